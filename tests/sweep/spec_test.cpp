// Sweep specs expand into the documented point order; shards partition the points; CSV fields
// survive a write and a read.
#include "tools/sweep/spec.h"

#include <catch2/catch.hpp>
#include <set>

#include "isa/error.h"
#include "tools/sweep/results.h"
#include "tools/source_dir.h"

using namespace tpusim;
using namespace tpusim::tools::sweep;

namespace {

const std::filesystem::path kSpecPath =
    std::string(tpusim::source_dir()) + "/workloads/sweeps/test.toml";  // workloads resolve from here

Spec parse(const std::string& body) {
  return parse_spec("[sweep]\nworkloads = [\"../small/mnist_mlp.toml\", \"../small/tiny_cnn.toml\"]\n" + body,
                    kSpecPath);
}

}  // namespace

TEST_CASE("grid: workloads outermost, the last axis fastest, linked parameters together") {
  const Spec s = parse(
      "[grid]\nclock_mhz = [700, 1400]\n[grid.array]\narray_rows = [64, 128, 256]\narray_cols = [32, 64, "
      "128]\n");
  REQUIRE(s.points.size() == 2 * 2 * 3);  // workloads x clocks x array sizes
  CHECK(s.points[0].workload->name == "mnist_mlp");
  CHECK(s.points[6].workload->name == "tiny_cnn");
  CHECK(s.points[0].arch.clock_mhz == 700.0);
  CHECK(s.points[0].arch.array_rows == 64);
  CHECK(s.points[0].arch.array_cols == 32);
  CHECK(s.points[1].arch.array_rows == 128);  // the array axis, written last, varies fastest
  CHECK(s.points[1].arch.array_cols == 64);
  CHECK(s.points[3].arch.clock_mhz == 1400.0);
  for (size_t i = 0; i < s.points.size(); ++i) CHECK(s.points[i].index == i);
}

TEST_CASE("ranges: step adds, times multiplies, integers stay integers") {
  const Spec s = parse(
      "[grid]\narray_rows = { from = 32, to = 256, times = 2 }\nweight_mem_gbps = { from = 10, to = 30, step "
      "= 10 }\n");
  REQUIRE(s.points.size() == 2 * 4 * 3);
  CHECK(s.points[0].arch.array_rows == 32);
  CHECK(s.points[3].arch.array_rows == 64);
  CHECK(s.points[11].arch.array_rows == 256);
  CHECK(s.points[2].arch.weight_mem_gbps == 30.0);
}

TEST_CASE("[set] applies to every point, [[points]] follow the grid, duplicates are dropped") {
  const Spec s = parse(
      "[set]\nweight_fifo_tiles = 2\n[grid]\nbatch = [4, 8]\n[[points]]\nbatch = 8\n[[points]]\nacc_entries "
      "= 64\n");
  REQUIRE(s.points.size() == 2 * 3);  // batch 4, batch 8, acc 64 (the listed batch 8 is the grid's)
  CHECK(s.duplicates == 2);
  CHECK(s.points[0].batch == 4u);
  CHECK(s.points[2].arch.acc_entries == 64);
  CHECK(!s.points[2].batch);
  for (const Point& p : s.points) CHECK(p.arch.weight_fifo_tiles == 2);
}

TEST_CASE("shards partition the points") {
  const Spec s = parse("[grid]\nclock_mhz = [100, 200, 300, 400, 500, 600, 700]\n");
  std::multiset<uint64_t> seen;
  for (uint64_t k = 0; k < 3; ++k)
    for (const Point& p : s.points)
      if (in_shard(p, parse_shard(std::to_string(k) + "/3"))) seen.insert(p.index);
  CHECK(seen.size() == s.points.size());
  CHECK(std::set<uint64_t>(seen.begin(), seen.end()).size() == s.points.size());
  CHECK_THROWS_AS(parse_shard("3/3"), InputError);
  CHECK_THROWS_AS(parse_shard("1"), InputError);
  CHECK_THROWS_AS(parse_shard("-1/2"), InputError);
}

TEST_CASE("bad specs name the line, the key and what was expected") {
  const auto message = [](const std::string& body) {
    try {
      parse(body);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("[grid]\nclok_mhz = [700]\n"),
             Catch::Contains("test.toml:4: grid: clok_mhz: unknown parameter (did you mean 'clock_mhz'?)"));
  CHECK_THAT(message("[grid]\nclock_mhz = []\n"),
             Catch::Contains("test.toml:4: grid: clock_mhz: []: expected at least one value"));
  CHECK_THAT(message("[grid]\nclock_mhz = [true]\n"), Catch::Contains("clock_mhz: true: expected a number"));
  CHECK_THAT(message("[grid]\nclock_mhz = { from = 1, to = 2 }\n"), Catch::Contains("one of step"));
  CHECK_THAT(message("[grid.a]\nbatch = [1]\nfoo = [2]\n"),
             Catch::Contains("grid.a: foo: unknown parameter"));
}

TEST_CASE("CSV fields with commas, quotes and line breaks read back") {
  const Row row = {int64_t{3}, std::string("a,b"),  std::string("say \"hi\"\nthere"), 0.1,
                   Cell{},     std::string("plain")};
  const auto records = parse_csv(csv_line(row) + csv_line(row), "test.csv");
  REQUIRE(records.size() == 2);
  CHECK(records[0] == std::vector<std::string>{"3", "a,b", "say \"hi\"\nthere", "0.1", "", "plain"});
  CHECK_THROWS_AS(parse_csv("1,\"open\n", "t.csv"), InputError);
}

TEST_CASE("every report key becomes a column, less the wall-clock ones") {
  std::set<std::string> names;
  for (const Column& c : columns()) names.insert(c.name);
  CHECK(names.contains("breakdown.array_active"));
  CHECK(names.contains("units_busy.matrix"));
  CHECK(names.contains("instructions.matmul"));
  CHECK(names.contains("weight_mem_gbps"));
  CHECK(names.contains("batch"));
  CHECK(!names.contains("host_seconds"));
  CHECK(!names.contains("simulated_cycles_per_second"));
  CHECK(names.size() == columns().size());
}
