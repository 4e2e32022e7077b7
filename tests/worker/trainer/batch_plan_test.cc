#include "worker/trainer/batch_plan.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

namespace cohort::trainer {
namespace {

using Steps = std::vector<std::vector<int64_t>>;

// Each step's rows on one rank, in order.
Steps RankSteps(int64_t rows, int64_t batch, int rank, int world, bool shuffle, uint64_t seed,
                int epoch) {
  BatchPlan plan(rows, batch, rank, world, shuffle, seed);
  plan.StartEpoch(epoch);
  Steps steps;
  for (int64_t s = 0; s < plan.steps(); ++s) {
    BatchPlan::Slice slice = plan.RankSlice(s);
    steps.emplace_back(slice.rows.begin(), slice.rows.end());
  }
  return steps;
}

// Every step's global batch as `world` ranks see it: the ranks' slices, concatenated in
// rank order. Also checks the global_rows every rank reports.
Steps GlobalSteps(int64_t rows, int64_t batch, int world, bool shuffle, uint64_t seed, int epoch) {
  BatchPlan first(rows, batch, 0, world, shuffle, seed);
  Steps steps(first.steps());
  for (int r = 0; r < world; ++r) {
    BatchPlan plan(rows, batch, r, world, shuffle, seed);
    REQUIRE(plan.steps() == first.steps());
    plan.StartEpoch(epoch);
    for (int64_t s = 0; s < plan.steps(); ++s) {
      BatchPlan::Slice slice = plan.RankSlice(s);
      CHECK(slice.global_rows == std::min(batch, rows - s * batch));
      steps[s].insert(steps[s].end(), slice.rows.begin(), slice.rows.end());
    }
  }
  return steps;
}

TEST_CASE("every world size trains on the same global batches as one rank", "[trainer]") {
  // (rows, batch): dividing, not dividing (a last partial batch), a last batch smaller
  // than the world (some ranks get no rows), and a batch larger than the data.
  auto [rows, batch] = GENERATE(table<int64_t, int64_t>(
      {{120, 12}, {100, 12}, {97, 12}, {1437, 64}, {25, 12}, {13, 24}, {1, 12}}));
  bool shuffle = GENERATE(false, true);
  int epoch = GENERATE(0, 3);
  CAPTURE(rows, batch, shuffle, epoch);
  Steps one = GlobalSteps(rows, batch, 1, shuffle, 7, epoch);
  REQUIRE(static_cast<int64_t>(one.size()) == (rows + batch - 1) / batch);
  std::vector<int64_t> all;
  for (const auto& step : one) all.insert(all.end(), step.begin(), step.end());
  std::vector<int64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(rows);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(sorted == expected);  // every row once per epoch
  if (!shuffle) CHECK(all == expected);
  for (int world = 2; world <= 4; ++world) {
    CAPTURE(world);
    // Same rows in the same order, so each rank's slice is a contiguous piece of it.
    CHECK(GlobalSteps(rows, batch, world, shuffle, 7, epoch) == one);
  }
}

TEST_CASE("rank slices are contiguous near-equal shares of each global batch", "[trainer]") {
  auto [rows, batch, world] = GENERATE(table<int64_t, int64_t, int>(
      {{100, 12, 4}, {97, 12, 3}, {25, 12, 4}, {1437, 64, 2}, {13, 24, 3}}));
  CAPTURE(rows, batch, world);
  BatchPlan counter(rows, batch, 0, world, true, 1);
  for (int64_t s = 0; s < counter.steps(); ++s) {
    int64_t n = std::min(batch, rows - s * batch);
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      int64_t size = static_cast<int64_t>(RankSteps(rows, batch, r, world, true, 1, 0)[s].size());
      CHECK(size >= n / world);
      CHECK(size <= (n + world - 1) / world);
      total += size;
    }
    CHECK(total == n);
  }
  // The last batch of 25 rows in batches of 12 is one row: three of four ranks get none.
  if (rows == 25 && world == 4) {
    for (int r = 0; r < 3; ++r) CHECK(RankSteps(rows, batch, r, world, true, 1, 0)[2].empty());
    CHECK(RankSteps(rows, batch, 3, world, true, 1, 0)[2].size() == 1);
  }
}

TEST_CASE("the permutation is a function of (seed, epoch) alone", "[trainer]") {
  const int64_t rows = 200, batch = 16;
  Steps a = GlobalSteps(rows, batch, 1, true, 42, 5);
  // Another world, and a rank that went through other epochs first: the same order.
  Steps again(a.size());
  for (int r = 0; r < 3; ++r) {
    BatchPlan plan(rows, batch, r, 3, true, 42);
    if (r == 1) {
      plan.StartEpoch(0);
      plan.StartEpoch(9);
    }
    plan.StartEpoch(5);
    REQUIRE(plan.steps() == static_cast<int64_t>(a.size()));
    for (int64_t s = 0; s < plan.steps(); ++s) {
      BatchPlan::Slice slice = plan.RankSlice(s);
      again[s].insert(again[s].end(), slice.rows.begin(), slice.rows.end());
    }
  }
  CHECK(again == a);
  // Shuffled: a different seed or epoch gives another order (vanishingly unlikely to
  // match for 200 rows), and an epoch is not the identity.
  CHECK(GlobalSteps(rows, batch, 1, true, 43, 5) != a);
  CHECK(GlobalSteps(rows, batch, 1, true, 42, 6) != a);
  CHECK(GlobalSteps(rows, batch, 1, false, 42, 5) != a);
  // Not shuffled: every epoch in row order.
  CHECK(GlobalSteps(rows, batch, 1, false, 42, 5) == GlobalSteps(rows, batch, 1, false, 1, 0));
}

TEST_CASE("RankShare splits validation rows into contiguous near-equal shares", "[trainer]") {
  for (int64_t rows : {1, 7, 360}) {
    for (int world = 1; world <= 4; ++world) {
      CAPTURE(rows, world);
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        auto [begin, end] = RankShare(rows, r, world);
        CHECK(begin == next);
        CHECK(end - begin >= rows / world);
        CHECK(end - begin <= (rows + world - 1) / world);
        next = end;
      }
      CHECK(next == rows);
    }
  }
}

}  // namespace
}  // namespace cohort::trainer
