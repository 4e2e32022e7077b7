// WriteKerasWeights: builds a weights file in memory (HDF5 core driver without a backing
// store) and returns its image. See keras_weights.h for the layout it reproduces.

#include <hdf5.h>

#include <algorithm>
#include <limits>
#include <new>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/trainer/weights/hdf5_session.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {
namespace {

using hdf5::Handle;
using hdf5::Session;

absl::Status ValidatePath(absl::string_view file_name, absl::string_view path, bool optimizer) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": cannot write group '", path, "': ", what));
  };
  if (optimizer != absl::StartsWith(path, kOptimizerGroupPrefix)) {
    return error(optimizer ? "optimizer groups are under optimizer/"
                           : "only optimizer groups are under optimizer/");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty() || parts[i] == "." || parts[i] == "..") {
      return error("empty, '.' or '..' path component");
    }
    if ((parts[i] == "vars") != (i + 1 == parts.size())) {
      return error("a group path ends in 'vars' and has no other 'vars' component");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateVariable(absl::string_view file_name, absl::string_view object,
                              const KerasVariable& variable) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": cannot write ", object, ": ", what));
  };
  std::optional<int64_t> count = hdf5::ElementCount(variable.shape);
  if (!count) return error(absl::StrCat("invalid shape ", FormatShape(variable.shape)));
  size_t held = variable.dtype == KerasDType::kFloat32 ? variable.values.size()
                                                       : variable.int_values.size();
  if (static_cast<uint64_t>(*count) != held) {
    return error(absl::StrCat("shape ", FormatShape(variable.shape), " needs ", *count,
                              " values, it has ", held));
  }
  if (variable.dtype == KerasDType::kInt32) {
    auto out_of_range = [](int64_t v) {
      return v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max();
    };
    if (std::any_of(variable.int_values.begin(), variable.int_values.end(), out_of_range)) {
      return error("an int32 value is out of range");
    }
  }
  return absl::OkStatus();
}

// Everything is checked before HDF5 is touched, so a bad request builds nothing.
absl::Status Validate(const KerasWeights& weights) {
  std::set<std::string> paths;
  for (const auto* list : {&weights.groups, &weights.optimizer}) {
    for (const KerasVarGroup& group : *list) {
      absl::Status status = ValidatePath(weights.file_name, group.path, list == &weights.optimizer);
      if (!status.ok()) return status;
      if (!paths.insert(group.path).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(weights.file_name, ": group '", group.path, "' is given twice"));
      }
      for (size_t i = 0; i < group.variables.size(); ++i) {
        status = ValidateVariable(weights.file_name, absl::StrCat(group.path, "/", i),
                                  group.variables[i]);
        if (!status.ok()) return status;
      }
    }
  }
  return absl::OkStatus();
}

class Writer {
 public:
  explicit Writer(absl::string_view file_name) : file_name_(file_name) {}

  absl::Status Create(Session& session, size_t expected_bytes);
  absl::Status WriteGroup(const KerasVarGroup& group);
  absl::StatusOr<std::string> Image();

 private:
  absl::Status Hdf5Error(absl::string_view object, absl::string_view what) const {
    std::string message = absl::StrCat(file_name_, ": cannot ", what);
    if (!object.empty()) absl::StrAppend(&message, " ", object);
    std::string detail = Session::LastError();
    if (!detail.empty()) absl::StrAppend(&message, " (HDF5: ", detail, ")");
    return absl::InternalError(message);
  }
  absl::StatusOr<Handle> CreateGroups(absl::string_view path);
  absl::Status WriteName(hid_t group, const std::string& path, const std::string& name);
  absl::Status WriteVariable(hid_t group, const std::string& path, size_t index,
                             const KerasVariable& variable);

  std::string file_name_;
  Handle file_;
  Handle group_plist_;    // group creation: no time tracking, as h5py does
  Handle dataset_plist_;  // dataset creation: contiguous, no time tracking
  std::set<std::string> created_;
};

absl::Status Writer::Create(Session& session, size_t expected_bytes) {
  // The core driver grows its buffer by `increment`: one step for the whole file.
  constexpr size_t kMinIncrement = size_t{1} << 20;
  constexpr size_t kMaxIncrement = size_t{1} << 30;
  size_t increment = std::clamp(expected_bytes + kMinIncrement, kMinIncrement, kMaxIncrement);
  Handle access(H5Pcreate(H5P_FILE_ACCESS));
  if (H5Pset_fapl_core(access.get(), increment, /*backing_store=*/false) < 0) {
    return Hdf5Error("", "set up the in-memory file");
  }
  file_ = Handle(H5Fcreate(session.UniqueImageName().c_str(), H5F_ACC_EXCL, H5P_DEFAULT,
                           access.get()));
  group_plist_ = Handle(H5Pcreate(H5P_GROUP_CREATE));
  dataset_plist_ = Handle(H5Pcreate(H5P_DATASET_CREATE));
  if (!file_.valid() || H5Pset_obj_track_times(group_plist_.get(), false) < 0 ||
      H5Pset_obj_track_times(dataset_plist_.get(), false) < 0) {
    return Hdf5Error("", "create the in-memory file");
  }
  return absl::OkStatus();
}

