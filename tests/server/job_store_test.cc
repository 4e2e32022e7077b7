#include "server/job_store.h"

#include <catch2/catch.hpp>

#include <set>

#include "proto/time_convert.h"
#include "tests/support/temp_dir.h"

namespace cohort::server {
namespace {

using cohort::testing::TempDir;

v1::JobSpec Spec(const std::string& name, int priority = 0, int workers = 1,
                 v1::DeviceType device = v1::DEVICE_TYPE_CPU) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_keras_path("/shared/model.keras");
  spec.set_priority(priority);
  spec.mutable_resources()->set_workers(workers);
  spec.mutable_resources()->set_device(device);
  spec.mutable_fit()->set_epochs(3);
  return spec;
}

struct Fixture {
  TempDir dir;
  ManualClock clock;
  std::unique_ptr<Database> db;
  std::unique_ptr<JobStore> store;

  Fixture() { Reopen(); }
  // A coordinator restart: a new connection and a new store over the same file.
  void Reopen() {
    store.reset();
    db.reset();
    db = *Database::Open(dir.File("cohort.db"));
    store = *JobStore::Create(db.get(), &clock);
  }
  v1::Job Insert(const std::string& name, int priority = 0, const std::string& key = "",
                 const std::string& owner = "alice") {
    auto job = store->Insert(Spec(name, priority), key, owner);
    REQUIRE(job.ok());
    clock.Advance(absl::Seconds(1));
    return *job;
  }
};

std::vector<std::string> Names(const v1::ListJobsResponse& r) {
  std::vector<std::string> out;
  for (const auto& j : r.jobs()) out.push_back(j.spec().name());
  return out;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("JobStore inserts a queued job with its first event, and gets it", "[server]") {
  Fixture f;
  absl::Time created = f.clock.Now();
  v1::Job job = f.Insert("mnist", 2);
  CHECK(job.id().rfind("job-", 0) == 0);
  CHECK(job.id().size() == 16);
  CHECK(job.state() == v1::JOB_STATE_QUEUED);
  CHECK(job.owner() == "alice");
  CHECK(job.attempt() == 0);
  CHECK(job.last_sequence() == 1);
  CHECK(FromProto(job.created_at()) == created);

  auto got = f.store->Get(job.id());
  REQUIRE(got.ok());
  CHECK(got->SerializeAsString() == job.SerializeAsString());
  CHECK(got->spec().keras_path() == "/shared/model.keras");

  auto events = f.store->Events(job.id(), 0);
  REQUIRE(events.ok());
  REQUIRE(events->size() == 1);
  const v1::JobEvent& e = (*events)[0];
  CHECK(e.job_id() == job.id());
  CHECK(e.sequence() == 1);
  CHECK(e.state_change().from() == v1::JOB_STATE_UNSPECIFIED);
  CHECK(e.state_change().to() == v1::JOB_STATE_QUEUED);
  CHECK(FromProto(e.time()) == created);
}

TEST_CASE("JobStore ids are unique", "[server]") {
  Fixture f;
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) ids.insert(f.Insert("j" + std::to_string(i)).id());
  CHECK(ids.size() == 50);
}

TEST_CASE("JobStore refuses a spec carrying model bytes", "[server]") {
  Fixture f;
  v1::JobSpec spec = Spec("m");
  spec.set_keras_file("PK\x03\x04");
  auto job = f.store->Insert(spec, "", "alice");
  CHECK(job.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Message(job.status()).find("spec.keras_file") != std::string::npos);
  spec.set_config_json("{}");
  CHECK(f.store->Insert(spec, "", "alice").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(*f.store->CountActive() == 0);
}

TEST_CASE("JobStore answers NOT_FOUND for an unknown job", "[server]") {
  Fixture f;
  auto got = f.store->Get("job-nope");
  CHECK(got.status().code() == absl::StatusCode::kNotFound);
  CHECK(Message(got.status()) == "job 'job-nope' not found");
  CHECK(f.store->Events("job-nope", 0).status().code() == absl::StatusCode::kNotFound);
  CHECK(f.store->Transition("job-nope", v1::JOB_STATE_CANCELLED, "x").status().code() ==
        absl::StatusCode::kNotFound);
  v1::JobEvent e;
  e.mutable_log()->set_text("hi");
  CHECK(f.store->AppendEvent("job-nope", e).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("JobStore lists newest first, page by page", "[server]") {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.Insert("j" + std::to_string(i));

  auto all = f.store->List({}, 0, "");
  REQUIRE(all.ok());
  CHECK(Names(*all) == std::vector<std::string>{"j4", "j3", "j2", "j1", "j0"});
  CHECK(all->next_page_token().empty());

  std::vector<std::string> paged;
  std::string token;
  int pages = 0;
  do {
    auto page = f.store->List({}, 2, token);
    REQUIRE(page.ok());
    for (const auto& n : Names(*page)) paged.push_back(n);
    token = page->next_page_token();
    ++pages;
  } while (!token.empty());
  CHECK(pages == 3);
  CHECK(paged == Names(*all));

  // Exactly a page's worth leaves no token.
  auto exact = f.store->List({}, 5, "");
  REQUIRE(exact.ok());
  CHECK(exact->jobs_size() == 5);
  CHECK(exact->next_page_token().empty());

  CHECK(f.store->List({}, 2, "garbage!").status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("JobStore lists by state", "[server]") {
  Fixture f;
  v1::Job a = f.Insert("a");
  f.Insert("b");
  REQUIRE(f.store->Transition(a.id(), v1::JOB_STATE_CANCELLED, "user").ok());
  auto cancelled = f.store->List({v1::JOB_STATE_CANCELLED}, 0, "");
  REQUIRE(cancelled.ok());
  CHECK(Names(*cancelled) == std::vector<std::string>{"a"});
  auto either = f.store->List({v1::JOB_STATE_CANCELLED, v1::JOB_STATE_QUEUED}, 0, "");
  REQUIRE(either.ok());
  CHECK(Names(*either) == std::vector<std::string>{"b", "a"});
}

TEST_CASE("JobStore returns the existing job for a reused idempotency key", "[server]") {
  Fixture f;
  v1::Job first = f.Insert("a", 0, "key-1");
  v1::Job again = f.Insert("a-retried", 0, "key-1");
  CHECK(again.id() == first.id());
  CHECK(again.spec().name() == "a");
  // Per owner: another owner's same key is a new job; no key never dedups.
  CHECK(f.Insert("b", 0, "key-1", "bob").id() != first.id());
  CHECK(f.Insert("c").id() != f.Insert("c").id());
  CHECK(f.store->List({}, 0, "")->jobs_size() == 4);
  CHECK(*f.store->CountActive() == 4);
}

TEST_CASE("JobStore queues by priority, then first come first served", "[server]") {
  Fixture f;
  v1::Job low1 = f.Insert("low1", 0);
  v1::Job high1 = f.Insert("high1", 5);
  v1::Job low2 = f.Insert("low2", 0);
  v1::Job high2 = f.Insert("high2", 5);
  auto gpu = f.store->Insert(Spec("gpu", 1, 4, v1::DEVICE_TYPE_CUDA), "", "alice");
  REQUIRE(gpu.ok());
  v1::Job started = f.Insert("started", 9);
  REQUIRE(f.store->Transition(started.id(), v1::JOB_STATE_STARTING, "").ok());

  auto queued = f.store->Queued();
  REQUIRE(queued.ok());
  std::vector<std::string> ids;
  for (const auto& q : *queued) ids.push_back(q.id);
  CHECK(ids == std::vector<std::string>{high1.id(), high2.id(), gpu->id(), low1.id(), low2.id()});
  CHECK((*queued)[0].priority == 5);
  CHECK((*queued)[0].sequence < (*queued)[1].sequence);
  CHECK((*queued)[0].ranks == 1);
  CHECK((*queued)[0].kind == SlotKind::kCpu);
  CHECK((*queued)[2].ranks == 4);
  CHECK((*queued)[2].kind == SlotKind::kGpu);
}

TEST_CASE("JobStore follows the lifecycle, recording each change", "[server]") {
  Fixture f;
  v1::Job job = f.Insert("a");
  absl::Time start = f.clock.Now();
  auto starting = f.store->Transition(job.id(), v1::JOB_STATE_STARTING, "scheduled",
                                      [](v1::Job& j) {
                                        j.set_attempt(1);
                                        auto* p = j.add_placements();
                                        p->set_rank(0);
                                        p->set_worker("w1");
                                        j.set_state(v1::JOB_STATE_SUCCEEDED);  // undone
                                      });
  REQUIRE(starting.ok());
  CHECK(starting->state() == v1::JOB_STATE_STARTING);
  CHECK(starting->attempt() == 1);
  CHECK(starting->placements_size() == 1);
  CHECK(FromProto(starting->started_at()) == start);
  CHECK_FALSE(starting->has_finished_at());
  CHECK(starting->last_sequence() == 2);

  f.clock.Advance(absl::Seconds(1));
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_RUNNING, "all ranks joined").ok());
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_RESTARTING, "rank 0 lost",
                              [](v1::Job& j) { j.set_restarts(j.restarts() + 1); })
              .ok());
  f.clock.Advance(absl::Seconds(1));
  auto again = f.store->Transition(job.id(), v1::JOB_STATE_STARTING, "new attempt",
                                   [](v1::Job& j) { j.set_attempt(2); });
  REQUIRE(again.ok());
  CHECK(FromProto(again->started_at()) == start);  // the first start stays
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_RUNNING, "").ok());
  f.clock.Advance(absl::Seconds(1));
  auto done = f.store->Transition(job.id(), v1::JOB_STATE_SUCCEEDED, "done");
  REQUIRE(done.ok());
  CHECK(done->restarts() == 1);
  CHECK(done->attempt() == 2);
  CHECK(FromProto(done->finished_at()) == f.clock.Now());
  CHECK(done->reason() == "done");
  CHECK(done->last_sequence() == 7);

