// ReadKerasWeights: walks the HDF5 tree of a weights file opened as an in-memory file
// image and collects every `vars` group. See keras_weights.h for the layout.

#include <hdf5.h>
#include <hdf5_hl.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <cstring>
#include <limits>
#include <new>

// Our sanitizer builds (-DCOHORT_SANITIZE=ON with gcc, scripts/fuzz with clang) all
// have ASan: gcc says so with __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define COHORT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COHORT_SANITIZED 1
#endif
#endif
#if COHORT_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/trainer/weights/hdf5_session.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {
namespace {

using hdf5::Handle;
using hdf5::Session;

// Deeper than any real model; stops a corrupt file whose hard links form a cycle.
constexpr int kMaxDepth = 64;
// Keras' own guard against decompression bombs (saving_lib.safe_get_h5_dataset): a
// dataset may declare more than 4 GiB only within 1000x of what it stores.
constexpr uint64_t kBombFloorBytes = uint64_t{1} << 32;
constexpr uint64_t kMaxExpansion = 1000;

// The superblock starts at 0 or, after a user block, at 512, 1024, 2048, ....
bool HasHdf5Signature(absl::string_view bytes) {
  constexpr absl::string_view kSignature("\x89HDF\r\n\x1a\n", 8);
  for (size_t offset = 0; offset + kSignature.size() <= bytes.size();
       offset = offset == 0 ? 512 : offset * 2) {
    if (bytes.substr(offset, kSignature.size()) == kSignature) return true;
  }
  return false;
}

std::string JoinPath(const std::string& parent, absl::string_view name) {
  return parent.empty() ? std::string(name) : absl::StrCat(parent, "/", name);
}

// "int16", "uint8", "float16", "string", ...: what a refused dataset holds.
std::string DescribeType(hid_t type) {
  size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return absl::StrCat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", bits);
    case H5T_FLOAT:
      return absl::StrCat("float", bits);
    case H5T_STRING:
      return "string";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length";
    default:
      return "an unknown type";
  }
}

// Dataset names in a vars group: "0", "1", ..., without leading zeros.
std::optional<size_t> ParseIndex(absl::string_view name) {
  size_t index = 0;
  auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (error != std::errc() || end != name.data() + name.size() ||
      (name.size() > 1 && name[0] == '0')) {
    return std::nullopt;
  }
  return index;
}

class Reader {
 public:
  explicit Reader(absl::string_view file_name) { result_.file_name = std::string(file_name); }

  absl::Status ReadGroup(hid_t group, const std::string& path, int depth);
  KerasWeights TakeResult() { return std::move(result_); }

 private:
  struct Child {
    std::string name;
    std::string path;
    Handle object;
    H5I_type_t type;
  };

  absl::Status Error(absl::string_view object, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(result_.file_name, ": ", object.empty() ? "/" : object, " ", what));
  }
  absl::Status Hdf5Error(absl::string_view object, absl::string_view what) const {
    std::string detail = Session::LastError();
    return Error(object, detail.empty() ? what : absl::StrCat(what, " (HDF5: ", detail, ")"));
  }

  absl::StatusOr<std::vector<Child>> Children(hid_t group, const std::string& path) const;
  absl::Status ReadVarsGroup(hid_t group, const std::string& path);
  absl::StatusOr<std::string> ReadNameAttribute(hid_t group, const std::string& path) const;
  absl::StatusOr<KerasVariable> ReadDataset(hid_t dataset, const std::string& path,
                                            bool allow_int) const;

  KerasWeights result_;
};

