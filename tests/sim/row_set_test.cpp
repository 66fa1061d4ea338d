// sim::RowSet (sim/row_set.h): the interval set behind the UB counter and the compiler's sync
// placement, against a plain set of rows on random spans.
#include "sim/row_set.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

using tpusim::sim::RowSet;

TEST_CASE("row set: joins touching spans, counts rows seen before, meets spans") {
  RowSet s;
  CHECK(s.add(10, 5) == 0);  // [10, 15)
  CHECK(s.add(20, 5) == 0);  // [10, 15) [20, 25)
  CHECK(s.intervals() == 2);
  CHECK(s.add(15, 5) == 0);  // touches both: [10, 25)
  CHECK(s.intervals() == 1);
  CHECK(s.add(12, 20) == 13);  // rows 12..24 were in: [10, 32)
  CHECK(s.add(40, 4) == 0);    // [10, 32) [40, 44)
  CHECK(s.add(41, 2) == 2);    // inside the interval the last add made
  CHECK(s.add(10, 22) == 22);  // inside the other one
  CHECK(s.add(44, 1) == 0);    // touches [40, 44): [10, 32) [40, 45)
  CHECK(s.intervals() == 2);
  CHECK(s.add(32, 8) == 0);    // joins both: [10, 45)
  CHECK(s.intervals() == 1);
  CHECK(s.add(20, 25) == 25);
  CHECK_FALSE(s.intersects(45, 1));
  CHECK(s.add(45, 1) == 0);  // [10, 46)
  CHECK(s.intersects(31, 1));
  CHECK_FALSE(s.intersects(46, 4));
  CHECK_FALSE(s.intersects(0, 10));
  CHECK(s.intersects(0, 11));
  CHECK_FALSE(s.intersects(11, 0));  // an empty span meets nothing
  CHECK(s.add(5, 0) == 0);
  CHECK(s.intervals() == 1);
  s.clear();
  CHECK(s.empty());
  CHECK_FALSE(s.intersects(10, 100));
}

TEST_CASE("row set: random spans agree with a plain set of rows") {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    RowSet s;
    std::set<uint64_t> plain;
    for (int i = 0; i < 60; ++i) {
      const uint64_t first = rng() % 200, rows = rng() % 12;
      uint64_t seen = 0, meets = 0;
      for (uint64_t r = first; r < first + rows; ++r) seen += plain.count(r);
      meets = seen > 0;
      CHECK(s.intersects(first, rows) == bool(meets));
      CHECK(s.add(first, rows) == seen);
      for (uint64_t r = first; r < first + rows; ++r) plain.insert(r);
      // The intervals are the plain set's maximal runs of consecutive rows.
      uint64_t runs = 0;
      for (auto it = plain.begin(); it != plain.end(); ++it)
        if (it == plain.begin() || *std::prev(it) + 1 != *it) ++runs;
      CHECK(s.intervals() == runs);
    }
  }
}