  auto got = f.store->Get(job.id());
  REQUIRE(got.ok());
  CHECK(got->SerializeAsString() == done->SerializeAsString());

  auto events = f.store->Events(job.id(), 0);
  REQUIRE(events.ok());
  std::vector<v1::JobState> to;
  for (const auto& e : *events) to.push_back(e.state_change().to());
  CHECK(to == std::vector<v1::JobState>{v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING,
                                        v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING,
                                        v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
                                        v1::JOB_STATE_SUCCEEDED});
  CHECK(events->back().state_change().from() == v1::JOB_STATE_RUNNING);
  CHECK(events->back().state_change().reason() == "done");
  CHECK(events->back().attempt() == 2);
}

TEST_CASE("JobStore refuses an illegal transition and changes nothing", "[server]") {
  Fixture f;
  v1::Job job = f.Insert("a");
  auto bad = f.store->Transition(job.id(), v1::JOB_STATE_RUNNING, "skip");
  REQUIRE(bad.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Message(bad.status()).find("QUEUED") != std::string::npos);
  CHECK(Message(bad.status()).find("RUNNING") != std::string::npos);
  CHECK(f.store->Get(job.id())->SerializeAsString() == job.SerializeAsString());
  CHECK(f.store->Events(job.id(), 0)->size() == 1);

  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_CANCELLED, "user").ok());
  v1::Job cancelled = *f.store->Get(job.id());
  for (v1::JobState to : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING,
                          v1::JOB_STATE_CANCELLED, v1::JOB_STATE_SUCCEEDED}) {
    CHECK(f.store->Transition(job.id(), to, "").status().code() ==
          absl::StatusCode::kFailedPrecondition);
  }
  CHECK(f.store->Get(job.id())->SerializeAsString() == cancelled.SerializeAsString());
  CHECK(f.store->Events(job.id(), 0)->size() == 2);
  CHECK(*f.store->CountActive() == 0);
}