absl::StatusOr<std::vector<Reader::Child>> Reader::Children(hid_t group,
                                                            const std::string& path) const {
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) return Hdf5Error(path, "cannot be listed");
  std::vector<Child> children;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t length = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0,
                                        H5P_DEFAULT);
    if (length < 0) return Hdf5Error(path, "cannot be listed");
    std::vector<char> name(static_cast<size_t>(length) + 1);
    if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                           H5P_DEFAULT) < 0) {
      return Hdf5Error(path, "cannot be listed");
    }
    Child child;
    child.name.assign(name.data(), static_cast<size_t>(length));
    child.path = JoinPath(path, child.name);
    H5L_info_t link;
    if (H5Lget_info(group, name.data(), &link, H5P_DEFAULT) < 0) {
      return Hdf5Error(child.path, "cannot be read");
    }
    if (link.type != H5L_TYPE_HARD) {
      return Error(child.path, "is a soft or external link; weights files may not hold links");
    }
    child.object = Handle(H5Oopen(group, name.data(), H5P_DEFAULT));
    if (!child.object.valid()) return Hdf5Error(child.path, "cannot be opened");
    child.type = H5Iget_type(child.object.get());
    children.push_back(std::move(child));
  }
  return children;
}

absl::Status Reader::ReadGroup(hid_t group, const std::string& path, int depth) {
  if (depth > kMaxDepth) return Error(path, "is nested too deep (a cycle of links?)");
  absl::StatusOr<std::vector<Child>> children = Children(group, path);
  if (!children.ok()) return children.status();
  for (const Child& child : *children) {
    if (child.type == H5I_DATASET) {
      return Error(child.path, "is a dataset outside any vars group: not a Keras 3 weights file");
    }
    if (child.type != H5I_GROUP) continue;  // named datatypes carry no weights
    absl::Status status = child.name == "vars"
                              ? ReadVarsGroup(child.object.get(), child.path)
                              : ReadGroup(child.object.get(), child.path, depth + 1);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadVarsGroup(hid_t group, const std::string& path) {
  KerasVarGroup vars;
  vars.path = path;
  absl::StatusOr<std::string> name = ReadNameAttribute(group, path);
  if (!name.ok()) return name.status();
  vars.name = *std::move(name);
  absl::StatusOr<std::vector<Child>> children = Children(group, path);
  if (!children.ok()) return children.status();
  const bool optimizer = absl::StartsWith(path, kOptimizerGroupPrefix);
  vars.variables.resize(children->size());
  std::vector<bool> filled(children->size());
  for (const Child& child : *children) {
    if (child.type != H5I_DATASET) {
      return Error(child.path, "is not a dataset; a vars group holds only datasets");
    }
    std::optional<size_t> index = ParseIndex(child.name);
    if (!index || *index >= children->size()) {
      // With distinct names all below the count, every index 0..n-1 is present.
      return Error(child.path, absl::StrCat("is misnamed: the datasets of a vars group are "
                                            "named 0 to n-1 (here n = ",
                                            children->size(), ")"));
    }
    if (filled[*index]) {
      // HDF5 keeps a group's link names distinct; only a damaged file repeats one.
      return Error(child.path, "appears twice in its group (a corrupt file)");
    }
    filled[*index] = true;
    absl::StatusOr<KerasVariable> variable = ReadDataset(child.object.get(), child.path, optimizer);
    if (!variable.ok()) return variable.status();
    vars.variables[*index] = *std::move(variable);
  }
  (optimizer ? result_.optimizer : result_.groups).push_back(std::move(vars));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Reader::ReadNameAttribute(hid_t group,
                                                      const std::string& path) const {
  htri_t exists = H5Aexists(group, "name");
  if (exists < 0) return Hdf5Error(path, "attributes cannot be read");
  if (exists == 0) return std::string();
  const std::string object = absl::StrCat(path, " attribute 'name'");
  Handle attribute(H5Aopen(group, "name", H5P_DEFAULT));
  Handle type(H5Aget_type(attribute.get()));
  Handle space(H5Aget_space(attribute.get()));
  if (!type.valid() || !space.valid()) return Hdf5Error(object, "cannot be read");
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1) {
    return Error(object, "is not a single string");
  }
  Handle memory_type(H5Tcopy(H5T_C_S1));
  if (H5Tis_variable_str(type.get()) > 0) {
    char* value = nullptr;
    if (H5Tset_size(memory_type.get(), H5T_VARIABLE) < 0 ||
        H5Tset_cset(memory_type.get(), H5Tget_cset(type.get())) < 0 ||
        H5Aread(attribute.get(), memory_type.get(), &value) < 0) {
      return Hdf5Error(object, "cannot be read");
    }
    std::string name = value == nullptr ? "" : value;
    H5free_memory(value);
    return name;
  }
  std::vector<char> value(H5Tget_size(type.get()) + 1, '\0');
  if (H5Tset_size(memory_type.get(), value.size()) < 0 ||
      H5Tset_cset(memory_type.get(), H5Tget_cset(type.get())) < 0 ||
      H5Aread(attribute.get(), memory_type.get(), value.data()) < 0) {
    return Hdf5Error(object, "cannot be read");
  }
  return std::string(value.data());
}

absl::StatusOr<KerasVariable> Reader::ReadDataset(hid_t dataset, const std::string& path,
                                                  bool allow_int) const {
  KerasVariable variable;
  Handle type(H5Dget_type(dataset));
  if (!type.valid()) return Hdf5Error(path, "has an unreadable type");
  const H5T_class_t type_class = H5Tget_class(type.get());
  const size_t type_size = H5Tget_size(type.get());
  hid_t memory_type;
  if (type_class == H5T_FLOAT && (type_size == 4 || type_size == 8)) {
    variable.dtype = KerasDType::kFloat32;
    memory_type = H5T_NATIVE_FLOAT;
  } else if (allow_int && type_class == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_2 &&
             (type_size == 4 || type_size == 8)) {
    variable.dtype = type_size == 4 ? KerasDType::kInt32 : KerasDType::kInt64;
    memory_type = H5T_NATIVE_INT64;
  } else {
    return Error(path, absl::StrCat("has dtype ", DescribeType(type.get()),
                                    allow_int ? "; optimizer variables must be float32, "
                                                "float64, int32 or int64"
                                              : "; weights must be float32 or float64"));
  }

  Handle space(H5Dget_space(dataset));
  if (!space.valid()) return Hdf5Error(path, "has an unreadable shape");
  switch (H5Sget_simple_extent_type(space.get())) {
    case H5S_SCALAR:
      break;
    case H5S_SIMPLE: {
      int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 0) return Hdf5Error(path, "has an unreadable shape");
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
        return Hdf5Error(path, "has an unreadable shape");
      }
      for (hsize_t dim : dims) {
        if (dim > static_cast<hsize_t>(std::numeric_limits<int64_t>::max())) {
          return Error(path, "has a dimension too large");
        }
        variable.shape.push_back(static_cast<int64_t>(dim));
      }
      break;
    }
    default:
      return Error(path, "has no shape (a null dataspace)");
  }
  std::optional<int64_t> count = hdf5::ElementCount(variable.shape);
  uint64_t declared_bytes = 0;
  if (!count || __builtin_mul_overflow(static_cast<uint64_t>(*count), type_size, &declared_bytes)) {
    return Error(path, absl::StrCat("has a shape too large: ", FormatShape(variable.shape)));
  }
  const uint64_t stored_bytes = H5Dget_storage_size(dataset);
  if (declared_bytes > kBombFloorBytes && declared_bytes / kMaxExpansion > stored_bytes) {
    return Error(path, absl::StrCat("declares ", declared_bytes, " bytes but stores only ",
                                    stored_bytes));
  }
  void* buffer;
  if (variable.dtype == KerasDType::kFloat32) {
    variable.values.resize(static_cast<size_t>(*count));
    buffer = variable.values.data();
  } else {
    variable.int_values.resize(static_cast<size_t>(*count));
    buffer = variable.int_values.data();
  }
  if (*count > 0 && H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) < 0) {
    return Hdf5Error(path, "cannot be read (truncated or corrupt?)");
  }
  return variable;
}

