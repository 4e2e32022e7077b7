// DenseGraph's hand-written step against LibTorch's autograd on the same model, weights
// and batch: the loss, the prediction and every gradient, for each kind of layer,
// activation and loss it covers; and the models it must leave to autograd.

#include "worker/trainer/dense_graph.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/keras/model_config.h"
#include "tests/common/keras/config_builder.h"
#include "worker/trainer/autocast.h"
#include "worker/trainer/cpu_kernels.h"
#include "worker/trainer/flat_parameters.h"
#include "worker/trainer/gemm.h"
#include "worker/trainer/keras_file.h"
#include "worker/trainer/losses.h"

namespace cohort::trainer {
namespace {

using keras::LossConfig;
using keras::LossKind;
using keras::testing::Connect;
using keras::testing::DenseEntry;
using keras::testing::FunctionalModel;
using keras::testing::InputEntry;
using keras::testing::Json;
using keras::testing::LayerEntry;
using keras::testing::SequentialModel;

keras::ModelIr Parse(const Json& config) {
  absl::StatusOr<keras::ModelIr> ir = keras::ParseModelConfig(config.dump());
  INFO(ir.status().ToString());
  REQUIRE(ir.ok());
  return *ir;
}

keras::ModelIr Example(const std::string& name) {
  absl::StatusOr<KerasModelFile> file =
      LoadKerasModel(std::string(COHORT_SOURCE_DIR) + "/examples/" + name);
  INFO(file.status().ToString());
  REQUIRE(file.ok());
  return file->ir;
}

LossConfig Loss(LossKind kind, bool from_logits = false, double smoothing = 0.0) {
  LossConfig loss;
  loss.kind = kind;
  loss.from_logits = from_logits;
  loss.label_smoothing = smoothing;
  return loss;
}

// A model with random weights (biases too), its variables in a flat buffer.
struct Fixture {
  std::unique_ptr<KerasModel> model;
  std::vector<torch::Tensor*> trainable;  // flat order, as the trainer lays it out
  std::unique_ptr<FlatParameters> flat;

