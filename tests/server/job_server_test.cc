// The job server end to end over gRPC: a real coordinator, fake agents on stubs.

#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "cohort/v1/cluster_service.grpc.pb.h"
#include "proto/time_convert.h"
#include "tests/server/job_fixtures.h"
#include "tests/server/job_server_harness.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;
using testing::ClassifierSpec;
using testing::Expect;
using testing::FakeAgent;
using testing::Rank;
using testing::TestServer;
using testing::WriteData;

struct Env {
  TempDir data;  // the job's arrays
  TempDir dir;   // the coordinator's data directory
  std::unique_ptr<TestServer> server;
  explicit Env(CoordinatorOptions options = {}) {
    WriteData(data.path(), 40, 64, 9);
    server = std::make_unique<TestServer>(dir.path(), options);
  }
};

TEST_CASE("A 2-rank job starts on two workers, runs, succeeds, and is watched", "[server][jobs]") {
  Env env;
  FakeAgent w1("w1", 1), w2("w2", 1);
  w1.Join(*env.server);
  w2.Join(*env.server);
  v1::Job job = env.server->Submit(ClassifierSpec(env.data.path(), 2));
  CHECK(job.state() == v1::JOB_STATE_QUEUED);
  CHECK(job.owner() == "local");
  CHECK(job.spec().model_case() == v1::JobSpec::kModelArtifactId);
  const std::string id = job.id();

  v1::Assignment a1 = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  v1::Assignment a2 = Expect(w2, v1::ASSIGNMENT_ACTION_START);
  std::set<int> ranks = {a1.rank().rank(), a2.rank().rank()};
  CHECK(ranks == std::set<int>{0, 1});
  FakeAgent& rank0 = a1.rank().rank() == 0 ? w1 : w2;
  FakeAgent& rank1 = a1.rank().rank() == 0 ? w2 : w1;
  CHECK(a1.world_size() == 2);
  CHECK(a1.rank().attempt() == 1);
  CHECK(a1.rendezvous_namespace() == id + "/1");
  CHECK_FALSE(a1.resume());
  CHECK(a1.checkpoint_artifact().empty());
  CHECK(a1.spec().model_artifact_id() == job.spec().model_artifact_id());
  REQUIRE(a1.data_artifacts_size() == 1);
  CHECK(a1.data_artifacts(0).artifact_id() == job.spec().model_artifact_id());
  CHECK(env.server->Get(id).state() == v1::JOB_STATE_STARTING);

  {  // The attempt's rendezvous is open.
    grpc::ClientContext set_ctx;
    v1::RendezvousSetRequest set;
    set.set_namespace_(id + "/1");
    set.set_key("rank0");
    set.set_value("127.0.0.1:4000");
    v1::RendezvousSetResponse set_resp;
    REQUIRE(w1.stub().RendezvousSet(&set_ctx, set, &set_resp).ok());
    grpc::ClientContext get_ctx;
    v1::RendezvousGetRequest get;
    get.set_namespace_(id + "/1");
    get.add_keys("rank0");
    ToProto(absl::Seconds(5), get.mutable_timeout());
    v1::RendezvousGetResponse got;
    REQUIRE(w2.stub().RendezvousGet(&get_ctx, get, &got).ok());
    CHECK(got.values(0) == "127.0.0.1:4000");
  }

  REQUIRE(rank0.Started(Rank(id, 1, 0)).ok());
  absl::SleepFor(absl::Milliseconds(200));
  CHECK(env.server->Get(id).state() == v1::JOB_STATE_STARTING);
  REQUIRE(rank1.Started(Rank(id, 1, 1)).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RUNNING));
  {  // Each worker's slot is busy.
    auto cluster = v1::ClusterService::NewStub(env.server->channel());
    grpc::ClientContext ctx;
    v1::ListWorkersResponse workers;
    REQUIRE(cluster->ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok());
    REQUIRE(workers.workers_size() == 2);
    CHECK(workers.workers(0).busy_slots() == 1);
    CHECK(workers.workers(1).busy_slots() == 1);
  }

  v1::RankEvent step;
  *step.mutable_rank() = Rank(id, 1, 0);
  step.mutable_step()->set_epoch(1);
  step.mutable_step()->set_step(3);
  v1::RankEvent log;
  *log.mutable_rank() = Rank(id, 1, 1);
  log.mutable_log()->set_text("hello from rank 1");
  v1::RankEvent stale = log;
  stale.mutable_rank()->set_attempt(7);
  REQUIRE(rank0.Events({step, log, stale}).ok());

  REQUIRE(rank1.Exit(Rank(id, 1, 1), 0).ok());
  CHECK(rank1.Upload(Rank(id, 1, 1), "model.keras", "x").error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  CHECK(rank0.Upload(Rank(id, 1, 0), "../escape", "x").error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
  const std::string model = "model bytes, pretend it is a zip";
  REQUIRE(rank0.Upload(Rank(id, 1, 0), "model.keras", model).ok());
  REQUIRE(rank0.Upload(Rank(id, 1, 0), "history.json", "{}").ok());
  {  // Not downloadable before success.
    grpc::ClientContext ctx;
    v1::DownloadArtifactRequest req;
    req.set_job_id(id);
    req.set_name("model.keras");
    auto reader = env.server->jobs().DownloadArtifact(&ctx, req);
    v1::DataChunk c;
    while (reader->Read(&c)) {
    }
    CHECK(reader->Finish().error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  }
  REQUIRE(rank0.Exit(Rank(id, 1, 0), 0).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_SUCCEEDED));
  REQUIRE(rank0.Exit(Rank(id, 1, 0), 0).ok());  // a duplicate: a no-op
  v1::Job done = env.server->Get(id);
  CHECK(done.restarts() == 0);
  REQUIRE(done.artifacts_size() == 2);
  CHECK(done.artifacts(0).name() == "model.keras");
  CHECK(done.artifacts(0).size_bytes() == static_cast<int64_t>(model.size()));

  std::vector<v1::JobEvent> events = env.server->Watch(id);
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().state_change().to() == v1::JOB_STATE_SUCCEEDED);
  int steps = 0, logs = 0, placements = 0;
  std::vector<v1::JobState> states;
  for (const v1::JobEvent& e : events) {
    if (e.has_step()) ++steps;
    if (e.has_log()) {
      ++logs;
      CHECK(e.log().rank() == 1);
      CHECK(e.log().text() == "hello from rank 1");
    }
    if (e.has_attempt_started()) ++placements;
    if (e.has_state_change()) states.push_back(e.state_change().to());
  }
  CHECK(steps == 1);
  CHECK(logs == 1);
  CHECK(placements == 1);
  CHECK(states == std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING,
                                            v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED});
  // A watcher that resumes gets only what follows.
  std::vector<v1::JobEvent> tail = env.server->Watch(id, events[events.size() - 2].sequence());
  REQUIRE(tail.size() == 1);
  CHECK(tail[0].sequence() == events.back().sequence());
  CHECK(env.server->Watch(id, events.back().sequence()).empty());

  {  // Download from an offset.
    grpc::ClientContext ctx;
    v1::DownloadArtifactRequest req;
    req.set_job_id(id);
    req.set_name("model.keras");
    req.set_offset(6);
    auto reader = env.server->jobs().DownloadArtifact(&ctx, req);
    std::string got;
    v1::DataChunk c;
    while (reader->Read(&c)) got += c.data();
    REQUIRE(reader->Finish().ok());
    CHECK(got == model.substr(6));
  }
  {  // The attempt's rendezvous has ended.
    grpc::ClientContext ctx;
    v1::RendezvousGetRequest get;
    get.set_namespace_(id + "/1");
    get.add_keys("rank0");
    v1::RendezvousGetResponse got;
    grpc::Status s = w1.stub().RendezvousGet(&ctx, get, &got);
    CHECK(s.error_code() == grpc::StatusCode::ABORTED);
    CHECK(s.error_message() == "attempt 1 of job " + id + " has ended");
  }
  {  // A finished job cannot be cancelled.
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(id);
    v1::Job out;
    CHECK(env.server->jobs().CancelJob(&ctx, req, &out).error_code() ==
          grpc::StatusCode::FAILED_PRECONDITION);
  }
}

