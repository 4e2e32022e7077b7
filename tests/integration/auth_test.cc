// Authentication, roles, TLS and tenancy (docs/security.md) on a real cohort-server
// with real agents: tokens from a --token-file, certificates made with the openssl CLI
// for this run (valid one day, nothing committed), every RPC of every service probed.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <google/protobuf/descriptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cohort/v1/cluster_service.grpc.pb.h"
#include "cohort/v1/job_service.grpc.pb.h"
#include "cohort/v1/worker_service.grpc.pb.h"
#include "common/transfer/sha256.h"
#include "proto/channel.h"
#include "tests/integration/cluster.h"
#include "tests/integration/job_client.h"
#include "tests/support/ports.h"
#include "tests/support/process.h"

namespace cohort::testing {
namespace {

constexpr const char* kAlice = "alice-token-7c1e0f5a9b3d42e8";
constexpr const char* kBob = "bob-token-2d9a6c4e1f8b7035";
constexpr const char* kAdmin = "admin-token-5b8e2a7c0d4f9163";
constexpr const char* kWorker = "worker-token-9f3c1b6e8a2d5047";

// Alice and the worker in clear, Bob and the admin as digests.
std::string WriteTokenFile(const TempDir& dir) {
  auto digest = [](const std::string& token) {
    Sha256 h;
    h.Update(token);
    return "sha256:" + h.HexDigest();
  };
  std::string path = dir.File("tokens");
  WriteFile(path, absl::StrCat("# token identity role\n", kAlice, " alice user\n", digest(kBob),
                               " bob user\n", digest(kAdmin), " root admin\n", kWorker,
                               " node-agent worker\n"));
  return path;
}

// A CA, the coordinator's certificate (for 127.0.0.1 and localhost) and an agent's
// client certificate, signed by the CA.
struct Pki {
  std::string ca, server_cert, server_key, client_cert, client_key;
};

Pki MakePki(const TempDir& dir) {
  Pki pki{dir.File("ca.pem"), dir.File("server.pem"), dir.File("server.key"),
          dir.File("client.pem"), dir.File("client.key")};
  auto run = [](std::vector<std::string> argv) {
    CommandResult r = RunCommand(argv, absl::Seconds(60));
    INFO(r.output);
    REQUIRE(r.status.code == 0);
  };
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                       "-nodes"};
  std::vector<std::string> ca = {COHORT_OPENSSL_BIN, "req", "-x509"};
  ca.insert(ca.end(), ec.begin(), ec.end());
  ca.insert(ca.end(), {"-keyout", dir.File("ca.key"), "-out", pki.ca, "-days", "1", "-subj",
                       "/CN=cohort-test-ca"});
  run(ca);
  auto issue = [&](const std::string& name, const std::string& cert, const std::string& key,
                   const std::string& extensions) {
    std::vector<std::string> req = {COHORT_OPENSSL_BIN, "req"};
    req.insert(req.end(), ec.begin(), ec.end());
    req.insert(req.end(), {"-keyout", key, "-out", dir.File(name + ".csr"), "-subj", "/CN=" + name});
    run(req);
    WriteFile(dir.File(name + ".ext"), extensions);
    run({COHORT_OPENSSL_BIN, "x509", "-req", "-in", dir.File(name + ".csr"), "-CA", pki.ca, "-CAkey",
         dir.File("ca.key"), "-CAcreateserial", "-out", cert, "-days", "1", "-extfile",
         dir.File(name + ".ext")});
  };
  issue("cohort-coordinator", pki.server_cert, pki.server_key,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  issue("node-agent", pki.client_cert, pki.client_key, "extendedKeyUsage=clientAuth\n");
  return pki;
}

ChannelSecurity Security(const Pki* pki, const std::string& token, bool client_cert = false) {
  ChannelSecurityFiles files{.token = token};
  if (pki != nullptr) {
    files.tls_ca = pki->ca;
    if (client_cert) {
      files.tls_cert = pki->client_cert;
      files.tls_key = pki->client_key;
    }
  }
  absl::StatusOr<ChannelSecurity> security = LoadChannelSecurity(files);
  REQUIRE(security.ok());
  return *security;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address, const ChannelSecurity& security) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  REQUIRE(hp.ok());
  return CreateCoordinatorChannel(*hp, security);
}

// One call of any method, unary or streaming, with `request` (serialized) as its only
// message: the status and the first reply.
struct RawReply {
  grpc::Status status;
  std::string first;
};
RawReply CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                 const std::string& request = "",
                 const std::multimap<std::string, std::string>& metadata = {}) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&context, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t id) {
    REQUIRE(cq.Next(&tag, &ok));
    REQUIRE(reinterpret_cast<intptr_t>(tag) == id);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(1);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->WriteLast(out, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  step(2);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  RawReply reply;
  if (step(3)) {
    std::vector<grpc::Slice> slices;
    REQUIRE(in.Dump(&slices).ok());
    for (const grpc::Slice& s : slices) reply.first.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  call->Finish(&reply.status, reinterpret_cast<void*>(4));
  step(4);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return reply;
}

// "/cohort.v1.JobService/SubmitJob", ... for every method of the service.
std::vector<std::string> Methods(const google::protobuf::FileDescriptor* file, const std::string& service) {
  const google::protobuf::ServiceDescriptor* s = file->FindServiceByName(service);
  REQUIRE(s != nullptr);
  std::vector<std::string> out;
  for (int i = 0; i < s->method_count(); ++i) {
    out.push_back(absl::StrCat("/", s->full_name(), "/", s->method(i)->name()));
  }
  return out;
}

std::vector<std::string> ClientMethods() {
  std::vector<std::string> out = Methods(v1::GetJobRequest::descriptor()->file(), "JobService");
  for (const std::string& m : Methods(v1::ListWorkersRequest::descriptor()->file(), "ClusterService")) {
    out.push_back(m);
  }
  REQUIRE(out.size() == 8);
  return out;
}

std::vector<std::string> WorkerMethods() {
  std::vector<std::string> out = Methods(v1::RegisterRequest::descriptor()->file(), "WorkerService");
  REQUIRE(out.size() == 10);
  return out;
}

const std::string kHealthCheck = "/grpc.health.v1.Health/Check";
const std::string kServing = std::string("\x08\x01", 2);  // HealthCheckResponse{status: SERVING}

std::string Serialized(const google::protobuf::Message& m) { return m.SerializeAsString(); }

// UploadData of `path`; the status, and the artifact id on success.
grpc::Status Upload(v1::JobService::Stub& stub, const std::string& path, std::string* id) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::UploadDataResponse response;
  auto writer = stub.UploadData(&context, &response);
  v1::UploadChunk chunk;
  chunk.mutable_header()->set_file_name(std::filesystem::path(path).filename().string());
  chunk.mutable_header()->set_size_bytes(static_cast<int64_t>(bytes.size()));
  Sha256 hash;  // declared, as `cohort submit --upload` does
  hash.Update(bytes);
  chunk.mutable_header()->set_sha256(hash.HexDigest());
  chunk.set_data(bytes);
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  *id = response.artifact_id();
  return status;
}

std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

v1::SubmitJobRequest SubmitRequest(const DigitsData& data, const std::string& name) {
  v1::SubmitJobRequest request;
  v1::JobSpec& spec = *request.mutable_spec();
  spec.set_name(name);
  spec.set_keras_path(std::string(COHORT_SOURCE_DIR) + "/examples/digits_cnn.keras");
  spec.mutable_data()->mutable_x()->set_path(data.File("x_train.npy"));
  spec.mutable_data()->mutable_y()->set_path(data.File("y_train.npy"));
  spec.mutable_fit()->set_epochs(1);
  spec.mutable_fit()->set_batch_size(64);
  spec.mutable_resources()->set_workers(2);
  return request;
}

}  // namespace

