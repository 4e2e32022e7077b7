#include "client/loss_chart.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort::client {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

void Put(std::vector<double>& curve, int epoch, double value) {
  if (epoch < 1) return;
  if (static_cast<int>(curve.size()) < epoch) curve.resize(epoch, kNone);
  curve[epoch - 1] = value;
}

}  // namespace

absl::StatusOr<EpochCurves> FetchEpochCurves(v1::JobService::StubInterface* stub,
                                             const Connection& connection, const v1::Job& job) {
  EpochCurves curves;
  if (job.last_sequence() <= 0) return curves;
  std::unique_ptr<grpc::ClientContext> context = NewCallContext(connection);
  v1::WatchJobRequest request;
  request.set_job_id(job.id());
  std::unique_ptr<grpc::ClientReaderInterface<v1::JobEvent>> reader = stub->WatchJob(context.get(), request);
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (event.has_epoch()) {
      for (const v1::Metric& m : event.epoch().metrics()) {
        if (m.name() == "loss") Put(curves.loss, event.epoch().epoch(), m.value());
        if (m.name() == "val_loss") Put(curves.val_loss, event.epoch().epoch(), m.value());
      }
    }
    if (event.sequence() >= job.last_sequence()) {
      context->TryCancel();  // what was stored when we asked is all we draw
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    return absl::UnavailableError(status.error_message());
  }
  return curves;
}

std::string LossChart(const EpochCurves& curves, int height, int max_width) {
  height = std::max(2, height);
  const int epochs = static_cast<int>(std::max(curves.loss.size(), curves.val_loss.size()));
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool any_loss = false;
  for (const std::vector<double>* c : {&curves.loss, &curves.val_loss}) {
    for (double v : *c) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      any_loss |= c == &curves.loss;
    }
  }
  if (!any_loss) return "";
  const int step = std::max(1, (epochs + max_width - 1) / std::max(1, max_width));
  const int width = (epochs + step - 1) / step;
  // Row 0 is the top (hi); a flat curve sits on the bottom row.
  auto row_of = [&](double v) {
    if (hi <= lo) return height - 1;
    return static_cast<int>(std::lround((hi - v) / (hi - lo) * (height - 1)));
  };
  std::vector<std::vector<std::string>> grid(height, std::vector<std::string>(width, " "));
  const bool validates = std::any_of(curves.val_loss.begin(), curves.val_loss.end(),
                                     [](double v) { return std::isfinite(v); });
  bool both = false;  // a loss and a val_loss in one cell
  for (int col = 0; col < width; ++col) {
    int e = col * step;  // the first epoch of the column
    auto at = [&](const std::vector<double>& c) { return e < static_cast<int>(c.size()) ? c[e] : kNone; };
    double v = at(curves.val_loss);
    if (std::isfinite(v)) grid[row_of(v)][col] = "○";
    double l = at(curves.loss);
    if (std::isfinite(l)) {
      std::string& cell = grid[row_of(l)][col];
      both |= cell == "○";
      cell = cell == "○" ? "◉" : "●";
    }
  }
  std::string top = absl::StrFormat("%.4g", hi), bottom = absl::StrFormat("%.4g", lo);
  size_t label = std::max(top.size(), bottom.size());
  std::string out;
  for (int r = 0; r < height; ++r) {
    std::string name = r == 0 ? "loss " : "     ";
    std::string value = r == 0 ? top : r == height - 1 ? bottom : "";
    absl::StrAppend(&out, name, std::string(label - value.size(), ' '), value,
                    value.empty() ? " │" : " ┤");
    for (const std::string& cell : grid[r]) out += cell;
    out += "\n";
  }
  std::string rule;
  for (int i = 0; i < width; ++i) rule += "─";
  absl::StrAppend(&out, std::string(5 + label + 1, ' '), "└", rule, "\n");
  absl::StrAppend(&out, std::string(5 + label + 2, ' '), "epoch 1..", epochs,
                  step > 1 ? absl::StrCat(" (every ", step, ")") : "", "   ● loss",
                  validates ? "  ○ val_loss" : "", both ? "  ◉ both" : "", "\n");
  return out;
}

}  // namespace cohort::client
