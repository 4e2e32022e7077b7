#pragma once

// Internal to common/keras: typed reads of JSON fields that never throw and whose
// errors say where the field is, e.g.
//   "layer 'dense' (Dense): field 'units' must be an integer, got a string".
// Missing and null fields are the same to every reader (Keras writes None as null).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace cohort::keras::internal {

using Json = nlohmann::json;

// A short description of a value for error messages: "the integer 3", "a string",
// "a list", "an object", "null". Never dumps the value itself (it may be huge).
std::string Describe(const Json& value);

// An int64 held by `value`, or nullopt for non-integers and integers past int64.
std::optional<int64_t> AsInt64(const Json& value);

// Reads the fields of one JSON object. `object` must outlive the reader; it may be any
// JSON value (a non-object simply has no fields).
class FieldReader {
 public:
  FieldReader(const Json& object, std::string context)
      : object_(object), context_(std::move(context)) {}

  const std::string& context() const { return context_; }
  // InvalidArgument "<context>: <message>".
  absl::Status Error(absl::string_view message) const;

  // The field's value, or nullptr when absent or null.
  const Json* Find(absl::string_view key) const;

  absl::StatusOr<int64_t> Int(absl::string_view key) const;  // required
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<std::optional<int64_t>> OptionalInt(absl::string_view key) const;
  // Integers are accepted as doubles.
  absl::StatusOr<double> Double(absl::string_view key) const;  // required
  absl::StatusOr<double> Double(absl::string_view key, double fallback) const;
  absl::StatusOr<std::optional<double>> OptionalDouble(absl::string_view key) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const;
  absl::StatusOr<std::string> String(absl::string_view key) const;  // required
  absl::StatusOr<std::string> String(absl::string_view key, absl::string_view fallback) const;
  // A list of ints (each checked by AsInt64); an int alone reads as a list of `n` copies.
  // nullopt when absent or null.
  absl::StatusOr<std::optional<std::vector<int64_t>>> IntList(absl::string_view key,
                                                              size_t n = 1) const;

  // Refuses a field that is present and not null: "<context>: <key> is not supported
  // (<reason>)".
  absl::Status RequireNull(absl::string_view key, absl::string_view reason) const;

 private:
  absl::Status TypeError(absl::string_view key, absl::string_view expected, const Json& got) const;

  const Json& object_;
  std::string context_;
};

}  // namespace cohort::keras::internal