TEST_CASE("JobStore's lifecycle table", "[server]") {
  using S = v1::JobState;
  const S q = v1::JOB_STATE_QUEUED, st = v1::JOB_STATE_STARTING, r = v1::JOB_STATE_RUNNING,
          re = v1::JOB_STATE_RESTARTING, ok = v1::JOB_STATE_SUCCEEDED,
          fail = v1::JOB_STATE_FAILED, c = v1::JOB_STATE_CANCELLED;
  CHECK(JobStore::IsLegal(q, st));
  CHECK(JobStore::IsLegal(q, c));
  CHECK_FALSE(JobStore::IsLegal(q, r));
  CHECK_FALSE(JobStore::IsLegal(q, fail));
  CHECK(JobStore::IsLegal(st, r));
  CHECK(JobStore::IsLegal(st, re));
  CHECK(JobStore::IsLegal(st, fail));
  CHECK(JobStore::IsLegal(st, q));
  CHECK_FALSE(JobStore::IsLegal(st, ok));
  CHECK(JobStore::IsLegal(r, ok));
  CHECK(JobStore::IsLegal(r, fail));
  CHECK(JobStore::IsLegal(r, re));
  CHECK(JobStore::IsLegal(r, q));
  CHECK_FALSE(JobStore::IsLegal(r, st));
  CHECK(JobStore::IsLegal(re, st));
  CHECK(JobStore::IsLegal(re, q));
  CHECK(JobStore::IsLegal(re, fail));
  CHECK(JobStore::IsLegal(re, c));
  CHECK_FALSE(JobStore::IsLegal(re, ok));
  for (S final_state : {ok, fail, c}) {
    for (S to : {q, st, r, re, ok, fail, c}) CHECK_FALSE(JobStore::IsLegal(final_state, to));
  }
  for (S s : {q, st, r, re}) CHECK_FALSE(JobStore::IsLegal(s, s));
}

