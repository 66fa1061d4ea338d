// One run held equal to another: the stepped engine's run against a debugged run of the same
// program (tests/debug) or a run with the Verilated RTL array (tests/hw).
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <string>

#include "sim/machine.h"
#include "sim/reference.h"

namespace tpusim::test {

// Everything a run observes held equal between `a` and `b`: cycles, each instruction's issue,
// start and end, the counters, busy times, array steps, peaks and the memories.
inline void require_same_run(const sim::RunResult& a, const sim::RunResult& b) {
  REQUIRE(a.cycles == b.cycles);
  REQUIRE(a.timeline.size() == b.timeline.size());
  for (size_t i = 0; i < b.timeline.size(); ++i) {
    INFO("instruction " << i);
    REQUIRE(a.timeline[i] == b.timeline[i]);
  }
  REQUIRE(a.matrix == b.matrix);
  REQUIRE(a.macs == b.macs);
  REQUIRE(a.array_macs == b.array_macs);
  REQUIRE(a.unit_busy == b.unit_busy);
  REQUIRE(a.weight_mem_busy == b.weight_mem_busy);
  REQUIRE(a.array_steps == b.array_steps);
  REQUIRE(a.ub_peak_rows == b.ub_peak_rows);
  REQUIRE(a.acc_peak_rows == b.acc_peak_rows);
  std::string why;
  INFO(why);
  REQUIRE(sim::same_memories(*a.state, *b.state, &why));
}

}  // namespace tpusim::test
