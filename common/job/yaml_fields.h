#pragma once

// Typed reads from yaml-cpp nodes, each naming the field it reads and recording the
// line it was found on. Internal to common/job's YAML parser. yaml-cpp may throw
// YAML::Exception from any node access: callers run inside ParseJobSpec's catch.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/job/field_error.h"

namespace cohort::job {

// "a map", "a list", "a value" or "nothing", for "must be X, got a list".
absl::string_view DescribeNode(const YAML::Node& node);
// A scalar quoted (shortened when long): "'abc'"; otherwise DescribeNode.
std::string DescribeValue(const YAML::Node& node);

// The entries of one YAML map.
class YamlMap {
 public:
  // Fails unless `node` is a map (a null node reads as an empty one) whose keys are
  // scalars, none repeated, all in `known` (an unknown key gets a did-you-mean when
  // one is close). Records the line of each entry as "<path>.<key>" in `lines`; `path`
  // is empty for the document itself.
  static absl::StatusOr<YamlMap> Read(const YAML::Node& node, absl::string_view path,
                                      std::initializer_list<absl::string_view> known,
                                      FieldLines& lines);

  // The value of `key`, or nullopt when the map does not have it.
  std::optional<YAML::Node> Get(absl::string_view key) const;
  // "<path>.<key>", or "<key>" at the top.
  std::string Field(absl::string_view key) const;
  // "<path>.<key>: required", with the line of the map itself.
  absl::Status Missing(absl::string_view key, const FieldLines& lines) const;

 private:
  std::string path_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

// The items of a YAML list, recording "<field>[i]" lines.
absl::StatusOr<std::vector<YAML::Node>> ReadList(const YAML::Node& node, absl::string_view field,
                                                 FieldLines& lines, absl::string_view what);

// A scalar as text (quoted or not). Fails for maps, lists and empty values.
absl::StatusOr<std::string> ReadString(const YAML::Node& node, absl::string_view field,
                                       const FieldLines& lines);

// A finite number ("0.001", "1e-3", "2"). `what` completes "must be ...".
absl::StatusOr<double> ReadNumber(const YAML::Node& node, absl::string_view field,
                                  const FieldLines& lines, absl::string_view what);

// true / True / TRUE / false / False / FALSE.
absl::StatusOr<bool> ReadBool(const YAML::Node& node, absl::string_view field,
                              const FieldLines& lines);

// A decimal integer that fits T; ranges are checked later (ValidateJobSpec).
template <typename T>
absl::StatusOr<T> ReadInteger(const YAML::Node& node, absl::string_view field,
                              const FieldLines& lines, absl::string_view what) {
  T value;
  if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), &value)) return value;
  return FieldError(lines, field, absl::StrCat("must be ", what, ", got ", DescribeValue(node)));
}

// The 1-based line where a second YAML document starts in `yaml`, or nullopt when it
// holds at most one. (Instead of YAML::LoadAll, which loops forever on some malformed
// input in yaml-cpp 0.7.)
std::optional<int> SecondDocumentLine(const std::string& yaml);

// The closest of `candidates` to `word` when it is close enough to be a typo.
std::optional<absl::string_view> DidYouMean(absl::string_view word,
                                            std::initializer_list<absl::string_view> candidates);

}  // namespace cohort::job
