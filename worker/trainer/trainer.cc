#include "worker/trainer/trainer.h"

#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fault_point.h"
#include "common/job/compile_overrides.h"
#include "common/logging.h"
#include "common/zip/atomic_file.h"
#include "worker/trainer/allocator.h"
#include "worker/trainer/autocast.h"
#include "worker/trainer/batch_plan.h"
#include "worker/trainer/batch_prefetch.h"
#include "worker/trainer/checkpoint.h"
#include "worker/trainer/cpu_threads.h"
#include "worker/trainer/collective/gloo_collective.h"
#include "worker/trainer/collective/prefix_store.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/dense_graph.h"
#include "worker/trainer/events.h"
#include "worker/trainer/flat_parameters.h"
#include "worker/trainer/gemm.h"
#include "worker/trainer/gradient_reducer.h"
#include "worker/trainer/keras_file.h"
#include "worker/trainer/keras_model.h"
#include "worker/trainer/losses.h"
#include "worker/trainer/optimizer.h"
#include "worker/trainer/optimizer_weights.h"
#include "worker/trainer/shared_replica.h"
#include "worker/trainer/step_stats.h"
#include "worker/trainer/step_trace.h"
#include "worker/trainer/tensorboard_log.h"
#if COHORT_HAVE_NCCL
#include "worker/trainer/collective/nccl_collective.h"
#endif

namespace cohort::trainer {
namespace {

// Keras files Cohort writes say they are Keras 3 files when the input did not say
// which Keras made it (a to_json() config).
constexpr char kDefaultKerasVersion[] = "3.0.0";

// Sums over an epoch (or a validation pass), reduced across ranks at its end:
// [loss * rows, rows, metric sums..., metric counts...].
class Totals {
 public:
  explicit Totals(size_t metrics) : values_(2 + 2 * metrics, 0.0) {}
  void AddLoss(double row_loss_sum, int64_t rows) {
    values_[0] += row_loss_sum;
    values_[1] += static_cast<double>(rows);
  }
  void AddMetric(size_t i, double sum, int64_t count) {
    values_[2 + 2 * i] += sum;
    values_[3 + 2 * i] += static_cast<double>(count);
  }
  double loss() const { return values_[1] > 0 ? values_[0] / values_[1] : 0.0; }
  double metric(size_t i) const {
    return values_[3 + 2 * i] > 0 ? values_[2 + 2 * i] / values_[3 + 2 * i] : 0.0;
  }
  int64_t rows() const { return static_cast<int64_t>(values_[1]); }
  absl::Status Reduce(collective::Collective* c) {
    if (c == nullptr) return absl::OkStatus();
    // float32 on the wire; sums of per-row values stay exact enough (and counts exact
    // to 2^24 rows per rank and epoch), the division happens in double here.
    std::vector<float> f(values_.begin(), values_.end());
    if (absl::Status s = c->AllReduce(f.data(), f.size()); !s.ok()) return s;
    values_.assign(f.begin(), f.end());
    return absl::OkStatus();
  }

 private:
  std::vector<double> values_;
};

// `status` with `context` in front of its message: where in the run a collective failed.
absl::Status InContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

class Run {
 public:
  explicit Run(const TrainOptions& options) : o_(options), events_(options.events) {}
  absl::Status Execute();
  // --trace: this rank's timeline so far, to out_dir/trace/rank-<rank>.json.
  void WriteTrace();

 private:
  absl::Status Setup();
  absl::Status Connect();
  absl::Status SyncState();
  absl::Status Resume();
  absl::Status TrainEpoch(int epoch, nlohmann::json* logs);
  // TrainEpoch under LibTorch's profiler (TrainOptions::profile_epoch).
  absl::Status TrainEpochProfiled(int epoch, nlohmann::json* logs);
  absl::Status Validate(int epoch, nlohmann::json* logs);
  absl::Status Checkpoint(int epochs_done);
  absl::Status WriteOutputs();
  void AddMetrics(Totals& totals, const torch::Tensor& prediction, const torch::Tensor& y);
  bool mixed() const { return o_.spec.fit.precision == job::Precision::kMixedBfloat16; }
  bool leader() const { return o_.rank == 0; }