TEST_CASE("A failed rank restarts the job from its newest checkpoint, then FAILED",
          "[server][jobs]") {
  CoordinatorOptions options;
  options.failure_settle = absl::Milliseconds(500);
  Env env(options);
  FakeAgent w1("w1", 2);
  w1.Join(*env.server);
  v1::JobSpec spec = ClassifierSpec(env.data.path(), 2);
  spec.set_max_restarts(1);
  const std::string id = env.server->Submit(spec).id();
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  REQUIRE(w1.Started(Rank(id, 1, 0)).ok());
  REQUIRE(w1.Started(Rank(id, 1, 1)).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RUNNING));
  REQUIRE(w1.Upload(Rank(id, 1, 0), "checkpoints/ckpt-epoch-000002.zip", "c2").ok());
  REQUIRE(w1.Upload(Rank(id, 1, 0), "checkpoints/ckpt-epoch-000001.zip", "c1").ok());
  REQUIRE(w1.Upload(Rank(id, 1, 0), "checkpoints/ckpt-epoch-000000.zip", "c0").ok());
  {  // Only the newest checkpoint.keep (2 by default) are kept.
    v1::Job job = env.server->Get(id);
    REQUIRE(job.artifacts_size() == 2);
    CHECK(job.artifacts(0).name() == "checkpoints/ckpt-epoch-000002.zip");
    CHECK(job.artifacts(1).name() == "checkpoints/ckpt-epoch-000001.zip");
    CHECK_FALSE(std::filesystem::exists(env.dir.path() +
                                        "/jobs/" + id + "/checkpoints/ckpt-epoch-000000.zip"));
    CHECK(std::filesystem::exists(env.dir.path() + "/jobs/" + id +
                                  "/checkpoints/ckpt-epoch-000001.zip"));
  }

  REQUIRE(w1.Exit(Rank(id, 1, 1), 1, "loss is NaN").ok());
  // Rank 0 is stopped at once; the job waits (up to failure_settle) for its exit.
  CHECK(env.server->Get(id).state() == v1::JOB_STATE_RUNNING);
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RESTARTING));
  v1::Job restarting = env.server->Get(id);
  CHECK(restarting.reason() == "rank 1 on worker 'w1' exited with code 1: loss is NaN");
  CHECK(restarting.restarts() == 1);
  v1::Assignment stop = Expect(w1, v1::ASSIGNMENT_ACTION_STOP);
  CHECK(stop.rank().job_id() == id);
  CHECK(stop.rank().attempt() == 1);
  // Rank 0 still holds its slot: attempt 2 cannot start yet.
  CHECK_FALSE(w1.Next(absl::Milliseconds(1500)).has_value());
  REQUIRE(w1.Upload(Rank(id, 1, 0), "checkpoints/late.zip", "x").error_code() ==
          grpc::StatusCode::FAILED_PRECONDITION);
  REQUIRE(w1.Exit(Rank(id, 1, 0), -1, "", 15).ok());

  v1::Assignment again = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  CHECK(again.rank().attempt() == 2);
  CHECK(again.rendezvous_namespace() == id + "/2");
  CHECK(again.resume());
  CHECK(again.checkpoint_artifact() == "checkpoints/ckpt-epoch-000002.zip");
  CHECK(env.server->Get(id).state() == v1::JOB_STATE_STARTING);

  REQUIRE(w1.Exit(Rank(id, 2, 0), -1, "out of memory", 9).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_FAILED));
  v1::Job failed = env.server->Get(id);
  CHECK(failed.reason() == "rank 0 on worker 'w1' was killed by signal 9: out of memory");
  CHECK(failed.restarts() == 2);
  Expect(w1, v1::ASSIGNMENT_ACTION_STOP);  // rank 1 of attempt 2
  std::vector<v1::JobEvent> events = env.server->Watch(id);
  CHECK(events.back().state_change().to() == v1::JOB_STATE_FAILED);
}

