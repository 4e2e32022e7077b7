// One rank of a collective contract test: the test starts N of these as real processes
// sharing a FileStore directory. Each runs one scenario against one backend, checks
// every result itself, and prints "ok <what>" lines; it exits 0 when all held, 1 on a
// wrong result, 2 when setup failed, 3 after the failure scenario saw its error.
//
//   collective_rank_helper BACKEND RANK SIZE STORE_DIR SCENARIO TIMEOUT_MS
//
// Buffers live where the backend wants them: host memory for gloo, device memory for
// nccl (filled and read back with cudaMemcpy, on the default stream the NCCL backend
// waits for).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#if COHORT_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "worker/trainer/collective/nccl_collective.h"
#endif

#include "absl/strings/str_cat.h"
#include "worker/trainer/collective/file_store.h"
#include "worker/trainer/collective/gloo_collective.h"

namespace cohort::trainer::collective {
namespace {

struct Args {
  std::string backend;
  int rank = 0;
  int size = 1;
  std::string dir;
  std::string scenario;
  absl::Duration timeout;
};

// Gloo's ranks ask for this much shared memory (Collective::SharedFloats).
constexpr size_t kSharedFloats = 4096;

[[noreturn]] void Fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  std::fflush(stdout);
  _exit(1);
}

void Check(const absl::Status& status, const std::string& what) {
  if (!status.ok()) Fail(absl::StrCat(what, ": ", status.ToString()));
}

// A buffer where the backend's operations want it, filled and read from the host.
class Buffer {
 public:
  Buffer(bool device, size_t bytes) : device_(device), bytes_(bytes) {
#if COHORT_HAVE_NCCL
    if (device_) {
      if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)) != cudaSuccess) Fail("cudaMalloc");
      return;
    }
#endif
    host_.resize(bytes);
    ptr_ = host_.data();
  }
  ~Buffer() {
#if COHORT_HAVE_NCCL
    if (device_) cudaFree(ptr_);
#endif
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return ptr_; }
  float* floats() { return static_cast<float*>(ptr_); }

  void Upload(const void* from) {
#if COHORT_HAVE_NCCL
    if (device_) {
      if (cudaMemcpy(ptr_, from, bytes_, cudaMemcpyHostToDevice) != cudaSuccess) Fail("upload");
      return;
    }
#endif
    if (bytes_ > 0) std::memcpy(ptr_, from, bytes_);
  }
  void Download(void* to) const {
#if COHORT_HAVE_NCCL
    if (device_) {
      if (cudaMemcpy(to, ptr_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) Fail("download");
      return;
    }
#endif
    if (bytes_ > 0) std::memcpy(to, ptr_, bytes_);
  }

 private:
  const bool device_;
  const size_t bytes_;
  std::vector<char> host_;
  void* ptr_ = nullptr;
};

class Scenarios {
 public:
  Scenarios(const Args& args, Collective& c) : args_(args), c_(c) {}

  bool device() const { return c_.device_kind() == DeviceKind::kCuda; }
  double RankSum() const { return args_.size * (args_.size + 1) / 2.0; }  // sum of rank+1

  // Every rank contributes (rank + 1 + step) * Pattern(i); the sum is exact in float.
  static float Pattern(size_t i, size_t bucket) { return static_cast<float>(i % 1013 + bucket); }

  std::vector<float> Contribution(size_t count, size_t bucket, int step) const {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = (args_.rank + 1 + step) * Pattern(i, bucket);
    return v;
  }

  void ExpectSum(const Buffer& buffer, size_t count, size_t bucket, int step,
                 const std::string& what) const {
    std::vector<float> got(count);
    buffer.Download(got.data());
    double factor = RankSum() + static_cast<double>(args_.size) * step;
    for (size_t i = 0; i < count; ++i) {
      float want = static_cast<float>(factor * Pattern(i, bucket));
      if (got[i] != want) {
        Fail(absl::StrCat(what, ": element ", i, " of ", count, " is ", got[i], ", want ", want));
      }
    }
  }