  const TrainOptions& o_;
  EventWriter events_;
  torch::Device device_{torch::kCPU};
  KerasModelFile file_;
  keras::CompileConfig compile_;
  std::vector<keras::MetricConfig> metrics_;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<KerasModel> model_;
  std::vector<torch::Tensor*> trainable_;  // flat order
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DenseGraph> dense_;  // the hand-written step; null: autograd's
  std::unique_ptr<collective::PrefixStore> store_;
  std::unique_ptr<collective::Collective> collective_;
  // Ranks on one machine: one copy of the model for all; null otherwise (then a reducer).
  std::unique_ptr<SharedReplica> shared_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<TensorBoardLog> tensorboard_;  // rank 0's curves; null elsewhere
  std::unique_ptr<StepTrace> trace_;             // --trace; null without
  int first_epoch_ = 0;
  int threads_ = 1;  // the rank's compute threads
  nlohmann::json history_ = nlohmann::json::object();
};

absl::Status Run::Setup() {
  const job::JobSpec& spec = o_.spec;
  if (spec.fit.batch_size % o_.world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("fit.batch_size: ", spec.fit.batch_size,
                                                   " is not divisible by the ", o_.world,
                                                   " ranks"));
  }
  if (o_.device == job::Device::kCuda) {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(
          "resources.device: cuda was asked for, but LibTorch here sees no CUDA device");
    }
    device_ = torch::Device(torch::kCUDA,
                            static_cast<int8_t>(o_.rank % torch::cuda::device_count()));
  }
  absl::StatusOr<KerasModelFile> file = LoadKerasModel(spec.model.path);
  if (!file.ok()) return file.status();
  file_ = std::move(*file);
  const bool convolutions = absl::c_any_of(file_.ir.nodes, [](const keras::Node& n) {
    return n.layer_class() == keras::LayerClass::kConv1D ||
           n.layer_class() == keras::LayerClass::kConv2D;
  });
  threads_ = o_.threads > 0 ? o_.threads : DefaultCpuThreads(o_.world);
  absl::StatusOr<keras::CompileConfig> compile = job::ResolveCompile(file_.ir.compile, spec.compile);
  if (!compile.ok()) return compile.status();
  compile_ = std::move(*compile);

  absl::StatusOr<std::unique_ptr<Dataset>> data = Dataset::Open(spec.data, file_.ir, *compile_.loss);
  if (!data.ok()) return data.status();
  data_ = std::move(*data);
  // "accuracy" means what Keras makes of it for these shapes.
  for (const keras::MetricConfig& m : compile_.metrics) {
    metrics_.push_back(keras::ResolveMetric(m, data_->y_row_shape(), file_.ir.output().output_shape));
  }

  absl::StatusOr<std::unique_ptr<KerasModel>> model =
      KerasModel::Create(file_.ir, device_, spec.fit.seed);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  if (file_.weights) {
    if (absl::Status s = model_->LoadWeights(*file_.weights); !s.ok()) return s;
  }
  // Gradients arrive last layer first: lay the flat buffer out in that order.
  for (auto it = model_->variables().rbegin(); it != model_->variables().rend(); ++it) {
    if (it->trainable) trainable_.push_back(&it->value);
  }
  flat_ = std::make_unique<FlatParameters>(trainable_);
  optimizer_ = std::make_unique<Optimizer>(compile_.optimizer, *flat_);
  std::string autograd_because = "--autograd";
  if (!o_.autograd) {
    dense_ = DenseGraph::Create(*model_, *compile_.loss, trainable_, mixed(), &autograd_because);
  }
  if (!dense_) spdlog::debug("training step through autograd: {}", autograd_because);
  // The rank's threads go where its heavy work runs (cpu_threads.h): bfloat16 products
  // run in oneDNN, on the intra-op pool, as convolutions do.
  SetCpuThreads(threads_, convolutions || mixed() ||
                              (dense_ && SgemmLibrary() == GemmLibrary::kOneDnn));
  return absl::OkStatus();
}

