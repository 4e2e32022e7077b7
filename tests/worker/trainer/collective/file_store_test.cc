#include "worker/trainer/collective/file_store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/support/temp_dir.h"
#include "worker/trainer/collective/prefix_store.h"

namespace cohort::trainer::collective {
namespace {

using cohort::testing::TempDir;

std::unique_ptr<FileStore> OpenStore(const TempDir& dir) {
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(dir.File("store"));
  REQUIRE(store.ok());
  return *std::move(store);
}

TEST_CASE("file store: values come back in key order, binary-safe, replaced by Set",
          "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  std::string binary("a\0b\xff", 4);
  REQUIRE(store->Set("one", binary).ok());
  REQUIRE(store->Set("two", "").ok());
  absl::StatusOr<std::vector<std::string>> got = store->Get({"two", "one"}, absl::Seconds(1));
  REQUIRE(got.ok());
  CHECK(*got == std::vector<std::string>{"", binary});
  REQUIRE(store->Set("one", "again").ok());
  CHECK(store->Get({"one"}, absl::Seconds(1))->front() == "again");
}

TEST_CASE("file store: Get waits for a key another thread sets later", "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  absl::Time start = absl::Now();
  absl::Status set;  // Catch2 assertions are for the test's own thread
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    set = store->Set("late", "here");
  });
  absl::StatusOr<std::vector<std::string>> got = store->Get({"late"}, absl::Seconds(10));
  setter.join();
  REQUIRE(set.ok());
  REQUIRE(got.ok());
  CHECK(got->front() == "here");
  CHECK(absl::Now() - start >= absl::Milliseconds(250));
}

TEST_CASE("file store: Get times out naming the missing keys only", "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  REQUIRE(store->Set("present", "x").ok());
  absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> got =
      store->Get({"present", "rank_1", "rank_2"}, absl::Milliseconds(300));
  absl::Duration took = absl::Now() - start;
  REQUIRE(absl::IsDeadlineExceeded(got.status()));
  INFO(got.status().ToString());
  CHECK(absl::StrContains(got.status().message(),
                          "timed out after 300ms waiting for keys rank_1, rank_2"));
  CHECK(!absl::StrContains(got.status().message(), "present"));
  CHECK(took >= absl::Milliseconds(300));
  CHECK(took < absl::Seconds(3));
}

TEST_CASE("file store: keys with any bytes map to distinct files", "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  std::vector<std::string> keys = {"a/b", "a%2Fb", "a.b", ".hidden", "..", "x y", "a_b", "a-b"};
  for (size_t i = 0; i < keys.size(); ++i) REQUIRE(store->Set(keys[i], std::to_string(i)).ok());
  absl::StatusOr<std::vector<std::string>> got = store->Get(keys, absl::Seconds(1));
  REQUIRE(got.ok());
  for (size_t i = 0; i < keys.size(); ++i) CHECK((*got)[i] == std::to_string(i));
  CHECK(absl::IsInvalidArgument(store->Set("", "x")));
  CHECK(absl::IsInvalidArgument(store->Get({""}, absl::Seconds(1)).status()));
}

TEST_CASE("file store: readers never see a partly written value", "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  REQUIRE(store->Set("v", std::string(1 << 20, 'a')).ok());
  std::atomic<bool> stop{false};
  absl::Status written;
  std::thread writer([&] {
    for (char c = 'b'; !stop && written.ok(); c = c == 'z' ? 'a' : c + 1) {
      written = store->Set("v", std::string(1 << 20, c));
    }
  });
  int torn = 0;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<std::vector<std::string>> got = store->Get({"v"}, absl::Seconds(1));
    REQUIRE(got.ok());
    const std::string& v = got->front();
    if (v.size() != (1u << 20) || v.find_first_not_of(v[0]) != std::string::npos) ++torn;
  }
  stop = true;
  writer.join();
  CHECK(written.ok());
  CHECK(torn == 0);
}

TEST_CASE("file store: a directory that cannot be created is named", "[collective][store]") {
  TempDir dir;
  cohort::testing::WriteFile(dir.File("file"), "not a directory");
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(dir.File("file/store"));
  REQUIRE(absl::IsUnavailable(store.status()));
  CHECK(absl::StrContains(store.status().message(), dir.File("file/store")));
  CHECK(absl::IsInvalidArgument(FileStore::Open("").status()));
}

TEST_CASE("prefix store: namespaces sharing one store do not see each other's keys",
          "[collective][store]") {
  TempDir dir;
  auto store = OpenStore(dir);
  PrefixStore first("job-1/attempt-1", store.get());
  PrefixStore second("job-1/attempt-2", store.get());
  REQUIRE(first.Set("rank_0", "old").ok());
  REQUIRE(second.Set("rank_0", "new").ok());
  CHECK(first.Get({"rank_0"}, absl::Seconds(1))->front() == "old");
  CHECK(second.Get({"rank_0"}, absl::Seconds(1))->front() == "new");
  CHECK(store->Get({"job-1/attempt-2/rank_0"}, absl::Seconds(1))->front() == "new");
  absl::Status missing = second.Get({"rank_1"}, absl::Milliseconds(50)).status();
  CHECK(absl::IsDeadlineExceeded(missing));
  CHECK(absl::StrContains(missing.message(), "job-1/attempt-2/rank_1"));
}

}  // namespace
}  // namespace cohort::trainer::collective
