// Training with the real cohort-worker binary: accuracy on the digits data, the same
// weights on 1, 2 and 3 ranks, a rank that dies or hangs, resuming, and the refusals
// that come before training. Fixtures come from real Keras and scikit-learn
// (training_fixtures.py, examples/make_digits.py); numpy and h5py judge the outputs.

#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kWorker[] = COHORT_WORKER_BIN;
constexpr char kPython[] = COHORT_VENV_PYTHON;
const std::string kSource = COHORT_SOURCE_DIR;
const std::string kFixtures = kSource + "/tests/worker/trainer/training_fixtures.py";
const std::string kDigitsCnn = kSource + "/examples/digits_cnn.keras";

// Generous bounds for a loaded 2-core machine: a run is seconds, these only stop a hang.
constexpr absl::Duration kRunTimeout = absl::Seconds(240);
constexpr absl::Duration kToolTimeout = absl::Seconds(180);

std::string Describe(const CommandResult& r) {
  return absl::StrCat("exit ", r.status.code, " signal ", r.status.signal, "\n", r.output);
}

// Runs a venv python script; REQUIREs success; returns its stdout.
std::string Python(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, kToolTimeout, {{"KERAS_BACKEND", "jax"}});
  INFO(Describe(r));
  REQUIRE(r.status.code == 0);
  return r.out;
}

// The JSON objects among a process's output lines (its events; log lines are skipped).
std::vector<nlohmann::json> Events(const std::string& output) {
  std::vector<nlohmann::json> events;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "{")) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("event")) events.push_back(std::move(j));
  }
  return events;
}

int CountEvents(const std::string& output, const std::string& kind) {
  int n = 0;
  for (const nlohmann::json& e : Events(output)) n += e["event"] == kind;
  return n;
}

// The line of `output` that holds `needle`, or "".
std::string LineWith(const std::string& output, const std::string& needle) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, needle)) return std::string(line);
  }
  return "";
}

// A job on the digits data (x_train/y_train, validated on x_test/y_test unless a
// validation split is given).
struct Job {
  std::string model = kDigitsCnn;
  int epochs = 1;
  int batch_size = 64;
  int seed = 1;
  int every_epochs = 1;
  double validation_split = 0;
  std::string precision = "float32";
};

// A test's directory: the digits data in data/, jobs, runs.
class Workspace {
 public:
  Workspace() {
    Python({kSource + "/examples/make_digits.py", data()});
  }

  std::string data() const { return dir_.File("data"); }
  std::string File(const std::string& name) const { return dir_.File(name); }

  std::string WriteJob(const std::string& name, const Job& job) const {
    std::ostringstream y;
    y << "model: " << job.model << "\n"
      << "data:\n"
      << "  x: data/x_train.npy\n"
      << "  y: data/y_train.npy\n";
    if (job.validation_split > 0) {
      y << "  validation_split: " << job.validation_split << "\n";
    } else {
      y << "  validation_x: data/x_test.npy\n"
        << "  validation_y: data/y_test.npy\n";
    }
    y << "fit:\n"
      << "  epochs: " << job.epochs << "\n"
      << "  batch_size: " << job.batch_size << "\n"
      << "  seed: " << job.seed << "\n"
      << "  precision: " << job.precision << "\n"
      << "checkpoint:\n"
      << "  every_epochs: " << job.every_epochs << "\n";
    std::string path = dir_.File(name + ".yaml");
    WriteFile(path, y.str());
    return path;
  }

