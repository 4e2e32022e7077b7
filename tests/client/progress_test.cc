#include "client/progress.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "proto/time_convert.h"

namespace cohort::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// Builds a job's event stream with increasing sequence numbers.
class Events {
 public:
  v1::JobEvent State(double at, v1::JobState from, v1::JobState to, const std::string& reason = "",
                     int attempt = 1) {
    v1::JobEvent e = Next(at, attempt);
    e.mutable_state_change()->set_from(from);
    e.mutable_state_change()->set_to(to);
    e.mutable_state_change()->set_reason(reason);
    return e;
  }
  v1::JobEvent Attempt(double at, int attempt) {
    v1::JobEvent e = Next(at, attempt);
    e.mutable_attempt_started()->set_attempt(attempt);
    for (int r = 0; r < 2; ++r) {
      v1::Placement* p = e.mutable_attempt_started()->add_placements();
      p->set_rank(r);
      p->set_worker(r == 0 ? "w1" : "w2");
    }
    return e;
  }
  v1::JobEvent Step(double at, int epoch, int64_t step, int64_t steps, double loss) {
    v1::JobEvent e = Next(at, 1);
    v1::StepProgress* s = e.mutable_step();
    s->set_epoch(epoch);
    s->set_epochs(2);
    s->set_step(step);
    s->set_steps(steps);
    AddMetric(s->add_metrics(), "loss", loss);
    AddMetric(s->add_metrics(), "accuracy", 0.5);
    return e;
  }
  v1::JobEvent Epoch(double at, int epoch, double seconds, bool validation = true) {
    v1::JobEvent e = Next(at, 1);
    v1::EpochEnd* end = e.mutable_epoch();
    end->set_epoch(epoch);
    end->set_epochs(2);
    ToProto(absl::Seconds(seconds), end->mutable_duration());
    end->set_samples_per_second(5120);
    AddMetric(end->add_metrics(), "loss", 0.30123);
    AddMetric(end->add_metrics(), "accuracy", 0.9123);
    if (validation) {
      AddMetric(end->add_metrics(), "val_loss", 0.25);
      AddMetric(end->add_metrics(), "val_accuracy", 0.95);
    }
    return e;
  }
  v1::JobEvent Log(double at, int rank, v1::LogLevel level, const std::string& text) {
    v1::JobEvent e = Next(at, 1);
    e.mutable_log()->set_rank(rank);
    e.mutable_log()->set_level(level);
    e.mutable_log()->set_text(text);
    return e;
  }

 private:
  static void AddMetric(v1::Metric* m, const std::string& name, double value) {
    m->set_name(name);
    m->set_value(value);
  }
  v1::JobEvent Next(double at, int attempt) {
    v1::JobEvent e;
    e.set_job_id("job-7");
    e.set_sequence(++sequence_);
    e.set_attempt(attempt);
    ToProto(kT0 + absl::Seconds(at), e.mutable_time());
    return e;
  }
  int64_t sequence_ = 0;
};

std::string Bar(int filled, int width = 20) {
  std::string out;
  for (int i = 0; i < filled; ++i) out += "━";
  for (int i = filled; i < width; ++i) out += "─";
  return out;
}

ProgressOptions Style(ProgressStyle style) {
  ProgressOptions o;
  o.style = style;
  o.max_restarts = 3;
  return o;
}