  void AllReduceSizes() {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{256}, size_t{1000},
                         size_t{4097}, size_t{65537}, size_t{262144}, size_t{(1 << 20) + 3}}) {
      Buffer buffer(device(), count * sizeof(float));
      // Three steps on one buffer, as the trainer reuses its buckets.
      for (int step = 0; step < 3; ++step) {
        std::vector<float> v = Contribution(count, 0, step);
        buffer.Upload(v.data());
        std::string what = absl::StrCat("all-reduce of ", count, " floats, step ", step);
        Check(c_.AllReduce(buffer.floats(), count), what);
        ExpectSum(buffer, count, 0, step, what);
      }
    }
    std::printf("ok all-reduce sums exactly\n");
  }

  void Broadcasts() {
    for (int root = 0; root < args_.size; ++root) {
      for (size_t bytes : {size_t{1}, size_t{1000}, size_t{(1 << 20) + 3}}) {
        std::vector<uint8_t> v(bytes, 0xEE);
        if (args_.rank == root) {
          for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(root * 31 + i * 7);
        }
        Buffer buffer(device(), bytes);
        buffer.Upload(v.data());
        std::string what = absl::StrCat("broadcast of ", bytes, " bytes from ", root);
        Check(c_.Broadcast(buffer.data(), bytes, root), what);
        buffer.Download(v.data());
        for (size_t i = 0; i < bytes; ++i) {
          if (v[i] != static_cast<uint8_t>(root * 31 + i * 7)) {
            Fail(absl::StrCat(what, ": byte ", i, " is ", int{v[i]}));
          }
        }
      }
    }
    std::printf("ok broadcast copies the root's bytes\n");
  }

  // Each rank leaves a file before the barrier (rank 0 late); after it, all files exist.
  void Barriers() {
    for (int round = 0; round < 3; ++round) {
      if (args_.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::ofstream(absl::StrCat(args_.dir, "/barrier-", round, "-", args_.rank)) << "here";
      Check(c_.Barrier(), absl::StrCat("barrier ", round));
      for (int r = 0; r < args_.size; ++r) {
        std::string path = absl::StrCat(args_.dir, "/barrier-", round, "-", r);
        if (access(path.c_str(), F_OK) != 0) {
          Fail(absl::StrCat("barrier ", round, " returned before rank ", r, " reached it"));
        }
      }
    }
    std::printf("ok barrier waits for every rank\n");
  }

  // Many buckets of different sizes started before any is waited on, a broadcast queued
  // among them, waited in an order that differs between ranks.
  void Async() {
    constexpr size_t kBuckets = 20;
    std::vector<size_t> counts;
    std::vector<std::unique_ptr<Buffer>> buffers;
    for (size_t b = 0; b < kBuckets; ++b) {
      counts.push_back(1 + (b * 7919 * 37) % 400000);
      buffers.push_back(std::make_unique<Buffer>(device(), counts[b] * sizeof(float)));
    }
    std::vector<uint8_t> message(4096, 0);
    if (args_.rank == args_.size - 1) std::fill(message.begin(), message.end(), 0x5A);
    Buffer broadcast(device(), message.size());
    broadcast.Upload(message.data());
    for (int step = 0; step < 3; ++step) {
      std::vector<std::unique_ptr<Work>> works;
      for (size_t b = 0; b < kBuckets; ++b) {
        buffers[b]->Upload(Contribution(counts[b], b, step).data());
        works.push_back(c_.StartAllReduce(buffers[b]->floats(), counts[b]));
        if (b == kBuckets / 2) {
          Check(c_.Broadcast(broadcast.data(), message.size(), args_.size - 1), "broadcast");
        }
      }
      for (size_t k = 0; k < kBuckets; ++k) {
        size_t b = args_.rank % 2 == 0 ? k : kBuckets - 1 - k;
        std::string what = absl::StrCat("bucket ", b, " (", counts[b], " floats), step ", step);
        Check(works[b]->Wait(), what);
        ExpectSum(*buffers[b], counts[b], b, step, what);
      }
    }
    broadcast.Download(message.data());
    if (std::count(message.begin(), message.end(), 0x5A) != 4096) Fail("queued broadcast");
    std::printf("ok async all-reduces run in order\n");
  }

  void Large() {
    constexpr size_t kCount = (64 << 20) / sizeof(float);
    Buffer buffer(device(), kCount * sizeof(float));
    for (int step = 0; step < 2; ++step) {
      std::vector<float> v(kCount);
      for (size_t i = 0; i < kCount; ++i) v[i] = (args_.rank + 1 + step) * float(i % 977);
      buffer.Upload(v.data());
      Check(c_.AllReduce(buffer.floats(), kCount), "64 MiB all-reduce");
      buffer.Download(v.data());
      double factor = RankSum() + args_.size * step;
      for (size_t i = 0; i < kCount; ++i) {
        if (v[i] != static_cast<float>(factor * (i % 977))) {
          Fail(absl::StrCat("64 MiB all-reduce, step ", step, ": element ", i, " is ", v[i]));
        }
      }
    }
    // Larger than the gloo backend's broadcast chunk, and not a multiple of it.
    constexpr size_t kBytes = (40 << 20) + 5;
    int root = args_.size - 1;
    std::vector<uint8_t> bytes(kBytes, 0);
    if (args_.rank == root) {
      for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
    }
    Buffer message(device(), kBytes);
    message.Upload(bytes.data());
    Check(c_.Broadcast(message.data(), kBytes, root), "40 MiB broadcast");
    message.Download(bytes.data());
    for (size_t i = 0; i < kBytes; ++i) {
      if (bytes[i] != static_cast<uint8_t>(i * 13 + 1)) {
        Fail(absl::StrCat("40 MiB broadcast: byte ", i, " is ", int{bytes[i]}));
      }
    }
    std::printf("ok 64 MiB all-reduce and 40 MiB broadcast\n");
  }

  // Memory every rank maps (gloo between ranks of one machine; none elsewhere): each
  // rank writes its block, rank 0 late; after SharedBarrier every rank sees every
  // block. All-reduces run between rounds: they share the segment's barrier words.
  void Shared() {
    std::span<float> shared = c_.SharedFloats();
    if (args_.backend != "gloo") {
      if (!shared.empty()) Fail("shared memory where the ranks do not share it");
      absl::Status s = c_.SharedBarrier();
      if (s.code() != absl::StatusCode::kFailedPrecondition) {
        Fail("SharedBarrier without shared memory: " + s.ToString());
      }
      std::printf("ok shared memory only where ranks share it\n");
      return;
    }
    if (shared.size() != kSharedFloats) Fail(absl::StrCat(shared.size(), " shared floats"));
    for (float f : shared) {
      if (f != 0) Fail("shared memory is not zero-filled");
    }
    Check(c_.SharedBarrier(), "shared barrier: every rank has checked");
    constexpr size_t kBlock = kSharedFloats / 4;  // up to 3 ranks
    for (int round = 1; round <= 3; ++round) {
      if (args_.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::fill_n(shared.data() + args_.rank * kBlock, kBlock, static_cast<float>(round * 10 + args_.rank));
      Check(c_.SharedBarrier(), absl::StrCat("shared barrier ", round));
      for (int r = 0; r < args_.size; ++r) {
        for (size_t i = 0; i < kBlock; ++i) {
          if (shared[r * kBlock + i] != static_cast<float>(round * 10 + r)) {
            Fail(absl::StrCat("round ", round, ": rank ", r, "'s float ", i, " is ",
                              shared[r * kBlock + i], " after the barrier"));
          }
        }
      }
      Check(c_.SharedBarrier(), absl::StrCat("shared barrier ", round, ", every rank has read"));
      std::vector<float> v = Contribution(1000, 0, round);
      Check(c_.AllReduce(v.data(), v.size()), "all-reduce between rounds");
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] != static_cast<float>((RankSum() + args_.size * round) * Pattern(i, 0))) {
          Fail(absl::StrCat("all-reduce between rounds: element ", i, " is ", v[i]));
        }
      }
    }
    std::printf("ok shared memory and its barrier\n");
  }

  // More shared memory asked for than /dev/shm has: none, and the all-reduce still goes
  // through shared memory.
  void SharedTooBig() {
    if (!c_.SharedFloats().empty()) Fail("4 TiB of shared memory");
    std::vector<float> v = Contribution(70000, 0, 0);
    Check(c_.AllReduce(v.data(), v.size()), "all-reduce");
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != static_cast<float>(RankSum() * Pattern(i, 0))) {
        Fail(absl::StrCat("all-reduce: element ", i, " is ", v[i]));
      }
    }
    std::printf("ok no shared floats, all-reduce through shared memory\n");
  }

  // Shared barriers until one fails (a peer was killed or stopped), then an all-reduce.
  [[noreturn]] void SharedUntilFailure() {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      absl::Status s = c_.SharedBarrier();
      if (!s.ok()) {
        std::printf("error: %s\n", s.ToString().c_str());
        float x = 1;
        std::printf("after: %s\n", c_.AllReduce(&x, 1).ToString().c_str());
        std::fflush(stdout);
        _exit(3);
      }
      if (i == 0) {
        std::printf("running\n");
        std::fflush(stdout);
      }
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(120)) {
        Fail("no error after 120 s");
      }
    }
  }

  // All-reduces until one fails (a peer was killed or stopped), then tries once more.
  [[noreturn]] void UntilFailure() {
    constexpr size_t kCount = 256 << 10;
    Buffer buffer(device(), kCount * sizeof(float));
    auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      absl::Status s = c_.AllReduce(buffer.floats(), kCount);
      if (!s.ok()) {
        std::printf("error: %s\n", s.ToString().c_str());
        std::printf("after: %s\n", c_.Barrier().ToString().c_str());
        std::fflush(stdout);
        _exit(3);
      }
      if (i == 0) {
        std::printf("running\n");
        std::fflush(stdout);
      }
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(120)) {
        Fail("no error after 120 s");
      }
    }
  }

 private:
  const Args& args_;
  Collective& c_;
};