  // Starts rank `rank` of `world`; its output goes to OUT.rank<R>.log.
  std::unique_ptr<Process> StartRank(const std::string& job, int rank, int world,
                                     const std::string& out, const std::string& rendezvous,
                                     std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv{kWorker, "train", job, "--rank", std::to_string(rank),
                                  "--world", std::to_string(world), "--out", dir_.File(out),
                                  "--rendezvous", "file://" + dir_.File(rendezvous),
                                  // One thread per rank: 2 ranks fit 2 cores, and runs
                                  // compute in one order (bitwise reproducible).
                                  "--threads", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(argv, dir_.File(absl::StrCat(out, ".rank", rank, ".log")));
  }

  // Runs every rank of `world` to completion (each REQUIREd to succeed) and returns rank
  // 0's output. A fresh rendezvous directory per call.
  std::string Train(const std::string& job, int world, const std::string& out,
                    const std::vector<std::string>& extra = {}) {
    std::string rendezvous = absl::StrCat(out, ".rendezvous", ++runs_);
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(StartRank(job, r, world, out, rendezvous, extra));
    for (int r = 0; r < world; ++r) {
      std::optional<ExitStatus> exit = ranks[r]->Wait(kRunTimeout);
      INFO("rank " << r << " of " << world << ":\n" << ranks[r]->Output());
      REQUIRE(exit.has_value());
      REQUIRE(exit->code == 0);
    }
    std::string output = ranks[0]->Output();
    REQUIRE(CountEvents(output, "done") == 1);
    REQUIRE(fs::exists(File(out + "/model.keras")));
    return output;
  }

  // Test accuracy of OUT/model.keras by `cohort-worker predict` on x_test, against y_test.
  double TestAccuracy(const std::string& out, const std::string& device = "cpu") const {
    std::string pred = File(out + "/test_predictions.npy");
    CommandResult r = RunCommand({kWorker, "predict", File(out + "/model.keras"), "--x",
                                  data() + "/x_test.npy", "--out", pred, "--device", device},
                                 kToolTimeout);
    INFO(Describe(r));
    REQUIRE(r.status.code == 0);
    nlohmann::json result =
        nlohmann::json::parse(Python({kFixtures, "accuracy", pred, data() + "/y_test.npy"}));
    REQUIRE(result["rows"] == 360);
    return result["accuracy"].get<double>();
  }

 private:
  TempDir dir_;
  int runs_ = 0;
};

// Compares every variable of two .keras files: max|a-b| <= rtol * max|b| each (rtol 0:
// the same bytes). Returns the fixture's verdict.
nlohmann::json CompareWeights(const std::string& a, const std::string& b, double rtol) {
  std::vector<std::string> argv{kPython, kFixtures, "compare", a, b, "--rtol", absl::StrCat(rtol)};
  CommandResult r = RunCommand(argv, kToolTimeout);
  INFO(Describe(r));
  REQUIRE((r.status.code == 0 || r.status.code == 1));
  nlohmann::json verdict = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(verdict.is_object());
  return verdict;
}

nlohmann::json History(const std::string& path) {
  nlohmann::json h = nlohmann::json::parse(ReadFile(path), nullptr, false);
  REQUIRE(h.is_object());
  return h;
}

// The per-epoch training losses of two runs agree to `rtol`.
void CheckSameLosses(const nlohmann::json& a, const nlohmann::json& b, double rtol) {
  REQUIRE(a["loss"].size() == b["loss"].size());
  for (size_t i = 0; i < a["loss"].size(); ++i) {
    double x = a["loss"][i].get<double>(), y = b["loss"][i].get<double>();
    INFO("epoch " << i + 1 << ": loss " << x << " vs " << y);
    CHECK(std::abs(x - y) <= rtol * std::abs(y));
  }
}

// Waits until rank 0 has reported `epochs` finished epochs.
void WaitForEpochs(const Process& rank0, int epochs) {
  bool reached = WaitUntil([&] { return CountEvents(rank0.Output(), "epoch_end") >= epochs; },
                           kRunTimeout);
  INFO(rank0.Output());
  REQUIRE(reached);
}

TEST_CASE("digits_cnn reaches 95% test accuracy on 1 rank and on 2 ranks", "[trainer][slow]") {
  int world = GENERATE(1, 2);
  CAPTURE(world);
  Workspace w;
  Job job;
  job.epochs = 10;
  job.batch_size = 64;
  job.every_epochs = 0;
  std::string path = w.WriteJob("digits", job);
  std::string out = absl::StrCat("world", world);
  absl::Time start = absl::Now();
  w.Train(path, world, out);
  absl::Duration took = absl::Now() - start;
  double accuracy = w.TestAccuracy(out);
  WARN("digits_cnn, 10 epochs of batch 64 on " << world << " rank(s): test accuracy "
                                               << accuracy << ", " << absl::FormatDuration(took));
  CHECK(accuracy >= 0.95);
  // The trainer's own validation metric measured the same thing (batches of another
  // size may move a borderline row).
  nlohmann::json history = History(w.File(out + "/history.json"));
  REQUIRE(history["val_accuracy"].size() == 10);
  CHECK(std::abs(history["val_accuracy"].back().get<double>() - accuracy) <= 1.0 / 360 + 1e-9);
  // checkpoint.every_epochs 0: only the final checkpoint.
  CHECK_FALSE(fs::exists(w.File(out + "/checkpoints/ckpt-epoch-000001.zip")));
  CHECK(fs::exists(w.File(out + "/checkpoints/ckpt-epoch-000010.zip")));
}

// Whether this CPU has AVX-512, which oneDNN's bfloat16 GEMM (DenseGraph's products in
// mixed_bfloat16) needs.
bool CpuHasAvx512() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "flags")) return absl::StrContains(line, " avx512f");
  }
  return false;
}

