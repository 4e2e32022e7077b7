#include "client/trace_command.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/download.h"
#include "client/exit_codes.h"
#include "client/job_format.h"
#include "common/chrome_trace.h"
#include "common/zip/atomic_file.h"
#include "proto/grpc_status.h"

namespace cohort::client {
namespace {

// A directory of its own under $TMPDIR, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cohort-trace-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "cohort: error: %s\n", message.c_str());
  return kExitFailed;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int RunTraceCommand(const Connection& connection, const TraceOptions& options) {
  if (options.out_path.empty()) {
    std::fprintf(stderr, "cohort: error: -o/--output: a file name is needed\n");
    return kExitUsage;
  }
  auto stub = NewJobStub(connection);
  v1::Job job;
  grpc::Status status = GetJob(connection, *stub, options.job_id, &job);
  if (!status.ok()) return ReportCallError(connection, status);
  if (!job.spec().trace()) {
    return Fail(absl::StrCat("job ", job.id(),
                             " was not traced: submit it with --trace (or trace: true in the job "
                             "spec) to record its ranks' step timelines"));
  }
  const int world = std::max(1, job.spec().resources().workers());
  std::map<int, const v1::ArtifactInfo*> traces;  // by rank
  for (const v1::ArtifactInfo& a : job.artifacts()) {
    absl::string_view name = a.name();
    int rank;
    if (absl::ConsumePrefix(&name, "trace/rank-") && absl::ConsumeSuffix(&name, ".json") &&
        absl::SimpleAtoi(name, &rank) && rank >= 0 && rank < world) {
      traces[rank] = &a;
    }
  }
  if (traces.empty()) {
    const bool ended = job.state() == v1::JOB_STATE_SUCCEEDED ||
                       job.state() == v1::JOB_STATE_FAILED ||
                       job.state() == v1::JOB_STATE_CANCELLED;
    return Fail(absl::StrCat("job ", job.id(),
                             ended ? " has no trace: none of its ranks uploaded one"
                                   : " has no trace yet: each rank uploads its trace when it ends",
                             " (the job is ", JobStateName(job.state()), ")"));
  }

  ScratchDir scratch;
  if (scratch.path().empty()) return Fail("cannot create a temporary directory for the download");
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& [rank, artifact] : traces) {
    const std::string file = absl::StrCat(scratch.path(), "/rank-", rank, ".json");
    absl::StatusOr<int64_t> fetched = DownloadArtifact(*stub, job.id(), *artifact, file);
    if (!fetched.ok()) {
      if (fetched.status().code() == absl::StatusCode::kUnavailable) {
        return ReportCallError(connection, ToGrpcStatus(fetched.status()));
      }
      return Fail(absl::StrCat(artifact->name(), ": ", fetched.status().message()));
    }
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    texts.emplace_back(artifact->name(), *std::move(text));
  }
  absl::StatusOr<std::string> merged = MergeChromeTraces(texts);
  if (!merged.ok()) return Fail(std::string(merged.status().message()));

  if (absl::Status written = WriteFileAtomically(options.out_path, *merged + "\n"); !written.ok()) {
    return Fail(absl::StrCat("cannot write ", options.out_path, ": ", written.message()));
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (traces.count(r) == 0) missing.push_back(r);
  }
  if (!missing.empty()) {
    std::fprintf(stderr, "cohort: warning: no trace from rank%s %s (the job is %s)\n",
                 missing.size() > 1 ? "s" : "", absl::StrJoin(missing, ", ").c_str(),
                 JobStateName(job.state()).c_str());
  }
  std::printf("%s (%d of %d ranks; open it in ui.perfetto.dev or chrome://tracing)\n",
              options.out_path.c_str(), static_cast<int>(traces.size()), world);
  return kExitOk;
}

}  // namespace cohort::client
