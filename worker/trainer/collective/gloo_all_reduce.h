#pragma once

// gloo's own all-reduce algorithms (internal to the Gloo backend, which runs them when
// GlooOptions::algorithm asks for one of them instead of the streamed ring, tcp_ring.h):
// float32 sums on synchronous pairs, large buffers split into
// segments (gloo_collective.h says why), and each large buffer's algorithms built once
// and kept, keyed by (pointer, count): building one allocates and first-touches its
// scratch memory, which costs as much as a quarter of the transfer itself.
//
// Used only on the collective's communication thread. Throws what gloo throws.

#include <cstddef>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <gloo/algorithm.h>

#include "worker/trainer/collective/gloo_collective.h"
#include "worker/trainer/collective/gloo_mesh.h"

namespace cohort::trainer::collective {

// Buffers this large or larger keep their algorithms between calls.
inline constexpr size_t kGlooKeptMinBytes = 256 << 10;

class GlooAllReduce {
 public:
  GlooAllReduce(std::shared_ptr<GlooContext> context, GlooAlgorithm algorithm,
                size_t max_segment_bytes);

  void Run(float* data, size_t count);

 private:
  // One segment's algorithm: `count` floats at `data`.
  std::unique_ptr<gloo::Algorithm> Build(float* data, size_t count) const;

  const std::shared_ptr<GlooContext> context_;
  const GlooAlgorithm algorithm_;
  const size_t segment_count_;  // floats per segment
  std::map<std::pair<float*, size_t>, std::vector<std::unique_ptr<gloo::Algorithm>>> kept_;
};

}  // namespace cohort::trainer::collective
