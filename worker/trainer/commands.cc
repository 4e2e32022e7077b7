#include "worker/trainer/commands.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/duration.h"
#include "common/job/job_spec_yaml.h"
#include "common/logging.h"
#include "worker/trainer/collective/file_store.h"
#include "worker/trainer/predict.h"
#include "worker/trainer/trainer.h"

namespace cohort::trainer {
namespace {

int Fail(int code, const absl::Status& status, const char* command = "train") {
  std::fprintf(stderr, "cohort-worker %s: error: %s\n", command,
               std::string(status.message()).c_str());
  return code;
}

}  // namespace

CLI::App* AddTrainCommand(CLI::App& app, TrainCommand& c) {
  CLI::App* train = app.add_subcommand(
      "train", "run one rank of a job (standalone, or as the agent launches each rank)");
  train->add_option("job", c.job_path, "the job spec (YAML, docs/job-spec.md)")->required();
  train->add_option("--rank", c.rank, "this process's rank")->check(CLI::NonNegativeNumber);
  train->add_option("--world", c.world, "the number of ranks")->check(CLI::PositiveNumber);
  train->add_option("--rendezvous", c.rendezvous,
                    "where the ranks meet (needed when --world > 1): file://DIR shared by "
                    "the ranks, or coordinator://HOST:PORT/JOB/ATTEMPT");
  train->add_option("--out", c.out_dir, "where rank 0 writes model.keras, history.json, checkpoints")
      ->required();
  train->add_option("--device", c.device, "cpu or cuda (default: the job's)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  train->add_flag("--resume", c.resume, "continue from the latest checkpoint in --out");
  train->add_option("--threads", c.threads, "LibTorch threads (default: cores / ranks)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--collective-timeout", c.collective_timeout,
                    "a rank that makes no progress for this long fails the run")
      ->capture_default_str();
  train->add_option("--hostname", c.hostname, "address this rank's Gloo listens on")
      ->capture_default_str();
  train->add_flag("--trace", c.trace,
                  "record every step's phases: --out/trace/rank-R.json, merged into "
                  "--out/trace.json by rank 0 (Chrome trace format)");
  train->add_option("--profile-epoch", c.profile_epoch,
                    "record LibTorch's operators (and Cohort's own loops) over epoch E, "
                    "counted from 1: --out/profile/rank-R.json (Chrome trace format)")
      ->check(CLI::PositiveNumber);
  train->add_flag("--autograd", c.autograd,
                  "train through LibTorch's autograd even a model of Dense layers, which "
                  "otherwise trains through the hand-written step (DenseGraph)");
  train->add_flag("--replica-per-rank", c.replica_per_rank,
                  "ranks on one machine keep a copy of the model each and all-reduce "
                  "gradients (as across machines) instead of sharing one copy in shared "
                  "memory, each updating its part");
  return train;
}

absl::StatusOr<std::unique_ptr<collective::Store>> OpenFileStore(absl::string_view url) {
  if (!absl::StartsWith(url, "file://") || url.size() <= 7) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rendezvous: '", url, "' is not file://DIR, a directory every rank can reach"));
  }
  absl::StatusOr<std::unique_ptr<collective::FileStore>> opened =
      collective::FileStore::Open(std::string(url.substr(7)));
  if (!opened.ok()) return opened.status();
  return std::unique_ptr<collective::Store>(std::move(*opened));
}

int RunTrainCommand(const TrainCommand& c, const StoreOpener& open_store) {
  if (c.rank >= c.world) {
    return Fail(2, absl::InvalidArgumentError(
                       absl::StrCat("--rank ", c.rank, " must be below --world ", c.world)));
  }
  absl::StatusOr<absl::Duration> timeout =
      ParsePositiveDuration(c.collective_timeout, "--collective-timeout");
  if (!timeout.ok()) return Fail(2, timeout.status());
  absl::StatusOr<job::JobSpec> spec = job::LoadJobSpec(c.job_path);
  if (!spec.ok()) return Fail(1, absl::Status(spec.status().code(),
                                              absl::StrCat(c.job_path, ": ", spec.status().message())));
  if (c.profile_epoch > spec->fit.epochs) {
    return Fail(2, absl::InvalidArgumentError(absl::StrCat(
                       "--profile-epoch ", c.profile_epoch, ": the job trains ",
                       spec->fit.epochs, " epoch(s)")));
  }
  if (absl::Status s = InitLogging(absl::StrCat("rank", c.rank), "info"); !s.ok()) return Fail(1, s);

  TrainOptions options;
  options.spec = std::move(*spec);
  options.rank = c.rank;
  options.world = c.world;
  options.out_dir = c.out_dir;
  options.resume = c.resume;
  options.threads = c.threads;
  options.collective_timeout = *timeout;
  options.hostname = c.hostname;
  options.trace = c.trace;
  options.profile_epoch = c.profile_epoch;
  options.autograd = c.autograd;
  options.replica_per_rank = c.replica_per_rank;
  options.device = c.device.empty() ? options.spec.resources.device
                   : c.device == "cuda"  ? job::Device::kCuda
                                         : job::Device::kCpu;
  std::unique_ptr<collective::Store> store;
  if (c.world > 1) {
    if (c.rendezvous.empty()) {
      return Fail(2, absl::InvalidArgumentError("--rendezvous is required when --world > 1"));
    }
    absl::StatusOr<std::unique_ptr<collective::Store>> opened = open_store(c.rendezvous);
    if (!opened.ok()) return Fail(absl::IsInvalidArgument(opened.status()) ? 2 : 1, opened.status());
    store = std::move(*opened);
    options.store = store.get();
  }
  absl::Status status = Train(options);
  if (!status.ok()) return Fail(1, status);
  return 0;
}

CLI::App* AddPredictCommand(CLI::App& app, PredictCommand& c) {
  CLI::App* predict = app.add_subcommand("predict", "write a model's outputs for an array");
  predict->add_option("model", c.model_path, "a .keras file with weights")->required();
  predict->add_option("--x", c.x_path, "inputs: .npy or .npz")->required();
  predict->add_option("--key", c.x_key, "the member of an .npz");
  predict->add_option("--out", c.out_path, "where to write the outputs (.npy, float32)")->required();
  predict->add_option("--batch-size", c.batch_size, "rows per forward pass")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  predict->add_option("--device", c.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  return predict;
}

int RunPredictCommand(const PredictCommand& c) {
  PredictOptions options;
  options.model_path = c.model_path;
  options.x = {c.x_path, c.x_key};
  options.out_path = c.out_path;
  options.batch_size = c.batch_size;
  options.device = c.device == "cuda" ? job::Device::kCuda : job::Device::kCpu;
  absl::Status status = Predict(options);
  if (!status.ok()) return Fail(1, status, "predict");
  return 0;
}

}  // namespace cohort::trainer
