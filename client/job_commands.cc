#include "client/job_commands.h"

#include <cstdio>

#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "client/job_format.h"
#include "client/loss_chart.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "proto/channel.h"

namespace cohort::client {
int RunStatusCommand(const Connection& connection, const std::string& job_id, OutputFormat format) {
  v1::Job job;
  auto stub = NewJobStub(connection);
  grpc::Status status = GetJob(connection, *stub, job_id, &job);
  if (!status.ok()) return ReportCallError(connection, status);
  if (format == OutputFormat::kJson) {
    std::printf("%s\n", ToJsonLine(job).c_str());
  } else {
    std::fputs(FormatJobStatus(job, absl::Now()).c_str(), stdout);
    // The loss curve so far (best effort: the status above is what was asked for).
    if (job.has_last_epoch()) {
      absl::StatusOr<EpochCurves> curves = FetchEpochCurves(stub.get(), connection, job);
      if (curves.ok()) std::fputs(LossChart(*curves).c_str(), stdout);
    }
  }
  return kExitOk;
}

int RunListCommand(const Connection& connection, const std::vector<v1::JobState>& states,
                   OutputFormat format) {
  auto stub = NewJobStub(connection);
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest request;
  for (v1::JobState s : states) request.add_states(s);
  request.set_page_size(100);
  while (true) {
    v1::ListJobsResponse response;
    grpc::Status status = stub->ListJobs(NewCallContext(connection).get(), request, &response);
    if (!status.ok()) return ReportCallError(connection, status);
    for (const v1::Job& job : response.jobs()) jobs.push_back(job);
    if (response.next_page_token().empty() || response.jobs_size() == 0) break;
    request.set_page_token(response.next_page_token());
  }
  if (format == OutputFormat::kJson) {
    // An array, as `cohort workers -o json` prints.
    std::string out = "[";
    for (size_t i = 0; i < jobs.size(); ++i) {
      out += (i == 0 ? "\n  " : ",\n  ") + ToJsonLine(jobs[i]);
    }
    std::printf("%s\n]\n", out.c_str());
    return kExitOk;
  }
  std::fputs(FormatJobTable(jobs, absl::Now()).c_str(), stdout);
  if (jobs.empty()) std::printf("(no jobs)\n");
  return kExitOk;
}

int RunCancelCommand(const Connection& connection, const std::string& job_id,
                     const std::string& reason, OutputFormat format) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  v1::Job job;
  grpc::Status status =
      NewJobStub(connection)->CancelJob(NewCallContext(connection).get(), request, &job);
  if (!status.ok()) return ReportCallError(connection, status);
  if (format == OutputFormat::kJson) {
    std::printf("%s\n", ToJsonLine(job).c_str());
  } else {
    std::printf("%s: %s\n", job.id().empty() ? job_id.c_str() : job.id().c_str(),
                JobStateName(job.state()).c_str());
  }
  return kExitOk;
}

}  // namespace cohort::client