// Trains `job` in mixed_bfloat16 and in float32 on `world` ranks; checks what the start
// event says (the precision, and `step`, the training step expected), and that the
// products really ran in bfloat16 (8 bits of mantissa): each epoch's loss follows
// float32's closely, but the runs part by more than float32's rounding (the first epoch
// alone can agree to 1e-6: its rounding errors average out over 1437 rows), and the
// output model holds float32 variables (as Keras' mixed policies keep them) near
// float32's. Returns the mixed_bfloat16 model's test accuracy.
double TrainMixedAgainstFloat32(Workspace& w, Job job, int world, const std::string& step) {
  std::string f32 = w.WriteJob("f32", job);
  job.precision = "mixed_bfloat16";
  std::string bf16 = w.WriteJob("bf16", job);
  std::string output = w.Train(bf16, world, "bf16");
  nlohmann::json start = Events(output).front();
  CHECK(start["precision"] == "mixed_bfloat16");
  CHECK(start["training_step"] == step);
  w.Train(f32, world, "f32");
  nlohmann::json a = History(w.File("bf16/history.json")), b = History(w.File("f32/history.json"));
  INFO("loss per epoch in mixed_bfloat16: " << a["loss"].dump() << ", in float32: " << b["loss"].dump());
  REQUIRE(a["loss"].size() == b["loss"].size());
  double parted = 0;
  for (size_t e = 0; e < a["loss"].size(); ++e) {
    double bf16_loss = a["loss"][e].get<double>(), f32_loss = b["loss"][e].get<double>();
    CHECK(std::abs(bf16_loss - f32_loss) < 0.05 * f32_loss);
    parted = std::max(parted, std::abs(bf16_loss - f32_loss) / f32_loss);
  }
  CHECK(parted > 1e-4);
  nlohmann::json verdict = CompareWeights(w.File("bf16/model.keras"), w.File("f32/model.keras"), 1.0);
  INFO(verdict.dump());
  CHECK(verdict["ok"] == true);
  return w.TestAccuracy("bf16");
}

TEST_CASE("fit.precision mixed_bfloat16 trains digits_cnn to 95% on 1 rank and on 2 ranks",
          "[trainer][slow]") {
  int world = GENERATE(1, 2);
  CAPTURE(world);
  Workspace w;
  Job job;
  job.epochs = 10;
  job.every_epochs = 0;
  double accuracy = TrainMixedAgainstFloat32(w, job, world, "autograd");
  WARN("digits_cnn in mixed_bfloat16 on " << world << " rank(s): test accuracy " << accuracy);
  CHECK(accuracy >= 0.95);
}

