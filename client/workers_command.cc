#include "client/workers_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "client/job_format.h"
#include "client/table.h"
#include "cohort/v1/cluster_service.grpc.pb.h"
#include "proto/channel.h"
#include "proto/time_convert.h"

namespace cohort::client {
namespace {

std::string StateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_ALIVE: return "alive";
    case v1::WORKER_STATE_LOST: return "lost";
    case v1::WORKER_STATE_LEFT: return "left";
    default: return "unknown";
  }
}

std::string Rfc3339(const google::protobuf::Timestamp& t) {
  return absl::FormatTime(absl::RFC3339_sec, FromProto(t), absl::UTCTimeZone());
}

nlohmann::json ToJson(const v1::WorkerInfo& w) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : w.resources().gpus()) {
    gpus.push_back({{"index", g.index()}, {"name", g.name()}, {"memory_bytes", g.memory_bytes()}});
  }
  return {{"name", w.name()},
          {"state", StateName(w.state())},
          {"address", w.address()},
          {"cpu_slots", w.resources().cpu_slots()},
          {"gpus", gpus},
          {"busy_slots", w.busy_slots()},
          {"version", w.version()},
          {"registered_at", Rfc3339(w.registered_at())},
          {"last_seen", Rfc3339(w.last_seen())}};
}

}  // namespace

int RunWorkersCommand(const Connection& connection, OutputFormat format) {
  auto stub = v1::ClusterService::NewStub(CreateCoordinatorChannel(connection.coordinator, connection.security));
  v1::ListWorkersRequest request;
  v1::ListWorkersResponse response;
  grpc::Status status = stub->ListWorkers(NewCallContext(connection).get(), request, &response);
  if (!status.ok()) return ReportCallError(connection, status);

  if (format == OutputFormat::kJson) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& w : response.workers()) out.push_back(ToJson(w));
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  const absl::Time now = absl::Now();
  for (const auto& w : response.workers()) {
    rows.push_back({w.name(), StateName(w.state()), absl::StrCat(w.resources().cpu_slots()),
                    absl::StrCat(w.resources().gpus_size()), w.address(),
                    FormatAgo(w.last_seen(), now)});
  }
  std::fputs(RenderTable({"NAME", "STATE", "SLOTS", "GPUS", "ADDRESS", "LAST SEEN"}, rows).c_str(),
             stdout);
  if (rows.empty()) std::printf("(no workers have registered)\n");
  return kExitOk;
}

}  // namespace cohort::client
