// The sweep's results database (tools/sweep/store.h): record() stores each batch in one
// transaction, through one INSERT prepared per store and reused; its statements
// (tools/sweep/statement.h) reset after every run.
#include "tools/sweep/store.h"

#include <algorithm>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "isa/error.h"
#include "tools/sweep/statement.h"
#include "tools/source_dir.h"

using namespace tpusim::tools::sweep;

TEST_CASE("store: a batch that fails is rolled back and the reused INSERT stores the next") {
  const Spec spec = parse_spec(
      "[sweep]\nworkloads = [\"../asm/matmul.s\"]\nengine = \"fast\"\n[grid]\nclock_mhz = [700, 800, 900]\n",
      std::string(tpusim::source_dir()) + "/workloads/sweeps/test.toml");
  REQUIRE(spec.points.size() == 3);
  ResultStore store(":memory:");
  store.attach_spec(spec);
  const auto failed = [&](size_t i) { return PointResult{&spec.points[i], &spec, nullptr, "boom " + std::to_string(i), 0.5}; };

  store.record({failed(0)});
  CHECK(store.count() == 1);
  // Point 1, then point 0 again: its key is taken (UNIQUE), the step fails, and the whole batch
  // is rolled back (point 1 not stored either).
  CHECK_THROWS_AS(store.record({failed(1), failed(0)}), tpusim::InputError);
  CHECK(store.count() == 1);
  // The same statement, reset after the failed step, stores the next batch (its parameters
  // rebound: nothing of the failed batch's is left in the row).
  store.record({failed(2), failed(1)});
  CHECK(store.count() == 3);
  CHECK(store.finished_keys() == std::set<std::string>{spec.points[0].key, spec.points[1].key, spec.points[2].key});
  const auto lines = parse_csv(store.csv(), "csv");
  REQUIRE(lines.size() == 4);  // header and three points, in point order
  const auto error = std::find(lines[0].begin(), lines[0].end(), "error") - lines[0].begin();
  const auto status = std::find(lines[0].begin(), lines[0].end(), "status") - lines[0].begin();
  REQUIRE(size_t(error) < lines[0].size());
  REQUIRE(size_t(status) < lines[0].size());
  for (size_t i = 1; i < 4; ++i) {
    CHECK(lines[i][0] == std::to_string(i - 1));
    CHECK(lines[i][status] == "failed");
    CHECK(lines[i][error] == "boom " + std::to_string(i - 1));
  }
}

// The report's nullable numbers (`model_macs`: "integer or null", `model_tops`: "number or null",
// docs/report.md) are numeric columns: stored as TEXT they compared as text in SQL (`WHERE model_tops
// > 100` held for every row: TEXT sorts above every number) and came back from SQLite's text
// conversion with 15 digits (0.1759089017495735 -> 0.175908901749573 in the CSV, where tops beside it
// kept all 16).
TEST_CASE("store: model_macs and model_tops are numbers, exact in the CSV") {
  const Spec spec = parse_spec("[sweep]\nworkloads = [\"../asm/matmul.s\"]\nengine = \"timing\"\n",
                               std::string(tpusim::source_dir()) + "/workloads/sweeps/test.toml");
  REQUIRE(spec.points.size() == 1);
  ResultStore store(":memory:");
  store.attach_spec(spec);
  nlohmann::ordered_json report = {{"batch", 1},         {"cycles", 3077},
                                   {"tops", 0.1759089017495735}, {"model_macs", 12345678901},
                                   {"model_tops", 0.1759089017495735}};
  store.record({PointResult{&spec.points[0], &spec, report, "", 0.5}});
  const auto lines = parse_csv(store.csv(), "csv");
  REQUIRE(lines.size() == 2);
  const auto at = [&](const char* name) {
    const size_t i = std::find(lines[0].begin(), lines[0].end(), name) - lines[0].begin();
    REQUIRE(i < lines[0].size());
    return lines[1][i];
  };
  CHECK(at("tops") == "0.1759089017495735");
  CHECK(at("model_tops") == "0.1759089017495735");
  CHECK(at("model_macs") == "12345678901");
  const auto type_of = [&](const char* name) {
    for (const Column& c : columns())
      if (c.name == name) return c.type;
    FAIL("no column " << name);
    return ColumnType::text;
  };
  CHECK(type_of("model_macs") == ColumnType::integer);
  CHECK(type_of("model_tops") == ColumnType::real);
}

TEST_CASE("store: a statement is reset and unbound after every run, stored or thrown") {
  // Statement::run is the one way the store runs a statement that changes the database: it must
  // leave the statement at its start with no value bound, or a statement reused for the next row
  // (record()'s INSERT, create()'s, attach_spec's, forget_failed's) would carry the last row's
  // values or the last step's state. Without the reset each CHECK on bound_sql() below fails.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
  struct Close {
    sqlite3* db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  REQUIRE(sqlite3_exec(db, "CREATE TABLE t(k INTEGER UNIQUE, v TEXT)", nullptr, nullptr, nullptr) == SQLITE_OK);
  const std::string unbound = "INSERT INTO t(k, v) VALUES (NULL, NULL)";
  {
    Statement insert(db, "INSERT INTO t(k, v) VALUES (?1, ?2)", "test.db");
    insert.run({int64_t{1}, std::string("one")});
    CHECK(insert.bound_sql() == unbound);
    CHECK_FALSE(insert.busy());
    // Key 1 is taken (UNIQUE): the step fails, the statement is reset all the same.
    CHECK_THROWS_AS(insert.run({int64_t{1}, std::string("again")}), tpusim::InputError);
    CHECK(insert.bound_sql() == unbound);
    CHECK_FALSE(insert.busy());
    // A third value has no parameter: the bind throws before any step, the two bound before it
    // are unbound all the same.
    CHECK_THROWS_AS(insert.run({int64_t{2}, std::string("two"), int64_t{3}}), tpusim::InputError);
    CHECK(insert.bound_sql() == unbound);
    // Fewer values than parameters: the rest NULL, not the last row's.
    insert.run({int64_t{2}});
    CHECK(insert.bound_sql() == unbound);
    // A statement that returns rows is stepped to its end.
    Statement returning(db, "INSERT INTO t(k, v) VALUES (?1, 'three') RETURNING k", "test.db");
    returning.run({int64_t{3}});
    CHECK_FALSE(returning.busy());
  }
  Statement rows(db, "SELECT k, v FROM t ORDER BY k", "test.db");
  std::vector<std::pair<int64_t, std::string>> stored;
  while (rows.step()) stored.push_back({rows.integer(0), rows.text(1)});
  CHECK(stored == std::vector<std::pair<int64_t, std::string>>{{1, "one"}, {2, ""}, {3, "three"}});
}
