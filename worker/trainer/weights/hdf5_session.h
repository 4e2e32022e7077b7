#pragma once

// Internal to cohort_keras_weights: the few HDF5 C API helpers the reader and the
// writer share. Not a public header.

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::trainer::hdf5 {

// Owns one HDF5 identifier of any kind (file, group, dataset, attribute, datatype,
// dataspace, property list) and releases it on destruction. Negative ids (failed
// calls) are held as invalid and released as nothing.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle();
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Brackets every use of the HDF5 library by this target. It holds one process-wide
// lock, because an HDF5 build may not be thread-safe and because two file images open
// at once could be taken for the same file by HDF5's open-file sharing; and it turns off
// HDF5's printing of error stacks to stderr for the calling thread (errors become
// absl::Status instead), restoring the previous setting when it ends.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The most specific message on this thread's HDF5 error stack (for example
  // "truncated file: eof = 96, sblock->base_addr = 0, stored_eof = 2048"), or "" when
  // the stack is empty. Call it right after the failing HDF5 call.
  static std::string LastError();

  // A name no other file image of this process has used, for H5Fcreate/H5LT.
  std::string UniqueImageName();

 private:
  absl::MutexLock lock_;
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
};

// The number of elements of `shape` (1 for a scalar), or nullopt when a dimension is
// negative or the product does not fit in int64.
std::optional<int64_t> ElementCount(std::span<const int64_t> shape);

}  // namespace cohort::trainer::hdf5
