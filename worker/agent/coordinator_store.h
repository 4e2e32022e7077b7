#pragma once

// CoordinatorStore: the rendezvous Store (worker/trainer/collective/store.h) of a job
// attempt, kept by the coordinator: RendezvousSet/RendezvousGet of WorkerService in the
// attempt's namespace "<job_id>/<attempt>". The trainers the agent launches reach it as
//   --rendezvous coordinator://HOST:PORT/<job_id>/<attempt>
//
// Errors: a Get's RPC deadline is its timeout plus `get_margin`, so the coordinator's
// own DEADLINE_EXCEEDED (naming the missing keys) is what the caller sees. ABORTED
// ("attempt N of job X has ended") passes through unchanged, so a trainer whose attempt
// was ended elsewhere fails at once instead of waiting out its timeouts. UNAVAILABLE
// (the coordinator restarting, a dropped connection) is retried with capped backoff for
// `retry_for` (Set) or until the Get's timeout (Get). Thread-safe.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "common/address.h"
#include "proto/channel.h"
#include "worker/trainer/collective/store.h"

namespace cohort::agent {

// True for URLs of the coordinator:// form (parsed or not).
bool IsCoordinatorRendezvous(absl::string_view url);

// The trainers an agent launches call the coordinator with the agent's credentials
// (docs/security.md): the agent hands them the paths of its --token-file and TLS files
// (never the token itself) in COHORT_TOKEN_FILE, COHORT_TLS_CA, COHORT_TLS_CERT,
// COHORT_TLS_KEY and COHORT_TLS_SERVER_NAME; empty settings are left out.
std::map<std::string, std::string> SecurityEnvironment(const ChannelSecurityFiles& files);
// The settings of those variables in this process's environment.
ChannelSecurityFiles SecurityFilesFromEnvironment();

// A parsed coordinator:// rendezvous URL.
struct CoordinatorRendezvous {
  HostPort coordinator;
  std::string ns;  // "<job_id>/<attempt>"
};

// INVALID_ARGUMENT naming the expected form for anything but
// coordinator://HOST:PORT/<job_id>/<attempt> (attempt a positive integer).
absl::StatusOr<CoordinatorRendezvous> ParseCoordinatorRendezvous(absl::string_view url);
std::string CoordinatorRendezvousUrl(const HostPort& coordinator, absl::string_view ns);

class CoordinatorStore final : public trainer::collective::Store {
 public:
  struct Options {
    absl::Duration rpc_timeout = absl::Seconds(10);  // Set's deadline
    absl::Duration get_margin = absl::Seconds(5);
    absl::Duration retry_for = absl::Seconds(30);
  };

  // `stub` is owned.
  CoordinatorStore(std::unique_ptr<v1::WorkerService::StubInterface> stub, std::string ns,
                   Options options);
  // A store on a new channel to the URL's coordinator (with `security`);
  // INVALID_ARGUMENT for a bad URL.
  static absl::StatusOr<std::unique_ptr<CoordinatorStore>> Open(absl::string_view url,
                                                                Options options,
                                                                const ChannelSecurity& security = {});

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  const std::unique_ptr<v1::WorkerService::StubInterface> stub_;
  const std::string ns_;
  const Options options_;
};

}  // namespace cohort::agent
