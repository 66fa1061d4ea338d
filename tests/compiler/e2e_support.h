// What the end-to-end compiler tests share: compile a model, run it on the engines, compare the
// output with the golden reference.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "compiler/model.h"
#include "graph_builder.h"

namespace tpusim::test {

namespace fs = std::filesystem;

inline const fs::path kWorkloads = fs::path(TPUSIM_SOURCE_DIR) / "workloads";

// Compiles `model` (with the mapper `options`), runs it on the given engines and checks the output against the golden
// reference; returns the fast engine's cycles.
inline uint64_t check_model(compiler::Model model, const sim::Arch& arch, bool all_engines,
                            const compiler::LowerOptions& options = {}) {
  const std::string name = model.name;
  compiler::Compiled c = compiler::prepare_model(std::move(model));
  compiler::lower_for(c, arch, options);
  REQUIRE(isa::check_program(c.program).empty());
  INFO(name << " on " << arch.name << " (" << arch.array_rows << "x" << arch.array_cols << ")");
  sim::RunResult fast;
  if (all_engines) {
    EngineRuns r = run_all(c.program, arch);
    fast = std::move(r.fast);
    for (const sim::HostBuffer& h : r.stepped.state->host)
      if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, arch).matches);
  } else {
    fast = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
    const sim::RunResult timing = sim::simulate(c.program, arch, {sim::Engine::timing, 0});
    REQUIRE(timing.cycles == fast.cycles);
    REQUIRE(timing.matrix == fast.matrix);
  }
  for (const sim::HostBuffer& h : fast.state->host)
    if (h.name == "output") {
      const compiler::OutputCheck check = compiler::check_output(c, h.bytes, arch);
      INFO(check.first_difference);
      CHECK(check.matches);
      // The quantized model stays close to the float one: a few percent of the output range,
      // more where sigmoid and tanh decide the output (LSTM cells compound int8 rounding over their
      // steps); a wrong scale anywhere costs ~100%.
      bool coarse = false;
      for (const compiler::Layer& l : c.model.layers)
        coarse |= l.type == compiler::LayerType::lstm || l.activation == compiler::Activation::sigmoid ||
                  l.activation == compiler::Activation::tanh;
      CHECK(check.error.relative < (coarse ? 0.5 : 0.1));
    }
  return fast.cycles;
}

