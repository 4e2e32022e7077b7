// PathRoots: what a daemon lets a request name on its disk.

#include "common/path_roots.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace cohort {
namespace {

using cohort::testing::TempDir;
namespace fs = std::filesystem;

TEST_CASE("PathRoots confines paths to its roots, symlinks and '..' resolved", "[paths]") {
  TempDir dir;
  fs::create_directories(dir.File("root/sub"));
  fs::create_directories(dir.File("root2"));
  fs::create_directories(dir.File("outside"));
  for (const char* f : {"root/a.npy", "root/sub/b.npy", "root2/c.npy", "outside/d.npy"}) {
    fs::path p = dir.File(f);
    std::FILE* file = std::fopen(p.c_str(), "w");
    REQUIRE(file != nullptr);
    std::fclose(file);
  }
  fs::create_symlink(dir.File("outside/d.npy"), dir.File("root/escape.npy"));
  fs::create_symlink(dir.File("outside"), dir.File("root/outdir"));
  fs::create_symlink(dir.File("root/sub/b.npy"), dir.File("root/inside.npy"));

  absl::StatusOr<PathRoots> roots = PathRoots::Create({dir.File("root")}, "--allowed-data-root");
  REQUIRE(roots.ok());
  CHECK(roots->confined());
  CHECK(roots->Check(dir.File("root/a.npy"), "data.x").ok());
  CHECK(roots->Check(dir.File("root/sub/b.npy"), "data.x").ok());
  CHECK(roots->Check(dir.File("root/inside.npy"), "data.x").ok());
  CHECK(roots->Check(dir.File("root/sub/../a.npy"), "data.x").ok());

  auto refused = [&](const std::string& path) {
    absl::Status s = roots->Check(path, "data.x");
    INFO(path);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  // A sibling whose name starts with the root's is not inside it.
  CHECK_THAT(refused(dir.File("root2/c.npy")), Catch::Contains("is outside the allowed data roots"));
  CHECK_THAT(refused(dir.File("root/../outside/d.npy")),
             Catch::Contains("is outside the allowed data roots"));
  CHECK_THAT(refused(dir.File("root/escape.npy")),
             Catch::Contains("(it resolves to ") && Catch::Contains("outside/d.npy)"));
  CHECK_THAT(refused(dir.File("root/outdir/d.npy")), Catch::Contains("is outside"));
  CHECK(refused("/etc/passwd") ==
        "data.x: '/etc/passwd' is outside the allowed data roots (" + roots->roots()[0] +
            "; see --allowed-data-root)");
  CHECK(refused("root/a.npy") == "data.x: 'root/a.npy' is not an absolute path");
  CHECK(refused("") == "data.x: '' is not an absolute path");
  CHECK_THAT(refused(dir.File("root/missing.npy")), Catch::StartsWith("data.x: cannot read "));

  // No roots: any absolute path, still no relative ones.
  PathRoots open;
  CHECK_FALSE(open.confined());
  CHECK(open.Check("/etc/passwd", "model").ok());
  CHECK_FALSE(open.Check("passwd", "model").ok());

  // "/" as a root allows everything absolute.
  absl::StatusOr<PathRoots> slash = PathRoots::Create({"/"}, "--allowed-data-root");
  REQUIRE(slash.ok());
  CHECK(slash->Check(dir.File("outside/d.npy"), "data.x").ok());
}

TEST_CASE("PathRoots refuses roots that are not directories", "[paths]") {
  TempDir dir;
  absl::StatusOr<PathRoots> missing = PathRoots::Create({dir.File("nope")}, "--allowed-data-root");
  CHECK(missing.status().message() ==
        "--allowed-data-root: '" + dir.File("nope") + "' is not an existing directory");
  std::FILE* file = std::fopen(dir.File("f").c_str(), "w");
  std::fclose(file);
  CHECK_FALSE(PathRoots::Create({dir.File("f")}, "--allowed-data-root").ok());
}

}  // namespace
}  // namespace cohort