absl::Status Run::Connect() {
  if (o_.world == 1) return absl::OkStatus();
  if (o_.store == nullptr) return absl::InvalidArgumentError("a rendezvous store is required");
  store_ = std::make_unique<collective::PrefixStore>(o_.rendezvous_prefix, o_.store);
  // tests/faults: this rank has started, its peers wait for it in the rendezvous.
  FaultPoint(absl::StrCat("rank", o_.rank, "-rendezvous"));
  absl::StatusOr<std::unique_ptr<collective::Collective>> c;
  if (device_.is_cuda()) {
#if COHORT_HAVE_NCCL
    collective::NcclOptions n;
    n.rank = o_.rank;
    n.size = o_.world;
    n.device = device_.index();
    n.timeout = o_.collective_timeout;
    c = collective::CreateNcclCollective(n, store_.get());
#else
    return absl::FailedPreconditionError("this cohort-worker was built without NCCL");
#endif
  } else {
    collective::GlooOptions g;
    g.rank = o_.rank;
    g.size = o_.world;
    g.timeout = o_.collective_timeout;
    g.hostname = o_.hostname;
    if (!o_.replica_per_rank && optimizer_->UpdatesByRange()) {
      g.shared_floats = SharedReplica::FloatsNeeded(
          flat_->numel(), static_cast<int>(optimizer_->State().size()), o_.world);
    }
    c = collective::CreateGlooCollective(g, store_.get());
  }
  if (!c.ok()) return c.status();
  collective_ = std::move(*c);
  absl::StatusOr<std::unique_ptr<SharedReplica>> shared =
      SharedReplica::Create(collective_.get(), flat_.get(), optimizer_.get());
  if (!shared.ok()) return InContext(shared.status(), "sharing the model in shared memory");
  shared_ = std::move(*shared);
  if (shared_) return absl::OkStatus();
  reducer_ = std::make_unique<GradientReducer>(flat_.get(), trainable_, collective_.get(),
                                              GradientReducer::Options());
  return absl::OkStatus();
}

// Rank 0's state (initial weights, or what it resumed) becomes every rank's.
absl::Status Run::SyncState() {
  if (!collective_) return absl::OkStatus();
  std::vector<torch::Tensor> tensors;
  if (!shared_) {  // a shared copy has rank 0's values already
    tensors.push_back(flat_->data());
    for (const torch::Tensor& t : optimizer_->State()) tensors.push_back(t);
  }
  for (ModelVariable& v : model_->variables()) {
    if (!v.trainable) tensors.push_back(v.value);
  }
  constexpr char kContext[] = "sending rank 0's model and optimizer state to every rank";
  for (torch::Tensor& t : tensors) {
    if (absl::Status s = collective_->Broadcast(t.data_ptr(), t.numel() * t.element_size(), 0);
        !s.ok()) {
      return InContext(s, kContext);
    }
  }
  std::vector<int64_t> counters{first_epoch_, optimizer_->iterations()};
  if (absl::Status s = collective_->Broadcast(counters.data(), sizeof(int64_t) * 2, 0); !s.ok()) {
    return InContext(s, kContext);
  }
  first_epoch_ = static_cast<int>(counters[0]);
  if (!leader()) return optimizer_->Restore(counters[1], optimizer_->State());
  return absl::OkStatus();
}

absl::Status Run::Resume() {
  if (!o_.resume || !leader()) return absl::OkStatus();
  std::string dir = o_.out_dir + "/checkpoints";
  std::vector<ModelVariable*> buffers;
  for (ModelVariable& v : model_->variables()) {
    if (!v.trainable) buffers.push_back(&v);
  }
  const size_t slots = optimizer_->State().size();
  const int64_t parameters = flat_->packed_numel();  // checkpoints hold them packed
  auto fits = [&](const CheckpointState& s) {
    bool same = s.params.numel() == parameters && s.buffers.size() == buffers.size() &&
                s.optimizer.size() == slots;
    for (size_t i = 0; same && i < buffers.size(); ++i) {
      same = s.buffers[i].numel() == buffers[i]->value.numel();
    }
    for (size_t i = 0; same && i < slots; ++i) same = s.optimizer[i].numel() == parameters;
    if (same) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "it does not match this model and optimizer (", s.params.numel(), " parameters, ",
        s.optimizer.size(), " optimizer slots, ", s.buffers.size(), " other variables; this run has ",
        parameters, ", ", slots, ", ", buffers.size(), ")"));
  };
  auto warn = [](const std::string& m) { spdlog::warn("{}", m); };
  absl::StatusOr<std::optional<CheckpointState>> state = LoadLatestCheckpoint(dir, fits, warn);
  if (!state.ok()) return state.status();
  if (!state->has_value()) {
    spdlog::info("--resume: no checkpoint in {}, starting from the beginning", dir);
    return absl::OkStatus();
  }
  CheckpointState& s = **state;
  torch::NoGradGuard no_grad;
  flat_->data().copy_(flat_->Unpacked(s.params));
  for (size_t i = 0; i < buffers.size(); ++i) {
    buffers[i]->value.copy_(s.buffers[i].reshape(buffers[i]->value.sizes()));
  }
  std::vector<torch::Tensor> optimizer_state;
  for (const torch::Tensor& t : s.optimizer) optimizer_state.push_back(flat_->Unpacked(t));
  if (absl::Status st = optimizer_->Restore(s.iterations, optimizer_state); !st.ok()) return st;
  first_epoch_ = s.epochs_done;
  history_ = s.history;
  spdlog::info("resumed from the checkpoint after epoch {}", s.epochs_done);
  return absl::OkStatus();
}