TEST_CASE("Cancel stops every rank and a second cancel is a no-op", "[server][jobs]") {
  Env env;
  FakeAgent w1("w1", 1);
  w1.Join(*env.server);
  const std::string id = env.server->Submit(ClassifierSpec(env.data.path(), 1)).id();
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  auto cancel = [&](const std::string& job_id, v1::Job* out) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(job_id);
    return env.server->jobs().CancelJob(&ctx, req, out);
  };
  v1::Job cancelled;
  REQUIRE(cancel(id, &cancelled).ok());
  CHECK(cancelled.state() == v1::JOB_STATE_CANCELLED);
  CHECK(cancelled.reason() == "cancelled by local");
  v1::Assignment stop = Expect(w1, v1::ASSIGNMENT_ACTION_STOP);
  CHECK(stop.rank().job_id() == id);
  REQUIRE(cancel(id, &cancelled).ok());
  CHECK(cancelled.state() == v1::JOB_STATE_CANCELLED);
  CHECK(cancel("job-000000000000", &cancelled).error_code() == grpc::StatusCode::NOT_FOUND);
  REQUIRE(w1.Exit(Rank(id, 1, 0), -1, "", 15).ok());
  CHECK(env.server->Watch(id).back().state_change().to() == v1::JOB_STATE_CANCELLED);

  // The slot is free again: the next job starts.
  const std::string next = env.server->Submit(ClassifierSpec(env.data.path(), 1)).id();
  CHECK(Expect(w1, v1::ASSIGNMENT_ACTION_START).rank().job_id() == next);
}

