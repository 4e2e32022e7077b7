#include "bench/bench_cluster.h"

#include <grpcpp/client_context.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/npy/npy_writer.h"
#include "proto/channel.h"
#include "tests/support/ports.h"

namespace cohort::bench {

BenchCluster::BenchCluster(const std::vector<std::string>& extra_flags)
    : address_(absl::StrCat("127.0.0.1:", testing::FreePort())) {
  std::vector<std::string> argv{COHORT_SERVER_BIN, "--listen", address_, "--data-dir",
                                dir_.File("data"), "--log-level", "warn"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  server_ = std::make_unique<testing::Process>(argv, dir_.File("server.log"));
  auto stub = Jobs();
  bool up = testing::WaitUntil(
      [&] {
        v1::ListJobsRequest request;
        v1::ListJobsResponse response;
        return stub->ListJobs(Deadline(absl::Seconds(1)).get(), request, &response).ok() ||
               !server_->Running();
      },
      absl::Seconds(20));
  if (!up || !server_->Running()) Die("cohort-server did not start:\n" + server_->Output());
}

void BenchCluster::StartWorker(const std::string& name, int slots) {
  workers_.push_back(std::make_unique<testing::Process>(
      std::vector<std::string>{COHORT_WORKER_BIN, "--coordinator", address_, "--name", name,
                               "--slots", std::to_string(slots), "--log-level", "warn",
                               "--work-dir", dir_.File("work-" + name)},
      dir_.File("worker-" + name + ".log")));
}

std::unique_ptr<v1::JobService::Stub> BenchCluster::Jobs() const {
  absl::StatusOr<HostPort> hp = ParseHostPort(address_);
  return v1::JobService::NewStub(CreateCoordinatorChannel(*hp));
}

std::unique_ptr<v1::WorkerService::Stub> BenchCluster::Workers() const {
  absl::StatusOr<HostPort> hp = ParseHostPort(address_);
  return v1::WorkerService::NewStub(CreateCoordinatorChannel(*hp));
}

Data WriteData(const std::string& dir, int64_t rows) {
  constexpr int64_t kFeatures = 784;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(rows * kFeatures);
  for (float& v : x) v = pixel(rng);
  std::vector<int64_t> y(rows);
  for (int64_t i = 0; i < rows; ++i) y[i] = i % 10;
  Data data{dir + "/x.npy", dir + "/y.npy"};
  if (!npy::WriteNpy(data.x, npy::DType::kFloat32, {rows, kFeatures}, x.data()).ok() ||
      !npy::WriteNpy(data.y, npy::DType::kInt64, {rows}, y.data()).ok()) {
    Die("cannot write the benchmark data in " + dir);
  }
  return data;
}

v1::JobSpec Spec(const Data& data, int workers, int epochs) {
  v1::JobSpec spec;
  spec.set_name("bench");
  spec.set_keras_path(std::string(COHORT_SOURCE_DIR) + "/examples/mnist_mlp.keras");
  spec.mutable_data()->mutable_x()->set_path(data.x);
  spec.mutable_data()->mutable_y()->set_path(data.y);
  spec.mutable_fit()->set_epochs(epochs);
  spec.mutable_fit()->set_batch_size(128);
  spec.mutable_resources()->set_workers(workers);
  return spec;
}

double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after ") ".
  if (fields.size() < 13) return 0;
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

double QuantileMs(std::vector<absl::Duration> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t index = std::min(samples.size() - 1, static_cast<size_t>(q * samples.size()));
  return absl::ToDoubleMilliseconds(samples[index]);
}

std::unique_ptr<grpc::ClientContext> Deadline(absl::Duration timeout) {
  return ContextWithDeadline(timeout);
}

void Die(const std::string& message) {
  std::fprintf(stderr, "job_server_bench: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace cohort::bench