TEST_CASE("JobStore numbers events strictly, and Events resumes after one", "[server]") {
  Fixture f;
  v1::Job job = f.Insert("a");
  v1::Job other = f.Insert("b");
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_STARTING, "",
                              [](v1::Job& j) { j.set_attempt(1); })
              .ok());
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_RUNNING, "").ok());
  for (int i = 0; i < 5; ++i) {
    v1::JobEvent e;
    e.mutable_log()->set_text("line " + std::to_string(i));
    auto stored = f.store->AppendEvent(job.id(), e);
    REQUIRE(stored.ok());
    CHECK(stored->sequence() == 4 + i);
    CHECK(stored->attempt() == 1);
    CHECK(stored->job_id() == job.id());
  }
  v1::JobEvent epoch;
  epoch.mutable_epoch()->set_epoch(1);
  epoch.mutable_epoch()->set_epochs(3);
  auto* m = epoch.mutable_epoch()->add_metrics();
  m->set_name("loss");
  m->set_value(0.5);
  REQUIRE(f.store->AppendEvent(job.id(), epoch).ok());

  auto got = f.store->Get(job.id());
  REQUIRE(got.ok());
  CHECK(got->last_sequence() == 9);
  CHECK(got->last_epoch().epoch() == 1);
  CHECK(got->last_epoch().metrics(0).value() == 0.5);

  auto all = f.store->Events(job.id(), 0);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 9);
  for (size_t i = 0; i < all->size(); ++i) CHECK((*all)[i].sequence() == int64_t(i) + 1);

  auto after = f.store->Events(job.id(), 6);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 3);
  CHECK((*after)[0].sequence() == 7);
  CHECK((*after)[0].log().text() == "line 3");
  CHECK((*after)[2].has_epoch());
  auto limited = f.store->Events(job.id(), 2, 2);
  REQUIRE(limited.ok());
  REQUIRE(limited->size() == 2);
  CHECK((*limited)[1].sequence() == 4);
  CHECK(f.store->Events(job.id(), 9)->empty());
  // The other job's events are its own.
  CHECK(f.store->Events(other.id(), 0)->size() == 1);

  v1::JobEvent change;
  change.mutable_state_change()->set_to(v1::JOB_STATE_SUCCEEDED);
  CHECK(f.store->AppendEvent(job.id(), change).status().code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_SUCCEEDED, "").ok());
  v1::JobEvent late;
  late.mutable_log()->set_text("late");
  CHECK(f.store->AppendEvent(job.id(), late).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(f.store->Events(job.id(), 0)->back().state_change().to() == v1::JOB_STATE_SUCCEEDED);
}

