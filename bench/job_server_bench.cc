// job_server_bench: the coordinator's numbers for issue 4, each beside its peer.
//
//   build/bench/job_server_bench [--stored-jobs 10000] [--workers 1000] [--seconds 20]
//
// 1. Submits: fills a real coordinator's store with --stored-jobs queued jobs (no worker
//    runs them), then measures SubmitJob latency (p50/p99, one client) and sustained
//    submits per second (8 concurrent clients), beside GetJob's latency as the floor
//    of a round trip to the same server.
// 2. Heartbeats: --workers simulated workers register and heartbeat at 1 Hz for
//    --seconds; prints the coordinator's CPU use (user+sys seconds per second) and the
//    heartbeat latency.
// 3. Start-up: submit to the first training step of a 2-rank CPU job on two real agents
//    (the MNIST MLP of examples/), beside the time two PyTorch processes take to
//    `import torch` and init a Gloo process group on this machine (Debian's python3-torch).
// Prints a markdown report; docs/benchmarks.md keeps one.

#include <grpcpp/client_context.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_cluster.h"
#include "tests/support/ports.h"

namespace cohort::bench {
namespace {

// One SubmitJob; its latency, or exits on an error.
absl::Duration Submit(v1::JobService::Stub& stub, const v1::JobSpec& spec, std::string* id = nullptr) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  absl::Time start = absl::Now();
  grpc::Status status = stub.SubmitJob(Deadline().get(), request, &response);
  absl::Duration took = absl::Now() - start;
  if (!status.ok()) Die("SubmitJob: " + status.error_message());
  if (id) *id = response.job().id();
  return took;
}

// `clients` threads submit `total` jobs between them; returns submits per second.
double SubmitConcurrently(BenchCluster& cluster, const v1::JobSpec& spec, int clients, int total) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = cluster.Jobs();
      while (next.fetch_add(1) < total) Submit(*stub, spec);
    });
  }
  for (auto& t : threads) t.join();
  return total / absl::ToDoubleSeconds(absl::Now() - start);
}

void BenchSubmits(int stored_jobs) {
  BenchCluster cluster({"--max-queued-jobs", "1000000"});
  Data data = WriteData(cluster.dir().path(), 1024);
  v1::JobSpec spec = Spec(data, 1, 1);
  double fill_rate = SubmitConcurrently(cluster, spec, 8, stored_jobs);

  auto stub = cluster.Jobs();
  std::vector<absl::Duration> submits, gets;
  std::string id;
  for (int i = 0; i < 1000; ++i) submits.push_back(Submit(*stub, spec, &id));
  for (int i = 0; i < 1000; ++i) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    absl::Time start = absl::Now();
    if (!stub->GetJob(Deadline().get(), request, &job).ok()) Die("GetJob failed");
    gets.push_back(absl::Now() - start);
  }
  double sustained = SubmitConcurrently(cluster, spec, 8, 2000);

  std::printf("### Submits with %d jobs stored\n\n", stored_jobs);
  std::printf("| measure | value |\n|---|--:|\n");
  std::printf("| SubmitJob p50 (1 client) | %.2f ms |\n", QuantileMs(submits, 0.5));
  std::printf("| SubmitJob p99 (1 client) | %.2f ms |\n", QuantileMs(submits, 0.99));
  std::printf("| GetJob p50 / p99 (the round-trip floor) | %.2f / %.2f ms |\n",
              QuantileMs(gets, 0.5), QuantileMs(gets, 0.99));
  std::printf("| sustained submits/s (8 clients, after the fill) | %.0f |\n", sustained);
  std::printf("| submits/s while filling the first %d | %.0f |\n\n", stored_jobs, fill_rate);
}