TEST_CASE("Tokens and roles and tenancy over TLS and a 2-rank job with mutual-TLS agents",
          "[integration][auth]") {
  DigitsData data;
  Cluster cluster;
  const Pki pki = MakePki(cluster.dir());
  const std::string tokens = WriteTokenFile(cluster.dir());
  cluster.set_server_args({"--token-file", tokens, "--tls-cert", pki.server_cert, "--tls-key",
                           pki.server_key, "--tls-client-ca", pki.ca, "--log-level", "trace"});
  cluster.set_client_args({"--token", kAdmin, "--tls-ca", pki.ca});
  REQUIRE(cluster.StartServer());
  const std::string address = cluster.address();
  auto channel = [&](const std::string& token, bool client_cert = false) {
    return Channel(address, Security(&pki, token, client_cert));
  };

  // Probes need no token; plaintext does not reach a TLS port.
  RawReply health = CallRaw(channel(""), kHealthCheck);
  INFO(health.status.error_message());
  CHECK(health.status.ok());
  CHECK(health.first == kServing);
  CHECK(CallRaw(Channel(address, {}), kHealthCheck).status.error_code() ==
        grpc::StatusCode::UNAVAILABLE);

  // Every method of every service: no token, an unknown token, a malformed header.
  std::vector<std::string> all = ClientMethods();
  for (const std::string& m : WorkerMethods()) all.push_back(m);
  for (const std::string& method : all) {
    INFO(method);
    RawReply none = CallRaw(channel(""), method);
    CHECK(none.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(absl::StartsWith(none.status.error_message(), "no token: this coordinator requires"));
    RawReply wrong = CallRaw(channel("not-a-token-of-this-server-00"), method);
    CHECK(wrong.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(wrong.status.error_message() == "the token is not valid for this coordinator");
    RawReply basic = CallRaw(channel(""), method, "", {{"authorization", std::string("Basic ") + kAlice}});
    CHECK(basic.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  // Roles: the worker token is no client; users and admins are no agents.
  for (const std::string& method : ClientMethods()) {
    INFO(method);
    RawReply r = CallRaw(channel(kWorker, /*client_cert=*/true), method);
    CHECK(r.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(r.status.error_message(),
                            "'node-agent' has role worker, which may not call"));
  }
  for (const std::string& method : WorkerMethods()) {
    INFO(method);
    for (const char* token : {kAlice, kAdmin}) {
      RawReply r = CallRaw(channel(token, /*client_cert=*/true), method);
      CHECK(r.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
      CHECK(absl::StrContains(r.status.error_message(), "(the worker role may)"));
    }
    // Mutual TLS: the worker token alone is not enough.
    RawReply no_cert = CallRaw(channel(kWorker), method);
    CHECK(no_cert.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(no_cert.status.error_message(), "without a TLS client certificate"));
  }
  // With both, the worker's calls get past authorization (an unknown lease is NOT_FOUND).
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_lease_id("no-such-lease");
  RawReply agent = CallRaw(channel(kWorker, true), "/cohort.v1.WorkerService/Heartbeat", Serialized(heartbeat));
  CHECK(agent.status.error_code() == grpc::StatusCode::NOT_FOUND);
  // The CLI says so in one line.
  CommandResult as_worker = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "--tls-ca",
                                        pki.ca, "--token", kWorker, "list"});
  CHECK(as_worker.status.code == 1);
  CHECK(absl::StrContains(as_worker.output, "cohort: error: 'node-agent' has role worker, which may not call JobService"));
  CommandResult anonymous = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "--tls-ca", pki.ca, "list"});
  CHECK(anonymous.status.code == 1);
  CHECK(absl::StrContains(anonymous.output, "cohort: error: no token"));

  // Tenancy. Alice's job waits for agents; Bob can neither see nor touch it.
  auto alice = v1::JobService::NewStub(channel(kAlice));
  auto bob = v1::JobService::NewStub(channel(kBob));
  auto root = v1::JobService::NewStub(channel(kAdmin));
  v1::SubmitJobResponse submitted;
  {
    auto context = ContextWithDeadline(absl::Seconds(30));
    grpc::Status s = alice->SubmitJob(context.get(), SubmitRequest(data, "alices"), &submitted);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  const std::string job_id = submitted.job().id();
  CHECK(submitted.job().owner() == "alice");
  auto denied = [&](const grpc::Status& s) {
    INFO(s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(s.error_message() == "job '" + job_id +
                                   "' belongs to another user; 'bob' may only see and change its own jobs");
  };
  {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    denied(bob->GetJob(ContextWithDeadline(absl::Seconds(10)).get(), request, &job));
    CHECK(alice->GetJob(ContextWithDeadline(absl::Seconds(10)).get(), request, &job).ok());
    CHECK(root->GetJob(ContextWithDeadline(absl::Seconds(10)).get(), request, &job).ok());
  }
  {
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    denied(bob->CancelJob(ContextWithDeadline(absl::Seconds(10)).get(), request, &job));
  }
  {
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    denied(CallRaw(channel(kBob), "/cohort.v1.JobService/WatchJob", Serialized(request)).status);
    v1::DownloadArtifactRequest download;
    download.set_job_id(job_id);
    download.set_name("history.json");
    denied(CallRaw(channel(kBob), "/cohort.v1.JobService/DownloadArtifact", Serialized(download)).status);
  }
  // Bob's own job: he sees and cancels it.
  v1::SubmitJobResponse bobs;
  REQUIRE(bob->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), SubmitRequest(data, "bobs"), &bobs).ok());
  CHECK(bobs.job().owner() == "bob");
  {
    v1::CancelJobRequest request;
    request.set_job_id(bobs.job().id());
    v1::Job job;
    REQUIRE(bob->CancelJob(ContextWithDeadline(absl::Seconds(10)).get(), request, &job).ok());
    CHECK(job.state() == v1::JOB_STATE_CANCELLED);
    CHECK(job.reason() == "cancelled by bob");
  }
  auto ids = [](v1::JobService::Stub& stub) {
    v1::ListJobsResponse list;
    REQUIRE(stub.ListJobs(ContextWithDeadline(absl::Seconds(10)).get(), v1::ListJobsRequest(), &list).ok());
    std::set<std::string> out;
    for (const v1::Job& j : list.jobs()) out.insert(j.id());
    return out;
  };
  CHECK(ids(*alice) == std::set<std::string>{job_id});
  CHECK(ids(*bob) == std::set<std::string>{bobs.job().id()});
  CHECK(ids(*root) == std::set<std::string>{job_id, bobs.job().id()});

  // Uploads belong to their uploader: Bob cannot name Alice's.
  std::string alices_x;
  REQUIRE(Upload(*alice, data.File("x_test.npy"), &alices_x).ok());
  {
    v1::SubmitJobRequest request = SubmitRequest(data, "borrowed");
    request.mutable_spec()->mutable_data()->mutable_x()->set_artifact_id(alices_x);
    request.mutable_spec()->mutable_data()->mutable_y()->set_path(data.File("y_test.npy"));
    request.set_dry_run(true);
    v1::SubmitJobResponse response;
    grpc::Status s = bob->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), request, &response);
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(s.error_message() == "data.x: artifact '" + alices_x +
                                   "' was not uploaded by 'bob'; a job may use only its owner's "
                                   "uploads (upload the file yourself)");
    CHECK(alice->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), request, &response).ok());
    // The same bytes uploaded by Bob are his too.
    std::string bobs_x;
    REQUIRE(Upload(*bob, data.File("x_test.npy"), &bobs_x).ok());
    CHECK(bobs_x == alices_x);
    s = bob->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), request, &response);
    INFO(s.error_message());
    CHECK(s.ok());
  }

  // Agents with the worker token and a client certificate run Alice's job over TLS.
  const std::string worker_token = cluster.dir().File("worker.token");
  WriteFile(worker_token, std::string(kWorker) + "\n");
  for (const std::string name : {"w1", "w2"}) {
    cluster.StartWorker(name, WorkerOptions{.slots = 1,
                                            .extra_args = {"--token-file", worker_token, "--tls-ca",
                                                           pki.ca, "--tls-cert", pki.client_cert,
                                                           "--tls-key", pki.client_key,
                                                           "--log-level", "trace"}});
  }
  JobClient alice_jobs(address, Security(&pki, kAlice));
  v1::Job done = alice_jobs.WaitForState(job_id, v1::JOB_STATE_SUCCEEDED);
  CHECK(done.owner() == "alice");

  // Alice downloads her model; Bob is refused, in one line.
  const std::string out = cluster.dir().File("out");
  CommandResult got = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "--tls-ca", pki.ca,
                                  "--token", kAlice, "download", job_id, "-o", out},
                                 absl::Seconds(60));
  INFO(got.output);
  CHECK(got.status.code == 0);
  CHECK(std::filesystem::exists(out + "/model.keras"));
  CommandResult refused = RunCommand({COHORT_CLIENT_BIN, "--coordinator", address, "--tls-ca",
                                      pki.ca, "--token", kBob, "download", job_id, "-o",
                                      cluster.dir().File("bob-out")},
                                     absl::Seconds(60));
  CHECK(refused.status.code != 0);
  CHECK(absl::StrContains(refused.output, "belongs to another user"));

  // No token in any log, at trace level: the coordinator's, the agents' (with their
  // trainers' output).
  cluster.StopServer();
  std::vector<std::string> logs;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cluster.dir().path())) {
    if (entry.is_regular_file() && entry.path().extension() == ".log") logs.push_back(entry.path());
  }
  REQUIRE(logs.size() >= 3);
  for (const std::string& log : logs) {
    std::string text = FileText(log);
    INFO(log);
    CHECK(!text.empty());
    for (const char* token : {kAlice, kBob, kAdmin, kWorker}) CHECK_FALSE(absl::StrContains(text, token));
  }
}

