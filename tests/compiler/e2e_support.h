// What the end-to-end compiler tests share: compile a model, run it on the engines, compare the
// output with the golden reference.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/model.h"
#include "isa/error.h"
#include "graph_builder.h"
#include "tools/source_dir.h"

namespace tpusim::test {

namespace fs = std::filesystem;

inline const fs::path kWorkloads = fs::path(tpusim::source_dir()) / "workloads";

// A generated description parsed; a description the parser refuses fails the test (the generator's
// bug), with the parser's message.
inline compiler::Model parse_generated(const std::string& text) {
  try {
    return compiler::parse_model(text, "random.toml", ".");
  } catch (const InputError& e) {
    INFO(e.what());
    FAIL("the generator wrote a description the parser refuses");
  }
  return {};
}

// Compiles `model` (with the mapper `options`), runs it on the given engines and checks the output against the golden
// reference; returns the fast engine's cycles.
inline uint64_t check_model(compiler::Model model, const sim::Arch& arch, bool all_engines,
                            const compiler::LowerOptions& options = {}) {
  const std::string name = model.name;
  compiler::Compiled c = compiler::prepare_model(std::move(model), false, options);
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
        coarse |= compiler::is_recurrent(l.type) || l.activation == compiler::Activation::sigmoid ||
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

// A random description built around concats (docs/compiler.md "Concatenation"): a map input and
// 1 to 3 modules, each joining 2 to 4 branches of 1 to 40 channels (narrower and wider than the
// random arrays' tiles, so that branches straddle K and N tile and UB slice boundaries): 1 x 1 and
// 3 x 3 "same" convolutions (any activation, sometimes 16-bit weights), the module's input itself,
// a pool branch (Inception's 3 x 3 stride-1 average and a padded 1 x 1 projection), a nested
// concat of two branches; or a reduction (a 2 x 2 stride-2 convolution beside a 2 x 2 stride-2 max
// pool). The modules' concats are read by the next module's convolutions, a pool, an activation,
// a strided or padded 3 x 3 convolution, a flatten and a dense layer, or are the model's output.
inline std::string random_concat_description(std::mt19937& rng, int index) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* acts[] = {"none", "relu", "relu6", "sigmoid", "tanh"};
  std::ostringstream d;
  int h = pick(4, 8), w = pick(4, 8), c = pick(1, 20);
  d << "[model]\nname = \"concat" << index << "\"\nbatch = " << pick(1, 4) << "\nseed = " << pick(1, 1000)
    << "\ninput = [" << h << ", " << w << ", " << c << "]\n";
  std::string x = "input";  // the module's input
  int n = 0;                // layers named so far
  const auto conv = [&](const std::string& in, int filters, int k, const std::string& extra) {
    const std::string name = fmt::format("l{}", n++);
    d << "[[layer]]\nname = \"" << name << "\"\ntype = \"conv2d\"\ninput = \"" << in << "\"\nfilters = " << filters
      << "\nkernel = " << k << "\nactivation = \"" << acts[pick(0, 9) < 8 ? pick(0, 2) : pick(3, 4)] << "\"\n"
      << (pick(0, 5) == 0 ? "weight_bits = 16\n" : "") << extra;
    return name;
  };
  const auto layer = [&](const std::string& body) {
    const std::string name = fmt::format("l{}", n++);
    d << "[[layer]]\nname = \"" << name << "\"\n" << body;
    return name;
  };
  const int modules = pick(1, 3);
  bool last_is_concat = false;
  for (int m = 0; m < modules; ++m) {
    std::vector<std::string> branches;
    int joined = 0;
    if (pick(0, 3) == 0 && h >= 4 && w >= 4) {  // a reduction
      const int c1 = pick(1, 40);
      branches.push_back(conv(x, c1, 2, "stride = 2\n"));
      branches.push_back(layer(fmt::format("type = \"max_pool\"\ninput = \"{}\"\nsize = 2\nstride = 2\n", x)));
      joined = c1 + c;
      h = (h - 2) / 2 + 1;
      w = (w - 2) / 2 + 1;
    } else {
      for (int b = 0, nb = pick(2, 4); b < nb; ++b) {
        const int kind = pick(0, 5), cb = pick(1, 40);
        if (kind == 0) {
          branches.push_back(conv(x, cb, 1, ""));
          joined += cb;
        } else if (kind == 1) {
          branches.push_back(conv(conv(x, pick(1, 24), 1, ""), cb, 3, "padding = \"same\"\n"));
          joined += cb;
        } else if (kind == 2 && h >= 3 && w >= 3) {
          const std::string pool = layer(fmt::format("type = \"avg_pool\"\ninput = \"{}\"\nsize = 3\nstride = 1\n", x));
          branches.push_back(conv(pool, cb, 1, "padding = 1\n"));
          joined += cb;
        } else if (kind == 3 && x != "input") {
          branches.push_back(x);  // the module's input itself (read by the other branches too)
          joined += c;
        } else {  // a nested concat of two 1 x 1 branches
          const int c2 = pick(1, 40);
          const std::string a = conv(x, cb, 1, ""), e = conv(x, c2, 1, "");
          branches.push_back(layer(fmt::format("type = \"concat\"\ninputs = [\"{}\", \"{}\"]\n", a, e)));
          joined += cb + c2;
        }
      }
    }
    std::ostringstream list;
    for (size_t b = 0; b < branches.size(); ++b) list << (b ? ", " : "") << '"' << branches[b] << '"';
    x = layer(fmt::format("type = \"concat\"\ninputs = [{}]\n", list.str()));
    c = joined;
    last_is_concat = true;
    const int reader = pick(0, 5);
    if (reader == 0 && h >= 2 && w >= 2) {
      const int s = pick(1, 2);
      x = layer(fmt::format("type = \"max_pool\"\nsize = 2\nstride = {}\n", s));
      h = (h - 2) / s + 1;
      w = (w - 2) / s + 1;
      last_is_concat = false;
    } else if (reader == 1) {
      x = layer("type = \"activation\"\nactivation = \"relu\"\n");
      last_is_concat = false;
    } else if (reader == 2 && h >= 3 && w >= 3) {  // a strided or padded 3 x 3 convolution
      const int s = pick(1, 2), p = pick(0, 1);
      c = pick(1, 40);
      x = conv(x, c, 3, fmt::format("stride = {}\npadding = {}\n", s, p));
      h = (h + 2 * p - 3) / s + 1;
      w = (w + 2 * p - 3) / s + 1;
      last_is_concat = false;
    }
  }
  if (!last_is_concat || pick(0, 1))
    d << "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 12) << "\n";
  return d.str();
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