absl::StatusOr<Handle> Writer::CreateGroups(absl::string_view path) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    if (created_.insert(prefix).second) {
      Handle group(H5Gcreate2(file_.get(), prefix.c_str(), H5P_DEFAULT, group_plist_.get(),
                              H5P_DEFAULT));
      if (!group.valid()) return Hdf5Error(prefix, "create group");
    }
  }
  Handle group(H5Gopen2(file_.get(), prefix.c_str(), H5P_DEFAULT));
  if (!group.valid()) return Hdf5Error(prefix, "open group");
  return group;
}

absl::Status Writer::WriteName(hid_t group, const std::string& path, const std::string& name) {
  // As h5py stores a Python str: variable-length UTF-8, scalar dataspace.
  Handle type(H5Tcopy(H5T_C_S1));
  Handle space(H5Screate(H5S_SCALAR));
  if (H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return Hdf5Error(path, "write attribute 'name' of");
  }
  Handle attribute(H5Acreate2(group, "name", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  const char* value = name.c_str();
  if (!attribute.valid() || H5Awrite(attribute.get(), type.get(), &value) < 0) {
    return Hdf5Error(path, "write attribute 'name' of");
  }
  return absl::OkStatus();
}

absl::Status Writer::WriteVariable(hid_t group, const std::string& path, size_t index,
                                   const KerasVariable& variable) {
  const std::string name = std::to_string(index);
  const std::string object = absl::StrCat(path, "/", name);
  hid_t file_type = H5T_IEEE_F32LE;
  hid_t memory_type = H5T_NATIVE_FLOAT;
  const void* data = variable.values.data();
  if (variable.dtype != KerasDType::kFloat32) {
    file_type = variable.dtype == KerasDType::kInt32 ? H5T_STD_I32LE : H5T_STD_I64LE;
    memory_type = H5T_NATIVE_INT64;
    data = variable.int_values.data();
  }
  std::vector<hsize_t> dims(variable.shape.begin(), variable.shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space.valid()) return Hdf5Error(object, "make the shape of");
  Handle dataset(H5Dcreate2(group, name.c_str(), file_type, space.get(), H5P_DEFAULT,
                            dataset_plist_.get(), H5P_DEFAULT));
  if (!dataset.valid()) return Hdf5Error(object, "create dataset");
  if (*hdf5::ElementCount(variable.shape) > 0 &&
      H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    return Hdf5Error(object, "write dataset");
  }
  return absl::OkStatus();
}

absl::Status Writer::WriteGroup(const KerasVarGroup& group) {
  absl::StatusOr<Handle> handle = CreateGroups(group.path);
  if (!handle.ok()) return handle.status();
  if (!group.name.empty()) {
    absl::Status status = WriteName(handle->get(), group.path, group.name);
    if (!status.ok()) return status;
  }
  for (size_t i = 0; i < group.variables.size(); ++i) {
    absl::Status status = WriteVariable(handle->get(), group.path, i, group.variables[i]);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Writer::Image() {
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) return Hdf5Error("", "flush the file");
  ssize_t size = H5Fget_file_image(file_.get(), nullptr, 0);
  if (size < 0) return Hdf5Error("", "get the file image");
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file_.get(), image.data(), image.size()) != size) {
    return Hdf5Error("", "get the file image");
  }
  return image;
}

size_t DataBytes(const KerasWeights& weights) {
  size_t bytes = 0;
  for (const auto* list : {&weights.groups, &weights.optimizer}) {
    for (const KerasVarGroup& group : *list) {
      for (const KerasVariable& variable : group.variables) {
        bytes += variable.values.size() * sizeof(float) + variable.int_values.size() * 8;
      }
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::string> WriteKerasWeights(const KerasWeights& weights) {
  absl::Status status = Validate(weights);
  if (!status.ok()) return status;
  try {
    Session session;
    Writer writer(weights.file_name);
    status = writer.Create(session, DataBytes(weights));
    for (const auto* list : {&weights.groups, &weights.optimizer}) {
      for (const KerasVarGroup& group : *list) {
        if (status.ok()) status = writer.WriteGroup(group);
      }
    }
    if (!status.ok()) return status;
    return writer.Image();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(weights.file_name, ": not enough memory to build the file"));
  }
}

}  // namespace cohort::trainer
