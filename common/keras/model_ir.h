#pragma once

// The model IR: a Keras 3 model config (the `config.json` of a `.keras` file, which is
// what `model.to_json()` returns) as typed C++ values. The coordinator builds one at
// submit to validate a job without LibTorch; the trainer builds its LibTorch modules
// from it and reads/writes `model.weights.h5` with the layout it records.
//
// Produced by ParseModelConfig (common/keras/model_config.h). A ModelIr is a plain
// value: it owns everything it holds, has no pointers into the JSON, and may be copied
// and read from any number of threads.
//
// Graph
//   `nodes` are the model's layers in Keras' model.layers order, which is topological:
//   nodes.front() is the InputLayer (the only node without inputs), nodes.back() the
//   output layer (every node leads to it). For a Functional model that order is the one
//   Keras computes from the graph (ops/function.py map_graph: deepest layer first, depth
//   being the longest path to the output; ties in the order of a depth-first walk back
//   from the output), not necessarily the order of the config's list; for a Sequential
//   model it is the list order. A node's `inputs` are indices of earlier nodes, in call
//   order (for Add/Concatenate, the order of the list the layer was called on). Every
//   layer has one output tensor, so an edge is just the producer's index. Only
//   single-input, single-output models without shared layers or nested models exist.
//
// Conventions
//   - Shapes exclude the batch dimension. An unknown dimension (None in Keras) is
//     kUnknownDim. Data is channels_last, as in Keras: a Conv2D input is (H, W, C).
//   - Axis fields (BatchNormalization, LayerNormalization, Softmax, Concatenate) are
//     non-negative and count the batch dimension, as Keras' own `axis` does: on an
//     (N, H, W, C) tensor, axis 3 is C. The parser resolves Keras' negative axes.
//   - Fields not recorded here do not change results (names, dtype of a float32
//     policy, regularizers that must be null, ...); options that would change results
//     and are not supported were refused by the parser, naming the layer.
//
// Keras semantics the trainer must reproduce (Keras 3.15, read from its source):
//   - Dense acts on the last axis of inputs of any rank: (T, F) -> (T, units).
//   - Flatten flattens in channels_last (row-major H, W, C) order; a scalar per sample
//     becomes (1,).
//   - BatchNormalization: moving = moving * momentum + batch * (1 - momentum) (torch's
//     momentum is 1 - Keras'), the batch variance is the biased one (ops.moments), and
//     a layer with trainable == false runs in inference mode (moving statistics) even
//     while training.
//   - Dropout's `training` flag comes from fit/predict, never from the call kwargs.
//   - Activation constants: leaky_relu negative_slope 0.2, elu alpha 1.0, gelu is the
//     exact (erf) form, silu(x) = x * sigmoid(x), softmax over the last axis.
//   - Initializers: see Initializer below.
//
// Weights layout (`model.weights.h5`), checked with h5py on files Keras 3.15 writes
// (Sequential MLP, CNN, Functional residual model with Add + BatchNormalization,
// Embedding + Conv1D text model, two Dense and two Conv2D siblings):
//   /vars                         group, attribute name=<model name>, no datasets
//   /layers/<group>/vars          one per entry of model.layers, attribute name=<layer
//                                 name>; datasets "0", "1", ... are the layer's
//                                 variables (float32) in the order of Node::weights
//   /optimizer/vars               attribute name=<optimizer name> when the model was
//                                 compiled: "0" iterations (int), "1" learning_rate
//                                 (float, absent for a schedule), then the slots of
//                                 each trainable variable (Adam: momentum, velocity)
//   <group> is snake_case(ClassName) ("conv2d", "batch_normalization", "re_lu",
//   "global_average_pooling2d", "input_layer"), with "_1", "_2", ... for the second,
//   third, ... layer of the same class in model.layers order (node order). The group
//   is named after the class, never after the layer (layer 'c1' of class Conv2D lives
//   in layers/conv2d). Every layer has a group, weightless ones an empty vars group.
//   model.layers of a Functional model includes the InputLayer (layers/input_layer,
//   empty vars); that of a Sequential model does not, so a Sequential InputLayer has
//   no group. Variables are saved trainable-first then non-trainable, which for every
//   supported layer is also their creation order:
//     Dense               kernel (in, units), bias (units)            [bias if use_bias]
//     Conv1D / Conv2D     kernel (k..., in / groups, filters), bias (filters)
//     BatchNormalization  gamma [scale], beta [center], moving_mean, moving_variance
//                         (each (C,); the moving ones are never trainable)
//     LayerNormalization  gamma [scale], beta [center] (sizes of the normalized axes)
//     Embedding           embeddings (input_dim, output_dim)
//   A layer with trainable == false keeps the same variables and order.
//   The LibTorch equivalents: Linear weight = kernel transposed; Conv2d weight =
//   kernel permuted (3, 2, 0, 1); Conv1d weight = kernel permuted (2, 1, 0).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/keras/compile_config.h"
#include "common/keras/shape.h"