void Run::AddMetrics(Totals& totals, const torch::Tensor& prediction, const torch::Tensor& y) {
  for (size_t i = 0; i < metrics_.size(); ++i) {
    MetricTotal total = MetricSum(metrics_[i], prediction, y);
    totals.AddMetric(i, total.sum, total.count);
  }
}

absl::Status Run::TrainEpoch(int epoch, nlohmann::json* logs) {
  const job::FitSpec& fit = o_.spec.fit;
  BatchPlan plan(data_->train_rows(), fit.batch_size, o_.rank, o_.world, fit.shuffle, fit.seed);
  plan.StartEpoch(epoch);
  // Dropout's stream: a function of (seed, epoch, rank), so resuming reproduces it.
  torch::manual_seed(Mix(Mix(fit.seed, epoch), o_.rank));
  Totals totals(metrics_.size());
  const bool check = epoch == first_epoch_;
  const double loss_weight = compile_.loss_weight;
  absl::Time start = absl::Now(), last_event = start, last_stats = start;
  int64_t samples = 0;
  StepStats stats;
  const std::string step_fault_point = absl::StrCat("rank", o_.rank, "-step");  // tests/faults
  // Batches are gathered in the background only on a core no rank computes on. Ranks
  // that share memory are on this machine; others are taken to be a machine each.
  const int local_ranks =
      collective_ && collective_->transport() == "shared memory" ? o_.world : 1;
  const bool spare_core = threads_ * local_ranks < CpuCores();
  BatchPrefetcher batches(*data_, plan, device_, check, spare_core);
  for (int64_t step = 0; step < plan.steps(); ++step) {
    absl::Time step_start = absl::Now();
    StepTiming timing;
    StepPhases phases{.start = step_start, .shared_sum = shared_ != nullptr};
    BatchPlan::Slice slice = plan.RankSlice(step);
    if (reducer_) reducer_->BeginStep();
    // DenseGraph overwrites every gradient; autograd adds to them.
    if (!dense_ || slice.rows.empty()) flat_->ZeroGrad();
    double step_loss = 0;
    if (!slice.rows.empty()) {
      torch::Tensor x, y, prediction;
      {
        RECORD_FUNCTION("cohort::data", std::vector<c10::IValue>());
        if (absl::Status s = batches.Take(step, &x, &y); !s.ok()) return s;
      }
      timing.data = absl::Now() - step_start;
      phases.data_end = step_start + timing.data;
      if (dense_) {
        DenseGraph::Forward f;
        {
          RECORD_FUNCTION("cohort::DenseGraph::forward", std::vector<c10::IValue>());
          f = dense_->RunForward(x, y, loss_weight / static_cast<double>(slice.global_rows));
        }
        phases.forward_end = absl::Now();
        {
          RECORD_FUNCTION("cohort::DenseGraph::backward", std::vector<c10::IValue>());
          dense_->RunBackward([this](int variable) {
            if (reducer_) reducer_->GradientReady(variable);
          });
        }
        phases.backward_end = absl::Now();
        step_loss = f.loss_sum;
        prediction = f.prediction;
      } else {
        KerasModel::Output out = ForwardInPrecision(*model_, x, /*training=*/true, mixed());
        torch::Tensor per = ElementLosses(*compile_.loss, out, y);
        int64_t per_row = per.numel() / static_cast<int64_t>(slice.rows.size());
        torch::Tensor sum = per.sum();
        phases.forward_end = absl::Now();
        (sum * (loss_weight / static_cast<double>(slice.global_rows * per_row))).backward();
        phases.backward_end = absl::Now();
        step_loss = sum.item<double>() / per_row;
        prediction = out.value.detach();
      }
      totals.AddLoss(step_loss * loss_weight, static_cast<int64_t>(slice.rows.size()));
      AddMetrics(totals, prediction, y);
    }
    auto failed = [&](const absl::Status& s, absl::string_view what) {
      return absl::Status(s.code(), absl::StrCat("epoch ", epoch + 1, ", step ", step + 1, ": ",
                                                 what, " failed: ", s.message()));
    };
    phases.reduce_start = absl::Now();
    bool finite = std::isfinite(step_loss);
    if (shared_) {
      absl::StatusOr<bool> all_finite = shared_->ReduceGradients(finite);
      if (!all_finite.ok()) return failed(all_finite.status(), "summing gradients in shared memory");
      finite = *all_finite;
    } else if (reducer_) {
      if (absl::Status s = reducer_->FinishStep(); !s.ok()) return failed(s, "gradient all-reduce");
    }
    phases.reduce_end = absl::Now();
    // Every rank sees the same summed gradients (or, sharing the model, the same verdict
    // on them), so every rank stops at the same step.
    {
      RECORD_FUNCTION("cohort::optimizer", std::vector<c10::IValue>());
      if (!shared_ && finite) finite = flat_->GradFinite();
      if (!finite) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the loss became NaN or infinite at epoch ", epoch + 1, ", step ", step + 1,
            " (learning rate ", optimizer_->learning_rate(), "): try a lower learning rate"));
      }
      FaultPoint(step_fault_point);  // gradients summed, weights not yet updated
      if (shared_) {
        if (absl::Status s = shared_->Update(); !s.ok()) return failed(s, "updating the shared model");
      } else {
        optimizer_->Step(*flat_);
      }
    }
    samples += slice.global_rows;
    absl::Time now = absl::Now();
    timing.step = now - step_start;
    if (trace_) {
      // Both arms lvalues, so the reducer's bucket spans are not copied each step.
      static const std::vector<std::pair<absl::Time, absl::Time>> kNoBuckets;
      trace_->AddStep(epoch + 1, step + 1, phases, now,
                      reducer_ ? reducer_->last_step().buckets : kNoBuckets);
    }
    timing.rows = static_cast<int64_t>(slice.rows.size());
    if (reducer_) {
      timing.all_reduce = reducer_->last_step().all_reduce;
      timing.all_reduce_wait = reducer_->last_step().wait;
      timing.all_reduce_bytes = reducer_->last_step().bytes;
    } else if (shared_) {  // the sum of this rank's range, barriers included
      timing.all_reduce = timing.all_reduce_wait = phases.reduce_end - phases.reduce_start;
      timing.all_reduce_bytes = shared_->range_end() - shared_->range_begin();
      timing.all_reduce_bytes *= 4 * o_.world;
    }
    stats.Add(timing);
    if (tensorboard_) {
      tensorboard_->AddStep(optimizer_->iterations(), totals.loss(), optimizer_->learning_rate(),
                            timing, slice.global_rows);
    }
    if (now - last_stats >= o_.step_event_interval || step + 1 == plan.steps()) {
      nlohmann::json fields = stats.TakeWindow(now - last_stats);
      fields.update({{"rank", o_.rank}, {"epoch", epoch + 1}, {"step", step + 1}});
      if (device_.is_cuda()) fields["gpu_memory_bytes"] = GpuMemoryUsedBytes(device_.index());
      events_.Emit("rank_stats", std::move(fields));
      last_stats = now;
    }
    if (leader() && (now - last_event >= o_.step_event_interval || step + 1 == plan.steps())) {
      last_event = now;
      nlohmann::json metrics = {{"loss", totals.loss()}};
      for (size_t i = 0; i < metrics_.size(); ++i) metrics[metrics_[i].name] = totals.metric(i);
      events_.Emit("step", {{"epoch", epoch + 1}, {"epochs", fit.epochs}, {"step", step + 1},
                            {"steps", plan.steps()}, {"metrics", metrics},
                            {"samples_per_second", samples / absl::ToDoubleSeconds(now - start)}});
    }
  }
  // Before the reduce below: once it completes, every rank's file of this epoch is
  // written (what rank 0's merge at the end relies on).
  WriteTrace();
  if (absl::Status s = totals.Reduce(collective_.get()); !s.ok()) {
    return InContext(s, absl::StrCat("epoch ", epoch + 1, ": summing the metrics of the ranks"));
  }
  (*logs)["loss"] = totals.loss();
  for (size_t i = 0; i < metrics_.size(); ++i) (*logs)[metrics_[i].name] = totals.metric(i);
  (*logs)["_samples"] = samples;
  return absl::OkStatus();
}

