#include "client/loss_chart.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "absl/strings/str_split.h"

namespace cohort::client {
namespace {

TEST_CASE("The loss chart draws one column per epoch, loss over val_loss", "[client][chart]") {
  EpochCurves c;
  c.loss = {2.0, 1.0, 0.5, 0.0};
  c.val_loss = {2.0, 1.5, 1.0, 0.5};
  std::string chart = LossChart(c, /*height=*/5);
  INFO(chart);
  std::vector<std::string> lines = absl::StrSplit(chart, '\n');
  REQUIRE(lines.size() == 8);  // 5 rows, the rule, the legend, ""
  CHECK(lines[0] == "loss 2 ┤◉   ");  // loss and val_loss in one cell
  CHECK(lines[1] == "       │ ○  ");
  CHECK(lines[2] == "       │ ●○ ");
  CHECK(lines[3] == "       │  ●○");
  CHECK(lines[4] == "     0 ┤   ●");
  CHECK(lines[5] == "       └────");
  CHECK(lines[6] == "        epoch 1..4   ● loss  ○ val_loss  ◉ both");
}

TEST_CASE("Missing epochs, flat curves and no data", "[client][chart]") {
  CHECK(LossChart({}) == "");
  EpochCurves only_val;
  only_val.val_loss = {1.0};
  CHECK(LossChart(only_val) == "");
  EpochCurves flat;
  flat.loss = {0.3, 0.3, std::nan("")};
  std::string chart = LossChart(flat, 3);
  INFO(chart);
  std::vector<std::string> lines = absl::StrSplit(chart, '\n');
  CHECK(lines[2] == "     0.3 ┤●● ");
  CHECK(lines[4].find("val_loss") == std::string::npos);
}

TEST_CASE("Long runs are thinned to fit", "[client][chart]") {
  EpochCurves c;
  for (int e = 0; e < 100; ++e) c.loss.push_back(100.0 - e);
  std::string chart = LossChart(c, 4, /*max_width=*/25);
  INFO(chart);
  std::vector<std::string> lines = absl::StrSplit(chart, '\n');
  std::string rule;
  for (int i = 0; i < 25; ++i) rule += "─";
  CHECK(lines[4] == "         └" + rule);  // "loss 100 ┤" is 9 columns before the plot
  CHECK(lines[5].find("epoch 1..100 (every 4)") != std::string::npos);
}

}  // namespace
}  // namespace cohort::client
