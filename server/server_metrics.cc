#include "server/server_metrics.h"

#include <map>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cohort/v1/types.pb.h"
#include "common/logging.h"
#include "common/version.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"

namespace cohort::server {
namespace {

// "JOB_STATE_QUEUED" -> "queued".
std::string StateName(std::string name, absl::string_view prefix) {
  if (absl::StartsWith(name, prefix)) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

constexpr const char* kCodeNames[] = {
    "OK",        "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

std::string CodeName(grpc::StatusCode code) {
  int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kCodeNames[i] : absl::StrCat(i);
}

std::string TypeName(grpc::experimental::ServerRpcInfo::Type type) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  switch (type) {
    case Type::UNARY:
      return "unary";
    case Type::CLIENT_STREAMING:
      return "client_stream";
    case Type::SERVER_STREAMING:
      return "server_stream";
    case Type::BIDI_STREAMING:
      return "bidi_stream";
  }
  return "unknown";
}

// Counts one RPC: started when made, handled (with its code and duration) when its
// status is sent.
class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(grpc::experimental::ServerRpcInfo* info, const ServerMetrics::Rpc& rpc)
      : rpc_(rpc), start_(absl::Now()) {
    std::string full = info->method() != nullptr ? info->method() : "";  // "/pkg.Service/Method"
    size_t slash = full.rfind('/');
    service_ = slash == std::string::npos || slash == 0 ? "unknown" : full.substr(1, slash - 1);
    method_ = slash == std::string::npos ? full : full.substr(slash + 1);
    type_ = TypeName(info->type());
    rpc_.started->WithLabels({service_, method_, type_}).Increment();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      std::string code = CodeName(methods->GetSendStatus().error_code());
      rpc_.handled->WithLabels({service_, method_, type_, code}).Increment();
      rpc_.seconds->WithLabels({service_, method_, type_})
          .Observe(absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  const ServerMetrics::Rpc rpc_;
  const absl::Time start_;
  std::string service_, method_, type_;
};

class RpcInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(const ServerMetrics::Rpc& rpc) : rpc_(rpc) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(info, rpc_);  // gRPC owns it
  }

 private:
  const ServerMetrics::Rpc rpc_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Listen(const HostPort& address) {
  std::unique_ptr<ServerMetrics> m(new ServerMetrics());
  if (absl::Status s = m->Register(); !s.ok()) return s;
  metrics::Registry* registry = &m->registry_;
  absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> http = metrics::MetricsHttpServer::Start(
      {.listen = address}, [registry] { return registry->TextFormat(); });
  if (!http.ok()) return http.status();
  m->http_ = std::move(*http);
  spdlog::info("metrics on http://{}:{}/metrics", address.host, m->http_->port());
  return m;
}

ServerMetrics::~ServerMetrics() { Stop(); }

void ServerMetrics::Stop() {
  if (http_) http_->Stop();
}

absl::Status ServerMetrics::Register() {
  using metrics::LatencyBuckets;
  auto started = registry_.AddCounter("cohort_grpc_server_started_total",
                                      "RPCs started on the coordinator.",
                                      {"grpc_service", "grpc_method", "grpc_type"});
  auto handled = registry_.AddCounter("cohort_grpc_server_handled_total",
                                      "RPCs completed on the coordinator, by status code.",
                                      {"grpc_service", "grpc_method", "grpc_type", "grpc_code"});
  auto seconds = registry_.AddHistogram(
      "cohort_grpc_server_handling_seconds",
      "Time from the start of an RPC to its status (streams: their whole life).",
      {"grpc_service", "grpc_method", "grpc_type"}, LatencyBuckets());
  auto jobs = registry_.AddGauge("cohort_jobs", "Jobs in the job store, by state.", {"state"});
  auto queue = registry_.AddGauge("cohort_queue_length",
                                  "Jobs waiting to be scheduled (queued or restarting).");
  auto scheduling = registry_.AddHistogram(
      "cohort_scheduling_latency_seconds",
      "Time a job waited between being queued (submitted, or restarting) and being placed.", {},
      {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600});
  auto workers = registry_.AddGauge("cohort_workers", "Registered workers, by state.", {"state"});
  auto slots = registry_.AddGauge("cohort_worker_slots",
                                  "Slots (CPU slots and GPUs) of each alive worker: total, and busy with ranks.",
                                  {"worker", "state"});
  auto build = registry_.AddGauge("cohort_build_info", "The cohort-server version; always 1.",
                                  {"version"});
  for (const absl::Status& s :
       {started.status(), handled.status(), seconds.status(), jobs.status(), queue.status(),
        scheduling.status(), workers.status(), slots.status(), build.status()}) {
    if (!s.ok()) return s;
  }
  rpc_ = {*started, *handled, *seconds};
  jobs_ = *jobs;
  queue_ = *queue;
  scheduling_ = *scheduling;
  workers_by_state_ = *workers;
  slots_ = *slots;
  (*build)->WithLabels({kVersion}).Set(1);
  (*queue)->WithLabels({}).Set(0);
  (*scheduling)->WithLabels({});
  return absl::OkStatus();
}

absl::Status ServerMetrics::Attach(const std::string& db_path, WorkerRegistry* workers,
                                   JobManager* manager) {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(db_path);
  if (!db.ok()) return db.status();
  db_ = std::move(*db);
  workers_ = workers;
  manager_ = manager;
  registry_.AddCollector([this] { Collect(); });
  return absl::OkStatus();
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ServerMetrics::InterceptorCreators() {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RpcInterceptorFactory>(rpc_));
  return creators;
}

void ServerMetrics::ObserveSchedulingLatency(absl::Duration waited) {
  scheduling_->WithLabels({}).Observe(absl::ToDoubleSeconds(waited));
}

// On the HTTP thread, at every scrape.
void ServerMetrics::Collect() {
  std::map<int, int64_t> by_state;
  absl::StatusOr<std::unique_ptr<Statement>> q =
      db_->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state");
  bool ok = q.ok();
  while (ok) {
    absl::StatusOr<bool> row = (*q)->Step();
    if (!row.ok()) {
      ok = false;
      spdlog::warn("metrics: cannot count jobs: {}", row.status());
    }
    if (!ok || !*row) break;
    by_state[static_cast<int>((*q)->ColumnInt(0))] = (*q)->ColumnInt(1);
  }
  if (ok) {
    for (int s = v1::JobState_MIN + 1; s <= v1::JobState_MAX; ++s) {
      if (!v1::JobState_IsValid(s)) continue;
      jobs_->WithLabels({StateName(v1::JobState_Name(static_cast<v1::JobState>(s)), "JOB_STATE_")})
          .Set(static_cast<double>(by_state[s]));
    }
    queue_->WithLabels({}).Set(
        static_cast<double>(by_state[v1::JOB_STATE_QUEUED] + by_state[v1::JOB_STATE_RESTARTING]));
  }

  std::map<int, int64_t> workers;
  slots_->Clear();
  for (const v1::WorkerInfo& w : workers_->List()) {
    workers[w.state()] += 1;
    if (w.state() != v1::WORKER_STATE_ALIVE) continue;
    slots_->WithLabels({w.name(), "total"})
        .Set(w.resources().cpu_slots() + w.resources().gpus_size());
    if (manager_ != nullptr) slots_->WithLabels({w.name(), "busy"}).Set(manager_->BusySlots(w.name()));
  }
  for (int s = v1::WorkerState_MIN + 1; s <= v1::WorkerState_MAX; ++s) {
    if (!v1::WorkerState_IsValid(s)) continue;
    workers_by_state_
        ->WithLabels({StateName(v1::WorkerState_Name(static_cast<v1::WorkerState>(s)),
                                "WORKER_STATE_")})
        .Set(static_cast<double>(workers[s]));
  }
}

}  // namespace cohort::server
