#include "client/job_format.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "client/keras_format.h"
#include "client/table.h"
#include "proto/time_convert.h"

namespace cohort::client {
namespace {

bool IsSet(const google::protobuf::Timestamp& t) { return t.seconds() != 0 || t.nanos() != 0; }

std::string Rfc3339(const google::protobuf::Timestamp& t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProto(t), absl::UTCTimeZone());
}

std::string EpochSummary(const v1::EpochEnd& epoch) {
  std::string out = absl::StrCat(epoch.epoch(), "/", epoch.epochs());
  if (epoch.has_duration()) {
    absl::StrAppend(&out, " - ", FormatElapsed(absl::ToDoubleSeconds(FromProto(epoch.duration()))));
  }
  absl::StrAppend(&out, FormatMetrics(epoch.metrics()));
  return out;
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED: return "QUEUED";
    case v1::JOB_STATE_STARTING: return "STARTING";
    case v1::JOB_STATE_RUNNING: return "RUNNING";
    case v1::JOB_STATE_RESTARTING: return "RESTARTING";
    case v1::JOB_STATE_SUCCEEDED: return "SUCCEEDED";
    case v1::JOB_STATE_FAILED: return "FAILED";
    case v1::JOB_STATE_CANCELLED: return "CANCELLED";
    default: return "UNKNOWN";
  }
}

std::optional<v1::JobState> JobStateFromName(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (!absl::StartsWith(upper, "JOB_STATE_")) upper = "JOB_STATE_" + upper;
  v1::JobState state;
  if (!v1::JobState_Parse(upper, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return std::nullopt;
  }
  return state;
}

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

int ExitCodeForState(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_SUCCEEDED: return kExitOk;
    case v1::JOB_STATE_CANCELLED: return kExitCancelled;
    default: return kExitFailed;
  }
}

std::string FormatPlacements(const google::protobuf::RepeatedPtrField<v1::Placement>& placements) {
  std::vector<std::string> parts;
  for (const v1::Placement& p : placements) {
    parts.push_back(absl::StrCat("rank ", p.rank(), " on ", p.worker(), " (slot ", p.slot(), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string FormatAgo(const google::protobuf::Timestamp& t, absl::Time now) {
  absl::Duration d = now - FromProto(t);
  if (d < absl::Seconds(1)) return "just now";
  return absl::StrCat(absl::FormatDuration(absl::Trunc(d, absl::Seconds(1))), " ago");
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return value < 10 ? absl::StrFormat("%.1f %s", value, units[unit])
                    : absl::StrFormat("%.0f %s", value, units[unit]);
}

std::string FormatJobStatus(const v1::Job& job, absl::Time now) {
  std::vector<std::pair<std::string, std::string>> fields;
  fields.push_back({"job", job.spec().name().empty()
                               ? job.id()
                               : absl::StrCat(job.id(), " (", job.spec().name(), ")")});
  fields.push_back({"state", JobStateName(job.state())});
  if (!job.reason().empty()) fields.push_back({"reason", job.reason()});
  const int max_restarts = job.spec().has_max_restarts() ? job.spec().max_restarts() : 3;
  fields.push_back({"attempt", absl::StrCat(job.attempt(), " (restarts: ", job.restarts(), " of ",
                                            max_restarts, ")")});
  const int workers = std::max(1, job.spec().resources().workers());
  fields.push_back({"resources",
                    absl::StrCat(workers, workers == 1 ? " rank" : " ranks", ", ",
                                 job.spec().resources().device() == v1::DEVICE_TYPE_CUDA ? "cuda"
                                                                                         : "cpu")});
  if (job.placements_size() > 0) fields.push_back({"placements", FormatPlacements(job.placements())});
  if (IsSet(job.created_at())) {
    fields.push_back({"created", absl::StrCat(Rfc3339(job.created_at()), " (",
                                              FormatAgo(job.created_at(), now), ")")});
  }
  if (IsSet(job.started_at())) fields.push_back({"started", Rfc3339(job.started_at())});
  if (IsSet(job.finished_at())) fields.push_back({"finished", Rfc3339(job.finished_at())});
  if (job.has_last_epoch() && job.last_epoch().epoch() > 0) {
    fields.push_back({"last epoch", EpochSummary(job.last_epoch())});
  }
  for (int i = 0; i < job.artifacts_size(); ++i) {
    const v1::ArtifactInfo& a = job.artifacts(i);
    fields.push_back({i == 0 ? "artifacts" : "", absl::StrCat(a.name(), " (",
                                                              FormatBytes(a.size_bytes()), ")")});
  }
  size_t width = 0;
  for (const auto& [name, value] : fields) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, value] : fields) {
    std::string label = name.empty() ? "" : name + ":";
    absl::StrAppend(&out, label, std::string(width + 2 - label.size(), ' '), value, "\n");
  }
  return out;
}

std::string FormatJobTable(const std::vector<v1::Job>& jobs, absl::Time now) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& job : jobs) {
    std::string progress;
    if (job.has_last_epoch() && job.last_epoch().epoch() > 0) {
      progress = absl::StrCat("epoch ", job.last_epoch().epoch(), "/", job.last_epoch().epochs());
    }
    rows.push_back({job.id(), job.spec().name(), JobStateName(job.state()),
                    absl::StrCat(std::max(1, job.spec().resources().workers())),
                    absl::StrCat(job.attempt()), progress,
                    IsSet(job.created_at()) ? FormatAgo(job.created_at(), now) : ""});
  }
  return RenderTable({"ID", "NAME", "STATE", "RANKS", "ATTEMPT", "PROGRESS", "CREATED"}, rows);
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

}  // namespace cohort::client