absl::Status Run::Validate(int epoch, nlohmann::json* logs) {
  if (data_->validation_rows() == 0) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  auto [begin, end] = RankShare(data_->validation_rows(), o_.rank, o_.world);
  Totals totals(metrics_.size());
  int64_t batch = std::max<int64_t>(1, o_.spec.fit.batch_size / o_.world);
  for (int64_t b = begin; b < end; b += batch) {
    torch::Tensor x, y;
    int64_t e = std::min(end, b + batch);
    if (absl::Status s = data_->GatherValidation(b, e, device_, &x, &y); !s.ok()) return s;
    KerasModel::Output out = ForwardInPrecision(*model_, x, /*training=*/false, mixed());
    torch::Tensor per = ElementLosses(*compile_.loss, out, y);
    int64_t per_row = per.numel() / (e - b);
    totals.AddLoss(per.sum().item<double>() / per_row * compile_.loss_weight, e - b);
    AddMetrics(totals, out.value, y);
  }
  if (absl::Status s = totals.Reduce(collective_.get()); !s.ok()) {
    return InContext(s, absl::StrCat("epoch ", epoch + 1, ": summing the validation metrics"));
  }
  (*logs)["val_loss"] = totals.loss();
  for (size_t i = 0; i < metrics_.size(); ++i) {
    (*logs)["val_" + metrics_[i].name] = totals.metric(i);
  }
  return absl::OkStatus();
}

