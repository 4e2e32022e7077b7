// WatchJob under many watchers: each stream waits on its own job (server/watch_hub.h),
// and --max-watches bounds the streams open at once.

#include <catch2/catch.hpp>

#include <thread>

#include "server/watch_hub.h"
#include "tests/server/job_fixtures.h"
#include "tests/server/job_server_harness.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;

TEST_CASE("A WatchHub wakes the watchers of one job only", "[server][watch]") {
  WatchHub hub;
  WatchHub::Subscription a(&hub, "job-a"), b(&hub, "job-b");
  const uint64_t a0 = a.Generation(), b0 = b.Generation();
  hub.Notify("job-b");
  hub.Notify("job-unwatched");  // no watcher: nothing kept for it
  CHECK(a.Generation() == a0);
  CHECK(b.Generation() == b0 + 1);
  CHECK(hub.watched_jobs() == 2);
  // A's wait runs out; B's returns at once for the notify it has not seen.
  absl::Time start = absl::Now();
  b.Wait(b0, absl::Seconds(30));
  CHECK(absl::Now() - start < absl::Seconds(20));
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    hub.Close();
  });
  a.Wait(a0, absl::Seconds(30));  // Close wakes it
  closer.join();
  CHECK(hub.closed());
}

TEST_CASE("At most --max-watches WatchJob streams are open at once", "[server][watch]") {
  TempDir data, dir;
  testing::WriteData(data.path(), 40, 64, 9);
  CoordinatorOptions options;
  options.max_watches = 2;
  testing::TestServer server(dir.path(), options);
  const std::string id = server.Submit(testing::ClassifierSpec(data.path(), 1)).id();  // stays QUEUED

  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  auto open = [&](Stream& s) {
    v1::WatchJobRequest request;
    request.set_job_id(id);
    s.reader = server.jobs().WatchJob(&s.context, request);
    v1::JobEvent first;
    return s.reader->Read(&first);  // the stored QUEUED event: the stream is being served
  };
  Stream one, two, three;
  REQUIRE(open(one));
  REQUIRE(open(two));
  CHECK_FALSE(open(three));
  grpc::Status refused = three.reader->Finish();
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(refused.error_message().find("--max-watches 2") != std::string::npos);

  // A watcher that leaves frees its place (the server notices within its 500 ms poll).
  one.context.TryCancel();
  one.reader->Finish();
  CHECK(cohort::testing::WaitUntil(
      [&] {
        auto again = std::make_unique<Stream>();
        bool ok = open(*again);
        again->context.TryCancel();
        again->reader->Finish();
        return ok;
      },
      absl::Seconds(10)));
  two.context.TryCancel();
  two.reader->Finish();
}

}  // namespace
}  // namespace cohort::server