// The kernels OpenBLAS runs in a rank, from its "start" event.
std::string OpenBlasCoreOfRun(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env = {}) {
  CommandResult r = RunCommand(argv, kRunTimeout, env);
  INFO(Describe(r));
  REQUIRE(r.status.code == 0);
  for (const nlohmann::json& e : Events(r.out)) {
    if (e.value("event", "") == "start") return e.at("openblas_core").get<std::string>();
  }
  FAIL("no start event");
  return "";
}

TEST_CASE("a rank runs OpenBLAS on the AVX2 or AVX-512 kernels its CPU has", "[trainer]") {
  Workspace w;
  Job job;
  job.every_epochs = 0;
  const std::string path = w.WriteJob("job", job);
  // Without OPENBLAS_CORETYPE, as a fresh shell starts it. OpenBLAS 0.3.21 does not know
  // some newer CPUs (an Emerald Rapids, model 207) and would run Prescott's kernels.
  const std::string core = OpenBlasCoreOfRun({"/usr/bin/env", "-u", "OPENBLAS_CORETYPE", kWorker,
                                              "train", path, "--out", w.File("plain"), "--threads", "1"});
  if (core.empty()) {
    WARN("the BLAS here is not OpenBLAS: nothing to check");
    return;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    WARN("no AVX2 here: OpenBLAS keeps its own choice, " << core);
    return;
  }
  INFO("OpenBLAS core: " << core);
  CHECK((core == "Haswell" || core == "Zen" || core == "SkylakeX" || core == "Cooperlake" ||
         core == "SapphireRapids"));
  // The user's choice stands.
  CHECK(OpenBlasCoreOfRun({kWorker, "train", path, "--out", w.File("chosen"), "--threads", "1"},
                          {{"OPENBLAS_CORETYPE", "Haswell"}}) == "Haswell");
}

TEST_CASE("fit.precision mixed_bfloat16 trains an mlp through the hand-written step",
          "[trainer][slow]") {
  Workspace w;
  Python({kFixtures, "models", w.File("models")});
  Job job;
  job.model = w.File("models/mlp.keras");  // Flatten of the 8x8 images, Dense layers
  job.epochs = 10;
  job.every_epochs = 0;
  const bool bf16_gemm = CpuHasAvx512();
  if (!bf16_gemm) WARN("no AVX-512 here: oneDNN's bfloat16 GEMM cannot run, autograd trains");
  double accuracy = TrainMixedAgainstFloat32(w, job, 1, bf16_gemm ? "dense_graph" : "autograd");
  double f32_accuracy = w.TestAccuracy("f32");
  WARN("digits mlp: test accuracy " << accuracy << " in mixed_bfloat16, " << f32_accuracy
                                    << " in float32");
  CHECK(accuracy >= f32_accuracy - 0.02);
  CHECK(accuracy >= 0.85);  // this small mlp reaches ~0.89 in 10 epochs in float32
}