absl::Status Run::Checkpoint(int epochs_done) {
  if (!leader()) return absl::OkStatus();
  CheckpointState s;
  s.epochs_done = epochs_done;
  s.iterations = optimizer_->iterations();
  s.history = history_;
  s.params = flat_->Packed(flat_->data());
  for (const torch::Tensor& t : optimizer_->State()) s.optimizer.push_back(flat_->Packed(t));
  for (const ModelVariable& v : model_->variables()) {
    if (!v.trainable) s.buffers.push_back(v.value);
  }
  std::string dir = o_.out_dir + "/checkpoints";
  absl::StatusOr<std::string> written = WriteCheckpoint(dir, s, o_.spec.checkpoint.keep);
  if (!written.ok()) return written.status();
  // "path" stays the directory (what bench/ and older readers take); "file" is the file
  // just written, which the agent uploads.
  events_.Emit("checkpoint", {{"epoch", epochs_done}, {"path", dir}, {"file", *written}});
  return absl::OkStatus();
}

absl::Status Run::WriteOutputs() {
  if (!leader()) return absl::OkStatus();
  std::string model_path = o_.out_dir + "/model.keras";
  std::string version = file_.keras_version.empty() ? kDefaultKerasVersion : file_.keras_version;
  KerasWeights weights = model_->SaveWeights();
  // Keras restores the optimizer of a model saved compiled, if it is the same optimizer.
  if (file_.ir.compile && SameOptimizerVariables(file_.ir.compile->optimizer, compile_.optimizer)) {
    weights.optimizer.push_back(OptimizerVarGroup(*model_, *flat_, *optimizer_));
  }
  if (absl::Status s = WriteKerasModel(model_path, file_.config_json, weights, version); !s.ok()) {
    return s;
  }
  std::string history_path = o_.out_dir + "/history.json";
  if (absl::Status s = WriteFileAtomically(history_path, history_.dump(2) + "\n"); !s.ok()) {
    return InContext(s, "writing the history");
  }
  events_.Emit("done", {{"model", model_path}, {"history", history_path}});
  return absl::OkStatus();
}

absl::Status Run::TrainEpochProfiled(int epoch, nlohmann::json* logs) {
  std::ostringstream profile;
  absl::Status status;
  {
    torch::autograd::profiler::RecordProfile recording(profile);  // written out as it ends
    status = TrainEpoch(epoch, logs);
  }
  const std::string path = RankTracePath(o_.out_dir + "/profile", o_.rank);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (absl::Status s = WriteFileAtomically(path, profile.str()); !s.ok()) {
    spdlog::warn("--profile-epoch: {}", s);
  } else {
    spdlog::info("--profile-epoch {}: LibTorch's profile of the epoch in {}", epoch + 1, path);
  }
  return status;
}

void Run::WriteTrace() {
  if (!trace_) return;
  if (absl::Status s = trace_->Write(RankTracePath(o_.out_dir + "/trace", o_.rank)); !s.ok()) {
    spdlog::warn("--trace: {}", s);
  }
}

