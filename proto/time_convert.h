#pragma once

// absl::Time / absl::Duration <-> google.protobuf.Timestamp / Duration.

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/time/time.h"

namespace cohort {

void ToProto(absl::Time t, google::protobuf::Timestamp* out);
void ToProto(absl::Duration d, google::protobuf::Duration* out);
absl::Time FromProto(const google::protobuf::Timestamp& t);
absl::Duration FromProto(const google::protobuf::Duration& d);

}  // namespace cohort
