// sim::parallel_for (sim/parallel.h): every item once on any thread count, the lowest failing
// item's exception, calls from several threads at once and from inside an item.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sim/parallel.h"

using namespace tpusim;

namespace {

// Restores the default thread count when a test ends.
struct Threads {
  explicit Threads(unsigned n) { sim::set_threads(n); }
  ~Threads() { sim::set_threads(0); }
};

}  // namespace

TEST_CASE("parallel_for: every item exactly once, on 1, 2 and 5 threads", "[parallel]") {
  for (unsigned t : {1u, 2u, 5u}) {
    const Threads threads(t);
    CHECK(sim::threads() == t);
    for (uint64_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> seen(n);
      sim::parallel_for(n, [&](uint64_t i) { seen[i].fetch_add(1); });
      for (uint64_t i = 0; i < n; ++i) CHECK(seen[i].load() == 1);
    }
  }
}

TEST_CASE("parallel_for: the lowest failing item's exception, later items skipped", "[parallel]") {
  for (unsigned t : {1u, 4u}) {
    const Threads threads(t);
    std::atomic<uint64_t> ran{0};
    try {
      // Items 3 and 5 throw; on one thread item 3 throws first and 4.. are skipped.
      sim::parallel_for(200, [&](uint64_t i) {
        ran.fetch_add(1);
        if (i == 3 || i == 5) throw std::runtime_error("item " + std::to_string(i));
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "item 3");
    }
    if (t == 1) CHECK(ran.load() == 4);  // items 0..3
  }
}

TEST_CASE("parallel_for: calls from two threads at once and from inside an item all finish", "[parallel]") {
  const Threads threads(3);
  std::atomic<uint64_t> sum{0};
  const auto work = [&] {
    sim::parallel_for(50, [&](uint64_t i) {
      sim::parallel_for(20, [&](uint64_t j) { sum.fetch_add(i * 20 + j); });  // nested
    });
  };
  std::thread other(work);
  work();
  other.join();
  // Twice the sum of 0 .. 999.
  CHECK(sum.load() == 2 * (999 * 1000 / 2));
}

TEST_CASE("threads: set_threads overrides the default, 0 restores it", "[parallel]") {
  const unsigned base = sim::threads();
  CHECK(base >= 1);
  sim::set_threads(7);
  CHECK(sim::threads() == 7);
  sim::set_threads(0);
  CHECK(sim::threads() == base);
  CHECK(sim::usable_cpus() >= 1);
}
