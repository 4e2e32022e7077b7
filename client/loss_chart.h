#pragma once

// The loss curve in the terminal, for `cohort status JOB`: the job's per-epoch "loss"
// (and "val_loss" when it validates) read from its event log, drawn as a small chart.
//
//   loss 2.131 ┤◉
//              │ ●
//              │ ○●
//              │   ●○○○○○○
//       0.0951 ┤    ●●●●●●
//              └──────────
//               epoch 1..10   ● loss  ○ val_loss  ◉ both
//
// LossChart is a pure function (thread-safe); FetchEpochCurves makes one WatchJob call
// that stops at the job's last stored event (it does not wait for more), within the
// connection's timeout.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/call.h"
#include "cohort/v1/job_service.grpc.pb.h"

namespace cohort::client {

struct EpochCurves {
  // By epoch (index 0 is epoch 1); NaN where an epoch has no value (yet). A restarted
  // attempt that ends an epoch again replaces its values.
  std::vector<double> loss;
  std::vector<double> val_loss;
};

absl::StatusOr<EpochCurves> FetchEpochCurves(v1::JobService::StubInterface* stub,
                                             const Connection& connection, const v1::Job& job);

// The chart, `height` rows of plot (at least 2), one column per epoch (epochs are
// thinned to every k-th when there are more than `max_width`). "" when no epoch has a
// finite loss.
std::string LossChart(const EpochCurves& curves, int height = 8, int max_width = 60);

}  // namespace cohort::client