TEST_CASE("the same job on 1 rank and on 2 or 3 ranks ends with the same weights",
          "[trainer][slow]") {
  Workspace w;
  Python({kFixtures, "models", w.File("models")});
  // MLP: 1381 training rows (a validation split of 0.0389 of 1437: Keras keeps floor(1437 * 0.9611)) in global batches of
  // 60: 23 full batches and one of a single row, which only the last rank trains on.
  // CNN: 1437 rows in batches of 64, the last one of 29 rows (14 + 15 on 2 ranks).
  Job mlp;
  mlp.model = w.File("models/mlp.keras");
  mlp.epochs = 3;
  mlp.batch_size = 60;
  mlp.validation_split = 0.0389;
  mlp.every_epochs = 0;
  Job cnn = mlp;
  cnn.model = w.File("models/cnn.keras");
  cnn.batch_size = 64;
  cnn.validation_split = 0;
  struct Case {
    const char* name;
    Job job;
    std::vector<int> worlds;
  };
  for (const Case& c : {Case{"mlp", mlp, {2, 3}}, Case{"cnn", cnn, {2}}}) {
    std::string job = w.WriteJob(c.name, c.job);
    std::string one = absl::StrCat(c.name, "-world1");
    std::string output = w.Train(job, 1, one);
    nlohmann::json start = Events(output).front();
    REQUIRE(start["event"] == "start");
    CHECK(start["samples"] == (c.job.validation_split > 0 ? 1381 : 1437));
    // Ranks on one machine share one copy of the model (shared_replica.h); with
    // --replica-per-rank they keep one each and all-reduce, as across machines.
    for (int world : c.worlds) {
      for (bool shared : {true, false}) {
        INFO(c.name << " on " << world << " ranks, " << (shared ? "sharing" : "a replica each"));
        std::string many = absl::StrCat(c.name, "-world", world, shared ? "-shared" : "");
        std::vector<std::string> flags;
        if (!shared) flags.push_back("--replica-per-rank");
        std::string output = w.Train(job, world, many, flags);
        nlohmann::json start = Events(output).front();
        CHECK(start["all_reduce"] == "shared memory");
        CHECK(start["shared_model"] == shared);
        nlohmann::json verdict =
            CompareWeights(w.File(one + "/model.keras"), w.File(many + "/model.keras"), 1e-4);
        INFO(verdict.dump());
        CHECK(verdict["ok"] == true);
        // Two kernels and two biases, and Adam's iteration, learning rate and two slots
        // for each of those four: the optimizer state agrees across world sizes too.
        CHECK(verdict["variables"] == 14);
        CheckSameLosses(History(w.File(many + "/history.json")),
                        History(w.File(one + "/history.json")), 1e-4);
      }
    }
  }
}

TEST_CASE("a killed rank fails the run promptly and --resume finishes it as if nothing happened",
          "[trainer][slow]") {
  Workspace w;
  Job job;
  job.epochs = 8;
  job.batch_size = 32;
  job.every_epochs = 1;
  std::string path = w.WriteJob("digits", job);
  const std::vector<std::string> timeout{"--collective-timeout", "5s"};

  auto rank0 = w.StartRank(path, 0, 2, "run", "rendezvous1", timeout);
  auto rank1 = w.StartRank(path, 1, 2, "run", "rendezvous1", timeout);
  WaitForEpochs(*rank0, 2);
  rank1->Signal(SIGKILL);
  absl::Time killed = absl::Now();
  std::optional<ExitStatus> exit = rank0->Wait(absl::Seconds(60));
  absl::Duration took = absl::Now() - killed;
  std::string output = rank0->Output();
  INFO(output);
  REQUIRE(exit.has_value());
  CHECK(exit->code == 1);
  WARN("rank 0 exited " << absl::FormatDuration(took) << " after rank 1 was killed");
  CHECK(took < absl::Seconds(15));  // 3x the collective timeout
  // One line on stderr naming the peer, and the same as an error event.
  std::string line = LineWith(output, "cohort-worker train: error:");
  CHECK(absl::StrContains(line, "rank 1"));
  CHECK(absl::StrContains(line, "peer died"));
  std::vector<nlohmann::json> events = Events(output);
  REQUIRE_FALSE(events.empty());
  CHECK(events.back()["event"] == "error");
  CHECK(absl::StrContains(events.back()["message"].get<std::string>(), "rank 1"));
  CHECK_FALSE(fs::exists(w.File("run/model.keras")));
  int done = CountEvents(output, "epoch_end");
  REQUIRE(done < job.epochs);

  // Both ranks again, in a fresh rendezvous directory.
  std::string resumed = w.Train(path, 2, "run", {"--resume"});
  std::string from = LineWith(resumed, "resumed from the checkpoint after epoch");
  INFO(from);
  CHECK_FALSE(from.empty());
  nlohmann::json start = Events(resumed).front();
  REQUIRE(start["event"] == "start");
  CHECK(start["first_epoch"].get<int>() >= 3);
  CHECK(start["first_epoch"].get<int>() <= done + 1);

  w.Train(path, 2, "uninterrupted");
  nlohmann::json verdict =
      CompareWeights(w.File("uninterrupted/model.keras"), w.File("run/model.keras"), 0);
  INFO(verdict.dump());
  CHECK(verdict["ok"] == true);
  CHECK(History(w.File("run/history.json")) == History(w.File("uninterrupted/history.json")));
}