void BenchHeartbeats(int workers, int seconds) {
  BenchCluster cluster({"--lease-ttl", "10s"});
  auto stub = cluster.Workers();
  std::vector<std::string> leases;
  for (int w = 0; w < workers; ++w) {
    v1::RegisterRequest request;
    request.set_name(absl::StrFormat("sim-%04d", w));
    request.set_instance_id(absl::StrFormat("bench-%04d", w));
    request.set_address("127.0.0.1");
    request.mutable_resources()->set_cpu_slots(1);
    v1::RegisterResponse response;
    grpc::Status status = stub->Register(Deadline().get(), request, &response);
    if (!status.ok()) Die("Register: " + status.error_message());
    leases.push_back(response.lease_id());
  }
  const int kThreads = 16;
  absl::Mutex mu;
  std::vector<absl::Duration> latencies;
  std::atomic<int> failures{0};
  double cpu_before = CpuSeconds(cluster.server_pid());
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto own = cluster.Workers();
      std::vector<absl::Duration> mine;
      for (int round = 0; round < seconds; ++round) {
        absl::Time tick = start + absl::Seconds(round);
        // Spread each thread's workers over the second, as independent agents would be.
        for (size_t w = t; w < leases.size(); w += kThreads) {
          absl::Time when = tick + absl::Seconds(1) * (static_cast<double>(w) / leases.size());
          absl::SleepFor(when - absl::Now());
          v1::HeartbeatRequest request;
          request.set_lease_id(leases[w]);
          v1::HeartbeatResponse response;
          absl::Time sent = absl::Now();
          if (!own->Heartbeat(Deadline(absl::Seconds(5)).get(), request, &response).ok()) ++failures;
          mine.push_back(absl::Now() - sent);
        }
      }
      absl::MutexLock lock(&mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  double wall = absl::ToDoubleSeconds(absl::Now() - start);
  double cpu = CpuSeconds(cluster.server_pid()) - cpu_before;
  std::printf("### Heartbeats: %d workers at 1 Hz for %d s\n\n", workers, seconds);
  std::printf("| measure | value |\n|---|--:|\n");
  std::printf("| heartbeats sent / failed | %zu / %d |\n", latencies.size(), failures.load());
  std::printf("| coordinator CPU (user+sys s per s of wall time) | %.1f%% of one core |\n",
              100 * cpu / wall);
  std::printf("| heartbeat p50 / p99 | %.2f / %.2f ms |\n\n", QuantileMs(latencies, 0.5),
              QuantileMs(latencies, 0.99));
}

// Submit to the first StepProgress event of a 2-rank job, and to RUNNING.
std::pair<absl::Duration, absl::Duration> TimeToFirstStep(BenchCluster& cluster, const Data& data) {
  auto stub = cluster.Jobs();
  absl::Time start = absl::Now();
  std::string id;
  Submit(*stub, Spec(data, 2, 1), &id);
  v1::WatchJobRequest request;
  request.set_job_id(id);
  auto context = Deadline(absl::Seconds(300));
  auto reader = stub->WatchJob(context.get(), request);
  v1::JobEvent event;
  absl::Duration running = absl::InfiniteDuration();
  while (reader->Read(&event)) {
    if (event.has_state_change() && event.state_change().to() == v1::JOB_STATE_RUNNING) {
      running = absl::Now() - start;
    }
    if (event.has_step()) {
      absl::Duration first_step = absl::Now() - start;
      context->TryCancel();
      reader->Finish();
      // Let the job finish so the next one finds both slots free.
      v1::GetJobRequest get;
      get.set_job_id(id);
      testing::WaitUntil([&] {
        v1::Job job;
        stub->GetJob(Deadline().get(), get, &job);
        return job.state() >= v1::JOB_STATE_SUCCEEDED;
      }, absl::Seconds(300));
      return {first_step, running};
    }
  }
  Die("the job ended without a step: " + reader->Finish().error_message());
}

// Two PyTorch processes: python start, import torch, Gloo process group, one barrier.
absl::Duration TorchStartup() {
  int port = testing::FreePort();
  const char* script =
      "import os, torch, torch.distributed as d\n"
      "d.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=2)\n"
      "d.barrier()\n";
  absl::Time start = absl::Now();
  std::vector<std::unique_ptr<testing::Process>> ranks;
  testing::TempDir dir;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<testing::Process>(
        std::vector<std::string>{"/usr/bin/python3", "-c", script}, dir.File(absl::StrCat(r)),
        std::map<std::string, std::string>{{"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", std::to_string(port)},
                                           {"RANK", std::to_string(r)}}));
  }
  for (auto& rank : ranks) {
    auto exit = rank->Wait(absl::Seconds(120));
    if (!exit || exit->code != 0) Die("the PyTorch peer failed:\n" + rank->Output());
  }
  return absl::Now() - start;
}

void BenchStartup(int repeats) {
  BenchCluster cluster;
  cluster.StartWorker("w1", 1);
  cluster.StartWorker("w2", 1);
  Data data = WriteData(cluster.dir().path(), 4096);
  absl::SleepFor(absl::Seconds(2));  // both agents registered and streaming
  std::vector<absl::Duration> steps, runnings, torch;
  for (int i = 0; i < repeats; ++i) {
    auto [step, running] = TimeToFirstStep(cluster, data);
    steps.push_back(step);
    runnings.push_back(running);
    torch.push_back(TorchStartup());
  }
  double cohort_ms = QuantileMs(steps, 0.5), torch_ms = QuantileMs(torch, 0.5);
  std::printf("### Start-up of a 2-rank CPU job (median of %d)\n\n", repeats);
  std::printf("| measure | value |\n|---|--:|\n");
  std::printf("| Cohort: submit to RUNNING (both ranks joined) | %.0f ms |\n", QuantileMs(runnings, 0.5));
  std::printf("| Cohort: submit to the first training step | %.0f ms |\n", cohort_ms);
  std::printf("| PyTorch: 2 processes, import torch + Gloo init + barrier | %.0f ms |\n", torch_ms);
  std::printf("| ratio (Cohort / PyTorch) | %.2f |\n\n", cohort_ms / torch_ms);
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) {
  CLI::App app{"job_server_bench: the coordinator's submit, heartbeat and start-up numbers"};
  int stored_jobs = 10000, workers = 1000, seconds = 20, repeats = 3;
  app.add_option("--stored-jobs", stored_jobs, "jobs in the store before measuring submits")
      ->capture_default_str();
  app.add_option("--workers", workers, "simulated workers heartbeating")->capture_default_str();
  app.add_option("--seconds", seconds, "how long they heartbeat")->capture_default_str();
  app.add_option("--repeats", repeats, "start-up runs (median)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::printf("## Job server (bench/job_server_bench.cc)\n\n");
  std::fflush(stdout);
  cohort::bench::BenchSubmits(stored_jobs);
  std::fflush(stdout);
  cohort::bench::BenchHeartbeats(workers, seconds);
  std::fflush(stdout);
  cohort::bench::BenchStartup(repeats);
  return 0;
}
