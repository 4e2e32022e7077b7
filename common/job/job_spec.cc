#include "common/job/job_spec.h"

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/names.h"

namespace cohort::job {
namespace {

absl::Status CheckInteger(const FieldLines& lines, absl::string_view field, int64_t value,
                          int64_t min, absl::string_view what) {
  if (value >= min) return absl::OkStatus();
  return FieldError(lines, field, absl::StrCat("must be ", what, ", got ", value));
}

// RFC 3629 UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. YAML is
// Unicode text, so a path that is not UTF-8 cannot be written back as YAML.
bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length;
    uint32_t code;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

// Paths and keys: UTF-8 text without control characters (no file name needs them, and
// a NUL would cut the path short when it is opened).
absl::Status CheckText(const FieldLines& lines, absl::string_view field, absl::string_view text) {
  if (!IsValidUtf8(text)) return FieldError(lines, field, "must be valid UTF-8");
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      return FieldError(lines, field, "must not contain control characters");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(const ModelRef& model, const FieldLines& lines) {
  const absl::string_view extension = model.format == ModelFormat::kKeras ? ".keras" : ".json";
  if (model.path.empty()) return FieldError(lines, "model", "required");
  if (absl::Status status = CheckText(lines, "model", model.path); !status.ok()) return status;
  if (!absl::EndsWithIgnoreCase(model.path, extension)) {
    return FieldError(lines, "model",
                      absl::StrCat("must be a .keras file or the .json of model.to_json(), got '",
                                   model.path, "'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateArray(const ArrayRef& array, const std::string& field,
                           const FieldLines& lines) {
  if (array.path.empty()) return FieldError(lines, field, "required");
  absl::Status status = CheckText(lines, field, array.path);
  if (status.ok()) status = CheckText(lines, field + ".key", array.key);
  if (!status.ok()) return status;
  if (absl::EndsWithIgnoreCase(array.path, ".npy")) {
    if (array.key.empty()) return absl::OkStatus();
    return FieldError(lines, field + ".key", "only an .npz file has members");
  }
  if (absl::EndsWithIgnoreCase(array.path, ".npz")) {
    if (!array.key.empty()) return absl::OkStatus();
    return FieldError(lines, field,
                      absl::StrCat("'", array.path,
                                   "' is an .npz file: name its member with {path: FILE.npz, "
                                   "key: ARRAY}"));
  }
  return FieldError(
      lines, field,
      absl::StrCat("must be a .npy file or {path: FILE.npz, key: ARRAY}, got '", array.path, "'"));
}

absl::Status ValidateData(const DataSpec& data, const FieldLines& lines) {
  absl::Status status = ValidateArray(data.x, "data.x", lines);
  if (status.ok()) status = ValidateArray(data.y, "data.y", lines);
  if (!status.ok()) return status;
  if (data.validation_x.has_value() != data.validation_y.has_value()) {
    return data.validation_x.has_value()
               ? FieldError(lines, "data.validation_y", "required with data.validation_x")
               : FieldError(lines, "data.validation_x", "required with data.validation_y");
  }
  if (data.validation_x.has_value()) {
    status = ValidateArray(*data.validation_x, "data.validation_x", lines);
    if (status.ok()) status = ValidateArray(*data.validation_y, "data.validation_y", lines);
    if (!status.ok()) return status;
  }
  if (!(data.validation_split >= 0 && data.validation_split < 1)) {
    return FieldError(lines, "data.validation_split",
                      absl::StrCat("must be in [0, 1), got ", FormatNumber(data.validation_split)));
  }
  if (data.validation_split > 0 && data.validation_x.has_value()) {
    return FieldError(lines, "data.validation_split", "cannot be combined with data.validation_x");
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return "float32";
    case Precision::kMixedBfloat16:
      return "mixed_bfloat16";
  }
  return "unknown";
}

absl::StatusOr<Precision> PrecisionFromName(absl::string_view name) {
  std::string supported;
  for (Precision p : {Precision::kFloat32, Precision::kMixedBfloat16}) {
    if (name == PrecisionName(p)) return p;
    absl::StrAppend(&supported, supported.empty() ? "" : ", ", PrecisionName(p));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not supported; supported: ", supported));
}

absl::string_view DeviceName(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "unknown";
}

absl::Status ValidateJobSpec(const JobSpec& spec, const FieldLines& lines) {
  absl::Status status = CheckName(spec.name, "name");
  if (!status.ok()) return FieldError(lines, "name", absl::StripPrefix(status.message(), "name: "));
  status = ValidateModel(spec.model, lines);
  if (status.ok()) status = ValidateData(spec.data, lines);
  if (!status.ok()) return status;

  constexpr absl::string_view kPositive = "a positive integer";
  constexpr absl::string_view kNonNegative = "an integer >= 0";
  status.Update(CheckInteger(lines, "fit.epochs", spec.fit.epochs, 1, kPositive));
  status.Update(CheckInteger(lines, "fit.batch_size", spec.fit.batch_size, 1, kPositive));
  status.Update(CheckInteger(lines, "resources.workers", spec.resources.workers, 1, kPositive));
  status.Update(CheckInteger(lines, "checkpoint.every_epochs", spec.checkpoint.every_epochs, 0,
                             kNonNegative));
  status.Update(CheckInteger(lines, "checkpoint.keep", spec.checkpoint.keep, 1, kPositive));
  status.Update(CheckInteger(lines, "max_restarts", spec.max_restarts, 0, kNonNegative));
  if (!status.ok()) return status;
  if (spec.fit.batch_size % spec.resources.workers != 0) {
    return FieldError(
        lines, "fit.batch_size",
        absl::StrCat("the global batch ", spec.fit.batch_size,
                     " is not divisible by resources.workers (", spec.resources.workers,
                     "); every rank takes an equal slice of each batch"));
  }
  return ValidateCompileOverrides(spec.compile, lines);
}

}  // namespace cohort::job
