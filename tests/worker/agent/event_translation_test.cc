#include "worker/agent/event_translation.h"

#include <catch2/catch.hpp>

namespace cohort::agent {
namespace {

v1::RankRef Ref(int rank = 1) {
  v1::RankRef ref;
  ref.set_job_id("job-7");
  ref.set_attempt(2);
  ref.set_rank(rank);
  return ref;
}

TEST_CASE("start becomes RankStarted with the steps and samples", "[agent][events]") {
  TrainerLine line = TranslateStdoutLine(
      R"({"event":"start","rank":1,"world":2,"epochs":3,"steps":47,"samples":1500,"device":"cpu","time":1.5})",
      Ref());
  REQUIRE(line.event.has_value());
  CHECK(line.event->rank().job_id() == "job-7");
  CHECK(line.event->rank().attempt() == 2);
  CHECK(line.event->rank().rank() == 1);
  REQUIRE(line.event->has_started());
  CHECK(line.event->started().steps_per_epoch() == 47);
  CHECK(line.event->started().samples() == 1500);
  CHECK_FALSE(line.error_message.has_value());
  CHECK_FALSE(line.checkpoint_file.has_value());
}

TEST_CASE("step becomes StepProgress with its metrics", "[agent][events]") {
  TrainerLine line = TranslateStdoutLine(
      R"({"event":"step","epoch":2,"epochs":3,"step":10,"steps":47,)"
      R"("metrics":{"loss":0.5,"accuracy":0.75},"samples_per_second":1234.5,"time":2})",
      Ref(0));
  REQUIRE(line.event.has_value());
  REQUIRE(line.event->has_step());
  const v1::StepProgress& step = line.event->step();
  CHECK(step.epoch() == 2);
  CHECK(step.epochs() == 3);
  CHECK(step.step() == 10);
  CHECK(step.steps() == 47);
  CHECK(step.samples_per_second() == Approx(1234.5));
  REQUIRE(step.metrics_size() == 2);
  CHECK(step.metrics(0).name() == "accuracy");
  CHECK(step.metrics(0).value() == Approx(0.75));
  CHECK(step.metrics(1).name() == "loss");
  CHECK(step.metrics(1).value() == Approx(0.5));
}

TEST_CASE("epoch_end becomes EpochEnd with seconds as a duration", "[agent][events]") {
  TrainerLine line = TranslateStdoutLine(
      R"({"event":"epoch_end","epoch":1,"epochs":3,"metrics":{"loss":0.4,"val_loss":0.6},)"
      R"("seconds":2.25,"samples_per_second":800,"time":3})",
      Ref(0));
  REQUIRE(line.event.has_value());
  REQUIRE(line.event->has_epoch());
  const v1::EpochEnd& epoch = line.event->epoch();
  CHECK(epoch.epoch() == 1);
  CHECK(epoch.epochs() == 3);
  CHECK(epoch.duration().seconds() == 2);
  CHECK(epoch.duration().nanos() == 250000000);
  CHECK(epoch.samples_per_second() == Approx(800));
  REQUIRE(epoch.metrics_size() == 2);
  CHECK(epoch.metrics(1).name() == "val_loss");
}

TEST_CASE("checkpoint and error are kept for the agent, not forwarded", "[agent][events]") {
  TrainerLine ckpt = TranslateStdoutLine(
      R"({"event":"checkpoint","epoch":3,"path":"/o/checkpoints","file":"/o/checkpoints/ckpt-epoch-000003.zip"})",
      Ref(0));
  CHECK_FALSE(ckpt.event.has_value());
  REQUIRE(ckpt.checkpoint_file.has_value());
  CHECK(*ckpt.checkpoint_file == "/o/checkpoints/ckpt-epoch-000003.zip");

  // An older trainer names only the directory: nothing to upload.
  CHECK_FALSE(TranslateStdoutLine(R"({"event":"checkpoint","epoch":3,"path":"/o/checkpoints"})", Ref())
                  .checkpoint_file.has_value());

  TrainerLine error = TranslateStdoutLine(R"({"event":"error","message":"loss is NaN"})", Ref());
  CHECK_FALSE(error.event.has_value());
  REQUIRE(error.error_message.has_value());
  CHECK(*error.error_message == "loss is NaN");

  TrainerLine done = TranslateStdoutLine(R"({"event":"done","model":"m","history":"h"})", Ref());
  CHECK_FALSE(done.event.has_value());
  CHECK_FALSE(TranslateStdoutLine(R"({"event":"something_new"})", Ref()).event.has_value());
  CHECK_FALSE(TranslateStdoutLine("   ", Ref()).event.has_value());
}

TEST_CASE("garbage on stdout becomes a warning that quotes it", "[agent][events]") {
  for (const char* garbage : {"hello world", "{\"event\":", "[1,2,3]", "{\"no_event\":1}",
                              "{\"event\":42}", "\xff\xfe binary"}) {
    INFO(garbage);
    TrainerLine line = TranslateStdoutLine(garbage, Ref(1));
    REQUIRE(line.event.has_value());
    REQUIRE(line.event->has_log());
    CHECK(line.event->log().level() == v1::LOG_LEVEL_WARNING);
    CHECK(line.event->log().rank() == 1);
    CHECK(line.event->log().text().find("not an event") != std::string::npos);
  }
}

TEST_CASE("mistyped fields fall back to zero instead of failing", "[agent][events]") {
  TrainerLine line = TranslateStdoutLine(
      R"({"event":"step","epoch":"two","step":null,"metrics":{"loss":"x","acc":1}})", Ref());
  REQUIRE(line.event.has_value());
  CHECK(line.event->step().epoch() == 0);
  CHECK(line.event->step().step() == 0);
  REQUIRE(line.event->step().metrics_size() == 1);
  CHECK(line.event->step().metrics(0).name() == "acc");
}

TEST_CASE("stderr lines become LogLines with spdlog's level", "[agent][events]") {
  v1::RankEvent w = TranslateStderrLine("2026-12-03T08:07:34.123 W rank1: slow step", Ref(1));
  REQUIRE(w.has_log());
  CHECK(w.log().level() == v1::LOG_LEVEL_WARNING);
  CHECK(w.log().text() == "slow step");
  CHECK(w.log().rank() == 1);
  CHECK(w.rank().job_id() == "job-7");

  CHECK(TranslateStderrLine("2026-12-03T08:07:34.123 E rank0: boom", Ref()).log().level() ==
        v1::LOG_LEVEL_ERROR);
  CHECK(TranslateStderrLine("2026-12-03T08:07:34.123 I rank0: hi", Ref()).log().level() ==
        v1::LOG_LEVEL_INFO);
  CHECK(TranslateStderrLine("2026-12-03T08:07:34.123 D rank0: dbg", Ref()).log().level() ==
        v1::LOG_LEVEL_DEBUG);
  CHECK(TranslateStderrLine("[2026-12-03 08:07:34.123] [rank0] [warning] w", Ref()).log().level() ==
        v1::LOG_LEVEL_WARNING);
  CHECK(TranslateStderrLine("[2026-12-03 08:07:34.123] [rank0] [error] e", Ref()).log().level() ==
        v1::LOG_LEVEL_ERROR);
  v1::RankEvent fatal = TranslateStderrLine("cohort-worker train: error: job.yaml: bad", Ref());
  CHECK(fatal.log().level() == v1::LOG_LEVEL_ERROR);
  CHECK(fatal.log().text() == "cohort-worker train: error: job.yaml: bad");
  CHECK(TranslateStderrLine("plain text", Ref()).log().level() == v1::LOG_LEVEL_INFO);
  // A long line is cut, not forwarded whole.
  CHECK(TranslateStderrLine(std::string(100000, 'x'), Ref()).log().text().size() < 20000);
}

}  // namespace
}  // namespace cohort::agent