namespace cohort::keras {

// Element types of model inputs and data arrays, named as numpy and Keras name them.
enum class DType {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64,
};
absl::string_view DTypeName(DType dtype);  // "float32"
std::optional<DType> DTypeFromName(absl::string_view name);
bool IsFloatingPoint(DType dtype);

enum class Activation {
  kLinear,
  kRelu,
  kSigmoid,
  kTanh,
  kSoftmax,
  kGelu,
  kSilu,  // Keras' "silu", alias "swish"
  kElu,
  kSelu,
  kSoftplus,
  kLeakyRelu,
};
absl::string_view ActivationName(Activation activation);  // Keras' name: "leaky_relu"

// Output length L' for input length L, kernel (or pool) k, stride s, dilation d:
//   kValid   L' = (L - d * (k - 1) - 1) / s + 1, no padding
//   kSame    L' = ceil(L / s); total padding max((L' - 1) * s + d * (k - 1) + 1 - L, 0),
//            the smaller half before and the larger after (TensorFlow's rule, which
//            Keras' JAX backend follows)
//   kCausal  Conv1D only: left padding of d * (k - 1), then valid; L' = ceil(L / s)
enum class Padding { kValid, kSame, kCausal };

// How Keras initializes a variable when the file carries no weights. GlorotUniform,
// HeNormal, LecunUniform, ... are the VarianceScaling cases Keras defines them as:
//   glorot_*  scale 1, fan_avg     he_*  scale 2, fan_in     lecun_*  scale 1, fan_in
//   *_uniform distribution kUniform, *_normal kTruncatedNormal.
// Fans (keras compute_fans): rank 1 (n): fan_in = fan_out = n; rank 2 (in, out);
// rank > 2 (k..., in, out): receptive = prod(k...), fan_in = in * receptive,
// fan_out = out * receptive. With n the chosen fan: uniform on [-l, l] with
// l = sqrt(3 * scale / n); truncated normal with stddev sqrt(scale / n) / .87962566103423978
// cut at 2 stddev; untruncated normal with stddev sqrt(scale / n).
// kTruncatedNormal (the TruncatedNormal initializer) also cuts at 2 stddev.
struct Initializer {
  enum class Kind {
    kZeros,
    kOnes,
    kConstant,         // value
    kRandomNormal,     // mean, stddev
    kRandomUniform,    // minval, maxval
    kTruncatedNormal,  // mean, stddev
    kVarianceScaling,  // scale, mode, distribution
  };
  enum class FanMode { kFanIn, kFanOut, kFanAvg };
  enum class Distribution { kUniform, kTruncatedNormal, kUntruncatedNormal };

  Kind kind = Kind::kVarianceScaling;
  double value = 0.0;
  double mean = 0.0;
  double stddev = 0.05;
  double minval = -0.05;
  double maxval = 0.05;
  double scale = 1.0;
  FanMode mode = FanMode::kFanAvg;
  Distribution distribution = Distribution::kUniform;
  std::optional<int64_t> seed;  // Keras' seed; Cohort cannot reproduce Keras' streams