TEST_CASE("A non-loopback --listen without a token file and TLS needs --insecure",
          "[integration][auth]") {
  TempDir dir;
  const std::string tokens = WriteTokenFile(dir);
  const std::string port = std::to_string(FreePort());
  const std::string listen = "0.0.0.0:" + port;
  CommandResult open = RunCommand({COHORT_SERVER_BIN, "--listen", listen, "--data-dir", dir.File("data")});
  CHECK(open.status.code == 1);
  CHECK(open.output == "cohort-server: error: --listen " + listen +
                           " is not a loopback address and there is no --token-file: anyone who "
                           "reaches the port could submit jobs and run code on the workers. Give "
                           "--token-file (and --tls-cert/--tls-key), or --insecure to serve it "
                           "without authentication anyway\n");
  CommandResult clear = RunCommand({COHORT_SERVER_BIN, "--listen", listen, "--data-dir",
                                    dir.File("data"), "--token-file", tokens});
  CHECK(clear.status.code == 1);
  CHECK(absl::StrContains(clear.output, "there is no --tls-cert/--tls-key: tokens would cross the network in clear"));
  CHECK_FALSE(std::filesystem::exists(dir.File("data")));

  // With --insecure it serves (and says so).
  Process server({COHORT_SERVER_BIN, "--listen", listen, "--data-dir", dir.File("data"), "--insecure"},
                 dir.File("server.log"));
  CHECK(WaitUntil(
      [&] {
        return RunCommand({COHORT_CLIENT_BIN, "--coordinator", "127.0.0.1:" + port, "list"})
                   .status.code == 0;
      },
      absl::Seconds(20)));
  server.Signal(SIGTERM);
  CHECK(server.Wait(absl::Seconds(30)).has_value());
  CHECK(absl::StrContains(server.Output(), "--insecure: serving " + listen));
}

