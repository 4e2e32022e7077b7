#include "worker/trainer/shared_replica.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/trainer/collective/sum.h"
#include "worker/trainer/cpu_kernels.h"

namespace cohort::trainer {
namespace {

// The shared floats, in order: a flag per rank (a line each), the parameters, the
// optimizer's slots, each rank's gradients.
struct Layout {
  Layout(int64_t parameters, int optimizer_slots, int ranks)
      : params(kLineFloats * ranks),
        slots(params + LineRoundUp(parameters)),
        gradients(slots + LineRoundUp(parameters * optimizer_slots)),
        gradient_stride(LineRoundUp(parameters)),
        total(gradients + gradient_stride * ranks) {}
  int64_t params, slots, gradients, gradient_stride, total;
};

}  // namespace

size_t SharedReplica::FloatsNeeded(int64_t parameters, int optimizer_slots, int ranks) {
  return static_cast<size_t>(Layout(parameters, optimizer_slots, ranks).total);
}

SharedReplica::SharedReplica(collective::Collective* collective, FlatParameters* flat,
                             Optimizer* optimizer)
    : collective_(collective),
      flat_(flat),
      optimizer_(optimizer),
      rank_(collective->rank()),
      size_(collective->size()) {}

absl::StatusOr<std::unique_ptr<SharedReplica>> SharedReplica::Create(
    collective::Collective* collective, FlatParameters* flat, Optimizer* optimizer) {
  std::span<float> shared = collective->SharedFloats();
  if (shared.empty()) return nullptr;
  const int64_t n = flat->numel();
  const int slots = static_cast<int>(optimizer->State().size());
  const Layout layout(n, slots, collective->size());
  if (static_cast<int64_t>(shared.size()) < layout.total) {
    return absl::InternalError(absl::StrCat("shared memory of ", shared.size(), " floats for ",
                                            layout.total, " (", n, " parameters)"));
  }
  std::unique_ptr<SharedReplica> r(new SharedReplica(collective, flat, optimizer));
  const bool leader = r->rank_ == 0;
  float* base = shared.data();
  flat->MoveTo(base + layout.params, base + layout.gradients + layout.gradient_stride * r->rank_,
               leader);
  optimizer->MoveStateTo(base + layout.slots, leader);
  r->flags_ = base;
  for (int k = 0; k < r->size_; ++k) {
    r->gradients_.push_back(base + layout.gradients + layout.gradient_stride * k);
  }
  auto boundary = [&](int k) {
    return k == r->size_ ? n : std::min(n, LineRoundUp(n * k / r->size_));
  };
  r->begin_ = boundary(r->rank_);
  r->end_ = boundary(r->rank_ + 1);
  // Rank 0's values are in place before anyone reads them.
  if (absl::Status s = collective->SharedBarrier(); !s.ok()) return s;
  return r;
}

absl::StatusOr<bool> SharedReplica::ReduceGradients(bool loss_finite) {
  if (absl::Status s = collective_->SharedBarrier(); !s.ok()) return s;  // every gradient written
  float* mine = flat_->grad().data_ptr<float>() + begin_;
  const size_t len = static_cast<size_t>(end_ - begin_);
  for (int k = 0; k < size_; ++k) {
    if (k != rank_) collective::AddInto(mine, gradients_[k] + begin_, len);
  }
  flags_[kLineFloats * rank_] = loss_finite && AllFinite({mine, len}) ? 1.0f : 0.0f;
  if (absl::Status s = collective_->SharedBarrier(); !s.ok()) return s;  // every flag written
  for (int k = 0; k < size_; ++k) {
    if (flags_[kLineFloats * k] != 1.0f) return false;
  }
  return true;
}

absl::Status SharedReplica::Update() {
  optimizer_->Step(*flat_, {.begin = begin_, .end = end_, .shared = true});
  return collective_->SharedBarrier();  // every range updated
}

}  // namespace cohort::trainer