TEST_CASE("Every rank uploads its own trace and nothing else, also after the job ended",
          "[server][jobs]") {
  Env env;
  FakeAgent w1("w1", 2);
  w1.Join(*env.server);
  const std::string id = env.server->Submit(ClassifierSpec(env.data.path(), 2)).id();
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  REQUIRE(w1.Started(Rank(id, 1, 0)).ok());
  REQUIRE(w1.Started(Rank(id, 1, 1)).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RUNNING));
  REQUIRE(w1.Upload(Rank(id, 1, 1), "trace/rank-1.json", "{\"traceEvents\": []}").ok());
  for (const char* name : {"trace/rank-0.json", "model.keras", "tensorboard/train/e", "ckpt.zip"}) {
    grpc::Status refused = w1.Upload(Rank(id, 1, 1), name, "x");
    INFO(name);
    CHECK(refused.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(refused.error_message(), "rank 1 may upload only its trace"));
  }
  CHECK(w1.Upload(Rank(id, 1, 2), "trace/rank-2.json", "x").error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext ctx;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  v1::Job cancelled;
  REQUIRE(env.server->jobs().CancelJob(&ctx, cancel, &cancelled).ok());
  // A cancelled (or failed) attempt's ranks still hand in how it went.
  REQUIRE(w1.Upload(Rank(id, 1, 0), "trace/rank-0.json", "{\"traceEvents\": []}").ok());
  REQUIRE(w1.Upload(Rank(id, 1, 0), "tensorboard/train/events.out", "e").ok());
  CHECK(w1.Upload(Rank(id, 1, 0), "model.keras", "m").error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(w1.Upload(Rank(id, 1, 0), "checkpoints/late.zip", "c").error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(w1.Upload(Rank(id, 2, 0), "trace/rank-0.json", "x").error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  std::set<std::string> names;
  const v1::Job ended = env.server->Get(id);
  CHECK(ended.state() == v1::JOB_STATE_CANCELLED);
  for (const v1::ArtifactInfo& a : ended.artifacts()) names.insert(a.name());
  CHECK(names == std::set<std::string>{"trace/rank-0.json", "trace/rank-1.json",
                                       "tensorboard/train/events.out"});
}

TEST_CASE("A lost worker fails the attempt and the job restarts on a healthy worker",
          "[server][jobs]") {
  CoordinatorOptions options;
  options.lease_ttl = absl::Seconds(1);
  Env env(options);
  FakeAgent w1("w1", 1), w2("w2", 1);
  w1.Join(*env.server);
  w2.Join(*env.server);
  const std::string id = env.server->Submit(ClassifierSpec(env.data.path(), 1)).id();
  std::optional<v1::Assignment> on1 = w1.Next(absl::Seconds(10));
  FakeAgent& first = on1 ? w1 : w2;
  FakeAgent& second = on1 ? w2 : w1;
  if (!on1) Expect(w2, v1::ASSIGNMENT_ACTION_START);
  REQUIRE(first.Started(Rank(id, 1, 0)).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RUNNING));
  first.StopHeartbeats();
  v1::Assignment again = Expect(second, v1::ASSIGNMENT_ACTION_START, absl::Seconds(15));
  CHECK(again.rank().attempt() == 2);
  CHECK(again.resume());
  CHECK(env.server->Get(id).restarts() == 1);
  REQUIRE(second.Started(Rank(id, 2, 0)).ok());
  REQUIRE(second.Upload(Rank(id, 2, 0), "model.keras", "m").ok());
  REQUIRE(second.Exit(Rank(id, 2, 0), 0).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_SUCCEEDED));
  std::string reason;
  for (const v1::JobEvent& e : env.server->Watch(id)) {
    if (e.state_change().to() == v1::JOB_STATE_RESTARTING) reason = e.state_change().reason();
  }
  CHECK(reason == "rank 0 on worker '" + first.name() + "' was lost: no heartbeat within the lease");
}

TEST_CASE("An attempt whose ranks never start times out", "[server][jobs]") {
  CoordinatorOptions options;
  options.start_timeout = absl::Seconds(1);
  Env env(options);
  FakeAgent w1("w1", 1);
  w1.Join(*env.server);
  v1::JobSpec spec = ClassifierSpec(env.data.path(), 1);
  spec.set_max_restarts(0);
  const std::string id = env.server->Submit(spec).id();
  Expect(w1, v1::ASSIGNMENT_ACTION_START);
  Expect(w1, v1::ASSIGNMENT_ACTION_STOP, absl::Seconds(5));
  REQUIRE(w1.Exit(Rank(id, 1, 0), -1, "stopped before the trainer started", 15).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_FAILED));
  CHECK(env.server->Get(id).reason() ==
        "attempt 1 did not start within 1s: ranks not started: 0 (worker 'w1')");
}

