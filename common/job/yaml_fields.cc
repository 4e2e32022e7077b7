#include "common/job/yaml_fields.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace cohort::job {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Records where the document it handles starts; ignores everything else.
class DocumentStart : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { line_ = mark.line + 1; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  int line() const { return line_; }

 private:
  int line_ = 0;
};

}  // namespace

std::optional<int> SecondDocumentLine(const std::string& yaml) {
  std::istringstream stream(yaml);
  YAML::Parser parser(stream);
  DocumentStart first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  DocumentStart second;
  if (!parser.HandleNextDocument(second)) return std::nullopt;
  return second.line();
}

absl::string_view DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a value";
    default:
      return "nothing";
  }
}

std::string DescribeValue(const YAML::Node& node) {
  constexpr size_t kMaxShown = 60;
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text.size() <= kMaxShown) return absl::StrCat("'", text, "'");
    return absl::StrCat("'", absl::string_view(text).substr(0, kMaxShown), "...'");
  }
  return std::string(DescribeNode(node));
}

std::optional<absl::string_view> DidYouMean(absl::string_view word,
                                            std::initializer_list<absl::string_view> candidates) {
  if (word.size() > 64) return std::nullopt;  // no typo is that long; bounds the work
  const std::string lower = absl::AsciiStrToLower(word);
  std::optional<absl::string_view> best;
  size_t best_distance = lower.size() / 3 + 1;  // a third of the letters may be wrong
  for (absl::string_view candidate : candidates) {
    const size_t distance = EditDistance(lower, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

absl::StatusOr<YamlMap> YamlMap::Read(const YAML::Node& node, absl::string_view path,
                                      std::initializer_list<absl::string_view> known,
                                      FieldLines& lines) {
  YamlMap map;
  map.path_ = std::string(path);
  if (node.IsNull()) return map;
  if (!node.IsMap()) {
    return FieldError(lines, path,
                      absl::StrCat("must be a map of fields, got ", DescribeNode(node)));
  }
  // yaml-cpp's iterators yield temporaries: `entry` keeps this one alive.
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    const int line = key.Mark().line + 1;
    if (!key.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "job spec" : path,
                                                     ": a key must be a name, got ",
                                                     DescribeNode(key), " (line ", line, ")"));
    }
    const std::string& name = key.Scalar();
    const std::string field = map.Field(name);
    auto [previous, inserted] = lines.emplace(field, line);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": set twice (lines ", previous->second, " and ", line, ")"));
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::optional<absl::string_view> close = DidYouMean(name, known);
      return FieldError(lines, field,
                        close.has_value()
                            ? absl::StrCat("unknown field (did you mean '", *close, "'?)")
                            : absl::StrCat("unknown field; known: ", absl::StrJoin(known, ", ")));
    }
    map.entries_.emplace_back(name, entry.second);
  }
  return map;
}

std::optional<YAML::Node> YamlMap::Get(absl::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return value;
  }
  return std::nullopt;
}

std::string YamlMap::Field(absl::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
}

absl::Status YamlMap::Missing(absl::string_view key, const FieldLines& lines) const {
  auto it = lines.find(path_);
  if (it == lines.end()) return absl::InvalidArgumentError(absl::StrCat(Field(key), ": required"));
  return absl::InvalidArgumentError(
      absl::StrCat(Field(key), ": required (in ", path_, ", line ", it->second, ")"));
}

absl::StatusOr<std::vector<YAML::Node>> ReadList(const YAML::Node& node, absl::string_view field,
                                                 FieldLines& lines, absl::string_view what) {
  if (!node.IsSequence()) {
    return FieldError(lines, field, absl::StrCat("must be ", what, ", got ", DescribeValue(node)));
  }
  std::vector<YAML::Node> items;
  for (const YAML::Node& item : node) {
    lines.emplace(absl::StrCat(field, "[", items.size(), "]"), item.Mark().line + 1);
    items.push_back(item);
  }
  return items;
}

absl::StatusOr<std::string> ReadString(const YAML::Node& node, absl::string_view field,
                                       const FieldLines& lines) {
  if (node.IsScalar() && !node.Scalar().empty()) return node.Scalar();
  if (node.IsScalar()) return FieldError(lines, field, "must not be empty");
  return FieldError(lines, field, absl::StrCat("must be a string, got ", DescribeNode(node)));
}

absl::StatusOr<double> ReadNumber(const YAML::Node& node, absl::string_view field,
                                  const FieldLines& lines, absl::string_view what) {
  double value;
  if (node.IsScalar() && absl::SimpleAtod(node.Scalar(), &value) && std::isfinite(value)) {
    return value;
  }
  return FieldError(lines, field, absl::StrCat("must be ", what, ", got ", DescribeValue(node)));
}

absl::StatusOr<bool> ReadBool(const YAML::Node& node, absl::string_view field,
                              const FieldLines& lines) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  return FieldError(lines, field, absl::StrCat("must be true or false, got ", DescribeValue(node)));
}

}  // namespace cohort::job