TEST_CASE("TTY: a bar redrawn per step, left standing at the epoch's end", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kTty));
  CHECK(r.Render(ev.State(0, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED)) == "job-7: QUEUED\n");
  CHECK(r.Render(ev.State(1, v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING)) ==
        "job-7: STARTING (attempt 1)\n");
  CHECK(r.Render(ev.Attempt(1, 1)) ==
        "job-7: attempt 1 on 2 ranks: rank 0 on w1 (slot 0), rank 1 on w2 (slot 0)\n");
  CHECK(r.Render(ev.State(2, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING)) == "job-7: RUNNING\n");

  // 117 of 234 steps 1.5 s after RUNNING: half a bar, 13ms/step (1.5 s / 117).
  CHECK(r.Render(ev.Step(3.5, 1, 117, 234, 0.33)) ==
        "\r\x1b[2KEpoch 1/2 " + Bar(10) + " 117/234 - 2s 13ms/step - accuracy: 0.5000 - loss: 0.3300");
  // An INFO line from a rank is not shown while watching; a WARNING is, above the bar.
  CHECK(r.Render(ev.Log(3.6, 1, v1::LOG_LEVEL_INFO, "chatter")).empty());
  CHECK(r.Render(ev.Log(3.7, 1, v1::LOG_LEVEL_WARNING, "slow disk")) ==
        "\r\x1b[2K[rank 1] WARNING: slow disk\nEpoch 1/2 " + Bar(10) +
            " 117/234 - 2s 13ms/step - accuracy: 0.5000 - loss: 0.3300");
  CHECK(r.Render(ev.Epoch(5, 1, 3)) ==
        "\r\x1b[2KEpoch 1/2 " + Bar(20) +
            " 234/234 - 3s 13ms/step - accuracy: 0.9123 - loss: 0.3012 - val_accuracy: 0.9500 - "
            "val_loss: 0.2500 - 5120 samples/s\n");
  // The second epoch counts from the first one's end.
  CHECK(r.Render(ev.Step(6, 2, 234, 234, 0.2)) ==
        "\r\x1b[2KEpoch 2/2 " + Bar(20) + " 234/234 - 1s 4ms/step - accuracy: 0.5000 - loss: 0.2000");
  CHECK(r.Close() == "\n");
  CHECK(r.Close().empty());
  CHECK(r.Render(ev.State(7, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)) ==
        "job-7: SUCCEEDED\n");
}

TEST_CASE("TTY: a restart leaves the broken bar and says which restart it is", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kTty));
  r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  r.Render(ev.Step(1, 1, 10, 100, 1.0));
  CHECK(r.Render(ev.State(2, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING,
                          "rank 1 on worker 'w2' exited with code 1: boom")) ==
        "\njob-7: RESTARTING (restart 1 of 3): rank 1 on worker 'w2' exited with code 1: boom\n");
  CHECK(r.Render(ev.State(3, v1::JOB_STATE_RESTARTING, v1::JOB_STATE_STARTING, "", 2)) ==
        "job-7: STARTING (attempt 2)\n");
  CHECK(r.Render(ev.State(4, v1::JOB_STATE_STARTING, v1::JOB_STATE_FAILED, "too many restarts", 2)) ==
        "job-7: FAILED: too many restarts\n");
  CHECK(r.Close().empty());
}

TEST_CASE("TTY: color draws the bar as Keras does", "[client]") {
  Events ev;
  ProgressOptions o = Style(ProgressStyle::kTty);
  o.color = true;
  ProgressRenderer r("job-7", o);
  r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  const std::string line = r.Render(ev.Step(1, 1, 50, 100, 1.0));
  CHECK(line.find("\x1b[32m") != std::string::npos);
  CHECK(line.find(" 50/100 - 1s 20ms/step") != std::string::npos);
}

TEST_CASE("TTY: the redrawn bar never wraps on a narrow terminal", "[client]") {
  Events ev;
  ProgressOptions o = Style(ProgressStyle::kTty);
  o.columns = 30;
  ProgressRenderer r("job-7", o);
  r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  CHECK(r.Render(ev.Step(1, 1, 50, 100, 1.0)) == "\r\x1b[2KEpoch 1/2 " + Bar(10, 19));
  // The epoch's last line stays whole: it is printed once and may wrap.
  CHECK(r.Render(ev.Epoch(2, 1, 2)).size() > 100);
}

