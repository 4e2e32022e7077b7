#include "bench/load_scenario.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/bench_cluster.h"
#include "bench/sim_worker.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "proto/channel.h"

namespace cohort::bench {
namespace {

constexpr char kFlapper[] = "flappy";
// What the coordinator's log line says when it fails an attempt on the lost flapper.
constexpr char kFlapperLost[] = "on worker 'flappy' was lost";

bool IsFinal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED;
}

// A channel with its own connection: one more client, not a stream on a shared socket.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// Violations, from any thread.
class Problems {
 public:
  void Add(std::string line) {
    absl::MutexLock lock(&mu_);
    if (lines_.size() < 200) lines_.push_back(std::move(line));
    ++count_;
  }
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    if (count_ > static_cast<int64_t>(lines_.size())) {
      lines_.push_back(absl::StrCat("... and ", count_ - lines_.size(), " more"));
    }
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// The id each submit index was given, published as submits are accepted.
class Ledger {
 public:
  explicit Ledger(int n) : ids_(n) {}
  void Accept(int index, const std::string& id) {
    absl::MutexLock lock(&mu_);
    ids_[index] = id;
    accepted_.push_back(id);
  }
  void Refuse(int index) {
    absl::MutexLock lock(&mu_);
    ids_[index] = "-";
  }
  // The id of `index` once decided ("" if refused or `deadline` passed).
  std::string Wait(int index, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto decided = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !ids_[index].empty(); };
    mu_.AwaitWithDeadline(absl::Condition(&decided), deadline);
    return ids_[index] == "-" ? "" : ids_[index];
  }
  std::string Any(std::mt19937& rng) {
    absl::MutexLock lock(&mu_);
    if (accepted_.empty()) return "";
    return accepted_[rng() % accepted_.size()];
  }
  std::vector<std::string> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> accepted_ ABSL_GUARDED_BY(mu_);
};

// What a watcher saw of one job.
struct Watched {
  bool done = false;  // a final state change was seen
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string reason;
  int64_t last_sequence = 0;
  bool hit_by_flap = false;  // an attempt failed because the flapper was lost
  bool restarted = false;    // went RESTARTING at least once
  bool restarted_after_flap = false;
};

void Watch(v1::JobService::Stub& stub, const std::string& id, absl::Time deadline,
           Watched& out, std::atomic<int64_t>& reconnects, std::atomic<int32_t>& open,
           std::atomic<int32_t>& max_open, Problems& problems) {
  while (!out.done && absl::Now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::WatchJobRequest request;
    request.set_job_id(id);
    request.set_after_sequence(out.last_sequence);
    auto reader = stub.WatchJob(&context, request);
    int32_t now_open = ++open;
    for (int32_t m = max_open.load(); now_open > m && !max_open.compare_exchange_weak(m, now_open);) {
    }
    v1::JobEvent e;
    while (reader->Read(&e)) {
      if (e.sequence() != out.last_sequence + 1) {
        problems.Add(absl::StrCat(id, ": watcher got event ", e.sequence(), " after ",
                                  out.last_sequence, " (a gap or a repeat)"));
      }
      out.last_sequence = e.sequence();
      if (out.done) problems.Add(absl::StrCat(id, ": event ", e.sequence(), " after the final one"));
      if (e.has_state_change()) {
        const v1::StateChange& c = e.state_change();
        if (c.from() != out.state) {
          problems.Add(absl::StrCat(id, ": event ", e.sequence(), " changes state from ",
                                    v1::JobState_Name(c.from()), " but the watcher had ",
                                    v1::JobState_Name(out.state)));
        }
        out.state = c.to();
        if (c.to() == v1::JOB_STATE_RESTARTING) {
          out.restarted = true;
          if (absl::StrContains(c.reason(), kFlapperLost)) out.restarted_after_flap = true;
        }
        if (IsFinal(c.to())) {
          out.done = true;
          out.reason = c.reason();
        }
      }
      if (e.has_log() && e.log().rank() == -1 && absl::StrContains(e.log().text(), kFlapperLost)) {
        out.hit_by_flap = true;
      }
    }
    grpc::Status status = reader->Finish();
    --open;
    if (out.done) break;
    if (status.ok()) {
      problems.Add(absl::StrCat(id, ": WatchJob ended OK before a final state (last event ",
                                out.last_sequence, ")"));
      break;
    }
    ++reconnects;  // resumed after the last event seen, as `cohort status --follow` does
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// Peaks of the coordinator's threads and resident memory (/proc/PID/status).
void SampleProcess(pid_t pid, int64_t& threads, int64_t& rss_kib) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    int64_t value = 0;
    if (key == "Threads:" && in >> value) threads = std::max(threads, value);
    if (key == "VmRSS:" && in >> value) rss_kib = std::max(rss_kib, value);
  }
}

v1::JobSpec LoadSpec(const Data& data, const std::string& name, int ranks) {
  v1::JobSpec spec = Spec(data, ranks, 1);
  spec.set_name(name);
  spec.mutable_fit()->set_batch_size(32);
  return spec;
}

}  // namespace