absl::Status Run::Execute() {
  if (absl::Status s = Setup(); !s.ok()) return s;
  if (leader()) {
    std::error_code ec;
    std::filesystem::create_directories(o_.out_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("--out ", o_.out_dir, ": ", ec.message()));
    }
  }
  if (leader()) {
    // Curves are a convenience: a run whose TensorBoard files cannot be made trains on.
    absl::StatusOr<std::unique_ptr<TensorBoardLog>> tb = TensorBoardLog::Create(o_.out_dir + "/tensorboard");
    if (tb.ok()) {
      tensorboard_ = std::move(*tb);
    } else {
      spdlog::warn("no TensorBoard curves for this run: {}", tb.status());
    }
  }
  if (o_.trace) trace_ = std::make_unique<StepTrace>(o_.rank);
  if (absl::Status s = Resume(); !s.ok()) return s;
  if (absl::Status s = Connect(); !s.ok()) return s;
  if (absl::Status s = SyncState(); !s.ok()) return s;
  const job::FitSpec& fit = o_.spec.fit;
  BatchPlan plan(data_->train_rows(), fit.batch_size, o_.rank, o_.world, fit.shuffle, fit.seed);
  events_.Emit("start", {{"rank", o_.rank}, {"world", o_.world}, {"epochs", fit.epochs},
                         {"first_epoch", first_epoch_ + 1}, {"steps", plan.steps()},
                         {"samples", data_->train_rows()}, {"device", device_.str()},
                         {"training_step", dense_ ? "dense_graph" : "autograd"},
                         {"precision", std::string(job::PrecisionName(fit.precision))},
                         {"all_reduce", collective_ ? std::string(collective_->transport()) : "none"},
                         {"shared_model", shared_ != nullptr},
                         {"openblas_core", OpenBlasCore()}});
  for (int epoch = first_epoch_; epoch < fit.epochs; ++epoch) {
    absl::Time start = absl::Now();
    nlohmann::json logs = nlohmann::json::object();
    if (epoch + 1 == o_.profile_epoch) {
      if (absl::Status s = TrainEpochProfiled(epoch, &logs); !s.ok()) return s;
    } else if (absl::Status s = TrainEpoch(epoch, &logs); !s.ok()) {
      return s;
    }
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    double samples = logs["_samples"].get<double>();
    logs.erase("_samples");
    if (absl::Status s = Validate(epoch, &logs); !s.ok()) return s;
    for (auto& [name, value] : logs.items()) history_[name].push_back(value);
    if (leader()) {
      // The curves are flushed before "epoch_end": the agent uploads them on that event.
      if (tensorboard_) {
        if (absl::Status s = tensorboard_->EndEpoch(epoch, logs, optimizer_->learning_rate(),
                                                    samples / std::max(seconds, 1e-9));
            !s.ok()) {
          spdlog::warn("TensorBoard curves stop here: {}", s);
          tensorboard_.reset();
        }
      }
      events_.Emit("epoch_end", {{"epoch", epoch + 1}, {"epochs", fit.epochs}, {"metrics", logs},
                                 {"seconds", seconds},
                                 {"samples_per_second", samples / std::max(seconds, 1e-9)}});
    }
    int every = o_.spec.checkpoint.every_epochs;
    bool last = epoch + 1 == fit.epochs;
    if (last || (every > 0 && (epoch + 1) % every == 0)) {
      if (absl::Status s = Checkpoint(epoch + 1); !s.ok()) return s;
    }
  }
  if (absl::Status s = WriteOutputs(); !s.ok()) return s;
  if (trace_ && leader()) {
    if (absl::Status s = MergeRankTraces(o_.out_dir + "/trace", o_.out_dir + "/trace.json"); !s.ok()) {
      spdlog::warn("--trace: {}", s);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Train(const TrainOptions& options) {
  TuneAllocator();
  CacheLargeCpuBlocks();
  FlushDenormalsToZero();
  Run run(options);
  absl::Status status;
  try {
    status = run.Execute();
  } catch (const c10::Error& e) {
    status = absl::InternalError(absl::StrCat("LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    run.WriteTrace();  // a failed run's timeline is what shows where it went wrong
    EventWriter(options.events).Emit("error", {{"message", status.message()}});
  }
  return status;
}

}  // namespace cohort::trainer