TEST_CASE("a killed rank 0 fails rank 1 promptly naming it", "[trainer][slow]") {
  Workspace w;
  Job job;
  job.epochs = 30;
  job.batch_size = 32;
  job.every_epochs = 0;
  std::string path = w.WriteJob("digits", job);
  const std::vector<std::string> timeout{"--collective-timeout", "5s"};
  auto rank0 = w.StartRank(path, 0, 2, "run", "rendezvous", timeout);
  auto rank1 = w.StartRank(path, 1, 2, "run", "rendezvous", timeout);
  WaitForEpochs(*rank0, 1);
  rank0->Signal(SIGKILL);
  absl::Time killed = absl::Now();
  std::optional<ExitStatus> exit = rank1->Wait(absl::Seconds(60));
  INFO(rank1->Output());
  REQUIRE(exit.has_value());
  CHECK(exit->code == 1);
  CHECK(absl::Now() - killed < absl::Seconds(15));
  std::string line = LineWith(rank1->Output(), "cohort-worker train: error:");
  CHECK(absl::StrContains(line, "rank 0"));
  CHECK(absl::StrContains(line, "peer died"));
}

TEST_CASE("resuming skips a corrupted latest checkpoint with a warning and still finishes",
          "[trainer][slow]") {
  Workspace w;
  Job job;
  job.epochs = 3;
  job.batch_size = 64;
  std::string first = w.WriteJob("three", job);
  job.epochs = 5;
  std::string longer = w.WriteJob("five", job);
  w.Train(first, 1, "run");
  std::string latest = w.File("run/checkpoints/ckpt-epoch-000003.zip");
  REQUIRE(fs::exists(latest));
  REQUIRE(fs::exists(w.File("run/checkpoints/ckpt-epoch-000002.zip")));
  // Damage a few bytes inside the stored tensors: the zip still opens, only the CRC-32
  // of a member tells.
  std::string bytes = ReadFile(latest);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 8; ++i) bytes[i] ^= 0x5a;
  WriteFile(latest, bytes);
  // What a trainer killed while writing epoch 4's checkpoint leaves behind.
  std::string half = w.File("run/checkpoints/ckpt-epoch-000004.zip.tmp-999999");
  WriteFile(half, bytes.substr(0, bytes.size() / 2));

  std::string output = w.Train(longer, 1, "run", {"--resume"});
  CHECK_FALSE(fs::exists(half));  // not taken for a checkpoint, and gone
  std::string warning = LineWith(output, "skipping checkpoint");
  INFO(output);
  CHECK(absl::StrContains(warning, "ckpt-epoch-000003.zip"));
  CHECK(absl::StrContains(warning, "CRC"));
  CHECK(absl::StrContains(output, "resumed from the checkpoint after epoch 2"));
  CHECK(Events(output).front()["first_epoch"] == 3);

  w.Train(longer, 1, "uninterrupted");
  nlohmann::json verdict =
      CompareWeights(w.File("uninterrupted/model.keras"), w.File("run/model.keras"), 0);
  INFO(verdict.dump());
  CHECK(verdict["ok"] == true);
  CHECK(History(w.File("run/history.json")) == History(w.File("uninterrupted/history.json")));
}

