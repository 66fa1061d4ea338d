// A timing-only compile (LoadOptions::timing_only, what `tpusim run --engine timing` asks for)
// computes no data: no seeded inputs, no float calibration run. Its programs must time exactly
// as the full compile's do: the same instructions in the same order (only requantization fields
// and table contents may differ), the same cycle for every instruction's start and end, the same
// counters.
#include <catch2/catch.hpp>

#include "e2e_support.h"
#include "isa/disassembler.h"

namespace tpusim::test {

namespace {

// Every instruction's opcode and every field but the requantization ones (act's mult, shift).
void check_same_but_requantization(const isa::Program& a, const isa::Program& b) {
  REQUIRE(a.code.size() == b.code.size());
  for (size_t i = 0; i < a.code.size(); ++i) {
    isa::Instruction x = a.code[i], y = b.code[i];
    for (isa::Field f : {isa::Field::mult, isa::Field::shift}) x[f] = y[f] = 0;
    INFO("instruction " << i << ": " << isa::format_instruction(a.code[i]) << " / " << isa::format_instruction(b.code[i]));
    CHECK(x == y);
  }
}

void check_same_timing(const fs::path& model, const sim::Arch& arch) {
  INFO(model.string());
  compiler::LoadOptions full, timing;
  timing.timing_only = true;
  const compiler::Compiled a = compiler::compile_file(model, arch, full);
  const compiler::Compiled b = compiler::compile_file(model, arch, timing);
  check_same_but_requantization(a.program, b.program);
  CHECK(a.program.weights == b.program.weights);  // the weights are still the model's
  const sim::RunResult ra = sim::simulate(a.program, arch, {sim::Engine::timing, 0});
  const sim::RunResult rb = sim::simulate(b.program, arch, {sim::Engine::timing, 0});
  CHECK(ra.cycles == rb.cycles);
  CHECK(ra.timeline == rb.timeline);
  CHECK(ra.matrix == rb.matrix);
  CHECK(ra.macs == rb.macs);
  CHECK(ra.array_macs == rb.array_macs);
  // A timing-only SCALE-Sim topology carries no input data.
  if (model.extension() == ".csv")
    for (const isa::HostRegion& r : b.program.host_regions)
      if (r.name.starts_with("input")) CHECK(r.init.empty());
}

}  // namespace

TEST_CASE("a timing-only compile times exactly as the full compile on every kind of workload") {
  const fs::path data = fs::path(TPUSIM_SOURCE_DIR) / "tests/data/models";
  for (const char* w : {"small/lenet5.toml", "small/lstm1.toml", "small/resblock.toml", "small/tiny_cnn.toml",
                        "small/mnist_mlp.toml", "small/wide_mlp.toml"})
    check_same_timing(kWorkloads / w, sim::Arch{});
  for (const char* t : {"topology.csv", "depthwise.csv", "gemm.csv"}) {
    check_same_timing(data / t, sim::Arch{});
    check_same_timing(data / t, square(8));
  }
}

}  // namespace tpusim::test