int Main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s BACKEND RANK SIZE STORE_DIR SCENARIO TIMEOUT_MS\n", argv[0]);
    return 2;
  }
  Args args{argv[1], std::atoi(argv[2]), std::atoi(argv[3]), argv[4], argv[5],
            absl::Milliseconds(std::atoi(argv[6]))};
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(args.dir + "/store");
  if (!store.ok()) Fail(store.status().ToString());

  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Collective>> collective =
      absl::InvalidArgumentError("unknown backend " + args.backend);
  if (args.backend == "gloo" || args.backend == "gloo-tcp") {
    GlooOptions options;
    options.rank = args.rank;
    options.size = args.size;
    options.timeout = args.timeout;
    options.shared_memory = args.backend == "gloo";
    // "shared-too-big": more than any /dev/shm holds (4 TiB).
    options.shared_floats = args.scenario == "shared-too-big" ? size_t{1} << 40 : kSharedFloats;
    collective = CreateGlooCollective(options, store->get());
  }
#if COHORT_HAVE_NCCL
  if (args.backend == "nccl") {
    NcclOptions options;
    options.rank = args.rank;
    options.size = args.size;
    options.device = args.rank;
    options.timeout = args.timeout;
    collective = CreateNcclCollective(options, store->get());
  }
#endif
  if (!collective.ok()) {
    long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    std::printf("setup failed after %ld ms: %s\n", ms, collective.status().ToString().c_str());
    return 2;
  }
  if ((*collective)->rank() != args.rank || (*collective)->size() != args.size) {
    Fail("rank() or size() differ from the options");
  }
  std::printf("transport: %s\n", std::string((*collective)->transport()).c_str());
  Scenarios s(args, **collective);
  if (args.scenario == "all-reduce") s.AllReduceSizes();
  else if (args.scenario == "broadcast") s.Broadcasts();
  else if (args.scenario == "barrier") s.Barriers();
  else if (args.scenario == "async") s.Async();
  else if (args.scenario == "large") s.Large();
  else if (args.scenario == "until-failure") s.UntilFailure();
  else if (args.scenario == "shared") s.Shared();
  else if (args.scenario == "shared-too-big") s.SharedTooBig();
  else if (args.scenario == "shared-until-failure") s.SharedUntilFailure();
  else Fail("unknown scenario " + args.scenario);
  return 0;
}

}  // namespace
}  // namespace cohort::trainer::collective

int main(int argc, char** argv) { return cohort::trainer::collective::Main(argc, argv); }
