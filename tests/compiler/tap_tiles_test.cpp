// A kernel the ONNX importer widens with zero weights (a dilated kernel's gaps, a padded Conv1d's
// zero rows: MatmulOp::taps) has weight tiles that are all zero by its structure. The lowering
// neither fetches (read_weights) nor streams (matmul) them: unpacked, a kernel position that is
// no tap has no tile (Lowering::computed_tiles); packed, only the kernel rows with a tap are
// gathered (gather_row_step = the rows' spacing). Exact counts worked out by hand, on 16 x 16 and
// 32 x 32 arrays, bit-exact on every engine (docs/compiler.md "Kernel taps").
//
// Checked against the lowering without the skip (a temporary build whose computed_tiles ignored
// the taps and whose packing_for gathered every kernel row, as before): the same cases then
// gave 50 matmuls and 50 fetches (conv_dilated3, 16 x 16), 34 and 34 (conv1d, 16 x 16), 35 and 5
// (conv_dilated, 32 x 32): every count below fails there.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "e2e_support.h"
#include "graph_builder.h"

namespace tpusim::test {

using isa::Opcode;

namespace {

const fs::path kOnnx = fs::path(tpusim::source_dir()) / "tests" / "data" / "onnx";

compiler::Compiled compile_onnx(const std::string& name, const sim::Arch& arch) {
  compiler::LoadOptions lo;
  lo.input_file = kOnnx / ("x_" + name + ".npy");  // (batch 3)
  return compiler::compile_file(kOnnx / (name + ".onnx"), arch, lo);
}

// The program's weight fetches and matmuls, each layer's tiles (meta.mapping), and the run
// bit-exact on every engine, its useful MACs the model's.
struct Counts {
  size_t fetches = 0, matmuls = 0;
  std::vector<uint64_t> tiles;
};
Counts run_and_count(const std::string& name, const sim::Arch& a, uint64_t model_macs) {
  compiler::Compiled c = compile_onnx(name, a);
  Counts n{count(c.program, Opcode::read_weights), count(c.program, Opcode::matmul), {}};
  for (const nlohmann::json& l : c.program.meta["mapping"]) n.tiles.push_back(l["weight_tiles"].get<uint64_t>());
  const EngineRuns r = run_all(c.program, a);  // (fast, stepped and timing held equal)
  CHECK(r.fast.macs == model_macs);
  for (const sim::HostBuffer& h : r.fast.state->host)
    if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, a).matches);
  return n;
}

}  // namespace

TEST_CASE("a dilated kernel's gap positions are neither fetched nor streamed (unpacked, 16 x 16)") {
  // conv_dilated3.onnx: Conv2d(4, 8, 3, padding 2, dilation 2), then a depthwise one alike (8
  // groups), on 6 x 6 maps, batch 3: each kernel read as 5 x 5, its 9 taps at rows and columns
  // 0, 2, 4. On 16 x 16 neither packs (a kernel row's 5 x 4 and 5 x 8 channels exceed 16 rows):
  // one K and one N tile, 3 x 36 = 108 accumulator rows in one pass, stride 1: one matmul per
  // weight tile. 9 taps a layer (the 25 positions: 25). The model input streams into the first
  // layer, cut into 2 chunks of output rows, each fetching its 9 tiles (compiler/lower.cpp,
  // paying_cuts: 4,005 cycles, against 4,545 in one chunk): 2 x 9 + 9 = 27 tiles fetched and 27
  // matmuls.
  const Counts n = run_and_count("conv_dilated3", rect(16, 16), 38880);
  CHECK(n.fetches == 27);
  CHECK(n.matmuls == 27);
  CHECK(n.tiles == std::vector<uint64_t>{18, 9});
}

TEST_CASE("a Conv1d's zero kernel rows are not gathered, its gaps not fetched (packed and not, 16 x 16)") {
  // conv1d.onnx, batch 3:
  //   c1 Conv1d(3, 6, 3, stride 2, padding 1) on 11: a 3 x 3 kernel, only row 1 a tap row. Packed,
  //     gathering that row alone: U = (P - 1) x 2 + 3 input pixels x 3 channels within 16 rows,
  //     P = 2 (U = 5, 15 rows; P x N = 12 columns): 1 tile; the one output row of 3 groups is 1
  //     matmul (every kernel row gathered: 16 / 15 = 1 row a tile, 3 tiles and 3 matmuls).
  //   c2 Conv1d(6, 4, 3, padding 2, dilation 2) on 6: a 5 x 5 kernel, taps at (2, 0), (2, 2),
  //     (2, 4); 5 x 6 channels exceed 16 rows: unpacked, 3 tiles, 3 matmuls (25 positions: 25).
  //   fc Gemm(24, 5) after the flatten: a 1 x 6 kernel over the map, 6 x 4 channels > 16: 6 tiles
  //     and 6 matmuls, unchanged.
  // 1 + 3 + 6 = 10 fetches and 10 matmuls (3 + 25 + 6 = 34 before).
  const Counts n = run_and_count("conv1d", rect(16, 16), 3 * 876);
  CHECK(n.fetches == 10);
  CHECK(n.matmuls == 10);
  CHECK(n.tiles == std::vector<uint64_t>{1, 3, 6});
}

TEST_CASE("a packed dilated kernel gathers its tap rows, one row tile each (32 x 32)") {
  // conv_dilated.onnx: a 3 x 2 kernel dilated (2, 3), padded (2, 1), read as 5 x 6 (taps at rows
  // 0, 2, 4, columns 1 and 4), 2 -> 4 channels, 7 x 7 outputs, batch 3. Packed with P = 7 (U = 12
  // input pixels x 2 channels = 24 rows: one kernel row a tile; P x N = 28 columns): the 3 tap
  // rows are 3 row tiles, gathered 2 image rows apart, and each of the 7 output rows takes one
  // matmul per row tile: 3 fetches, 21 matmuls (all 5 rows: 5 and 35).
  const Counts n = run_and_count("conv_dilated", rect(32, 32), 3 * 2352);
  CHECK(n.fetches == 3);
  CHECK(n.matmuls == 21);
  CHECK(n.tiles == std::vector<uint64_t>{3});
}

}  // namespace tpusim::test
