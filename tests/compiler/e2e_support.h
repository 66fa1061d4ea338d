// What the end-to-end compiler tests share: compile a model, run it on the engines, compare the
// output with the golden reference.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>

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

inline sim::Arch square(uint64_t n, uint64_t ub_rows = 32768, uint64_t acc = 256) {
  sim::Arch a = small_arch();
  a.name = "test-" + std::to_string(n);
  a.array_rows = a.array_cols = n;
  a.ub_bytes = ub_rows * n;
  a.acc_entries = acc;
  return a;
}

inline compiler::Model load(const std::string& rel, std::optional<uint64_t> batch = std::nullopt) {
  compiler::LoadOptions o;
  o.batch = batch;
  return compiler::load_model(kWorkloads / rel, o);
}

}  // namespace tpusim::test