// Reads `bytes` in this process; the caller holds a Session.
absl::StatusOr<KerasWeights> ReadInThisProcess(absl::string_view bytes,
                                               absl::string_view file_name) {
  try {
    // Read-only and without copying: HDF5 reads `bytes` in place until the file closes.
    Handle file(H5LTopen_file_image(const_cast<char*>(bytes.data()), bytes.size(),
                                    H5LT_FILE_IMAGE_DONT_COPY | H5LT_FILE_IMAGE_DONT_RELEASE));
    if (!file.valid()) {
      std::string detail = Session::LastError();
      return absl::InvalidArgumentError(absl::StrCat(
          file_name, ": is a truncated or corrupt HDF5 file",
          detail.empty() ? "" : absl::StrCat(" (HDF5: ", detail, ")")));
    }
    Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT));
    Reader reader(file_name);
    absl::Status status = root.valid() ? reader.ReadGroup(root.get(), "", 0)
                                       : absl::InvalidArgumentError(absl::StrCat(
                                             file_name, ": has no readable root group"));
    if (!status.ok()) return status;
    KerasWeights weights = reader.TakeResult();
    if (weights.groups.empty() && weights.optimizer.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ": has no vars group: not a Keras 3 weights file"));
    }
    auto by_path = [](const KerasVarGroup& a, const KerasVarGroup& b) { return a.path < b.path; };
    std::sort(weights.groups.begin(), weights.groups.end(), by_path);
    std::sort(weights.optimizer.begin(), weights.optimizer.end(), by_path);
    return weights;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file_name, ": its weights do not fit in memory"));
  }
}


