#pragma once

// The few tensorflow.Event messages an event file needs, in protobuf's wire encoding,
// written by hand so that nothing here depends on TensorFlow's or protobuf's libraries:
//
//   message Event {                       message Summary {
//     double wall_time = 1;                 message Value {
//     int64 step = 2;                         string tag = 1;
//     oneof what {                            float simple_value = 2;   // of a oneof
//       string file_version = 3;            }
//       Summary summary = 5;                repeated Value value = 1;
//     }                                   }
//   }
//
// (tensorboard/compat/proto/event.proto and summary.proto). TensorBoard reads a
// `simple_value` as a point of the scalar plugin. Thread-safe (pure functions).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cohort::tensorboard {

// What TensorBoard expects as the first event of a file.
inline constexpr char kFileVersion[] = "brain.Event:2";

struct Scalar {
  std::string tag;
  float value = 0;  // the wire type is float32, as TensorFlow's scalar summaries
};

// An Event with `file_version` (and step 0).
std::string EncodeFileVersionEvent(double wall_time, absl::string_view file_version);

// An Event with a Summary of one simple_value per scalar, at `step`.
std::string EncodeScalarsEvent(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

}  // namespace cohort::tensorboard