TEST_CASE("JobStore keeps every job and event across a restart", "[server]") {
  Fixture f;
  v1::Job queued = f.Insert("queued", 1, "k");
  v1::Job running = f.Insert("running");
  v1::Job done = f.Insert("done");
  REQUIRE(f.store->Transition(running.id(), v1::JOB_STATE_STARTING, "").ok());
  REQUIRE(f.store->Transition(running.id(), v1::JOB_STATE_RUNNING, "").ok());
  v1::JobEvent e;
  e.mutable_log()->set_text("hello");
  REQUIRE(f.store->AppendEvent(running.id(), e).ok());
  REQUIRE(f.store->Transition(done.id(), v1::JOB_STATE_CANCELLED, "user").ok());
  std::vector<v1::Job> before;
  std::vector<std::vector<v1::JobEvent>> events_before;
  for (const auto& j : {queued, running, done}) {
    before.push_back(*f.store->Get(j.id()));
    events_before.push_back(*f.store->Events(j.id(), 0));
  }

  f.Reopen();
  for (size_t i = 0; i < before.size(); ++i) {
    auto got = f.store->Get(before[i].id());
    REQUIRE(got.ok());
    CHECK(got->SerializeAsString() == before[i].SerializeAsString());
    auto events = f.store->Events(before[i].id(), 0);
    REQUIRE(events.ok());
    REQUIRE(events->size() == events_before[i].size());
    for (size_t k = 0; k < events->size(); ++k) {
      CHECK((*events)[k].SerializeAsString() == events_before[i][k].SerializeAsString());
    }
  }
  auto unfinished = f.store->Unfinished();
  REQUIRE(unfinished.ok());
  REQUIRE(unfinished->size() == 1);
  CHECK((*unfinished)[0].id() == running.id());
  CHECK(*f.store->CountActive() == 2);
  CHECK(f.store->Queued()->size() == 1);
  // The idempotency key survives too.
  CHECK(f.Insert("queued-again", 1, "k").id() == queued.id());
  // Recovery requeues the running job; numbering continues.
  auto requeued = f.store->Transition(running.id(), v1::JOB_STATE_QUEUED, "coordinator restart");
  REQUIRE(requeued.ok());
  CHECK(requeued->last_sequence() == 5);
  CHECK(f.store->Queued()->size() == 2);
}

TEST_CASE("JobStore reports a corrupt stored spec as an error naming the job", "[server]") {
  Fixture f;
  v1::Job good = f.Insert("good");
  v1::Job bad = f.Insert("bad");
  REQUIRE(f.db->Exec("UPDATE jobs SET spec = x'ffffffffffff' WHERE id = '" + bad.id() + "'").ok());
  auto got = f.store->Get(bad.id());
  REQUIRE(got.status().code() == absl::StatusCode::kInternal);
  CHECK(Message(got.status()).find(bad.id()) != std::string::npos);
  CHECK(Message(got.status()).find("corrupt") != std::string::npos);
  CHECK(f.store->List({}, 0, "").status().code() == absl::StatusCode::kInternal);
  CHECK(f.store->Transition(bad.id(), v1::JOB_STATE_CANCELLED, "").status().code() ==
        absl::StatusCode::kInternal);
  CHECK(f.store->Get(good.id()).ok());
  // The failed transition rolled back: a later one still works.
  CHECK(f.store->Transition(good.id(), v1::JOB_STATE_CANCELLED, "").ok());

  REQUIRE(f.db->Exec("UPDATE job_events SET event = x'ffffffff' WHERE job_id = '" + good.id() +
                     "'")
              .ok());
  auto events = f.store->Events(good.id(), 0);
  CHECK(events.status().code() == absl::StatusCode::kInternal);
  CHECK(Message(events.status()).find(good.id()) != std::string::npos);
}

TEST_CASE("JobStore counts active jobs", "[server]") {
  Fixture f;
  CHECK(*f.store->CountActive() == 0);
  v1::Job a = f.Insert("a");
  v1::Job b = f.Insert("b");
  f.Insert("c");
  CHECK(*f.store->CountActive() == 3);
  REQUIRE(f.store->Transition(a.id(), v1::JOB_STATE_STARTING, "").ok());
  CHECK(*f.store->CountActive() == 3);
  REQUIRE(f.store->Transition(a.id(), v1::JOB_STATE_FAILED, "crash").ok());
  REQUIRE(f.store->Transition(b.id(), v1::JOB_STATE_CANCELLED, "user").ok());
  CHECK(*f.store->CountActive() == 1);
}

TEST_CASE("A version-1 database gains the job tables", "[server]") {
  TempDir dir;
  std::string path = dir.File("cohort.db");
  {
    auto db = Database::Open(path);
    REQUIRE(db.ok());
    // Make it look like a database written by a cohort-server of schema version 1.
    REQUIRE((*db)->Exec("DROP TABLE uploads; DROP TABLE job_events; DROP TABLE jobs; "
                        "PRAGMA user_version=1;").ok());
    REQUIRE((*db)->Exec("INSERT INTO workers VALUES ('w', 'a', x'', 1, 'v', 1, 2)").ok());
  }
  auto db = Database::Open(path);
  REQUIRE(db.ok());
  ManualClock clock;
  auto store = JobStore::Create(db->get(), &clock);
  REQUIRE(store.ok());
  REQUIRE((*store)->Insert(Spec("a"), "", "alice").ok());
  auto stmt = (*db)->Prepare("SELECT count(*) FROM workers");
  REQUIRE(stmt.ok());
  REQUIRE(*(*stmt)->Step());
  CHECK((*stmt)->ColumnInt(0) == 1);
}

