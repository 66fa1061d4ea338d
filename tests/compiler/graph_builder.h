// Hand-built quantized graphs for the back end's tests, and the end-to-end check: lower, run on
// every engine (identical cycles, memories equal to the ISA reference executor) and compare the
// output region with the golden model reference.
#pragma once

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "../sim/machine_support.h"
#include "compiler/compile.h"
#include "compiler/graph.h"
#include "compiler/layout.h"
#include "compiler/lower.h"
#include "compiler/reference.h"

namespace tpusim::test {

struct GraphBuilder {
  compiler::QGraph g;
  std::mt19937 rng{7};

  explicit GraphBuilder(uint64_t batch) {
    g.name = "test";
    g.batch = batch;
  }
  std::vector<int8_t> random(size_t n, int lo = -128, int hi = 127) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int8_t> v(n);
    for (auto& x : v) x = static_cast<int8_t>(d(rng));
    return v;
  }
  int tensor(const std::string& name, compiler::Shape shape) {
    g.tensors.push_back({name, shape, 0.05, name});
    return static_cast<int>(g.tensors.size() - 1);
  }
  int input(compiler::Shape shape) {
    const int t = tensor("input" + std::to_string(g.inputs.size()), shape);
    g.inputs.push_back(t);
    g.input_data.push_back(random(g.batch * shape.elements()));
    return t;
  }
  // A matmul reading `inputs` (whole tensors unless views are given) into `out`, with random
  // weights; per-column requantization with random bias when `perchan`.
  compiler::MatmulOp matmul(std::vector<compiler::View> inputs, compiler::View out, uint64_t kh = 1, uint64_t kw = 1,
                            bool perchan = false) {
    compiler::MatmulOp m;
    m.inputs = std::move(inputs);
    m.output = out;
    m.kernel_h = kh;
    m.kernel_w = kw;
    for (const auto& v : m.inputs) m.k += g.tensors[v.tensor].shape.c;
    m.n = g.tensors[out.tensor].shape.c;
    m.weights = random(kh * kw * m.k * m.n);
    // Keep results in range: shift by about log2(sqrt(kh kw K) x 74 x 74 / 64).
    const auto shift = static_cast<uint8_t>(7 + std::lround(std::log2(std::sqrt(double(kh * kw * m.k)))));
    if (perchan) {
      std::uniform_int_distribution<int> b(-5000, 5000), mu(100, 300);
      for (uint64_t j = 0; j < m.n; ++j) {
        m.bias.push_back(b(rng));
        m.mult.push_back(static_cast<uint16_t>(mu(rng)));
        m.shift.push_back(static_cast<uint8_t>(shift + 8));
      }
    } else {
      m.mult = {1};
      m.shift = {shift};
    }
    m.func = isa::Func::relu;
    return m;
  }
  void add(compiler::QOp op, const std::string& layer) {
    g.ops.push_back(std::move(op));
    g.op_layer.push_back(layer);
  }
};

inline compiler::View whole(int t) { return {t, 0, 0}; }

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