  explicit Fixture(const keras::ModelIr& ir) {
    model = *KerasModel::Create(ir, torch::kCPU, 7);
    torch::manual_seed(11);
    {
      torch::NoGradGuard no_grad;
      for (ModelVariable& v : model->variables()) v.value.copy_(torch::randn_like(v.value) * 0.4);
    }
    for (auto it = model->variables().rbegin(); it != model->variables().rend(); ++it) {
      if (it->trainable) trainable.push_back(&it->value);
    }
    flat = std::make_unique<FlatParameters>(trainable);
  }
};

// y for `loss`: labels, one-hot rows, or real targets.
torch::Tensor Targets(const LossConfig& loss, int64_t rows, int64_t classes) {
  if (loss.kind == LossKind::kSparseCategoricalCrossentropy) {
    return torch::randint(classes, {rows, 1}, torch::kInt64);
  }
  if (loss.kind == LossKind::kCategoricalCrossentropy) {
    return torch::one_hot(torch::randint(classes, {rows}, torch::kInt64), classes).to(torch::kFloat32);
  }
  return torch::randn({rows, classes});
}

// Whether `got` is `expected` up to float rounding: within 1e-4 of expected's largest
// magnitude, elementwise. DenseGraph's products may run on another library than
// LibTorch's (gemm.h), which sums the 784 terms of a product in another order; a wrong
// formula is off by the order of the values themselves.
bool Close(const torch::Tensor& got, const torch::Tensor& expected) {
  double scale = expected.abs().max().item<double>();
  double worst = (got - expected.reshape(got.sizes())).abs().max().item<double>();
  return worst <= 1e-4 * scale + 1e-7;
}

// How far `got` is from `expected`, relative to expected's size (Frobenius norms).
double Off(const torch::Tensor& got, const torch::Tensor& expected) {
  return (got - expected.reshape(got.sizes())).norm().item<double>() /
         (expected.norm().item<double>() + 1e-12);
}

// One batch of `rows` through autograd and through DenseGraph; every result must agree.
// `bfloat16`: the graph's products run in bfloat16. Its loss, prediction and gradients
// then part from float32's (autograd's) by more than float32's rounding, and by no more
// than LibTorch's own bfloat16 (autograd under autocast) parts from them, with slack:
// autocast rounds each product's result to bfloat16 too, the graph only the operands,
// and on a handful of rows either can be the luckier.
void Compare(Fixture& f, DenseGraph& graph, const LossConfig& loss, int64_t rows,
             bool bfloat16 = false) {
  const keras::ModelIr& ir = f.model->ir();
  const int64_t classes = ir.output().output_shape.at(0);
  std::vector<int64_t> shape{rows};
  for (int64_t d : ir.input().output_shape) shape.push_back(d);
  torch::Tensor x = torch::randn(shape);
  torch::Tensor y = Targets(loss, rows, classes);
  const double scale = 0.75 / static_cast<double>(rows + 3);  // loss weight over a global batch

  // Autograd's results, in float32 or under autocast.
  auto through_autograd = [&](bool autocast, torch::Tensor* prediction, torch::Tensor* grad) {
    f.flat->ZeroGrad();
    KerasModel::Output out = ForwardInPrecision(*f.model, x, /*training=*/true, autocast);
    torch::Tensor sum = ElementLosses(loss, out, y).sum();
    (sum * scale).backward();
    *prediction = out.value.detach().clone();
    *grad = f.flat->grad().clone();
    return sum.item<double>();
  };
  torch::Tensor autocast_prediction, autocast_grad, expected_prediction, expected_grad;
  const double autocast_loss =
      bfloat16 ? through_autograd(true, &autocast_prediction, &autocast_grad) : 0.0;
  const double expected_loss = through_autograd(false, &expected_prediction, &expected_grad);

  f.flat->grad().fill_(12345.0f);  // DenseGraph must overwrite every gradient
  DenseGraph::Forward result = graph.RunForward(x, y, scale);
  REQUIRE(result.prediction.sizes() == expected_prediction.sizes());
  if (bfloat16) {
    const double loss_off = std::abs(result.loss_sum - expected_loss) / std::abs(expected_loss);
    const double autocast_off = std::abs(autocast_loss - expected_loss) / std::abs(expected_loss);
    INFO("loss off float32's by " << loss_off << "; autocast's by " << autocast_off);
    CHECK(loss_off <= std::max(3 * autocast_off, 1e-2));
    const double prediction_off = Off(result.prediction, expected_prediction);
    const double autocast_prediction_off = Off(autocast_prediction, expected_prediction);
    INFO("prediction off float32's by " << prediction_off << "; autocast's by " << autocast_prediction_off);
    CHECK(prediction_off <= 3 * autocast_prediction_off);
  } else {
    CHECK(result.loss_sum == Approx(expected_loss).epsilon(1e-5));
    CHECK(Close(result.prediction, expected_prediction));
  }
  std::map<int, int> calls;
  std::map<int, torch::Tensor> at_ready;
  graph.RunBackward([&](int v) {
    calls[v] += 1;
    at_ready[v] = f.trainable.at(v)->grad().clone();
  });
  CHECK(calls.size() == f.trainable.size());
  for (auto [v, n] : calls) CHECK(n == 1);
  for (size_t v = 0; v < f.trainable.size(); ++v) {
    const FlatParameters::Slot& slot = f.flat->slots()[v];
    torch::Tensor expected = expected_grad.narrow(0, slot.offset, slot.numel);
    torch::Tensor got = f.flat->grad().narrow(0, slot.offset, slot.numel);
    INFO("variable " << v << " of " << f.trainable.size() << ": largest difference "
                     << (got - expected).abs().max().item<float>() << ", largest value "
                     << expected.abs().max().item<float>());
    if (!bfloat16) CHECK(Close(got, expected));
    // The gradient was final when `ready` said so.
    REQUIRE(at_ready.count(static_cast<int>(v)) == 1);
    CHECK(torch::equal(at_ready[static_cast<int>(v)].reshape({-1}), got));
  }
  if (bfloat16) {
    // Over the variables: the padding between them in the flat buffer is no gradient.
    const torch::Tensor expected = f.flat->Packed(expected_grad);
    const double off = Off(f.flat->Packed(f.flat->grad()), expected);
    const double autocast_off = Off(f.flat->Packed(autocast_grad), expected);
    INFO("gradients off float32's by " << off << "; autocast's by " << autocast_off);
    CHECK(off > 1e-3);  // it really multiplied in bfloat16
    CHECK(off <= 2 * autocast_off);
  }
}

void CompareSizes(const keras::ModelIr& ir, const LossConfig& loss, bool bfloat16 = false) {
  Fixture f(ir);
  std::string why;
  std::unique_ptr<DenseGraph> graph =
      DenseGraph::Create(*f.model, loss, f.trainable, bfloat16, &why);
  INFO(why);
  REQUIRE(graph != nullptr);
  // A batch, a smaller last one, and the full size again: the buffers follow.
  for (int64_t rows : {32, 7, 32}) {
    INFO(rows << " rows");
    Compare(f, *graph, loss, rows, bfloat16);
  }
}

std::string WhyNot(const keras::ModelIr& ir, const LossConfig& loss) {
  Fixture f(ir);
  std::string why;
  std::unique_ptr<DenseGraph> graph = DenseGraph::Create(*f.model, loss, f.trainable, false, &why);
  CHECK(graph == nullptr);
  return why;
}

Json Seq(const std::vector<Json>& layers) {
  std::vector<Json> all{InputEntry("in", {12})};
  all.insert(all.end(), layers.begin(), layers.end());
  return SequentialModel(all);
}

Json Flatten(const std::string& name) {
  return LayerEntry("Flatten", name, {{"data_format", "channels_last"}});
}

Json Relu(const std::string& name) {
  return LayerEntry("ReLU", name, {{"max_value", nullptr}, {"negative_slope", 0.0}, {"threshold", 0.0}});
}

Json Activation(const std::string& name, const std::string& activation) {
  return LayerEntry("Activation", name, {{"activation", activation}});
}

TEST_CASE("DenseGraph: the mlp and the residual model as autograd trains them", "[dense_graph]") {
  const LossConfig sparse = Loss(LossKind::kSparseCategoricalCrossentropy);
  SECTION("mlp") { CompareSizes(Example("mnist_mlp.keras"), sparse); }
  SECTION("residual") { CompareSizes(Example("mnist_residual.keras"), sparse); }
  SECTION("an mlp on images: a Flatten of the input first") {
    CompareSizes(Parse(SequentialModel({InputEntry("in", {4, 3, 2}), Flatten("flat"),
                                        DenseEntry("a", 16, "relu"), DenseEntry("out", 5, "softmax")})),
                 sparse);
  }
}

TEST_CASE("DenseGraph in bfloat16: the mlp and the residual model as autograd under autocast",
          "[dense_graph]") {
  if (!HasBf16Gemm()) {
    WARN("skipped: this CPU cannot run oneDNN's bfloat16 GEMM (it needs AVX-512)");
    return;
  }
  const LossConfig sparse = Loss(LossKind::kSparseCategoricalCrossentropy);
  SECTION("mlp") { CompareSizes(Example("mnist_mlp.keras"), sparse, true); }
  SECTION("residual") { CompareSizes(Example("mnist_residual.keras"), sparse, true); }
  SECTION("mean squared error, tanh and sigmoid") {
    CompareSizes(Parse(Seq({DenseEntry("a", 16, "tanh"), DenseEntry("b", 8, "sigmoid"),
                            DenseEntry("out", 3, "linear")})),
                 Loss(LossKind::kMeanSquaredError), true);
  }
}

TEST_CASE("ToBfloat16 rounds as LibTorch's BFloat16", "[dense_graph]") {
  std::vector<float> values{0.0f, -0.0f, 1.0f, 1.00390625f, 1.0117188f, 1.00390625f + 1e-7f,
                            -3.1415927f, 65504.0f, 3.4028235e38f, 1e-40f, -1e-45f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()};
  torch::Tensor random = torch::randn({100000}) * 1000;
  values.insert(values.end(), random.data_ptr<float>(), random.data_ptr<float>() + random.numel());
  std::vector<uint16_t> got(values.size());
  ToBfloat16(values, got.data());
  torch::Tensor expected = torch::from_blob(values.data(), {static_cast<int64_t>(values.size())})
                               .to(torch::kBFloat16);
  const uint16_t* want = reinterpret_cast<const uint16_t*>(expected.data_ptr<at::BFloat16>());
  int64_t mismatches = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    bool nan = std::isnan(values[i]);
    if (nan ? got[i] != 0x7fc0 : got[i] != want[i]) {
      if (mismatches++ < 5) WARN("value " << values[i] << ": " << got[i] << ", LibTorch " << want[i]);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("DenseGraph: every activation, elementwise layer and loss it covers", "[dense_graph]") {
  SECTION("tanh, sigmoid, linear; mean squared error") {
    CompareSizes(Parse(Seq({DenseEntry("a", 9, "tanh"), DenseEntry("b", 8, "sigmoid"),
                            DenseEntry("c", 5, "linear")})),
                 Loss(LossKind::kMeanSquaredError));
  }
  SECTION("sparse cross-entropy from logits") {
    CompareSizes(Parse(Seq({DenseEntry("a", 9, "relu"), DenseEntry("b", 4)})),
                 Loss(LossKind::kSparseCategoricalCrossentropy, /*from_logits=*/true));
  }
  SECTION("categorical cross-entropy with label smoothing, softmax output") {
    CompareSizes(Parse(Seq({DenseEntry("a", 9, "relu"), DenseEntry("b", 4, "softmax")})),
                 Loss(LossKind::kCategoricalCrossentropy, false, 0.1));
  }
  SECTION("categorical cross-entropy from logits") {
    CompareSizes(Parse(Seq({DenseEntry("a", 9, "tanh"), DenseEntry("b", 4)})),
                 Loss(LossKind::kCategoricalCrossentropy, true));
  }
  SECTION("Activation and ReLU layers, Flatten, Dropout(0), a three-way Add, a Softmax layer") {
    Json dropout = LayerEntry("Dropout", "drop", {{"rate", 0.0}, {"seed", nullptr}, {"noise_shape", nullptr}});
    Json flatten = Flatten("flat");
    std::vector<Json> layers{
        Connect(InputEntry("in", {12}), {}),
        Connect(DenseEntry("d1", 10), {"in"}),
        Connect(Activation("t1", "tanh"), {"d1"}),
        Connect(DenseEntry("d2", 10, "sigmoid"), {"t1"}),
        Connect(Relu("r1"), {"d1"}),
        Connect(flatten, {"r1"}),
        Connect(dropout, {"flat"}),
        Connect(LayerEntry("Add", "add", {}), {"d2", "drop", "t1"}),
        Connect(Activation("lin", "linear"), {"add"}),
        Connect(DenseEntry("d3", 6), {"lin"}),
        Connect(Activation("out", "softmax"), {"d3"}),
    };
    CompareSizes(Parse(FunctionalModel(layers, "in", "out")),
                 Loss(LossKind::kSparseCategoricalCrossentropy));
  }
  SECTION("activation layers applied by the Dense or Add before them") {
    // r1, r2, t2, s3 and r4 are each the only reader of a linear Dense or an Add; a2
    // adds the input (which needs no gradient), a3 one node twice, a4 three nodes.
    std::vector<Json> layers{
        Connect(InputEntry("in", {12}), {}),
        Connect(DenseEntry("d1", 10), {"in"}),
        Connect(Relu("r1"), {"d1"}),
        Connect(DenseEntry("d2", 10), {"r1"}),
        Connect(LayerEntry("Add", "a1", {}), {"r1", "d2"}),
        Connect(Relu("r2"), {"a1"}),
        Connect(DenseEntry("d3", 12), {"r2"}),
        Connect(LayerEntry("Add", "a2", {}), {"in", "d3"}),
        Connect(Activation("t2", "tanh"), {"a2"}),
        Connect(LayerEntry("Add", "a3", {}), {"t2", "t2"}),
        Connect(Activation("s3", "sigmoid"), {"a3"}),
        Connect(DenseEntry("d4", 12), {"s3"}),
        Connect(LayerEntry("Add", "a4", {}), {"d4", "s3", "t2"}),
        Connect(Relu("r4"), {"a4"}),
        Connect(DenseEntry("d5", 6), {"r4"}),
        Connect(Activation("out", "softmax"), {"d5"}),
    };
    CompareSizes(Parse(FunctionalModel(layers, "in", "out")),
                 Loss(LossKind::kSparseCategoricalCrossentropy));
  }
  SECTION("an activation layer at the output, applied by the Dense before it") {
    CompareSizes(Parse(Seq({DenseEntry("a", 9), Relu("r"), DenseEntry("b", 5),
                            Activation("s", "sigmoid")})),
                 Loss(LossKind::kMeanSquaredError));
  }
  SECTION("a frozen Dense layer: no gradient of its own, and gradients flow through it") {
    Json frozen = DenseEntry("frozen", 9, "relu");
    frozen["config"]["trainable"] = false;
    CompareSizes(Parse(Seq({DenseEntry("a", 9, "relu"), frozen, DenseEntry("b", 4, "softmax")})),
                 Loss(LossKind::kSparseCategoricalCrossentropy));
  }
}

TEST_CASE("DenseGraph leaves to autograd what it does not cover, and says why", "[dense_graph]") {
  const LossConfig sparse = Loss(LossKind::kSparseCategoricalCrossentropy);
  CHECK_THAT(WhyNot(Example("mnist_cnn.keras"), sparse), Catch::Contains("rank 4"));
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4, "softmax")})), Loss(LossKind::kBinaryCrossentropy)),
             Catch::Contains("loss"));
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4, "softmax")})), Loss(LossKind::kMeanSquaredError)),
             Catch::Contains("softmax"));
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4, "softmax")})),
                    Loss(LossKind::kSparseCategoricalCrossentropy, /*from_logits=*/true)),
             Catch::Contains("from logits"));
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4)})), sparse), Catch::Contains("not a softmax"));
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4, "gelu"), DenseEntry("b", 4, "softmax")})), sparse),
             Catch::Contains("'a'"));
  Json dropout = LayerEntry("Dropout", "drop", {{"rate", 0.5}, {"seed", nullptr}, {"noise_shape", nullptr}});
  CHECK_THAT(WhyNot(Parse(Seq({DenseEntry("a", 4), dropout, DenseEntry("b", 4, "softmax")})), sparse),
             Catch::Contains("Dropout 'drop'"));
}