TEST_CASE("JobStore Update edits a job without a state change or event", "[server]") {
  Fixture f;
  v1::Job job = f.Insert("a");
  auto updated = f.store->Update(job.id(), [](v1::Job& j) {
    j.add_artifacts()->set_name("model.keras");
    j.set_restarts(2);
    j.set_state(v1::JOB_STATE_RUNNING);  // undone
    j.set_last_sequence(99);             // undone
  });
  REQUIRE(updated.ok());
  v1::Job got = *f.store->Get(job.id());
  CHECK(got.state() == v1::JOB_STATE_QUEUED);
  CHECK(got.restarts() == 2);
  REQUIRE(got.artifacts_size() == 1);
  CHECK(got.last_sequence() == 1);
  CHECK(f.store->Events(job.id(), 0)->size() == 1);
  REQUIRE(f.store->Transition(job.id(), v1::JOB_STATE_CANCELLED, "").ok());
  CHECK(f.store->Update(job.id(), nullptr).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(f.store->Update("job-none", nullptr).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("JobStore Waiting lists QUEUED and RESTARTING jobs in schedule order", "[server]") {
  Fixture f;
  v1::Job low = f.Insert("low", 0);
  v1::Job high = f.Insert("high", 5);
  v1::Job restarting = f.Insert("restarting", 0);
  REQUIRE(f.store->Transition(restarting.id(), v1::JOB_STATE_STARTING, "").ok());
  REQUIRE(f.store->Transition(restarting.id(), v1::JOB_STATE_RESTARTING, "rank lost").ok());
  v1::Job running = f.Insert("running", 9);
  REQUIRE(f.store->Transition(running.id(), v1::JOB_STATE_STARTING, "").ok());
  auto waiting = f.store->Waiting();
  REQUIRE(waiting.ok());
  std::vector<std::string> ids;
  for (const QueuedJob& q : *waiting) ids.push_back(q.id);
  CHECK(ids == std::vector<std::string>{high.id(), low.id(), restarting.id()});
  CHECK(f.store->Queued()->size() == 2);
}

TEST_CASE("JobStore Waiting reads at most the jobs the free slots of each kind can take",
          "[server]") {
  Fixture f;
  // In schedule order: gpu-a (priority 5), cpu-1, gpu-b, cpu-2, cpu-3.
  std::vector<std::string> names = {"cpu-1", "gpu-b", "cpu-2", "cpu-3"};
  REQUIRE(f.store->Insert(Spec("gpu-a", 5, 1, v1::DEVICE_TYPE_CUDA), "", "alice").ok());
  for (const std::string& name : names) {
    v1::DeviceType device = name[0] == 'g' ? v1::DEVICE_TYPE_CUDA : v1::DEVICE_TYPE_CPU;
    REQUIRE(f.store->Insert(Spec(name, 0, 1, device), "", "alice").ok());
    f.clock.Advance(absl::Seconds(1));
  }
  auto names_of = [&](int64_t cpu, int64_t gpu) {
    std::vector<std::string> out;
    auto waiting = f.store->Waiting(cpu, gpu);
    INFO(waiting.status().ToString());
    REQUIRE(waiting.ok());
    for (const QueuedJob& q : *waiting) {
      auto job = f.store->Get(q.id);
      REQUIRE(job.ok());
      out.push_back(job->spec().name());
    }
    return out;
  };
  CHECK(names_of(2, 1) == std::vector<std::string>{"gpu-a", "cpu-1", "cpu-2"});
  CHECK(names_of(1, 0) == std::vector<std::string>{"cpu-1"});
  CHECK(names_of(0, 5) == std::vector<std::string>{"gpu-a", "gpu-b"});
  CHECK(names_of(0, 0).empty());
  CHECK(names_of(10, 10) == std::vector<std::string>{"gpu-a", "cpu-1", "gpu-b", "cpu-2", "cpu-3"});
  CHECK(f.store->Waiting()->size() == 5);
}

}  // namespace
}  // namespace cohort::server