  static Initializer GlorotUniform() { return {}; }
  static Initializer Zeros() { return OfKind(Kind::kZeros); }
  static Initializer Ones() { return OfKind(Kind::kOnes); }
  static Initializer RandomUniform() { return OfKind(Kind::kRandomUniform); }
  static Initializer OfKind(Kind kind) {
    Initializer out;
    out.kind = kind;
    return out;
  }
  bool operator==(const Initializer&) const = default;
};

// ---- Per-class layer configs. Keras defaults are the member defaults. ----

struct InputLayerConfig {
  Shape shape;  // batch_shape without its first entry
  DType dtype = DType::kFloat32;
};

struct DenseConfig {
  int64_t units = 0;
  Activation activation = Activation::kLinear;
  bool use_bias = true;
  Initializer kernel_initializer = Initializer::GlorotUniform();
  Initializer bias_initializer = Initializer::Zeros();
};

// Conv1D (N = 1) and Conv2D (N = 2).
template <int N>
struct ConvConfig {
  int64_t filters = 0;
  std::array<int64_t, N> kernel_size{};
  std::array<int64_t, N> strides{};
  std::array<int64_t, N> dilation_rate{};
  Padding padding = Padding::kValid;
  int64_t groups = 1;
  Activation activation = Activation::kLinear;
  bool use_bias = true;
  Initializer kernel_initializer = Initializer::GlorotUniform();
  Initializer bias_initializer = Initializer::Zeros();
};
using Conv1DConfig = ConvConfig<1>;
using Conv2DConfig = ConvConfig<2>;

enum class PoolOp { kMax, kAverage };

// MaxPooling1D, MaxPooling2D, AveragePooling2D. `strides` is already resolved (Keras'
// default strides = pool_size). Average pooling with padding same averages only the
// real (unpadded) elements, as Keras does.
template <int N, PoolOp kOp>
struct PoolingConfig {
  static constexpr PoolOp kPoolOp = kOp;
  std::array<int64_t, N> pool_size{};
  std::array<int64_t, N> strides{};
  Padding padding = Padding::kValid;
};
using MaxPooling1DConfig = PoolingConfig<1, PoolOp::kMax>;
using MaxPooling2DConfig = PoolingConfig<2, PoolOp::kMax>;
using AveragePooling2DConfig = PoolingConfig<2, PoolOp::kAverage>;

// GlobalAveragePooling1D/2D, GlobalMaxPooling2D: reduce the spatial axes.
template <int N, PoolOp kOp>
struct GlobalPoolingConfig {
  static constexpr PoolOp kPoolOp = kOp;
  bool keepdims = false;  // true: spatial axes kept with size 1
};
using GlobalAveragePooling1DConfig = GlobalPoolingConfig<1, PoolOp::kAverage>;
using GlobalAveragePooling2DConfig = GlobalPoolingConfig<2, PoolOp::kAverage>;
using GlobalMaxPooling2DConfig = GlobalPoolingConfig<2, PoolOp::kMax>;

struct FlattenConfig {};

struct ReshapeConfig {
  std::vector<int64_t> target_shape;  // as in the file: at most one -1
};

struct DropoutConfig {
  double rate = 0.0;
  // Keras' noise_shape including the batch entry; kUnknownDim entries take the
  // input's size. nullopt: the input's shape.
  std::optional<std::vector<int64_t>> noise_shape;
  std::optional<int64_t> seed;
};

struct BatchNormalizationConfig {
  int axis = -1;  // resolved by the parser: non-negative, counts the batch dimension
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta exists
  bool scale = true;   // gamma exists
  Initializer beta_initializer = Initializer::Zeros();
  Initializer gamma_initializer = Initializer::Ones();
  Initializer moving_mean_initializer = Initializer::Zeros();
  Initializer moving_variance_initializer = Initializer::Ones();
};

struct LayerNormalizationConfig {
  std::vector<int> axes = {-1};  // resolved: sorted, non-negative, count the batch dim
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = Initializer::Zeros();
  Initializer gamma_initializer = Initializer::Ones();
};

struct ActivationConfig {
  Activation activation = Activation::kLinear;
};

// Keras' relu: p = (x > threshold ? x : 0), clipped to [0, max_value] when max_value
// is set; f(x) = p - negative_slope * max(threshold - x, 0).
struct ReLUConfig {
  std::optional<double> max_value;
  double negative_slope = 0.0;
  double threshold = 0.0;
};

struct SoftmaxConfig {
  int axis = -1;  // resolved by the parser
};

// Indices are cast to integers; output = input shape + (output_dim,).
struct EmbeddingConfig {
  int64_t input_dim = 0;
  int64_t output_dim = 0;
  Initializer embeddings_initializer = Initializer::RandomUniform();
};

// Element-wise sum of its inputs; size-1 dimensions broadcast, ranks must match.
struct AddConfig {};

struct ConcatenateConfig {
  int axis = -1;  // resolved by the parser
};

// One alternative per supported class, in the order of LayerClass.
using LayerConfig =
    std::variant<InputLayerConfig, DenseConfig, Conv1DConfig, Conv2DConfig, MaxPooling1DConfig,
                 MaxPooling2DConfig, AveragePooling2DConfig, GlobalAveragePooling1DConfig,
                 GlobalAveragePooling2DConfig, GlobalMaxPooling2DConfig, FlattenConfig,
                 ReshapeConfig, DropoutConfig, BatchNormalizationConfig, LayerNormalizationConfig,
                 ActivationConfig, ReLUConfig, SoftmaxConfig, EmbeddingConfig, AddConfig,
                 ConcatenateConfig>;

enum class LayerClass {
  kInputLayer,
  kDense,
  kConv1D,
  kConv2D,
  kMaxPooling1D,
  kMaxPooling2D,
  kAveragePooling2D,
  kGlobalAveragePooling1D,
  kGlobalAveragePooling2D,
  kGlobalMaxPooling2D,
  kFlatten,
  kReshape,
  kDropout,
  kBatchNormalization,
  kLayerNormalization,
  kActivation,
  kReLU,
  kSoftmax,
  kEmbedding,
  kAdd,
  kConcatenate,
};
inline constexpr int kLayerClassCount = 21;
static_assert(std::variant_size_v<LayerConfig> == kLayerClassCount);

absl::string_view LayerClassName(LayerClass layer_class);  // Keras' class name: "Conv2D"
std::optional<LayerClass> LayerClassFromName(absl::string_view class_name);
// "InputLayer, Dense, Conv1D, ..." for error messages.
std::string SupportedLayerClassNames();

// One variable of a layer, as Keras creates it.
struct WeightSpec {
  std::string name;  // Keras' variable name: "kernel", "bias", "gamma", "moving_mean", ...
  Shape shape;
  // Updated by the optimizer: created trainable and the layer's trainable flag is set.
  bool trainable = true;
  Initializer initializer;
  std::string h5_path;  // dataset in model.weights.h5: "layers/dense_1/vars/0"
};

struct Node {
  std::string name;  // the layer's name
  bool trainable = true;
  LayerConfig config;
  std::vector<int> inputs;  // indices into ModelIr::nodes, in call order
  Shape output_shape;
  std::vector<WeightSpec> weights;  // creation order == dataset order in the vars group
  // Group in model.weights.h5 ("layers/conv2d_1"; its datasets are in <group>/vars);
  // empty for the InputLayer of a Sequential model, which has no group.
  std::string weights_group;
  int64_t param_count = 0;  // elements of all weights, trainable or not

  LayerClass layer_class() const { return static_cast<LayerClass>(config.index()); }
};

enum class ModelKind { kSequential, kFunctional };

struct ModelIr {
  std::string name;
  ModelKind kind = ModelKind::kSequential;
  std::vector<Node> nodes;  // model.layers order; front() the InputLayer, back() the output
  int64_t param_count = 0;  // == Keras model.count_params()
  int64_t trainable_param_count = 0;  // elements of weights with trainable == true
  // The file's compile_config; nullopt when the model was saved uncompiled.
  std::optional<CompileConfig> compile;

  const Node& input() const { return nodes.front(); }
  const Node& output() const { return nodes.back(); }
  const InputLayerConfig& input_config() const {
    return std::get<InputLayerConfig>(nodes.front().config);
  }
};

}  // namespace cohort::keras
