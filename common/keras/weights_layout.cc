#include "common/keras/weights_layout.h"

#include <cctype>

namespace cohort::keras::internal {
namespace {

bool IsUpper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }
bool IsLower(char c) { return std::islower(static_cast<unsigned char>(c)) != 0; }
bool IsWord(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Python's re.sub("(.)([A-Z][a-z]+)", r"\1_\2", s): a '_' before every uppercase letter
// that starts a run of lowercase ones and is not the first character; matches do not
// overlap, so the character before the match is consumed by it.
std::string SplitCapitalizedWords(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && IsUpper(s[i + 1]) && IsLower(s[i + 2])) {
      size_t j = i + 2;
      while (j < s.size() && IsLower(s[j])) ++j;
      out += s[i];
      out += '_';
      out.append(s, i + 1, j - i - 1);
      i = j;
    } else {
      out += s[i];
      ++i;
    }
  }
  return out;
}

// re.sub("([a-z])([A-Z])", r"\1_\2", s).
std::string SplitLowerUpper(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && IsLower(s[i]) && IsUpper(s[i + 1])) {
      out += s[i];
      out += '_';
      out += s[i + 1];
      i += 2;
    } else {
      out += s[i];
      ++i;
    }
  }
  return out;
}

WeightSpec Weight(std::string name, Shape shape, bool trainable, const Initializer& init) {
  WeightSpec w;
  w.name = std::move(name);
  w.shape = std::move(shape);
  w.trainable = trainable;
  w.initializer = init;
  return w;
}

struct WeightsVisitor {
  const Node& node;
  const Shape& in;

  std::vector<WeightSpec> operator()(const DenseConfig& c) const {
    std::vector<WeightSpec> w = {
        Weight("kernel", {in.back(), c.units}, node.trainable, c.kernel_initializer)};
    if (c.use_bias) w.push_back(Weight("bias", {c.units}, node.trainable, c.bias_initializer));
    return w;
  }

  template <int N>
  std::vector<WeightSpec> operator()(const ConvConfig<N>& c) const {
    Shape kernel(c.kernel_size.begin(), c.kernel_size.end());
    kernel.push_back(in.back() / c.groups);
    kernel.push_back(c.filters);
    std::vector<WeightSpec> w = {Weight("kernel", kernel, node.trainable, c.kernel_initializer)};
    if (c.use_bias) w.push_back(Weight("bias", {c.filters}, node.trainable, c.bias_initializer));
    return w;
  }

  std::vector<WeightSpec> operator()(const BatchNormalizationConfig& c) const {
    Shape shape = {in[c.axis - 1]};
    std::vector<WeightSpec> w;
    if (c.scale) w.push_back(Weight("gamma", shape, node.trainable, c.gamma_initializer));
    if (c.center) w.push_back(Weight("beta", shape, node.trainable, c.beta_initializer));
    w.push_back(Weight("moving_mean", shape, false, c.moving_mean_initializer));
    w.push_back(Weight("moving_variance", shape, false, c.moving_variance_initializer));
    return w;
  }

  std::vector<WeightSpec> operator()(const LayerNormalizationConfig& c) const {
    Shape shape;
    for (int axis : c.axes) shape.push_back(in[axis - 1]);
    std::vector<WeightSpec> w;
    if (c.scale) w.push_back(Weight("gamma", shape, node.trainable, c.gamma_initializer));
    if (c.center) w.push_back(Weight("beta", shape, node.trainable, c.beta_initializer));
    return w;
  }

  std::vector<WeightSpec> operator()(const EmbeddingConfig& c) const {
    return {Weight("embeddings", {c.input_dim, c.output_dim}, node.trainable,
                   c.embeddings_initializer)};
  }

  template <typename Config>
  std::vector<WeightSpec> operator()(const Config&) const {
    return {};
  }
};

}  // namespace

std::vector<WeightSpec> MakeWeights(const Node& node, const Shape& input_shape) {
  return std::visit(WeightsVisitor{node, input_shape}, node.config);
}

std::string ToSnakeCase(absl::string_view name) {
  // re.sub(r"\W+", "", name)
  std::string s;
  for (char c : name) {
    if (IsWord(c)) s += c;
  }
  s = SplitLowerUpper(SplitCapitalizedWords(s));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace cohort::keras::internal