TEST_CASE("a rank that hangs makes the others time out naming it", "[trainer][slow]") {
  Workspace w;
  Job job;
  job.epochs = 30;
  job.batch_size = 32;
  job.every_epochs = 0;
  std::string path = w.WriteJob("digits", job);
  const std::vector<std::string> timeout{"--collective-timeout", "5s"};
  auto rank0 = w.StartRank(path, 0, 2, "run", "rendezvous", timeout);
  auto rank1 = w.StartRank(path, 1, 2, "run", "rendezvous", timeout);
  WaitForEpochs(*rank0, 1);
  rank1->Signal(SIGSTOP);
  absl::Time stopped = absl::Now();
  std::optional<ExitStatus> exit = rank0->Wait(absl::Seconds(60));
  absl::Duration took = absl::Now() - stopped;
  INFO(rank0->Output());
  REQUIRE(exit.has_value());
  CHECK(exit->code == 1);
  CHECK(took >= absl::Seconds(4));
  CHECK(took < absl::Seconds(15));
  std::string line = LineWith(rank0->Output(), "cohort-worker train: error:");
  CHECK(absl::StrContains(line, "timed out after 5s waiting for rank 1"));
}

TEST_CASE("a rank that never starts fails the others at the rendezvous naming it",
          "[trainer][slow]") {
  Workspace w;
  Job job;
  job.batch_size = 60;  // divisible by 3
  std::string path = w.WriteJob("digits", job);
  const std::vector<std::string> timeout{"--collective-timeout", "3s"};
  // Ranks 0 and 2 of 3; rank 1 never comes.
  absl::Time start = absl::Now();
  auto rank0 = w.StartRank(path, 0, 3, "run", "rendezvous", timeout);
  auto rank2 = w.StartRank(path, 2, 3, "run", "rendezvous", timeout);
  for (auto* p : {rank0.get(), rank2.get()}) {
    std::optional<ExitStatus> exit = p->Wait(absl::Seconds(60));
    INFO(p->Output());
    REQUIRE(exit.has_value());
    CHECK(exit->code == 1);
    std::string line = LineWith(p->Output(), "cohort-worker train: error:");
    CHECK(absl::StrContains(line, "rendezvous timed out after 3s waiting for rank 1 to join"));
    CHECK(CountEvents(p->Output(), "start") == 0);
  }
  // Startup (loading LibTorch, the model and the data) plus the 3 s, with room for a
  // loaded machine; without a timeout this would not end at all.
  CHECK(absl::Now() - start < absl::Seconds(30));
}

TEST_CASE("bad rank arguments and an indivisible global batch are refused before training",
          "[trainer]") {
  TempDir dir;
  // No data is needed: these are refused before the model or the data is read.
  std::string job = dir.File("job.yaml");
  WriteFile(job, "model: " + kDigitsCnn +
                     "\ndata:\n  x: x.npy\n  y: y.npy\nfit:\n  epochs: 1\n  batch_size: 15\n");

  SECTION("--rank must be below --world: exit code 2") {
    CommandResult r = RunCommand({kWorker, "train", job, "--rank", "2", "--world", "2",
                                  "--rendezvous", "file://" + dir.File("rdv"), "--out",
                                  dir.File("out")});
    INFO(Describe(r));
    CHECK(r.status.code == 2);
    CHECK(absl::StrContains(r.output, "--rank 2 must be below --world 2"));
  }
  SECTION("a global batch of 15 on 2 ranks") {
    absl::Time start = absl::Now();
    // The default collective timeout (60 s): refusing must not wait for the peer.
    CommandResult r = RunCommand({kWorker, "train", job, "--rank", "0", "--world", "2",
                                  "--rendezvous", "file://" + dir.File("rdv"), "--out",
                                  dir.File("out")});
    INFO(Describe(r));
    CHECK(r.status.code == 1);
    CHECK(absl::StrContains(LineWith(r.output, "cohort-worker train: error:"),
                            "fit.batch_size: 15 is not divisible by the 2 ranks"));
    CHECK(CountEvents(r.out, "start") == 0);
    CHECK(absl::Now() - start < absl::Seconds(30));
    CHECK(fs::is_empty(dir.File("rdv")));  // it never joined
    CHECK_FALSE(fs::exists(dir.File("out/model.keras")));
  }
}