// libhdf5 1.10 trusts the addresses inside a file: a damaged or crafted file can make it
// read out of bounds and crash the process, or loop forever (the keras_weights fuzzer
// found both in its global heap, reading a variable-length string attribute). So a
// forked child reads the file first, with the default action for crash signals (no
// sanitizer or fuzzer report of a crash that is expected) and a time limit; only when
// the child ends normally in time does this process read it. The caller holds a Session
// across the fork, so no other thread of this process is inside HDF5 when the child
// copies it.
absl::Status CheckReadingSurvives(absl::string_view bytes, absl::string_view file_name) {
  // A sound file reads from memory at hundreds of MB/s; this is ample.
  const int limit_s = 10 + static_cast<int>(bytes.size() >> 24);  // + 1 s per 16 MiB
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file_name, ": cannot fork to check the file: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the reader that waits for it
    if (getppid() != parent) _exit(0);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    // A sanitizer build reports the library's bad reads before they crash; the child's
    // report is noise, and a fuzzer's death callback would save the input as a finding.
    if (int null_fd = open("/dev/null", O_WRONLY); null_fd >= 0) dup2(null_fd, STDERR_FILENO);
#if COHORT_SANITIZED
    __sanitizer_set_death_callback(nullptr);
#endif
    (void)ReadInThisProcess(bytes, file_name);  // the parent reads it again for the result
    _exit(0);
  }
  bool timed_out = false;
  if (int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); pidfd >= 0) {
    pollfd ended{.fd = pidfd, .events = POLLIN, .revents = 0};
    const absl::Time deadline = absl::Now() + absl::Seconds(limit_s);
    int ready;
    do {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      ready = poll(&ended, 1, static_cast<int>(std::max<int64_t>(left_ms, 0)));
    } while (ready < 0 && errno == EINTR);
    close(pidfd);
    if (ready == 0) {
      timed_out = true;
      kill(pid, SIGKILL);
    }
  }  // else (a kernel before 5.3): no time limit, only the crash check
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat(file_name, ": waiting for the file check: ", std::strerror(errno)));
    }
  }
  if (timed_out) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ": is a corrupt HDF5 file: the HDF5 library did not finish reading it in ",
        limit_s, " s"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string how = WIFSIGNALED(status)
                              ? absl::StrCat("signal ", WTERMSIG(status), ", ",
                                             strsignal(WTERMSIG(status)))
                              : absl::StrCat("exit code ", WEXITSTATUS(status));
  return absl::InvalidArgumentError(absl::StrCat(
      file_name, ": is a corrupt HDF5 file: reading it crashes the HDF5 library (", how, ")"));
}

}  // namespace

absl::StatusOr<KerasWeights> ReadKerasWeights(absl::string_view bytes,
                                              absl::string_view file_name) {
  if (!HasHdf5Signature(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": is not an HDF5 file"));
  }
  Session session;
  if (absl::Status s = CheckReadingSurvives(bytes, file_name); !s.ok()) return s;
  return ReadInThisProcess(bytes, file_name);
}

}  // namespace cohort::trainer