TEST_CASE("Plain: one line per epoch and the cluster lines, never a redraw", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kPlain));
  std::string out;
  out += r.Render(ev.State(0, v1::JOB_STATE_QUEUED, v1::JOB_STATE_STARTING));
  out += r.Render(ev.State(1, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  out += r.Render(ev.Step(2, 1, 50, 100, 1.0));
  out += r.Render(ev.Log(2.5, 0, v1::LOG_LEVEL_ERROR, "disk full"));
  out += r.Render(ev.Log(2.6, 0, v1::LOG_LEVEL_INFO, "chatter"));
  out += r.Render(ev.Step(3, 1, 100, 100, 0.5));
  out += r.Render(ev.Epoch(3.2, 1, 2.2, /*validation=*/false));
  out += r.Render(ev.State(4, v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED, "cancelled by local"));
  out += r.Close();
  CHECK(out ==
        "job-7: STARTING (attempt 1)\n"
        "job-7: RUNNING\n"
        "[rank 0] ERROR: disk full\n"
        "Epoch 1/2 - 100/100 - 2s 22ms/step - accuracy: 0.9123 - loss: 0.3012 - 5120 samples/s\n"
        "job-7: CANCELLED: cancelled by local\n");
  CHECK(out.find('\r') == std::string::npos);
  CHECK(out.find('\x1b') == std::string::npos);
}

TEST_CASE("JSON: one parseable object per event per line", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kJson));
  std::string out;
  out += r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  out += r.Render(ev.Step(1, 1, 5, 10, 0.7));
  out += r.Render(ev.Epoch(2, 1, 2));
  out += r.Render(ev.Log(3, -1, v1::LOG_LEVEL_INFO, "hello \"quoted\"\nsecond line"));
  out += r.Close();
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 4);
  std::vector<nlohmann::json> parsed;
  for (const std::string& line : lines) parsed.push_back(nlohmann::json::parse(line));
  CHECK(parsed[0]["job_id"] == "job-7");
  CHECK(parsed[0]["sequence"] == "1");  // int64 as a string, as proto's JSON mapping has it
  CHECK(parsed[0]["state_change"]["to"] == "JOB_STATE_RUNNING");
  CHECK(parsed[1]["step"]["step"] == "5");
  CHECK(parsed[1]["step"]["metrics"][0]["name"] == "loss");
  CHECK(parsed[2]["epoch"]["epoch"] == 1);
  CHECK(parsed[2]["epoch"]["duration"] == "2s");
  CHECK(parsed[3]["log"]["rank"] == -1);
  CHECK(parsed[3]["log"]["text"] == "hello \"quoted\"\nsecond line");
}

TEST_CASE("Logs: every level, no progress", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kLogs));
  std::string out;
  out += r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING));
  out += r.Render(ev.Log(1, 0, v1::LOG_LEVEL_INFO, "loading data"));
  out += r.Render(ev.Step(2, 1, 5, 10, 0.7));
  out += r.Render(ev.Epoch(3, 1, 2));
  out += r.Render(ev.Log(4, -1, v1::LOG_LEVEL_WARNING, "worker w2 is slow"));
  CHECK(out ==
        "job-7: RUNNING\n"
        "[rank 0] loading data\n"
        "[coordinator] WARNING: worker w2 is slow\n");
}

TEST_CASE("Events seen before (a replay after reconnecting) print nothing", "[client]") {
  Events ev;
  ProgressRenderer r("job-7", Style(ProgressStyle::kPlain));
  v1::JobEvent first = ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING);
  v1::JobEvent second = ev.Epoch(1, 1, 1);
  CHECK_FALSE(r.Render(first).empty());
  CHECK_FALSE(r.Render(second).empty());
  CHECK(r.last_sequence() == 2);
  CHECK(r.Render(first).empty());
  CHECK(r.Render(second).empty());
  CHECK(r.last_sequence() == 2);
}

TEST_CASE("JSON with logs_only keeps what `cohort logs` shows", "[client]") {
  Events ev;
  ProgressOptions o = Style(ProgressStyle::kJson);
  o.logs_only = true;
  ProgressRenderer r("job-7", o);
  CHECK_FALSE(r.Render(ev.State(0, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING)).empty());
  CHECK(r.Render(ev.Step(1, 1, 5, 10, 0.7)).empty());
  CHECK(r.Render(ev.Epoch(2, 1, 2)).empty());
  CHECK_FALSE(r.Render(ev.Log(3, 0, v1::LOG_LEVEL_INFO, "x")).empty());
}

}  // namespace
}  // namespace cohort::client