TEST_CASE("A lost worker, not its peers' failed collectives, is named as the cause",
          "[server][jobs]") {
  CoordinatorOptions options;
  options.lease_ttl = absl::Seconds(1);
  Env env(options);
  FakeAgent w1("w1", 1), w2("w2", 1);
  w1.Join(*env.server);
  w2.Join(*env.server);
  v1::JobSpec spec = ClassifierSpec(env.data.path(), 2);
  spec.set_max_restarts(0);
  const std::string id = env.server->Submit(spec).id();
  v1::Assignment a1 = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  Expect(w2, v1::ASSIGNMENT_ACTION_START);
  FakeAgent& survivor = a1.rank().rank() == 0 ? w1 : w2;
  FakeAgent& victim = a1.rank().rank() == 0 ? w2 : w1;
  REQUIRE(survivor.Started(Rank(id, 1, 0)).ok());
  REQUIRE(victim.Started(Rank(id, 1, 1)).ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_RUNNING));
  victim.StopHeartbeats();
  REQUIRE(survivor.Exit(Rank(id, 1, 0), 1, "all-reduce failed: connection closed (peer died?)").ok());
  REQUIRE(env.server->WaitForState(id, v1::JOB_STATE_FAILED));
  CHECK(env.server->Get(id).reason() ==
        "rank 1 on worker '" + victim.name() + "' was lost: no heartbeat within the lease");
  bool logged = false;
  for (const v1::JobEvent& e : env.server->Watch(id)) {
    logged = logged || (e.log().rank() == -1 && absl::StrContains(e.log().text(), "peer died"));
  }
  CHECK(logged);
}

