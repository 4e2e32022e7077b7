#include "common/keras/json_reader.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace cohort::keras::internal {

std::string Describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
      return absl::StrCat("the integer ", value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return absl::StrCat("the integer ", value.get<uint64_t>());
    case Json::value_t::number_float:
      return absl::StrCat("the number ", value.get<double>());
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (s.size() <= 64) return absl::StrCat("the string '", s, "'");
      return "a string";
    }
    case Json::value_t::array:
      return absl::StrCat("a list of ", value.size());
    case Json::value_t::object:
      return "an object";
    default:
      return "a binary value";
  }
}

std::optional<int64_t> AsInt64(const Json& value) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

absl::Status FieldReader::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(context_, ": ", message));
}

absl::Status FieldReader::TypeError(absl::string_view key, absl::string_view expected,
                                    const Json& got) const {
  return Error(absl::StrCat("field '", key, "' must be ", expected, ", got ", Describe(got)));
}

const Json* FieldReader::Find(absl::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<int64_t>> FieldReader::OptionalInt(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  std::optional<int64_t> i = AsInt64(*v);
  if (!i) return TypeError(key, "an integer", *v);
  return i;
}

absl::StatusOr<int64_t> FieldReader::Int(absl::string_view key) const {
  COHORT_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(key));
  if (!v) return Error(absl::StrCat("field '", key, "' is missing"));
  return *v;
}

absl::StatusOr<int64_t> FieldReader::Int(absl::string_view key, int64_t fallback) const {
  COHORT_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(key));
  return v.value_or(fallback);
}

absl::StatusOr<std::optional<double>> FieldReader::OptionalDouble(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return TypeError(key, "a number", *v);
  return std::optional<double>(v->get<double>());
}

absl::StatusOr<double> FieldReader::Double(absl::string_view key) const {
  COHORT_ASSIGN_OR_RETURN(std::optional<double> v, OptionalDouble(key));
  if (!v) return Error(absl::StrCat("field '", key, "' is missing"));
  return *v;
}

absl::StatusOr<double> FieldReader::Double(absl::string_view key, double fallback) const {
  COHORT_ASSIGN_OR_RETURN(std::optional<double> v, OptionalDouble(key));
  return v.value_or(fallback);
}

absl::StatusOr<bool> FieldReader::Bool(absl::string_view key, bool fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return TypeError(key, "true or false", *v);
  return v->get<bool>();
}

absl::StatusOr<std::string> FieldReader::String(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return Error(absl::StrCat("field '", key, "' is missing"));
  if (!v->is_string()) return TypeError(key, "a string", *v);
  return v->get<std::string>();
}

absl::StatusOr<std::string> FieldReader::String(absl::string_view key,
                                                absl::string_view fallback) const {
  if (Find(key) == nullptr) return std::string(fallback);
  return String(key);
}

absl::StatusOr<std::optional<std::vector<int64_t>>> FieldReader::IntList(absl::string_view key,
                                                                         size_t n) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<std::vector<int64_t>>();
  if (std::optional<int64_t> single = AsInt64(*v)) {
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>(n, *single));
  }
  if (!v->is_array()) return TypeError(key, "a list of integers", *v);
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const Json& e : *v) {
    std::optional<int64_t> i = AsInt64(e);
    if (!i) return TypeError(key, "a list of integers", e);
    out.push_back(*i);
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

absl::Status FieldReader::RequireNull(absl::string_view key, absl::string_view reason) const {
  if (Find(key) == nullptr) return absl::OkStatus();
  return Error(absl::StrCat(key, " is not supported (", reason, ")"));
}

}  // namespace cohort::keras::internal