LoadReport RunLoadScenario(const LoadOptions& o) {
  LoadReport report;
  Problems problems;
  auto say = [&](const std::string& line) {
    if (o.verbose) std::fprintf(stderr, "[load] %s\n", line.c_str());
  };
  std::vector<std::string> flags{"--lease-ttl", absl::StrCat(absl::ToInt64Milliseconds(o.lease_ttl), "ms")};
  flags.insert(flags.end(), o.server_flags.begin(), o.server_flags.end());
  BenchCluster cluster(flags);
  const std::string address = cluster.address();
  Data data = WriteData(cluster.dir().path(), 64);

  // 1. Agents, a seed job, GetJob on an idle coordinator.
  SimWorker::Options steady{.name = "steady-1", .slots = o.slots_per_worker, .run_time = o.run_time};
  std::vector<std::unique_ptr<SimWorker>> workers;
  for (const char* name : {"steady-1", "steady-2", kFlapper}) {
    steady.name = name;
    workers.push_back(std::make_unique<SimWorker>(OwnChannel(address), steady));
    if (!workers.back()->Start()) {
      problems.Add(absl::StrCat("simulated agent ", name, " could not register"));
      report.problems = problems.Take();
      return report;
    }
  }
  SimWorker& flapper = *workers.back();
  auto jobs = v1::JobService::NewStub(OwnChannel(address));
  std::string seed_id;
  {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = LoadSpec(data, "load-seed", 1);
    v1::SubmitJobResponse response;
    grpc::Status s = jobs->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), request, &response);
    if (!s.ok()) {
      problems.Add("the seed job was refused: " + s.error_message());
      report.problems = problems.Take();
      return report;
    }
    seed_id = response.job().id();
  }
  v1::Job seed;
  testing::WaitUntil(
      [&] {
        v1::GetJobRequest request;
        request.set_job_id(seed_id);
        return jobs->GetJob(ContextWithDeadline(absl::Seconds(5)).get(), request, &seed).ok() &&
               IsFinal(seed.state());
      },
      absl::Seconds(60));
  if (seed.state() != v1::JOB_STATE_SUCCEEDED) {
    problems.Add(absl::StrCat("the seed job did not succeed on an idle coordinator: ",
                              v1::JobState_Name(seed.state()), " ", seed.reason()));
    report.problems = problems.Take();
    return report;
  }
  say("seed job succeeded; probing GetJob idle");

  Ledger ledger(o.submits);
  std::atomic<bool> loaded{false}, probe_stop{false};
  absl::Mutex probe_mu;
  std::thread prober([&] {
    auto stub = v1::JobService::NewStub(OwnChannel(address));
    std::mt19937 rng(11);
    while (!probe_stop) {
      bool under_load = loaded;
      std::string id = under_load ? ledger.Any(rng) : seed_id;
      if (id.empty()) id = seed_id;
      v1::GetJobRequest request;
      request.set_job_id(id);
      v1::Job job;
      absl::Time start = absl::Now();
      grpc::Status s = stub->GetJob(ContextWithDeadline(o.get_deadline).get(), request, &job);
      absl::Duration took = absl::Now() - start;
      {
        absl::MutexLock lock(&probe_mu);
        if (!s.ok()) {
          ++report.get_failures;
          problems.Add(absl::StrCat("GetJob ", id, " failed after ", absl::FormatDuration(took),
                                    ": ", s.error_message()));
        } else {
          (under_load ? report.get_load : report.get_idle).push_back(took);
        }
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  absl::SleepFor(o.idle_probe);

  // 2. The load.
  say("load: watchers, submits, flaps");
  const pid_t server = cluster.server_pid();
  const double cpu_before = CpuSeconds(server);
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      SampleProcess(server, report.server_threads_peak, report.server_rss_peak_kib);
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.drain_timeout;
  loaded = true;

  std::vector<Watched> watched(o.submits);
  std::atomic<int64_t> reconnects{0};
  std::atomic<int32_t> open{0}, max_open{0};
  std::vector<std::thread> watchers;
  for (int k = 0; k < o.watchers; ++k) {
    watchers.emplace_back([&, k] {
      auto stub = v1::JobService::NewStub(OwnChannel(address));
      for (int i = k; i < o.submits; i += o.watchers) {
        std::string id = ledger.Wait(i, deadline);
        if (id.empty()) continue;
        Watch(*stub, id, deadline, watched[i], reconnects, open, max_open, problems);
      }
    });
  }

  std::atomic<int> next{0};
  std::atomic<int64_t> retries{0}, duplicates{0};
  absl::Mutex submit_mu;
  absl::Time last_accept = start;
  std::vector<std::thread> submitters;
  for (int c = 0; c < o.submit_clients; ++c) {
    submitters.emplace_back([&] {
      auto stub = v1::JobService::NewStub(OwnChannel(address));
      for (int i; (i = next.fetch_add(1)) < o.submits;) {
        v1::SubmitJobRequest request;
        *request.mutable_spec() = LoadSpec(data, absl::StrCat("load-", i), i % 10 == 9 ? 2 : 1);
        request.set_idempotency_key(absl::StrCat("load-key-", i));
        v1::SubmitJobResponse response;
        grpc::Status s;
        absl::Duration took;
        for (int tries = 0; tries < 5; ++tries) {
          absl::Time sent = absl::Now();
          s = stub->SubmitJob(ContextWithDeadline(absl::Seconds(20)).get(), request, &response);
          took = absl::Now() - sent;
          if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
              s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
            break;
          }
          ++retries;
        }
        if (!s.ok()) {
          problems.Add(absl::StrCat("submit ", i, " refused: ", s.error_message()));
          ledger.Refuse(i);
          continue;
        }
        const std::string id = response.job().id();
        ledger.Accept(i, id);
        {
          absl::MutexLock lock(&submit_mu);
          report.submit_latencies.push_back(took);
          last_accept = std::max(last_accept, absl::Now());
        }
        if (i % 10 == 0) {  // a client that lost the answer sends it again
          ++duplicates;
          v1::SubmitJobResponse again;
          s = stub->SubmitJob(ContextWithDeadline(absl::Seconds(20)).get(), request, &again);
          if (!s.ok() || again.job().id() != id) {
            problems.Add(absl::StrCat("submit ", i, " sent again with its key: ",
                                      s.ok() ? "got " + again.job().id() + ", not " + id
                                             : s.error_message()));
          }
        }
      }
    });
  }

  std::atomic<bool> drained{false};
  std::atomic<int64_t> flaps{0};
  std::thread flapping([&] {
    for (int f = 0; f < o.flaps && !drained; ++f) {
      // Silent while ranks run there, so attempts are lost with it.
      if (!testing::WaitUntil([&] { return drained || flapper.running() > 0; }, absl::Seconds(30)) ||
          drained) {
        break;
      }
      const int64_t registered = flapper.counts().registrations;
      flapper.Silence(o.lease_ttl + absl::Seconds(1));
      ++flaps;
      say(absl::StrCat("flap ", f + 1, ": flappy silent with ", flapper.running(), " ranks"));
      // Back, registered again, and up for a while before the next flap.
      testing::WaitUntil([&] { return drained || flapper.counts().registrations > registered; },
                         o.lease_ttl * 4 + absl::Seconds(10));
      absl::SleepFor(absl::Milliseconds(1500));
    }
  });

  for (auto& t : submitters) t.join();
  report.burst_wall = last_accept - start;
  say(absl::StrCat("burst over in ", absl::FormatDuration(report.burst_wall)));
  for (auto& t : watchers) t.join();
  report.drain_wall = absl::Now() - start;
  say(absl::StrCat("every watched job ended, or the deadline passed, after ",
                   absl::FormatDuration(report.drain_wall)));
  drained = true;
  flapping.join();
  probe_stop = true;
  prober.join();
  sampling = false;
  sampler.join();
  report.server_cpu_seconds = CpuSeconds(server) - cpu_before;
  report.submit_retries = retries;
  report.duplicate_submits = duplicates;
  report.flaps = flaps;
  report.watch_reconnects = reconnects;
  report.max_open_watches = max_open;

  // 3. Nothing lost.
  std::map<std::string, std::vector<v1::Job>> stored;  // by spec name
  std::string token;
  do {
    v1::ListJobsRequest request;
    request.set_page_size(1000);
    request.set_page_token(token);
    v1::ListJobsResponse page;
    grpc::Status s = jobs->ListJobs(ContextWithDeadline(absl::Seconds(30)).get(), request, &page);
    if (!s.ok()) {
      problems.Add("ListJobs: " + s.error_message());
      break;
    }
    for (const v1::Job& j : page.jobs()) stored[j.spec().name()].push_back(j);
    token = page.next_page_token();
  } while (!token.empty());

  const std::vector<std::string> ids = ledger.ids();
  for (int i = 0; i < o.submits; ++i) {
    const std::string name = absl::StrCat("load-", i);
    auto it = stored.find(name);
    const size_t copies = it == stored.end() ? 0 : it->second.size();
    if (ids[i].empty() || ids[i] == "-") continue;  // refused: reported above
    if (copies != 1) {
      problems.Add(absl::StrCat(name, " (", ids[i], ") is stored ", copies, " times"));
      continue;
    }
    const v1::Job& job = it->second.front();
    const Watched& w = watched[i];
    ++report.jobs;
    report.events_seen += w.last_sequence;
    if (job.id() != ids[i]) {
      problems.Add(absl::StrCat(name, " is stored as ", job.id(), " but its client got ", ids[i]));
    }
    if (!IsFinal(job.state())) {
      problems.Add(absl::StrCat(job.id(), " is stuck in ", v1::JobState_Name(job.state()),
                                " (reason: '", job.reason(), "')"));
      continue;
    }
    if (job.state() == v1::JOB_STATE_SUCCEEDED) ++report.succeeded;
    if (job.state() == v1::JOB_STATE_FAILED) {
      ++report.failed;
      if (job.reason().empty()) problems.Add(absl::StrCat(job.id(), " FAILED without a reason"));
    }
    if (job.state() == v1::JOB_STATE_CANCELLED) {
      problems.Add(absl::StrCat(job.id(), " was CANCELLED, though nobody cancelled it"));
    }
    if (!w.done || w.state != job.state() || w.last_sequence != job.last_sequence()) {
      problems.Add(absl::StrCat(job.id(), ": its watcher saw ", w.last_sequence, " events ending ",
                                v1::JobState_Name(w.state), "; stored: ", job.last_sequence(),
                                " events, ", v1::JobState_Name(job.state())));
    }
    if (w.restarted) ++report.restarted;
    if (w.hit_by_flap) {
      ++report.hit_by_flap;
      bool explained = w.restarted_after_flap ||
                       (job.state() == v1::JOB_STATE_FAILED && absl::StrContains(job.reason(), kFlapperLost));
      if (!explained) {
        problems.Add(absl::StrCat(job.id(), " lost an attempt with the flapping worker but was "
                                  "neither restarted for it nor failed naming it"));
      }
    }
  }
  size_t expected_names = 1;  // the seed
  for (const std::string& id : ids) expected_names += !id.empty() && id != "-";
  if (stored.size() != expected_names) {
    problems.Add(absl::StrCat("the store holds jobs of ", stored.size(), " names; ",
                              expected_names, " were accepted"));
  }
  if (report.flaps < o.flaps) {
    problems.Add(absl::StrCat("the worker flapped ", report.flaps, " times of ", o.flaps,
                              " (it never ran ranks to lose)"));
  }
  if (o.flaps > 0 && report.hit_by_flap == 0) {
    problems.Add("no job lost an attempt with the flapping worker: the flaps tested nothing");
  }
  report.flapper_registrations = flapper.counts().registrations;
  if (report.flapper_registrations < report.flaps + 1) {
    problems.Add(absl::StrCat("the flapping worker registered ", report.flapper_registrations,
                              " times for ", report.flaps, " flaps (it did not come back)"));
  }
  for (size_t w = 0; w + 1 < workers.size(); ++w) {
    report.steady_registrations += workers[w]->counts().registrations;
  }
  for (auto& w : workers) w->Stop();
  report.problems = problems.Take();
  return report;
}

}  // namespace cohort::bench