// --- GPU ---------------------------------------------------------------------------

// Why a CUDA run cannot happen here, or "" when it can: a 1-step probe run.
std::string CudaUnavailable(Workspace& w) {
  Job probe;
  probe.batch_size = 1437;
  probe.every_epochs = 0;
  std::string job = w.WriteJob("probe", probe);
  CommandResult r = RunCommand({kWorker, "train", job, "--out", w.File("probe"), "--device",
                                "cuda"},
                               kRunTimeout);
  if (r.status.code == 0) return "";
  std::string line = LineWith(r.output, "cohort-worker train: error:");
  if (absl::StrContains(line, "sees no CUDA device") || absl::StrContains(line, "without")) {
    return line;
  }
  FAIL("the CUDA probe run failed for another reason: " << Describe(r));
  return "";
}

int VisibleGpus() {
  CommandResult r =
      RunCommand({"/bin/sh", "-c", "nvidia-smi -L 2>/dev/null | grep -c '^GPU'"}, absl::Seconds(30));
  return r.status.code == 0 ? std::atoi(r.out.c_str()) : 0;
}

TEST_CASE("digits_cnn trains on one GPU to 95% test accuracy, in float32 and mixed_bfloat16",
          "[trainer][gpu]") {
  const std::string precision = GENERATE("float32", "mixed_bfloat16");
  CAPTURE(precision);
  Workspace w;
  if (std::string why = CudaUnavailable(w); !why.empty()) {
    WARN("skipped: no CUDA device for cohort-worker train --device cuda (" << why << ")");
    return;
  }
  Job job;
  job.epochs = 10;
  job.every_epochs = 0;
  job.precision = precision;
  std::string output = w.Train(w.WriteJob("digits", job), 1, "gpu", {"--device", "cuda"});
  CHECK(absl::StartsWith(Events(output).front()["device"].get<std::string>(), "cuda"));
  CHECK(Events(output).front()["precision"] == precision);
  CHECK(w.TestAccuracy("gpu") >= 0.95);
  CHECK(w.TestAccuracy("gpu", "cuda") >= 0.95);
}

TEST_CASE("2 ranks on 2 GPUs (NCCL) train digits_cnn to 95% and match 1 GPU", "[trainer][gpu]") {
  Workspace w;
  if (std::string why = CudaUnavailable(w); !why.empty()) {
    WARN("skipped: no CUDA device for cohort-worker train --device cuda (" << why << ")");
    return;
  }
  if (int gpus = VisibleGpus(); gpus < 2) {
    WARN("skipped: NCCL needs one GPU per rank; nvidia-smi lists " << gpus);
    return;
  }
  Job job;
  job.epochs = 10;
  job.every_epochs = 0;
  std::string path = w.WriteJob("digits", job);
  w.Train(path, 2, "nccl", {"--device", "cuda"});
  CHECK(w.TestAccuracy("nccl") >= 0.95);
  job.epochs = 2;
  std::string short_job = w.WriteJob("short", job);
  w.Train(short_job, 1, "one", {"--device", "cuda"});
  w.Train(short_job, 2, "two", {"--device", "cuda"});
  nlohmann::json verdict = CompareWeights(w.File("one/model.keras"), w.File("two/model.keras"), 1e-4);
  INFO(verdict.dump());
  CHECK(verdict["ok"] == true);
}

}  // namespace
}  // namespace cohort::testing
