// Optimizer::Step over parts of the parameters, as ranks sharing one copy of the model
// run it (shared_replica.h): the parts' updates together are the whole update, bit for
// bit, for every optimizer whose update reads only its own range.

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "common/keras/compile_config.h"
#include "worker/trainer/flat_parameters.h"
#include "worker/trainer/optimizer.h"

namespace cohort::trainer {
namespace {

using keras::OptimizerConfig;
using keras::OptimizerKind;

struct Case {
  std::string name;
  OptimizerConfig config;
};

std::vector<Case> ByRangeCases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, OptimizerKind kind, auto&& tweak) {
    OptimizerConfig c = keras::KerasDefaultOptimizer(kind);
    tweak(c);
    cases.push_back({std::move(name), c});
  };
  auto none = [](OptimizerConfig&) {};
  add("adam", OptimizerKind::kAdam, none);
  add("adam amsgrad, clipvalue", OptimizerKind::kAdam, [](OptimizerConfig& c) {
    c.amsgrad = true;
    c.clipvalue = 0.05;
  });
  add("adamw", OptimizerKind::kAdamW, none);
  add("sgd", OptimizerKind::kSgd, none);
  add("sgd nesterov", OptimizerKind::kSgd, [](OptimizerConfig& c) {
    c.momentum = 0.9;
    c.nesterov = true;
  });
  add("rmsprop centered with momentum", OptimizerKind::kRmsprop, [](OptimizerConfig& c) {
    c.centered = true;
    c.momentum = 0.5;
  });
  add("adagrad", OptimizerKind::kAdagrad, none);
  return cases;
}

// Two variables (1000 and 37 values), their gradients a fixed function of the step.
struct Model {
  Model() {
    torch::manual_seed(7);
    a = torch::randn({40, 25}).requires_grad_(true);
    b = torch::randn({37}).requires_grad_(true);
    flat = std::make_unique<FlatParameters>(std::vector<torch::Tensor*>{&a, &b});
  }
  void SetGradients(int step) {
    torch::NoGradGuard no_grad;
    torch::Tensor g = flat->grad();
    g.copy_(torch::sin(torch::arange(g.numel(), torch::kFloat32) * (0.37f + step)) * 0.3f);
  }
  torch::Tensor a, b;
  std::unique_ptr<FlatParameters> flat;
};

TEST_CASE("an optimizer's update by parts is its whole update, bit for bit", "[optimizer]") {
  for (const Case& c : ByRangeCases()) {
    INFO(c.name);
    Model whole, parts;
    Optimizer one(c.config, *whole.flat);
    Optimizer split(c.config, *parts.flat);
    REQUIRE(one.UpdatesByRange());
    const int64_t n = whole.flat->numel();
    // Ranges of 16-float multiples, as SharedReplica cuts them, and an odd one.
    const std::vector<int64_t> cuts{0, 512, 1008, 1011, n};
    for (int step = 0; step < 4; ++step) {
      whole.SetGradients(step);
      parts.SetGradients(step);
      one.Step(*whole.flat);
      // Each part is updated by a Step of its own, as each rank runs one; the others'
      // steps must leave it alone. The iteration count advances once per Step, so one
      // optimizer stands for every rank only if each part's Step sees the same count:
      // re-run the count back between parts.
      const int64_t iterations = split.iterations();
      for (size_t p = 0; p + 1 < cuts.size(); ++p) {
        REQUIRE(split.Restore(iterations, split.State()).ok());
        split.Step(*parts.flat, {.begin = cuts[p], .end = cuts[p + 1], .shared = p % 2 == 1});
      }
      REQUIRE(split.iterations() == one.iterations());
      CHECK(torch::equal(whole.flat->data(), parts.flat->data()));
      for (size_t s = 0; s < one.State().size(); ++s) {
        CHECK(torch::equal(one.State()[s], split.State()[s]));
      }
    }
    CHECK_FALSE(torch::equal(whole.flat->data(), Model().flat->data()));  // it did train
  }
}

TEST_CASE("clipping by norm needs every gradient: no update by parts", "[optimizer]") {
  for (bool global : {false, true}) {
    OptimizerConfig c = keras::KerasDefaultOptimizer(OptimizerKind::kAdam);
    (global ? c.global_clipnorm : c.clipnorm) = 1.0;
    Model m;
    Optimizer optimizer(c, *m.flat);
    CHECK_FALSE(optimizer.UpdatesByRange());
    m.SetGradients(0);
    CHECK_THROWS_WITH(optimizer.Step(*m.flat, {.begin = 0, .end = 16}),
                      Catch::Contains("clipping by norm updates every parameter at once"));
    optimizer.Step(*m.flat, {.begin = 0, .end = -1});  // the whole range is fine
  }
}

TEST_CASE("FlatParameters: every variable on a 64-byte line, packed for checkpoints",
          "[optimizer]") {
  torch::manual_seed(3);
  torch::Tensor a = torch::randn({40, 25}).requires_grad_(true);
  torch::Tensor b = torch::randn({37}).requires_grad_(true);
  torch::Tensor c = torch::randn({5}).requires_grad_(true);
  const torch::Tensor values = torch::cat({a.detach().reshape({-1}), b.detach(), c.detach()});
  FlatParameters flat({&a, &b, &c});

  REQUIRE(flat.slots().size() == 3);
  CHECK(flat.slots()[0].offset == 0);
  CHECK(flat.slots()[1].offset == 1008);  // 1000 rounded up to 16 floats
  CHECK(flat.slots()[2].offset == 1056);  // 1008 + 37 rounded up
  CHECK(flat.numel() == 1072);  // a multiple of 16 too
  CHECK(flat.packed_numel() == 1042);
  for (torch::Tensor* v : {&a, &b, &c}) {
    CHECK(reinterpret_cast<uintptr_t>(v->data_ptr<float>()) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(v->grad().data_ptr<float>()) % 64 == 0);
  }
  // The variables kept their values; the padding is zero in both buffers.
  const torch::Tensor packed = flat.Packed(flat.data());
  CHECK(torch::equal(packed, values));
  CHECK(flat.data().abs().sum().item<float>() == Approx(values.abs().sum().item<float>()));
  CHECK(flat.grad().abs().sum().item<float>() == 0.0f);
  // Unpacked puts every variable back where it lives, with zero padding.
  CHECK(torch::equal(flat.Unpacked(packed), flat.data()));
  CHECK_THROWS(flat.Unpacked(values.narrow(0, 0, 1041)));
  CHECK_THROWS(flat.Packed(values));
}

}  // namespace
}  // namespace cohort::trainer