// A random description: a map, vector or sequence input and a few layers of every kind.
inline std::string random_description(std::mt19937& rng, int index) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* acts[] = {"none", "relu", "relu6", "sigmoid", "tanh"};
  std::ostringstream head, d;
  head << "[model]\nname = \"random" << index << "\"\nbatch = " << pick(1, 5) << "\nseed = " << pick(1, 1000) << "\n";
  const int kind = pick(0, 2);
  if (kind == 0) {  // a CNN: convolutions (1x1 or 3x3, padded or not, strided or not), pools, residuals, concats
    int h = pick(5, 10), w = pick(5, 10), c = pick(1, 12);
    head << "input = [" << h << ", " << w << ", " << c << "]\n";
    for (int l = 0, layers = pick(1, 4); l < layers; ++l) {
      const int k = pick(0, 1) ? 3 : 1, stride = pick(0, 3) == 0 ? 2 : 1, pad = k == 3 ? pick(0, 1) : 0;
      if (h + 2 * pad < k || w + 2 * pad < k) break;
      c = pick(1, 20);
      d << "[[layer]]\ntype = \"conv2d\"\nname = \"conv" << l << "\"\nfilters = " << c << "\nkernel = " << k
        << "\nstride = " << stride << "\npadding = " << pad << "\nactivation = \"" << acts[pick(0, 2)] << "\"\n";
      h = (h + 2 * pad - k) / stride + 1;
      w = (w + 2 * pad - k) / stride + 1;
      if (pick(0, 2) == 0) {  // conv 3x3 same, added to the conv's output (and maybe squared)
        d << "[[layer]]\ntype = \"conv2d\"\nname = \"res" << l << "\"\nfilters = " << c
          << "\nkernel = 3\npadding = \"same\"\n[[layer]]\ntype = \"add\"\nname = \"sum" << l << "\"\ninputs = [\"res"
          << l << "\", \"conv" << l << "\"]\nactivation = \"relu\"\n";
        if (pick(0, 1))
          d << "[[layer]]\ntype = \"mul\"\ninputs = [\"sum" << l << "\", \"res" << l << "\"]\n";
      }
      if (pick(0, 2) == 0) {  // Inception-style: a 1x1 and a 3x3 same branch of the same map, joined
        const int c1 = pick(1, 12), c3 = pick(1, 12);
        d << "[[layer]]\ntype = \"activation\"\nname = \"pre" << l << "\"\nactivation = \"relu\"\n"
          << "[[layer]]\ntype = \"conv2d\"\nname = \"b1x1_" << l << "\"\nfilters = " << c1 << "\nkernel = 1\n"
          << "[[layer]]\ntype = \"conv2d\"\nname = \"b3x3_" << l << "\"\ninput = \"pre" << l << "\"\nfilters = " << c3
          << "\nkernel = 3\npadding = \"same\"\nactivation = \"" << acts[pick(0, 4)] << "\"\n"
          << "[[layer]]\ntype = \"concat\"\ninputs = [\"b1x1_" << l << "\", \"b3x3_" << l << "\", \"pre" << l << "\"]\n";
        c += c1 + c3;
      }
      if (pick(0, 2) == 0 && h >= 2 && w >= 2) {
        d << "[[layer]]\ntype = \"" << (pick(0, 1) ? "max_pool" : "avg_pool") << "\"\nsize = 2\n";
        h = (h - 2) / 2 + 1;
        w = (w - 2) / 2 + 1;
      }
    }
    d << "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 12) << "\n";
  } else if (kind == 1) {  // an MLP
    head << "input = [" << pick(1, 40) << "]\n";
    for (int l = pick(1, 4); l > 0; --l)
      d << "[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 40) << "\nactivation = \"" << acts[pick(0, 4)]
        << "\"\nbias = " << (pick(0, 1) ? "true" : "false") << "\n";
  } else {  // an LSTM (stacked or not), then a dense layer on its last (or every) step
    head << "input = [" << pick(1, 4) << ", " << pick(1, 20) << "]\n";
    d << "[[layer]]\ntype = \"lstm\"\nunits = " << pick(1, 20) << "\nstack = " << pick(1, 2)
      << "\nreturn_sequences = " << (pick(0, 1) ? "true" : "false") << "\n";
    d << "[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 10) << "\n";
  }
  if (pick(0, 1)) head << "[quantization]\nweights = \"per_tensor\"\n";
  return head.str() + d.str();
}

inline sim::Arch square(uint64_t n, uint64_t ub_rows = 32768, uint64_t acc = 256) {
  sim::Arch a = small_arch();
  a.name = "test-" + std::to_string(n);
  a.array_rows = a.array_cols = n;
  a.ub_bytes = ub_rows * n;
  a.acc_entries = acc;
  return a;
}

// wide_test's and wide_inputs_test's LSTM: 2 stacked layers of 5 units over 4 steps of 6 features
// at batch 3, then a dense layer of 3 with 8-bit weights; `quantization` is a [quantization] table
// (or empty) and `key` a line added to the lstm layer (or empty).
inline compiler::Model wide_lstm_model(const std::string& quantization, const std::string& key) {
  return compiler::parse_model("[model]\nname = \"wide_lstm\"\nbatch = 3\ninput = [4, 6]\n" + quantization +
                                   "\n[[layer]]\nname = \"lstm\"\ntype = \"lstm\"\nunits = 5\nstack = 2\n" + key +
                                   "\n[[layer]]\nname = \"scores\"\ntype = \"dense\"\nunits = 3\nweight_bits = 8\n",
                               "wide_lstm.toml", ".");
}

// A rows x cols array with 8192 UB rows and room for 65,536 tiles in weight memory (the random
// tests' machine).
inline sim::Arch rect(uint64_t rows, uint64_t cols) {
  sim::Arch a = square(8);
  a.array_rows = rows;
  a.array_cols = cols;
  a.name = "test-" + std::to_string(rows) + "x" + std::to_string(cols);
  a.ub_bytes = 8192 * a.ub_row_bytes();
  a.weight_mem_bytes = a.tile_bytes() * 65536;
  return a;
}

inline compiler::Model load(const std::string& rel, std::optional<uint64_t> batch = std::nullopt) {
  compiler::LoadOptions o;
  o.batch = batch;
  return compiler::load_model(kWorkloads / rel, o);
}

}  // namespace tpusim::test