TEST_CASE("Submit: dry run, idempotency, owner, queue limit, uploads, bad input",
          "[server][jobs]") {
  CoordinatorOptions options;
  options.max_queued_jobs = 2;
  Env env(options);
  v1::JobService::Stub& jobs = env.server->jobs();
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = ClassifierSpec(env.data.path(), 1);
    req.set_dry_run(true);
    v1::SubmitJobResponse resp;
    REQUIRE(jobs.SubmitJob(&ctx, req, &resp).ok());
    CHECK(resp.job().id().empty());
    CHECK(resp.job().spec().compile().optimizer().kind() == v1::OPTIMIZER_KIND_RMSPROP);
  }
  {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    v1::ListJobsResponse resp;
    REQUIRE(jobs.ListJobs(&ctx, req, &resp).ok());
    CHECK(resp.jobs_size() == 0);
  }
  // Data uploaded first, then named by artifact id.
  auto upload = [&](const std::string& file) {
    grpc::ClientContext ctx;
    v1::UploadDataResponse resp;
    auto writer = jobs.UploadData(&ctx, &resp);
    v1::UploadChunk chunk;
    chunk.mutable_header()->set_file_name("x.npy");
    chunk.set_data(cohort::testing::ReadFile(file));
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    INFO(s.error_message());
    REQUIRE(s.ok());
    return resp.artifact_id();
  };
  v1::JobSpec spec = ClassifierSpec(env.data.path(), 1);
  spec.mutable_data()->mutable_x()->set_artifact_id(upload(env.data.File("x.npy")));
  spec.mutable_data()->mutable_y()->set_artifact_id(upload(env.data.File("y.npy")));
  v1::Job a = env.server->Submit(spec, "key-1");
  CHECK(env.server->Submit(spec, "key-1").id() == a.id());
  {
    grpc::ClientContext ctx;
    // Metadata cannot choose the owner: without authentication every job is "local"'s.
    ctx.AddMetadata("x-cohort-user", "alice");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitJobResponse resp;
    REQUIRE(jobs.SubmitJob(&ctx, req, &resp).ok());
    CHECK(resp.job().owner() == "local");
  }
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitJobResponse resp;
    grpc::Status s = jobs.SubmitJob(&ctx, req, &resp);
    CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK(s.error_message() ==
          "the queue is full: 2 jobs are queued or running (--max-queued-jobs 2); submit again "
          "later");
  }
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = ClassifierSpec(env.data.path(), 1, 32);
    v1::SubmitJobResponse resp;
    grpc::Status s = jobs.SubmitJob(&ctx, req, &resp);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message() == "data.x: layer 'dense' expects 32 features, data has 64");
  }
  {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id("job-nope");
    v1::Job out;
    CHECK(jobs.GetJob(&ctx, req, &out).error_code() == grpc::StatusCode::NOT_FOUND);
  }
  // Agents fetch uploaded data by id, from an offset.
  FakeAgent w1("w1", 1);
  w1.Join(*env.server);
  v1::Assignment start = Expect(w1, v1::ASSIGNMENT_ACTION_START);
  CHECK(start.data_artifacts_size() == 3);  // the model, x, y
  grpc::ClientContext ctx;
  v1::FetchDataRequest fetch;
  fetch.set_artifact_id(spec.data().x().artifact_id());
  fetch.set_offset(10);
  auto reader = w1.stub().FetchData(&ctx, fetch);
  std::string got;
  v1::DataChunk c;
  while (reader->Read(&c)) got += c.data();
  REQUIRE(reader->Finish().ok());
  CHECK(got == cohort::testing::ReadFile(env.data.File("x.npy")).substr(10));
}

}  // namespace
}  // namespace cohort::server
