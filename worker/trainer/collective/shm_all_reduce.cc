#include "worker/trainer/collective/shm_all_reduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/trainer/collective/failure.h"
#include "worker/trainer/collective/sum.h"

namespace cohort::trainer::collective {

// The segment's header: the abort word, then one word per rank (how many barriers it
// has arrived at), each on a cache line of its own; then, from the next page, one slot
// per rank and the result area.
struct ShmAllReduce::Segment {
  static constexpr size_t kLine = 64;
  alignas(kLine) std::atomic<uint32_t> aborted;  // 0, or 1 + the rank that gave up
  std::atomic<uint32_t>& arrived(int rank) {
    return *reinterpret_cast<std::atomic<uint32_t>*>(reinterpret_cast<char*>(this) +
                                                     kLine * (1 + rank));
  }
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

namespace {

constexpr char kOp[] = "all-reduce";
constexpr size_t kPage = 4096;
// A wait spins this long before it sleeps on the futex: a futex wake-up costs tens of
// microseconds, more than the copies of a small all-reduce.
constexpr absl::Duration kSpin = absl::Microseconds(100);
constexpr absl::Duration kSleepSlice = absl::Milliseconds(10);  // between peer checks

size_t HeaderBytes(int size) {
  size_t bytes = ShmAllReduce::Segment::kLine * (1 + size);
  return (bytes + kPage - 1) / kPage * kPage;
}

size_t SegmentBytes(int size, size_t shared_floats) {
  return HeaderBytes(size) + (size + 1) * kShmChunkBytes + shared_floats * sizeof(float);
}

uint32_t* FutexWord(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

void FutexWake(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, FutexWord(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void FutexWait(std::atomic<uint32_t>& word, uint32_t seen, absl::Duration limit) {
  timespec ts = absl::ToTimespec(limit);
  syscall(SYS_futex, FutexWord(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

// What makes two processes able to share a segment: the same kernel boot, the same
// /dev/shm, and the same PID namespace (for the pidfds).
std::string HostIdentity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat shm {}, pid_ns {};
  if (boot.empty() || stat("/dev/shm", &shm) != 0 || stat("/proc/self/ns/pid", &pid_ns) != 0) {
    return "";
  }
  return absl::StrCat(boot, "/", shm.st_dev, ":", shm.st_ino, "/", pid_ns.st_ino);
}

std::string Errno(absl::string_view what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

bool Exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

}  // namespace

ShmAllReduce::~ShmAllReduce() {
  if (segment_ != nullptr) munmap(segment_, mapped_bytes_);
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

void ShmAllReduce::Abort() {
  uint32_t expected = 0;
  segment_->aborted.compare_exchange_strong(expected, static_cast<uint32_t>(rank_ + 1));
}

absl::Status ShmAllReduce::Barrier() {
  absl::Status s = Arrive("barrier");
  if (!s.ok()) Abort();
  return s;
}

absl::Status ShmAllReduce::Arrive(absl::string_view op) {
  const uint32_t target = ++barriers_;
  segment_->arrived(rank_).store(target, std::memory_order_release);
  FutexWake(segment_->arrived(rank_));
  const absl::Time start = absl::Now();
  for (int peer = 0; peer < size_; ++peer) {
    std::atomic<uint32_t>& word = segment_->arrived(peer);
    for (int spins = 0;; ++spins) {
      const uint32_t seen = word.load(std::memory_order_acquire);
      if (static_cast<int32_t>(seen - target) >= 0) break;
      if (uint32_t a = segment_->aborted.load(std::memory_order_relaxed); a != 0) {
        return PeerLost(op, static_cast<int>(a) - 1, "shared memory: it failed first");
      }
      if ((spins & 63) != 63 || absl::Now() - start < kSpin) {
        __builtin_ia32_pause();
        continue;
      }
      FutexWait(word, seen, kSleepSlice);
      if (Exited(pidfds_[peer])) return PeerLost(op, peer, "shared memory: its process exited");
      if (absl::Now() - start > timeout_) return PeerTimedOut(op, peer, timeout_, "shared memory");
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduce::Run(float* data, size_t count) {
  if (uint32_t a = segment_->aborted.load(); a != 0) {
    return PeerLost(kOp, static_cast<int>(a) - 1, "shared memory: it failed first");
  }
  constexpr size_t kChunk = kShmChunkBytes / sizeof(float);
  float* mine = slots_ + rank_ * kChunk;
  for (size_t offset = 0; offset < count; offset += kChunk) {
    const size_t n = std::min(kChunk, count - offset);
    float* chunk = data + offset;
    auto slice = [&](int r) { return std::pair<size_t, size_t>{n * r / size_, n * (r + 1) / size_}; };
    // The slices the peers sum; this rank's own it reads from `chunk` itself.
    for (int r = 0; r < size_; ++r) {
      auto [begin, end] = slice(r);
      if (r != rank_) std::memcpy(mine + begin, chunk + begin, (end - begin) * sizeof(float));
    }
    absl::Status s = Arrive(kOp);  // every slot written
    if (s.ok()) {
      // This rank's slice, summed in rank order: every rank gets the same bits. The
      // first two ranks' slices are added in one pass, and the last pass also writes
      // the sum into this rank's own buffer (ranks 0 and 1 read, the result area and
      // `chunk` written, all at once: 2 ranks take one pass, not three).
      auto [begin, end] = slice(rank_);
      const size_t len = end - begin;
      auto in = [&](int r) { return (r == rank_ ? chunk : slots_ + r * kChunk) + begin; };
      float* out = result_ + begin;
      SumTo(out, size_ == 2 ? chunk + begin : nullptr, in(0), in(1), len);
      for (int r = 2; r < size_; ++r) AddInto(out, in(r), len);
      if (size_ > 2) std::memcpy(chunk + begin, out, len * sizeof(float));
      s = Arrive(kOp);  // every slice summed
    }
    if (!s.ok()) {
      Abort();
      return s;
    }
    for (int r = 0; r < size_; ++r) {
      auto [begin, end] = slice(r);
      if (r != rank_) std::memcpy(chunk + begin, result_ + begin, (end - begin) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShmAllReduce>> ConnectSharedMemory(int rank, int size,
                                                                  absl::Duration timeout,
                                                                  Store& store,
                                                                  size_t shared_floats) {
  if (size < 2) return nullptr;
  auto keys = [size](absl::string_view what) {
    std::vector<std::string> k;
    for (int r = 0; r < size; ++r) k.push_back(absl::StrCat("shm/", what, "/", r));
    return k;
  };
  // 1. Are we all on this machine? (pid on the second line)
  const std::string identity = HostIdentity();
  if (absl::Status s = store.Set(keys("host")[rank], absl::StrCat(identity, "\n", getpid())); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<std::string>> hosts = store.Get(keys("host"), timeout);
  if (!hosts.ok()) return hosts.status();
  std::vector<pid_t> pids;
  for (const std::string& h : *hosts) {
    std::vector<std::string> parts = absl::StrSplit(h, '\n');
    int pid = 0;
    if (identity.empty() || parts.size() != 2 || parts[0] != identity || !absl::SimpleAtoi(parts[1], &pid)) {
      return nullptr;  // not all on one machine: TCP it is
    }
    pids.push_back(pid);
  }

  // 2. Rank 0 creates the segment and says its name and how many shared floats it has
  // ("" when it could not): when /dev/shm has no room for the shared floats, the
  // all-reduce's areas alone still beat TCP.
  std::string name, why;
  int fd = -1;
  if (rank == 0) {
    std::random_device random;
    name = absl::StrCat("/cohort-allreduce-", getpid(), "-", random(), random());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) why = Errno(absl::StrCat("shm_open ", name));
    for (size_t wanted : {shared_floats, size_t{0}}) {
      if (fd < 0) break;
      const size_t bytes = SegmentBytes(size, wanted);
      int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (e == 0) {
        if (wanted < shared_floats) {
          spdlog::warn("no shared memory for the model ({}): the ranks keep a copy each", why);
        }
        why.clear();
        shared_floats = wanted;
        break;
      }
      errno = e;
      why = Errno(absl::StrCat("reserving ", bytes, " bytes in /dev/shm"));
      if (wanted == 0) {
        close(fd);
        shm_unlink(name.c_str());
        fd = -1;
      }
    }
    std::string published = fd >= 0 ? absl::StrCat(name, "\n", shared_floats) : "";
    if (absl::Status s = store.Set("shm/name", published); !s.ok()) return s;
  } else {
    absl::StatusOr<std::vector<std::string>> got = store.Get({"shm/name"}, timeout);
    if (!got.ok()) return got.status();
    std::vector<std::string> parts = absl::StrSplit((*got)[0], '\n');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &shared_floats)) {
      why = "rank 0 could not create the segment";
    } else {
      name = parts[0];
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) why = Errno(absl::StrCat("shm_open ", name));
    }
  }
  const size_t bytes = SegmentBytes(size, shared_floats);

  // 3. Every rank maps it and opens a pidfd per peer, and says whether that worked.
  std::unique_ptr<ShmAllReduce> shm(new ShmAllReduce(rank, size, timeout));
  if (fd >= 0) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      why = Errno("mmap");
    } else {
      shm->segment_ = static_cast<ShmAllReduce::Segment*>(p);
      shm->mapped_bytes_ = bytes;
      shm->slots_ = reinterpret_cast<float*>(static_cast<char*>(p) + HeaderBytes(size));
      shm->result_ = shm->slots_ + size * (kShmChunkBytes / sizeof(float));
      shm->shared_ = {shm->result_ + kShmChunkBytes / sizeof(float), shared_floats};
    }
    for (int r = 0; r < size && why.empty(); ++r) {
      int pidfd = r == rank ? -1 : static_cast<int>(syscall(SYS_pidfd_open, pids[r], 0));
      if (r != rank && pidfd < 0) why = Errno(absl::StrCat("pidfd_open of rank ", r));
      shm->pidfds_.push_back(pidfd);
    }
  }
  if (absl::Status s = store.Set(keys("mapped")[rank], why.empty() ? "ok" : why); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> mapped = store.Get(keys("mapped"), timeout);
  if (rank == 0 && !name.empty()) shm_unlink(name.c_str());  // all have it open, or gave up
  if (!mapped.ok()) return mapped.status();
  for (int r = 0; r < size; ++r) {
    if ((*mapped)[r] != "ok") {
      if (rank == 0) {
        spdlog::warn("all-reduce over TCP: rank {} could not map shared memory: {}", r, (*mapped)[r]);
      }
      return nullptr;
    }
  }
  return shm;
}

}  // namespace cohort::trainer::collective
