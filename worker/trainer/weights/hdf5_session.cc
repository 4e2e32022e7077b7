#include "worker/trainer/weights/hdf5_session.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace cohort::trainer::hdf5 {
namespace {

ABSL_CONST_INIT absl::Mutex library_mutex(absl::kConstInit);
// Guarded by library_mutex.
uint64_t image_counter = 0;

herr_t KeepInnermost(unsigned /*n*/, const H5E_error2_t* error, void* data) {
  if (error->desc != nullptr && error->desc[0] != '\0') {
    *static_cast<std::string*>(data) = error->desc;
  }
  return 0;
}

}  // namespace

Handle::~Handle() {
  if (id_ >= 0) H5Idec_ref(id_);
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0) H5Idec_ref(id_);
    id_ = other.id_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

Session::Session() : lock_(&library_mutex) {
  H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Session::~Session() { H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_); }

std::string Session::LastError() {
  std::string message;
  // Walking downward visits the API call first and the deepest cause last.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, KeepInnermost, &message);
  return message;
}

std::string Session::UniqueImageName() {
  return absl::StrCat("cohort-keras-weights-image-", ++image_counter);
}

std::optional<int64_t> ElementCount(std::span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count)) return std::nullopt;
  }
  return count;
}

}  // namespace cohort::trainer::hdf5