// The accuracies' loop (MetricSum) against their LibTorch form (MetricValues), with
// ties and NaN rows, where argmax' rule for them decides.
TEST_CASE("MetricSum counts the accuracies as MetricValues computes them", "[metrics]") {
  torch::manual_seed(3);
  const int64_t rows = 200, classes = 7;
  // Values in steps of 0.5 over a small range: many rows with equal largest values.
  torch::Tensor prediction = torch::randint(0, 4, {rows, classes}).to(torch::kFloat32) * 0.5;
  prediction[5][3] = std::numeric_limits<float>::quiet_NaN();
  prediction[9][0] = std::numeric_limits<float>::quiet_NaN();
  prediction[9][4] = std::numeric_limits<float>::quiet_NaN();
  torch::Tensor labels = torch::randint(0, classes, {rows}, torch::kLong);
  labels[5] = 3;
  labels[9] = 0;
  torch::Tensor one_hot = torch::randint(0, 2, {rows, classes}).to(torch::kFloat32);
  keras::MetricConfig sparse{.kind = keras::MetricKind::kSparseCategoricalAccuracy};
  keras::MetricConfig categorical{.kind = keras::MetricKind::kCategoricalAccuracy};
  auto check = [](const keras::MetricConfig& metric, const torch::Tensor& p,
                  const torch::Tensor& y) {
    torch::Tensor values = MetricValues(metric, p, y);
    MetricTotal total = MetricSum(metric, p, y);
    CHECK(total.count == values.numel());
    CHECK(total.sum == values.sum().item<double>());
    return total.sum;
  };
  const double matched = check(sparse, prediction, labels);
  CHECK(matched > 0);  // the case means something: some rows match, some do not
  CHECK(matched < rows);
  check(sparse, prediction, labels.unsqueeze(1));
  check(sparse, prediction, labels.to(torch::kInt32));  // LibTorch's path
  check(categorical, prediction, one_hot);
  check(categorical, prediction, one_hot.to(torch::kFloat64));  // LibTorch's path
  check(sparse, prediction.t().contiguous().t(), labels);          // not contiguous
}

}  // namespace
}  // namespace cohort::trainer
