#include "worker/trainer/weights/keras_weights.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::trainer {

absl::StatusOr<const KerasVarGroup*> KerasWeights::FindGroup(absl::string_view path) const {
  for (const auto* list : {&groups, &optimizer}) {
    for (const KerasVarGroup& group : *list) {
      if (group.path == path) return &group;
    }
  }
  return absl::NotFoundError(absl::StrCat(file_name, ": has no group ", path));
}

absl::StatusOr<const KerasVariable*> KerasWeights::FindVariable(
    absl::string_view path, size_t index, std::span<const int64_t> expected_shape) const {
  absl::StatusOr<const KerasVarGroup*> group = FindGroup(path);
  if (!group.ok()) return group.status();
  const std::vector<KerasVariable>& variables = (*group)->variables;
  if (index >= variables.size()) {
    return absl::NotFoundError(absl::StrCat(file_name, ": ", path, " has ", variables.size(),
                                            " variables, no variable ", index));
  }
  const KerasVariable& variable = variables[index];
  if (!std::equal(variable.shape.begin(), variable.shape.end(), expected_shape.begin(),
                  expected_shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ": ", path, "/", index, " has shape ", FormatShape(variable.shape),
        ", the model expects ", FormatShape(expected_shape)));
  }
  return &variable;
}

absl::StatusOr<KerasWeights> ReadKerasWeightsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ReadKerasWeights(bytes, path);
}

std::string KerasSnakeCase(absl::string_view class_name) {
  // The three substitutions of keras/src/utils/naming.py, in order.
  static const std::regex kNonWord("[^A-Za-z0-9_]+");
  static const std::regex kCapitalizedWord("(.)([A-Z][a-z]+)");
  static const std::regex kLowerUpper("([a-z])([A-Z])");
  std::string name(class_name);
  name = std::regex_replace(name, kNonWord, "");
  name = std::regex_replace(name, kCapitalizedWord, "$1_$2");
  name = std::regex_replace(name, kLowerUpper, "$1_$2");
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return name;
}

std::vector<std::string> KerasLayerGroupPaths(const std::vector<std::string>& class_names,
                                              absl::string_view prefix) {
  // saving_lib._get_unique_name: the first of a name is bare, the next ones get _1, _2.
  std::map<std::string, int> used;
  std::vector<std::string> paths;
  paths.reserve(class_names.size());
  for (const std::string& class_name : class_names) {
    std::string name = KerasSnakeCase(class_name);
    auto [it, first] = used.try_emplace(name, 0);
    if (!first) name = absl::StrCat(name, "_", ++it->second);
    paths.push_back(absl::StrCat(prefix, "/", name, "/vars"));
  }
  return paths;
}

std::string FormatShape(std::span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace cohort::trainer