TEST_CASE("Tokens on plaintext loopback and per-user limits refusing with RESOURCE_EXHAUSTED",
          "[integration][auth]") {
  DigitsData data;
  Cluster cluster;
  const std::string tokens = WriteTokenFile(cluster.dir());
  // x_test.npy is 360 rows of 8x8x1 float32 (~92 KiB); the quota holds one such file.
  cluster.set_server_args({"--token-file", tokens, "--max-queued-jobs-per-user", "1",
                           "--max-upload-bytes-per-user", "150K", "--health-listen",
                           "127.0.0.1:0"});
  cluster.set_client_args({"--token", kAdmin});
  REQUIRE(cluster.StartServer());
  auto alice = v1::JobService::NewStub(Channel(cluster.address(), Security(nullptr, kAlice)));
  auto bob = v1::JobService::NewStub(Channel(cluster.address(), Security(nullptr, kBob)));
  CHECK(CallRaw(Channel(cluster.address(), {}), kHealthCheck).first == kServing);
  CHECK(CallRaw(Channel(cluster.address(), {}), "/cohort.v1.JobService/ListJobs").status.error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);

  v1::SubmitJobResponse response;
  REQUIRE(alice->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), SubmitRequest(data, "one"), &response).ok());
  grpc::Status second =
      alice->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), SubmitRequest(data, "two"), &response);
  CHECK(second.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(second.error_message() ==
        "'alice' has 1 jobs queued or running, the limit per user (--max-queued-jobs-per-user 1); "
        "submit again when one has ended, or cancel one");
  // The limit is per user.
  CHECK(bob->SubmitJob(ContextWithDeadline(absl::Seconds(30)).get(), SubmitRequest(data, "bobs"), &response).ok());

  std::string id;
  grpc::Status first = Upload(*alice, data.File("x_test.npy"), &id);
  INFO(first.error_message());
  REQUIRE(first.ok());
  // The same bytes again count once.
  grpc::Status again = Upload(*alice, data.File("x_test.npy"), &id);
  INFO(again.error_message());
  CHECK(again.ok());
  grpc::Status more = Upload(*alice, data.File("x_train.npy"), &id);
  CHECK(more.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StartsWith(more.error_message(), "upload refused: 'alice' has uploaded 0.1 MiB and this upload is "));
  CHECK(absl::EndsWith(more.error_message(), "over the limit of 0.1 MiB per user (--max-upload-bytes-per-user)"));
  std::string y_id;
  CHECK(Upload(*alice, data.File("y_test.npy"), &y_id).ok());  // small: fits
  CHECK(Upload(*bob, data.File("x_test.npy"), &id).ok());      // Bob's own quota
}

}  // namespace cohort::testing
