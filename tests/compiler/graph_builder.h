// Hand-built quantized graphs for the back end's tests, and the end-to-end check: lower, run on
// every engine (identical cycles, memories equal to the ISA reference executor) and compare the
// output region with the golden model reference.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "../sim/machine_support.h"
#include "compiler/compile.h"
#include "compiler/graph.h"
#include "compiler/layout.h"
#include "compiler/lower.h"
#include "compiler/reference.h"
#include "qgraph_builder.h"

namespace tpusim::test {

// Counts instructions with `op` (and, when given, field f == value).
inline size_t count(const isa::Program& p, isa::Opcode op, isa::Field f = isa::Field::tag, int64_t value = -1) {
  size_t n = 0;
  for (const auto& in : p.code)
    if (in.opcode == op && (value < 0 || in[f] == static_cast<uint64_t>(value))) ++n;
  return n;
}

// An 8 x 8 array (lanes of 8 channels) with 2048 UB rows and `acc_entries` accumulator rows, on
// small_arch()'s timing: the activation unit takes ceil(8 / 4) = 2 cycles per row (activation_lanes
// 4, latency 2).
inline sim::Arch arch8x8(uint64_t acc_entries = 256) {
  sim::Arch a = small_arch();
  a.name = "test-8x8";
  a.array_rows = a.array_cols = 8;
  a.ub_bytes = 2048 * 8;
  a.acc_entries = acc_entries;
  return a;
}

// The same options with input streaming off (docs/compiler.md "Input streaming"), for tests that
// pin another technique's exact instructions and cycles, which streaming the input would cut
// into parts and chunks.
inline compiler::LowerOptions whole_input(compiler::LowerOptions o = {}) {
  o.stream_input = false;
  return o;
}

// Lowers, runs every engine and compares the output region with the golden reference.
inline isa::Program lower_and_check(const compiler::QGraph& g, const sim::Arch& arch,
                                    const compiler::LowerOptions& options = {}) {
  const isa::Program p = compiler::lower(g, arch, options);
  REQUIRE(isa::check_program(p).empty());
  const EngineRuns r = run_all(p, arch);
  const auto golden = compiler::run_golden(g);
  const compiler::QTensor& out = g.tensors[g.output];
  const std::vector<uint8_t> want = compiler::to_tpu_order(golden[g.output], out.shape, g.batch,
                                                           compiler::slice_width(arch),
                                                           p.meta.value("batch_piece", uint64_t{0}));
  for (const sim::RunResult* run : {&r.fast, &r.stepped})
    for (const sim::HostBuffer& h : run->state->host)
      if (h.name == "output") CHECK(h.bytes == want);
  return p;
}

}  // namespace tpusim::test
