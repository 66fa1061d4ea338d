// Kernels the ONNX importer widens with zero weights (compiler/onnx.cpp): a dilated kernel's gaps
// and the zero rows of a padded Conv1d's kernel are positions the machine reads (their cycles are
// the wider kernel's) but none of the model's multiplies. compiler::model_macs (what compare and
// the GPU and CPU runners count) and the array's useful MACs (the report's `macs`, the layers'
// `macs`) count the model's taps only (MatmulOp::taps): a 3 x 3 with dilation 2 counts 9 taps,
// not 25. Exact counts worked out by hand, on every engine and on several arrays, packed or not.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "e2e_support.h"
#include "graph_builder.h"

namespace tpusim::test {

using isa::Opcode;

namespace {

const fs::path kOnnx = fs::path(tpusim::source_dir()) / "tests" / "data" / "onnx";

compiler::LowerOptions packing(bool pack, bool stream = true) {
  compiler::LowerOptions o;
  o.pack = pack;
  o.stream_input = stream;
  return o;
}

compiler::Compiled compile_onnx(const std::string& name, const sim::Arch& arch, const compiler::LowerOptions& mapper,
                                std::optional<compiler::Precision> precision = std::nullopt) {
  compiler::LoadOptions lo;
  lo.input_file = kOnnx / ("x_" + name + ".npy");
  lo.mapper = mapper;
  if (precision) lo.precision = *precision;
  return compiler::compile_file(kOnnx / (name + ".onnx"), arch, lo);
}

// Each layer of the manifest: its macs, model_macs.
std::vector<std::pair<uint64_t, uint64_t>> layer_macs(const isa::Program& p) {
  std::vector<std::pair<uint64_t, uint64_t>> v;
  for (const nlohmann::json& l : p.meta["mapping"])
    v.emplace_back(l["macs"].get<uint64_t>(), l["model_macs"].get<uint64_t>());
  return v;
}

}  // namespace

TEST_CASE("a dilated 3 x 3 counts its 9 taps, not the 25 positions the machine reads, on every engine") {
  // conv_dilated3.onnx: Conv2d(4, 8, 3, padding=2, dilation=2) + ReLU, then a depthwise one alike
  // (8 groups), on 6 x 6 maps, batch 3. Each kernel becomes 5 x 5 with padding 2: 6 x 6 outputs.
  // The model: 3 x 36 pixels x 9 taps x (4 x 8 + 1 x 8) = 38,880 MACs (31,104 + 7,776); the 25
  // positions would count 3 x 36 x 25 x 40 = 108,000.
  const sim::Arch a;  // tpu-v1
  compiler::Compiled c = compile_onnx("conv_dilated3", a, packing(false, false));
  const isa::Program& p = c.program;
  CHECK(compiler::model_macs(c.graph) == 38880);
  const compiler::MatmulWork w = compiler::graph_matmul_work(c.graph);
  CHECK(w.model_weights == 9 * 4 * 8 + 9 * 8);  // 360
  // The GEMMs as computed: 3 x 36 x 25 x (4 x 8 + 8 x 8) (the depthwise tile holds all 8 x 8).
  CHECK(w.gemm_macs == 259200);
  // One tile per tap and layer (4 and 8 channels: one K and one N tile): 2 x 9 matmuls; a gap's
  // tile is all zero and not computed (tests/compiler/tap_tiles_test.cpp; 2 x 25 before). conv1's
  // tiles are its weights' box (4 x 8): none listed; the depthwise tiles' box is 8 x 8 around a
  // diagonal of 8: listed at its 9 taps, 8 a vector.
  CHECK(count(p, Opcode::matmul) == 18);
  const std::vector<isa::MatmulMacs> g = isa::matmul_macs(p, a.array_rows, a.array_cols);
  REQUIRE(g.size() == 9);
  for (const isa::MatmulMacs& m : g) CHECK((m.macs == 8 && !m.copy));
  CHECK(p.meta["macs"] == 38880);
  CHECK(layer_macs(p) == std::vector<std::pair<uint64_t, uint64_t>>{{31104, 31104}, {7776, 7776}});
  const EngineRuns r = run_all(p, a);  // (fast, stepped and timing held equal, macs included)
  CHECK(r.fast.macs == 38880);
  for (const sim::HostBuffer& h : r.fast.state->host)
    if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, a).matches);
}

TEST_CASE("dilated and Conv1d kernels count the model's taps on every array, packed or not, 8 and 16-bit") {
  // conv1d.onnx (batch 3): c1 Conv1d(3, 6, 3, stride 2, padding 1) on 11: 6 outputs, a 3 x 3
  // kernel whose rows 0 and 2 are zero: 6 x 3 taps x 3 x 6 = 324; c2 Conv1d(6, 4, 3, padding 2,
  // dilation 2) on 6: 6 outputs, a 5 x 5 kernel of 3 taps: 6 x 3 x 6 x 4 = 432; fc 24 x 5 = 120.
  // 876 a sample (the kernels' positions: 972 + 3,600 + 120). conv_dilated.onnx: a 3 x 2 kernel
  // dilated (2, 3), padded (2, 1): 5 x 6 positions, 6 taps, 7 x 7 outputs of 4 from 2 channels:
  // 49 x 6 x 2 x 4 = 2,352 a sample (positions: 11,760). conv_dilated3.onnx: 12,960 (above).
  const std::vector<std::pair<std::string, uint64_t>> models = {
      {"conv1d", 3 * 876}, {"conv_dilated", 3 * 2352}, {"conv_dilated3", 3 * 12960}};
  uint64_t runs = 0, listed = 0;
  for (const auto& [name, macs] : models)
    for (const sim::Arch& a : {sim::Arch{}, arch8x8(), rect(64, 256), rect(256, 64), rect(16, 16)})
      for (const bool pack : {true, false})
        for (const bool wide : {false, true}) {
          INFO(name << " on " << a.array_rows << " x " << a.array_cols << (pack ? "" : ", pack=off")
                    << (wide ? ", --precision wide" : ""));
          const compiler::Compiled c =
              compile_onnx(name, a, packing(pack),
                           wide ? std::optional(compiler::Precision::wide) : std::nullopt);
          CHECK(compiler::model_macs(c.graph) == macs);
          // 16-bit weights: each layer's matmuls in two byte planes, both counted (docs/report.md).
          for (const auto& [layer, model] : layer_macs(c.program)) CHECK(layer == (wide ? 2 : 1) * model);
          CHECK(c.program.meta["macs"] == (wide ? 2 : 1) * macs);
          const sim::RunResult t = sim::simulate(c.program, a, {sim::Engine::timing, 0});
          CHECK(t.macs == (wide ? 2 : 1) * macs);
          if (runs++ % 7 == 0) {  // every engine, bit-exact, on one compile in seven
            const EngineRuns r = run_all(c.program, a);
            CHECK(r.fast.macs == t.macs);
          }
          listed += isa::matmul_macs(c.program, a.array_rows, a.array_cols).size();
        }
  CHECK(runs == 60);
  CHECK(listed > 0);
}

}  // namespace tpusim::test
