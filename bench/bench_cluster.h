#pragma once

// The pieces the benchmarks drive: a real coordinator process (and agents) on a free
// loopback port, stubs to it, benchmark data and job specs, the CPU time a process has
// used, and percentiles.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::bench {

class BenchCluster {
 public:
  // Starts cohort-server with `extra_flags`; exits the program when it does not answer.
  explicit BenchCluster(const std::vector<std::string>& extra_flags = {});

  std::string address() const { return address_; }
  pid_t server_pid() const { return server_->pid(); }
  const testing::TempDir& dir() const { return dir_; }
  // Starts a real agent offering `slots` CPU slots.
  void StartWorker(const std::string& name, int slots);

  std::unique_ptr<v1::JobService::Stub> Jobs() const;
  std::unique_ptr<v1::WorkerService::Stub> Workers() const;

 private:
  testing::TempDir dir_;
  std::string address_;
  std::unique_ptr<testing::Process> server_;
  std::vector<std::unique_ptr<testing::Process>> workers_;
};

// User + system CPU seconds `pid` has used so far (/proc/PID/stat).
double CpuSeconds(pid_t pid);

// Random MNIST-shaped data in DIR/x.npy, DIR/y.npy: `rows` x 784 float32 in [0, 1),
// labels 0..9 (int64), for examples/mnist_mlp.keras.
struct Data {
  std::string x, y;
};
Data WriteData(const std::string& dir, int64_t rows);

// A job of examples/mnist_mlp.keras on `data`: batch 128, `workers` CPU ranks.
v1::JobSpec Spec(const Data& data, int workers, int epochs);

// The q-quantile (0..1) of `samples` (sorted here), in milliseconds.
double QuantileMs(std::vector<absl::Duration> samples, double q);

// A context with a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> Deadline(absl::Duration timeout = absl::Seconds(30));

// Prints a message and exits 1.
[[noreturn]] void Die(const std::string& message);

}  // namespace cohort::bench
