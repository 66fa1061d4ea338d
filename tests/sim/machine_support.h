// Helpers for the machine tests: a small-machine architecture whose timing is easy to work out
// by hand, a program builder, and running one program on every engine.
#pragma once

#include <catch2/catch.hpp>
#include <initializer_list>
#include <utility>

#include "isa/assembler.h"
#include "isa/program.h"
#include "sim/machine.h"
#include "sim/reference.h"
#include "sim_support.h"

namespace tpusim::test {

// A 4x4 machine with round numbers: clock 1000 MHz, so gbps = bytes per cycle; a 16-byte tile
// transfers in 4 cycles (16 / 4 GB/s) and is usable 3 cycles later; host DMA moves 1 byte per
// cycle after a 10-cycle start; the activation unit does one 4-wide row per cycle after 2.
inline sim::Arch small_arch() {
  sim::Arch a;
  a.name = "test-4x4";
  a.array_rows = a.array_cols = 4;
  a.clock_mhz = 1000;
  a.ub_bytes = 256 * 4;
  a.acc_entries = 64;
  a.weight_fifo_tiles = 4;
  a.weight_mem_gbps = 4;
  a.weight_mem_latency_cycles = 3;
  a.host_gbps = 1;
  a.host_latency_cycles = 10;
  a.activation_lanes = 4;
  a.activation_latency_cycles = 2;
  a.issue_cycles = 1;
  a.station_queue_depth = 4;
  a.weight_mem_bytes = 1 << 20;
  // Not tpu-v1: a machine whose software has the compiler's piece schedule (tpu-v1's runs the whole
  // model once per piece: sim/arch.h, driver_piece_schedule), which the compiler tests exercise.
  a.driver_piece_schedule = 1;
  return a;
}

// small_arch() with every column of a tile shifting into the shadow tile at once
// (weight_shift_skewed = 0: a shift begins array_cols - 1 cycles after the previous switch; the
// default, tpu-v1's, is skewed by column and begins at the switch).
inline sim::Arch small_arch_unskewed() {
  sim::Arch a = small_arch();
  a.weight_shift_skewed = 0;
  return a;
}

// One 4 x 4 tile of weights `w` (16 random bytes, seed 1) for small_arch()'s programs to read
// (`rw waddr=w, tiles=1`).
inline const std::string kTile = ".weights w, 0, 16, init=random(1)\n";

// Assembles `body` (after a .model line).
inline isa::Program assemble(const std::string& body) {
  return isa::assemble(".model \"test\"\n" + body, "test.s");
}

struct EngineRuns {
  sim::RunResult fast, stepped, timing;
};

// Runs every engine; requires identical timing and counters on all three and memories equal to
// the reference executor on the two that compute data.
inline EngineRuns run_all(const isa::Program& p, const sim::Arch& arch) {
  EngineRuns r{sim::simulate(p, arch, {sim::Engine::fast, 0}),
               sim::simulate(p, arch, {sim::Engine::stepped, 0}),
               sim::simulate(p, arch, {sim::Engine::timing, 0})};
  for (const sim::RunResult* other : {&r.stepped, &r.timing}) {
    REQUIRE(other->cycles == r.fast.cycles);
    REQUIRE(other->timeline == r.fast.timeline);
    REQUIRE(other->matrix == r.fast.matrix);
    REQUIRE(other->macs == r.fast.macs);
    REQUIRE(other->copy_macs == r.fast.copy_macs);
    REQUIRE(other->array_macs == r.fast.array_macs);
    REQUIRE(other->unit_busy == r.fast.unit_busy);
    REQUIRE(other->weight_mem_busy == r.fast.weight_mem_busy);
    REQUIRE(other->ub_peak_rows == r.fast.ub_peak_rows);
    REQUIRE(other->acc_peak_rows == r.fast.acc_peak_rows);
  }
  REQUIRE(!r.timing.state);
  const sim::MachineState ref = sim::run_reference(p, arch);
  std::string why_fast, why_stepped;
  const bool fast_ok = sim::same_memories(*r.fast.state, ref, &why_fast);
  const bool stepped_ok = sim::same_memories(*r.stepped.state, ref, &why_stepped);
  INFO("fast vs reference: " << why_fast << "; stepped vs reference: " << why_stepped);
  CHECK(fast_ok);
  CHECK(stepped_ok);
  const sim::MatrixCounters& m = r.fast.matrix;
  REQUIRE(m.array_active + m.weight_stall + m.weight_shift + m.non_matrix == r.fast.cycles);
  return r;
}

}  // namespace tpusim::test
