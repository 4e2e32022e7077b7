// Hostile input through the real cohort-server and `cohort` client: models that ask for
// absurd tensors and paths outside --allowed-data-root are refused at submit (exit 2,
// one line naming the field, the layer and the size), and nothing is stored.

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "common/npy/npy_writer.h"
#include "tests/common/keras/config_builder.h"
#include "tests/integration/cluster.h"
#include "tests/support/temp_dir.h"

namespace cohort::testing {
namespace {

using keras::testing::DenseEntry;
using keras::testing::InputEntry;
using keras::testing::SequentialModel;

// dir/x.npy (16 x features float32), dir/y.npy (16 labels), dir/model.json (a Dense
// classifier of `units` outputs).
void WriteJob(const std::string& dir, int64_t features, int64_t units) {
  std::filesystem::create_directories(dir);
  std::vector<float> x(16 * features, 0.5f);
  std::vector<int64_t> y(16, 1);
  REQUIRE(npy::WriteNpy(dir + "/x.npy", npy::DType::kFloat32, {16, features}, x.data()).ok());
  REQUIRE(npy::WriteNpy(dir + "/y.npy", npy::DType::kInt64, {16}, y.data()).ok());
  WriteFile(dir + "/model.json",
            SequentialModel({InputEntry("features", {features}), DenseEntry("wide", units, "softmax")})
                .dump());
}

std::vector<std::string> Submit(const std::string& model, const std::string& x,
                                const std::string& y) {
  return {"submit", model, "--x", x, "--y", y, "--loss", "sparse_categorical_crossentropy",
          "--batch-size", "8", "--dry-run"};
}

TEST_CASE("cohort-server refuses absurd models at submit, naming the layer and the size",
          "[integration][limits]") {
  Cluster cluster;
  const std::string job = cluster.dir().File("job");
  WriteJob(job, 4, 10);
  // A Dense kernel of 10^12 elements: refused by the defaults, nothing allocated.
  WriteFile(job + "/huge.json",
            SequentialModel({InputEntry("features", {1000000}), DenseEntry("wide", 1000000)}).dump());
  cluster.set_server_args({"--max-step-activation-elements", "100"});
  REQUIRE(cluster.StartServer());

  CommandResult ok = cluster.Cli(Submit(job + "/model.json", job + "/x.npy", job + "/y.npy"));
  INFO(ok.output);
  CHECK(ok.status.code == 0);

  CommandResult huge = cluster.Cli(Submit(job + "/huge.json", job + "/x.npy", job + "/y.npy"));
  CHECK(huge.status.code == 2);
  CHECK(huge.output ==
        "cohort: error: model: layer 'wide' (Dense) has more parameters than the limit of "
        "2147483648 (its kernel is (1000000, 1000000))\n");

  // 8 samples per step of a 10-output Dense is 80 elements; 16 outputs are 128 > 100.
  WriteJob(cluster.dir().File("wider"), 4, 16);
  CommandResult wide = cluster.Cli(Submit(cluster.dir().File("wider/model.json"),
                                          job + "/x.npy", job + "/y.npy"));
  CHECK(wide.status.code == 1);  // RESOURCE_EXHAUSTED, like --max-model-bytes: not a usage error
  CHECK(wide.output ==
        "cohort: error: fit.batch_size: a step of 8 samples per rank keeps 128 activation "
        "elements, more than the limit of 100 (the largest, layer 'wide' (Dense), outputs (16,) "
        "per sample)\n");
  CHECK(absl::StrContains(cluster.Cli({"list"}).out, "(no jobs)"));
}

TEST_CASE("cohort-server --allowed-data-root confines the paths a job names",
          "[integration][limits][paths]") {
  Cluster cluster;
  const std::string root = cluster.dir().File("shared");
  const std::string outside = cluster.dir().File("private");
  WriteJob(root, 4, 10);
  WriteJob(outside, 4, 10);
  std::filesystem::create_symlink(outside + "/x.npy", root + "/link.npy");
  cluster.set_server_args({"--allowed-data-root", root});
  REQUIRE(cluster.StartServer());
  const std::string real_root = std::filesystem::canonical(root).string();

  CommandResult in = cluster.Cli(Submit(root + "/model.json", root + "/x.npy", root + "/y.npy"));
  INFO(in.output);
  CHECK(in.status.code == 0);

  CommandResult out = cluster.Cli(Submit(root + "/model.json", outside + "/x.npy", root + "/y.npy"));
  CHECK(out.status.code == 2);
  CHECK(out.output == "cohort: error: data.x: '" + outside + "/x.npy' is outside the allowed data "
                      "roots (" + real_root + "; see --allowed-data-root)\n");
  CommandResult dots =
      cluster.Cli(Submit(root + "/model.json", root + "/x.npy", root + "/../private/y.npy"));
  CHECK(dots.status.code == 2);
  CHECK(absl::StrContains(dots.output, "data.y: '" + outside + "/y.npy' is outside"));
  CommandResult link = cluster.Cli(Submit(root + "/model.json", root + "/link.npy", root + "/y.npy"));
  CHECK(link.status.code == 2);
  CHECK(absl::StrContains(link.output, "data.x: '" + root + "/link.npy' (it resolves to "));
  CommandResult model =
      cluster.Cli(Submit(outside + "/model.json", root + "/x.npy", root + "/y.npy"));
  CHECK(model.status.code == 2);
  CHECK(absl::StrContains(model.output, "cohort: error: model: '" + outside + "/model.json' is outside"));

  // Uploaded files are the coordinator's own: allowed wherever they came from.
  std::vector<std::string> upload =
      Submit(outside + "/model.json", outside + "/x.npy", outside + "/y.npy");
  upload.push_back("--upload");
  CommandResult uploaded = cluster.Cli(upload);
  CHECK(uploaded.status.code == 0);

  // --max-model-layers 1: a model listing two layers (InputLayer, Dense) is refused.
  CHECK(cluster.StopServer().code == 0);
  cluster.set_server_args({"--max-model-layers", "1"});
  REQUIRE(cluster.StartServer());
  CommandResult layers = cluster.Cli(Submit(root + "/model.json", root + "/x.npy", root + "/y.npy"));
  CHECK(layers.status.code == 2);
  CHECK(absl::StrContains(layers.output, "more than the limit of 1"));

  // A root that is not a directory stops the server with one line.
  CommandResult bad = RunCommand({COHORT_SERVER_BIN, "--data-dir", cluster.dir().File("d2"),
                                  "--listen", "127.0.0.1:0", "--allowed-data-root",
                                  root + "/x.npy"},
                                 absl::Seconds(30));
  CHECK(bad.status.code == 1);
  CHECK(bad.output == "cohort-server: error: --allowed-data-root: '" + root +
                          "/x.npy' is not an existing directory\n");
}

}  // namespace
}  // namespace cohort::testing
