#include "client/keras_format.h"

#include <catch2/catch.hpp>

namespace cohort::client {
namespace {

google::protobuf::RepeatedPtrField<v1::Metric> Metrics(
    std::initializer_list<std::pair<const char*, double>> items) {
  google::protobuf::RepeatedPtrField<v1::Metric> out;
  for (const auto& [name, value] : items) {
    v1::Metric* m = out.Add();
    m->set_name(name);
    m->set_value(value);
  }
  return out;
}

TEST_CASE("Metric values print as Keras' Progbar prints them", "[client]") {
  // f"{v:.4f}" above 1e-3 in magnitude, f"{v:.4e}" at or below it.
  CHECK(FormatMetricValue(0.30123) == "0.3012");
  CHECK(FormatMetricValue(0.91) == "0.9100");
  CHECK(FormatMetricValue(2.302585) == "2.3026");
  CHECK(FormatMetricValue(123.45678) == "123.4568");
  CHECK(FormatMetricValue(-0.5) == "-0.5000");
  CHECK(FormatMetricValue(0.0001234) == "1.2340e-04");
  CHECK(FormatMetricValue(0.001) == "1.0000e-03");
  CHECK(FormatMetricValue(0.0) == "0.0000e+00");
  CHECK(FormatMetricValue(1.5e-7) == "1.5000e-07");
  CHECK(FormatMetricValue(std::nan("")) == "nan");
  CHECK(FormatMetricValue(HUGE_VAL) == "inf");
}

TEST_CASE("Metrics are listed training first, then validation, each by name", "[client]") {
  auto metrics = Metrics({{"val_loss", 0.25}, {"loss", 0.3}, {"val_accuracy", 0.95},
                          {"accuracy", 0.9123}});
  CHECK(FormatMetrics(metrics) ==
        " - accuracy: 0.9123 - loss: 0.3000 - val_accuracy: 0.9500 - val_loss: 0.2500");
  CHECK(FormatMetrics(Metrics({})).empty());
}

TEST_CASE("Elapsed time and time per step use Keras' units", "[client]") {
  CHECK(FormatElapsed(3.4) == "3s");
  CHECK(FormatElapsed(125.2) == "125s");
  CHECK(FormatElapsed(0.2) == "0s");
  CHECK(FormatElapsed(-1) == "0s");
  CHECK(FormatPerStep(0.0123) == "12ms/step");
  CHECK(FormatPerStep(1.7) == "2s/step");
  CHECK(FormatPerStep(0.00085) == "850us/step");
  CHECK(FormatPerStep(0) == "0s/step");
}

TEST_CASE("Step counts are right-aligned to the total's width", "[client]") {
  CHECK(FormatStepCount(7, 234) == "  7/234");
  CHECK(FormatStepCount(234, 234) == "234/234");
  CHECK(FormatStepCount(1, 9) == "1/9");
}

TEST_CASE("The bar fills in proportion to the steps done", "[client]") {
  std::string full;
  for (int i = 0; i < 20; ++i) full += "━";
  CHECK(RenderBar(234, 234, 20, false) == full);
  std::string half;
  for (int i = 0; i < 10; ++i) half += "━";
  for (int i = 0; i < 10; ++i) half += "─";
  CHECK(RenderBar(117, 234, 20, false) == half);
  // Keras truncates: 1 of 234 steps is no cell yet.
  std::string empty;
  for (int i = 0; i < 20; ++i) empty += "─";
  CHECK(RenderBar(1, 234, 20, false) == empty);
  CHECK(RenderBar(5, 0, 20, false) == empty);  // unknown total
  CHECK(RenderBar(500, 234, 20, false) == full);  // clamped

  const std::string colored = RenderBar(117, 234, 20, true);
  CHECK(colored.find("\x1b[32m") == 0);  // the done part in green
  CHECK(colored.find("\x1b[2m") != std::string::npos);
  CHECK(colored.find("─") == std::string::npos);
}

TEST_CASE("A redrawn line is cut to the terminal's width, escapes kept", "[client]") {
  CHECK(FitToColumns("Epoch 1/2 - loss", 9) == "Epoch 1/2");
  CHECK(FitToColumns("short", 80) == "short");
  CHECK(FitToColumns("━━━━ 3/4", 3) == "━━━");
  // Colors take no column, and the reset after the cut part is kept.
  CHECK(FitToColumns("\x1b[32m━━\x1b[0m\x1b[2m━━\x1b[0m 2/4", 3) ==
        "\x1b[32m━━\x1b[0m\x1b[2m━\x1b[0m");
  CHECK(FitToColumns("abc", 0).empty());
}

}  // namespace
}  // namespace cohort::client
