// The back end on hand-built quantized graphs: the exact tiling, schedule and memory layout, and
// every program run on every engine with the output compared to the golden reference.
#include <catch2/catch.hpp>
#include <set>
#include <tuple>

#include "compiler/compile.h"
#include "compiler/emitter.h"
#include "compiler/packing.h"
#include "compiler/weight_image.h"
#include "e2e_support.h"
#include "graph_builder.h"
#include "isa/error.h"

namespace tpusim::test {

using compiler::map_shape;
using compiler::sequence_shape;
using compiler::vector_shape;
using isa::Field;
using isa::Opcode;

namespace {

const isa::Instruction& nth(const isa::Program& p, Opcode op, size_t n) {
  for (const auto& in : p.code)
    if (in.opcode == op && n-- == 0) return in;
  FAIL("no such instruction");
  return p.code.front();
}

// The fast engine's timing of the n-th instruction of kind op in prog (run as runs).
sim::InstructionTiming at(const isa::Program& prog, const EngineRuns& runs, Opcode op, size_t n) {
  for (size_t i = 0; i < prog.code.size(); ++i)
    if (prog.code[i].opcode == op && n-- == 0) return runs.fast.timeline[i];
  FAIL("no such instruction");
  return sim::InstructionTiming{};
}

// Index of the first setcfg of register `reg` in p.
size_t index_of_setcfg(const isa::Program& p, isa::ConfigReg reg) {
  for (size_t i = 0; i < p.code.size(); ++i)
    if (p.code[i].opcode == Opcode::set_config && p.code[i][Field::reg] == uint64_t(reg)) return i;
  FAIL("no setcfg of that register");
  return 0;
}

}  // namespace

TEST_CASE("a dense layer of K x N takes ceil(K/8) x ceil(N/8) tiles, one read_weights and one switching matmul each") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8x8());
  // K = 20: 3 K tiles; N = 12: 2 N tiles -> 6 tiles, all different.
  CHECK(count(p, Opcode::read_weights) == 6);
  CHECK(count(p, Opcode::matmul) == 6);
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 6);
  CHECK(count(p, Opcode::matmul, Field::accumulate, 1) == 4);  // K tiles 2 and 3 of each N tile
  CHECK(count(p, Opcode::activate) == 2);
  // K tiles of 8, 8 and 4 rows, N tiles of 8 and 4 columns: the partial tiles are stored as their
  // boxes and fetched as such (rw tile_rows x tile_cols), 2 x 64 + 2 x 8 x 4 + 4 x 8 + 4 x 4 = 240
  // bytes instead of 6 x 64.
  CHECK(p.weights.size() == 2 * 64 + 2 * 32 + 32 + 16);
  std::multiset<std::pair<uint64_t, uint64_t>> boxes;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::read_weights) boxes.insert({in[Field::tile_rows], in[Field::tile_cols]});
  CHECK(boxes == std::multiset<std::pair<uint64_t, uint64_t>>{{0, 0}, {0, 0}, {8, 4}, {8, 4}, {4, 8}, {4, 4}});
  // Each matmul streams the batch: 3 rows.
  CHECK(nth(p, Opcode::matmul, 0)[Field::rows] == 3);
  // The input is 3 DMAs, one per slice of 8, 8 and 4 channels, streamed as 3 parts at no start
  // more (docs/compiler.md "Input streaming"): the first matmul reading each part waits for it,
  // 3 syncs on host (mask bit 0); loaded whole, one sync before the first matmul.
  CHECK(count(p, Opcode::read_host) == 3);
  CHECK(count(p, Opcode::sync, Field::units, 1) == 3);
  CHECK(count(lower_and_check(b.g, arch8x8(), whole_input()), Opcode::sync, Field::units, 1) == 1);
  // --mapper partial=off: every tile stored and fetched whole; the same output (lower_and_check).
  compiler::LowerOptions whole;
  whole.partial_tiles = false;
  const isa::Program w = lower_and_check(b.g, arch8x8(), whole);
  CHECK(w.weights.size() == 6 * 64);
  CHECK(count(w, Opcode::read_weights, Field::tile_rows, 0) == 6);
  CHECK(count(w, Opcode::read_weights, Field::tile_cols, 0) == 6);
}

// The lanes (matmul `lane`, setcfg act_lane) of a program's matmuls and activates, in order.
std::vector<uint64_t> matmul_lanes(const isa::Program& p) {
  std::vector<uint64_t> v;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::matmul) v.push_back(in[Field::lane]);
  return v;
}
std::vector<uint64_t> act_lanes(const isa::Program& p) {
  std::vector<uint64_t> v;
  uint64_t lane = 0;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::set_config && in[Field::reg] == uint64_t(isa::ConfigReg::act_lane)) lane = in[Field::value];
    else if (in.opcode == Opcode::activate) v.push_back(lane);
  return v;
}

// The machine with every column of a tile shifting at once (weight_shift_skewed = 0: a tile
// switch at least array_rows + array_cols - 1 cycles after the one before), for tests whose
// hand-worked timings use that rule; tpu-v1's shift is skewed by column (docs/timing.md).
sim::Arch unskewed(sim::Arch a) {
  a.weight_shift_skewed = 0;
  return a;
}

sim::Arch array(uint64_t rows, uint64_t cols) {
  sim::Arch a = arch8x8();
  a.name = "test-" + std::to_string(rows) + "x" + std::to_string(cols);
  a.array_rows = rows;
  a.array_cols = cols;
  a.ub_bytes = 2048 * a.ub_row_bytes();
  a.weight_mem_bytes = a.tile_bytes() * 4096;
  return a;
}

// The dense layer above (K = 20, N = 12, batch 3) on non-square arrays; every one is also run on
// every engine against the golden reference by lower_and_check.
TEST_CASE("a wide array puts K tiles of array_rows side by side in a row: 4 x 8 takes 5 K x 2 N tiles") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  const sim::Arch a = array(4, 8);
  const isa::Program p = lower_and_check(b.g, a);
  // UB rows of 8 bytes: the input's slices hold 8, 8 and 4 channels; K tiles of 4 rows: two per
  // full slice (lanes 0 and 4), one in the last: 5. N tiles of 8 columns: 8 + 4 channels: 2.
  CHECK(count(p, Opcode::matmul) == 5 * 2);
  CHECK(count(p, Opcode::read_weights) == 10);
  // 5 K tiles of 4 full rows by N tiles of 8 and 4 columns: 5 x 4 x 8 + 5 x 4 x 4 bytes (the
  // 4-column tiles stored compactly, docs/compiler.md "Partial tiles").
  CHECK(p.weights.size() == 5 * 32 + 5 * 16);
  CHECK(matmul_lanes(p) == std::vector<uint64_t>{0, 4, 0, 4, 0, 0, 4, 0, 4, 0});
  CHECK(act_lanes(p) == std::vector<uint64_t>{0, 0});  // N tiles fill whole rows: no setcfg
  CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::act_lane)) == 0);
  const sim::RunResult r = sim::simulate(p, a, {sim::Engine::timing, 0});
  CHECK(r.matrix.array_active == 10 * 3);  // 10 matmuls streaming the batch of 3
  CHECK(r.macs == 3 * 20 * 12);            // useful: every tile's box is its channels
  CHECK(p.meta["macs"] == 3 * 20 * 12);
  // The manifest's per-layer mapping: 10 matmuls x 3 vectors x 4 x 8 cells computed; UB rows held
  // by the input (3 slices x 3 samples) and the output (2 slices x 3) of 8 bytes.
  REQUIRE(p.meta["mapping"].size() == 1);
  const auto& fc = p.meta["mapping"][0];
  CHECK(fc["layer"] == "fc");
  CHECK(fc["macs"] == 720);
  CHECK(fc["array_macs"] == 10 * 3 * 32);
  CHECK(fc["weight_tiles"] == 10);
  CHECK(fc["ub_bytes"] == (9 + 6) * 8);
}

TEST_CASE("a tall array writes N tiles of array_cols side by side in a row: 8 x 4 takes 3 K x 3 N tiles") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, array(8, 4));
  // K tiles of 8 rows: slices of 8, 8, 4 channels: 3. N tiles of 4 columns: the output's slices
  // hold 8 and 4 channels: act_lane 0 and 4 in the first, 0 in the second.
  CHECK(count(p, Opcode::matmul) == 3 * 3);
  CHECK(matmul_lanes(p) == std::vector<uint64_t>(9, 0));
  CHECK(act_lanes(p) == std::vector<uint64_t>{0, 4, 0});
  CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::act_lane)) == 2);
}

TEST_CASE("a tile that would pass the row's end is moved back to end at it, on arrays whose sides do not divide") {
  GraphBuilder b(2);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  b.add(b.matmul({whole(x)}, whole(y), 1, 1, true), "fc");
  b.g.output = y;
  // 6 x 4: rows of 6 bytes. Output slices of 6, 6 channels; N tiles of 4: lanes 0 and 2 (the
  // second rewrites channels 2, 3 with the same values) per slice. Input slices 6, 6, 6, 2: 4 K tiles.
  const isa::Program tall = lower_and_check(b.g, array(6, 4));
  CHECK(count(tall, Opcode::matmul) == 4 * 4);
  CHECK(act_lanes(tall) == std::vector<uint64_t>{0, 2, 0, 2});
  // 4 x 6: input slices of 6, 6, 6, 2 channels; K tiles of 4: lanes 0 and 2 (the second's first
  // two rows zero) in each full slice, lane 0 in the last: 7. N tiles of 6: 2.
  const isa::Program wide = lower_and_check(b.g, array(4, 6));
  CHECK(count(wide, Opcode::matmul) == 7 * 2);
  CHECK(matmul_lanes(wide) == std::vector<uint64_t>{0, 2, 0, 2, 0, 2, 0, 0, 2, 0, 2, 0, 2, 0});
  CHECK(wide.meta["macs"] == 2 * 20 * 12);
}

TEST_CASE("a 3x3 convolution with padding streams each output row group as one matmul, R x S passes") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(6, 6, 5)), y = b.tensor("y", map_shape(6, 6, 7));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3, true);
  m.pad = 1;
  b.add(m, "conv");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8x8(), whole_input());
  CHECK(count(p, Opcode::matmul) == 9);  // one per kernel position (1 K tile, 1 N tile, 1 chunk)
  CHECK(count(p, Opcode::read_weights) == 9);
  const isa::Instruction& first = nth(p, Opcode::matmul, 0);
  CHECK(first[Field::rows] == 6 * 2);      // one output row: 6 pixels x batch 2
  CHECK(first[Field::repeat] == 6);        // all 6 output rows
  CHECK(first[Field::stride] == 8 * 2);    // one stored row: (6 + 2 padding) pixels x batch 2
  // The input is stored with a 1-pixel border: 8 x 8 x 2 rows; kernel (0, 0) starts at its corner.
  CHECK(nth(p, Opcode::matmul, 4)[Field::ub] == first[Field::ub] + (8 + 1) * 2);  // kernel (1, 1)
  // Padded input rows come from the host one image row at a time: 6 DMAs.
  CHECK(count(p, Opcode::read_host) == 1 + 6);  // the per-column table, then the rows
  CHECK(count(p, Opcode::vector) == 0);          // fresh rows are zero: no border to clear
}

TEST_CASE("a strided convolution uses one matmul per output row and kernel position") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(7, 7, 3)), y = b.tensor("y", map_shape(4, 4, 4));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3);
  m.pad = 1;
  m.stride = 2;
  b.add(m, "conv");
  b.g.output = y;
  // Loaded whole: input streaming's chunks would fetch the 9 tiles again per chunk (pinned below).
  const isa::Program p = lower_and_check(b.g, arch8x8(), whole_input());
  CHECK(count(p, Opcode::matmul) == 9 * 4);
  const isa::Instruction& first = nth(p, Opcode::matmul, 0);
  CHECK(first[Field::rows] == 2);          // one pixel x batch 2
  CHECK(first[Field::repeat] == 4);        // 4 output pixels per row
  CHECK(first[Field::stride] == 2 * 2);    // stride 2 pixels x batch 2
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 9);
  // Streamed (the default): the padded input's 7 image rows are 7 DMAs, and the output's 4 rows
  // are cut into 3 chunks, each fetching the 9 tiles: the same 36 matmuls, 27 switches. (The
  // lowering's estimate of the layer's end, stream_end, gives 600 cycles uncut and 460 in 2 or 3
  // chunks, and takes the most where two tie; measured 874 loaded whole, 658 in 2 chunks, 660 in 3,
  // 731 in 4.)
  // (Those estimates are the unskewed shift's, a switch at least 15 cycles after the one before.)
  const isa::Program s = lower_and_check(b.g, unskewed(arch8x8()));
  CHECK(count(s, Opcode::matmul) == 9 * 4);
  CHECK(count(s, Opcode::matmul, Field::switch_weights, 1) == 3 * 9);
  // With the shift skewed by column (tpu-v1's), a switch follows the one before by at least 8
  // cycles: the refetched tiles' shifts hide behind the chunks' 8-vector matmuls and the estimate
  // takes a chunk per output row, 4: 36 switches.
  const isa::Program k = lower_and_check(b.g, arch8x8());
  CHECK(count(k, Opcode::matmul, Field::switch_weights, 1) == 4 * 9);
}

// Packing (compiler/packing.h) on a 16 x 16 array of small_arch() timing: 4 bytes a cycle from
// weight memory (a tile's box of b bytes: ceil(b / 4) cycles, usable 3 later), 4 tiles in the
// FIFO, so the few-byte boxes here never hold a switch up; a switch follows the one before it by
// at least 16 + 16 - 1 = 31 cycles; the activation unit 2 cycles per act plus a row per cycle
// (4 lanes). The estimates in the comments are packing.cpp's (TilePipeline, plus the act).
TEST_CASE("few input channels: kernel positions and output pixels packed per vector, the cheapest estimate") {
  sim::Arch a = arch8x8();
  a.name = "test-16x16";
  a.array_rows = a.array_cols = 16;
  a.ub_bytes = 2048 * 16;
  SECTION("1 channel, 3x3 on 6x6, 2 filters, batch 1: 4 pixels per vector") {
    GraphBuilder b(1);
    const int x = b.input(map_shape(6, 6, 1)), y = b.tensor("y", map_shape(4, 4, 2));
    b.add(b.matmul({whole(x)}, whole(y), 3, 3, true), "conv");
    b.g.output = y;
    // 16 output pixels, the act's rows 16 cycles. Unpacked: 9 tiles of 16 vectors, 8 x 31 + 16 =
    // 264, + 16 + 5 acts x 2 = 290. P = 1 (3 x 3 = 9 UB rows per vector): 4 rows x 4 x 9 = 144,
    // + 16 + 5 x 2 = 170. P = 2 (4 input pixels x 3 rows = 12 segments, 2 groups a row): 4 x 2 x
    // 12 = 96, + 16 + 8 acts x 2 = 128; P = 3 (a group of 3, 15 segments, and one of 1, 9) the
    // same. P = 4 (6 input pixels: 2 kernel rows fit, then 1; one group a row): 4 x 12 = 48,
    // enough for the next tile's shift (31), then 4 x 6 = 24: 72, + 16 + 4 acts x 2 = 96. P = 4
    // wins. (Counting each tile as a whole 64-cycle fetch against the layer, the estimate took P =
    // 2: max(96, 64) + 32 = 128 against P = 4's max(72, 128) + 24 = 152.) On the machine P = 4
    // runs the program in 355 cycles, P = 2 (forced: LowerOptions::pack_pixels) in 366.
    const isa::Program p = lower_and_check(b.g, a);
    compiler::LowerOptions two;
    two.pack_pixels = {{"conv", 2}};
    const isa::Program p2 = lower_and_check(b.g, a, two);
    CHECK(p2.meta["mapping"][0]["packing"] == "2 pixels per vector, 4 input pixels x 3 kernel rows gathered");
    CHECK(sim::simulate(p, a, {sim::Engine::timing, 0}).cycles == 355);
    CHECK(sim::simulate(p2, a, {sim::Engine::timing, 0}).cycles == 366);
    CHECK(count(p, Opcode::read_weights) == 2);  // two tiles: 12 rows, then 6, of 4 groups x 2 columns
    CHECK(count(p, Opcode::matmul) == 2 * 4);    // per kernel row tile, one per output row
    const isa::Instruction& first = nth(p, Opcode::matmul, 0);
    CHECK(first[Field::rows] == 1);    // batch 1
    CHECK(first[Field::repeat] == 1);  // 1 group of 4 pixels
    CHECK(first[Field::stride] == 0);
    CHECK(count(p, Opcode::activate) == 4);  // one per group: its 4 pixels scattered
    CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::gather_cols)) == 1);
    CHECK(p.meta["mapping"][0]["packing"] == "4 pixels per vector, 6 input pixels x 2 kernel rows gathered");
    // Useful: 16 pixels x 9 x 1 x 2 MACs; computed: 4 vectors x 2 tiles x 256 cells.
    CHECK(p.meta["mapping"][0]["macs"] == 16 * 9 * 2);
    CHECK(p.meta["mapping"][0]["array_macs"] == 8 * 256);
    // Its per-column table repeats the 2 channels for the 4 pixels of a group: ceil(7 x 16 / 16)
    // = 7 UB rows of 16 bytes, the only table (the plain one, 2 columns, no activate reads: it
    // was built too, 7 more rows the tensors did not have).
    const auto tables = std::find_if(p.host_regions.begin(), p.host_regions.end(),
                                     [](const isa::HostRegion& r) { return r.name == "qtables"; });
    REQUIRE(tables != p.host_regions.end());
    CHECK(tables->bytes == 7 * 16);
  }
  SECTION("1 channel, 3x3 on 7x7, 5 filters: 3 pixels per vector, each row's last group of 2") {
    GraphBuilder b(1);
    const int x = b.input(map_shape(7, 7, 1)), y = b.tensor("y", map_shape(5, 5, 5));
    b.add(b.matmul({whole(x)}, whole(y), 3, 3), "conv");
    b.g.output = y;
    // 25 output pixels; the act writes 25 rows of ceil(5 / 4) = 2 cycles = 50. Unpacked: 9 tiles
    // of 25 vectors, 8 x 31 + 25 = 273, + 50 + 6 acts x 2 = 335. P = 1: 5 rows x 5 x 9 = 225 + 62
    // = 287.
    // P = 2 (2 groups + a last of 1 gathering 3 pixels): 5 x (2 x 12 + 9) = 165, + 50 + 15 acts x 2
    // = 245. P = 3 (5 input pixels x 3 rows = 15 elements; a last group of 2 gathers 4 pixels):
    // 5 x (15 + 12) = 135, + 50 + 10 acts x 2 = 205. P = 4 needs 4 x 5 = 20 > 16 columns.
    const isa::Program p = lower_and_check(b.g, a);
    CHECK(count(p, Opcode::read_weights) == 1);
    CHECK(count(p, Opcode::matmul) == 5 * 2);  // per output row: the full group, the last group
    CHECK(count(p, Opcode::activate) == 5 * 2);
    // Each row switches the gather between 5 and 4 input pixels, the scatter between 3 and 2 groups.
    CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::gather_cols)) == 10);
    CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::act_groups)) == 10);
    CHECK(nth(p, Opcode::matmul, 1)[Field::ub] == nth(p, Opcode::matmul, 0)[Field::ub] + 3);  // pixel 3
    CHECK(p.meta["mapping"][0]["packing"] ==
          "3 pixels per vector, 5 input pixels x 3 kernel rows gathered (each row's last group 2 pixels)");
    CHECK(p.meta["mapping"][0]["macs"] == 25 * 9 * 5);
    CHECK(p.meta["mapping"][0]["array_macs"] == 10 * 256);
  }
  SECTION("2 channels, 3x3 stride 2 padding 1 on 7x7, 3 filters, batch 2: kernel rows in 3 tiles") {
    GraphBuilder b(2);
    const int x = b.input(map_shape(7, 7, 2)), y = b.tensor("y", map_shape(4, 4, 3));
    compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3);
    m.pad = 1;
    m.stride = 2;
    b.add(m, "conv");
    b.g.output = y;
    // 32 output rows. Unpacked: 9 tiles of 32 vectors, 8 x 32 + 32 = 288, + 32 + 10 = 330. P = 1
    // (3 pixels x 2 channels: 2 kernel rows per tile, then 1): 32 x 6 + 32 x 3 = 288, + 42 = 330.
    // P = 2 (5 input pixels x 2 channels = 10: one kernel row per tile, 3 tiles of 16 vectors x 5
    // segments = 80 cycles): 240, + 32 + 8 x 2 = 288.
    // P = 4 needs 9 x 2 = 18 > 16 rows.
    const isa::Program p = lower_and_check(b.g, a);
    CHECK(count(p, Opcode::read_weights) == 3);
    CHECK(count(p, Opcode::matmul) == 3 * 4);  // per kernel row tile, one per output row
    CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 3);
    CHECK(count(p, Opcode::matmul, Field::accumulate, 1) == 2 * 4);
    const isa::Instruction& first = nth(p, Opcode::matmul, 0);
    CHECK(first[Field::rows] == 2);    // batch 2
    CHECK(first[Field::repeat] == 2);  // 2 groups of 2 pixels
    CHECK(first[Field::stride] == 8);  // 2 pixels x stride 2 x batch 2
    // The 2-channel input is dense (layout.h): 2 samples' fields of 2 bytes per UB row, one UB row
    // per stored pixel; the gather's steps count logical rows (a pixel = 2 samples).
    CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::dense_rows)) >= 1);
    CHECK(p.code[index_of_setcfg(p, isa::ConfigReg::dense_rows)][Field::value] == 2);
    CHECK(p.code[index_of_setcfg(p, isa::ConfigReg::dense_bytes)][Field::value] == 2);
    CHECK(p.code[index_of_setcfg(p, isa::ConfigReg::gather_col_step)][Field::value] == 2);
    // Output row 1 reads input row 2 (stride 2) of the stored map (9 pixels wide with its border),
    // one UB row per pixel.
    CHECK(nth(p, Opcode::matmul, 1)[Field::ub] == first[Field::ub] + 2 * 9 * 1);
    CHECK(count(p, Opcode::activate) == 4 * 2);
  }
}

// The packing estimate's weight term (compiler/packing.cpp, TilePipeline): each tile's fetch moves
// its stored box (partial tiles), the weight FIFO fetches the layer's first weight_fifo_tiles tiles
// during the layer before and each later one once a slot frees (the tile weight_fifo_tiles before
// it has shifted in). LeNet-5's conv2 (5 x 5, 6 -> 16, 10 x 10 out) at batch 1 on 64 x 256 at 8.5
// GB/s (tpu-v1 otherwise: 700 MHz, a fetch of b bytes ceil(b x 700 / 8500) cycles, latency 100,
// 4 tiles). A switch follows the one before it by at least 64 + 256 - 1 = 319 cycles (its shift
// begins 255 after it); the activation unit: 100 rows + 8 a activate.
//   no packing: 25 tiles of 6 x 16 = 96 bytes (8 cycles, never waited for), 100 vectors each:
//     24 x 319 + 100 = 7756, + 100 + (1 chunk + 10 rows) x 8 = 7944.
//   P = 1 (5 input pixels x 6 = 30 rows: 2 kernel rows a tile, 2, then 1): 10 rows x 10 pixels x
//     10 segments = 1000 cycles, 1000, 500: 2500, + 100 + 11 x 8 = 2688.
//   P = 5 (9 input pixels x 6 = 54 rows, one kernel row a tile: 5 tiles of 54 x 80 = 4320 bytes,
//     356 cycles; 2 groups x 9 segments x 10 rows = 180 cycles each): tiles 1 to 3 are in the FIFO
//     (switches at 319, 638, 957); tile 4's fetch starts when tile 0's slot frees (its shift ends
//     at 0), arrives at 356 + 100 = 456, well before its shift may start (957 + 255 = 1212): 1276 +
//     180 = 1456, + 100 + 20 activates x 8 = 1716. P = 6 (10 input pixels, 60 x 96 = 5760 bytes,
//     475 cycles; groups of 6 and 4: 10 + 8 = 18 segments a row) the same 1716, as many passes (100
//     vectors x 5 tiles): P = 5, the first.
//   P = 2, 3, 4: 4 x 319 + 300, 260, 220 (5, 4, 3 groups a row), + 100 + 50, 40, 30 activates x 8.
// The estimate before counted every tile as a whole 16 KiB fetch (1349.3 cycles) against the
// layer: P = 1 max(2500, 3 x 1349.3) + 188 = 4236, P = 5 5 x 1349.3 + 260 = 7006, and took P = 1,
// which runs LeNet-5 on 64 x 256 with 256 KiB in 522,500 cycles against P = 5's 515,388
// (tests/CMakeLists.txt).
TEST_CASE("the packing estimate fetches each tile's box through the weight FIFO, ahead of the array") {
  sim::Arch a;  // tpu-v1, every column shifting at once (the estimates below use that rule)
  a.weight_shift_skewed = 0;
  a.array_rows = 64;
  a.weight_mem_gbps = 8.5;
  compiler::ConvShape cv{6, 16, 5, 5, 1, 10, 10, 1};
  const auto cycles = [&] {
    std::vector<std::pair<uint64_t, double>> out;  // P (0: no packing), estimate
    for (const compiler::PackingOption& o : compiler::packing_options(cv, a, 100))
      out.push_back({o.packing ? o.packing->p : 0, o.cycles});
    return out;
  };
  using E = std::vector<std::pair<uint64_t, double>>;
  CHECK(cycles() == E{{0, 7944}, {1, 2688}, {2, 2076}, {3, 1956}, {4, 1836}, {5, 1716}, {6, 1716}});
  REQUIRE(compiler::choose_packing(cv, a, 100));
  CHECK(compiler::choose_packing(cv, a, 100)->p == 5);
  SECTION("one FIFO slot: each fetch waits for the tile before it to have shifted in") {
    // P = 5: tile 1's fetch starts at 0 (tile 0's shift ends), arrives at 356 + 100 = 456 and
    // shifts in until 520; tile 2's fetch starts then: 520 + 356 + 100 + 64 = 1040, then 1560,
    // 2080: 2080 + 180 + 260 = 2520. P = 1: tile 1 shifts at max(80 + 100, 255) = 255 (as with 4),
    // tile 2's fetch (40 cycles) starts at 319: 2688.
    a.weight_fifo_tiles = 1;
    CHECK(cycles()[5] == std::pair<uint64_t, double>{5, 2520});
    CHECK(cycles()[1] == std::pair<uint64_t, double>{1, 2688});
  }
  SECTION("partial tiles off: every fetch moves a whole 16 KiB tile") {
    // ceil(16384 x 700 / 8500) = 1350 cycles a tile. P = 5: tile 4 arrives at 1350 + 100 = 1450,
    // after its shift could start (1212): 1450 + 64 + 180 + 260 = 1954. No packing: from tile 4 on
    // the weight memory sets the pace, tile i arriving at (i - 3) x 1350 + 100 and switched in 64
    // later: 21 x 1350 + 164 + 100 + 188 = 28802.
    cv.partial_tiles = false;
    CHECK(cycles()[5] == std::pair<uint64_t, double>{5, 1954});
    CHECK(cycles()[0] == std::pair<uint64_t, double>{0, 28802});
  }
}

// resblock's stem on 256 x 256 at 8.5 GB/s (tpu-v1 otherwise, batch 8): 3 x 3, 16 -> 16 channels,
// 8 x 8 out, the model's first layer. ceil(bytes x 700 / 8500) cycles a fetch, + 100 latency, a
// 256-cycle shift; the activation unit 8 x 8 x 8 = 512 rows + 8 cycles an activate.
//   P = 1 (3 input pixels x 3 kernel rows x 16 = 144 rows by 16: 2,304 bytes, 190 cycles; 1 tile):
//     8 rows x 8 pixels x 8 samples x 9 segments = 4,608, + 512 + (1 chunk + 8 rows) x 8 = 5,192.
//   P = 2 (4 x 3 x 16 = 192 rows by 32: 6,144 bytes, 506): 8 x 4 groups x 8 x 12 = 3,072, + 512 +
//     32 activates x 8 = 3,840.
//   P = 3 (5 x 3 x 16 = 240 by 48: 11,520 bytes, 949): groups of 3, 3 and 2 (15, 15, 12 segments):
//     8 x 8 x 42 = 2,688, + 512 + 24 x 8 = 3,392.
//   P = 4 (6 x 16 = 96 rows a kernel row: 2 kernel rows a tile, then 1; 192 and 96 rows by 64:
//     12,288 and 6,144 bytes, 1,012 and 506): 8 x 2 x 8 x 12 = 1,536, then 768: max(1,536, 511) +
//     768 = 2,304, + 512 + 16 x 8 = 2,944.
//   P = 8 (10 x 16 = 160 rows: 1 kernel row a tile, 3 tiles of 160 by 128: 20,480 bytes, 1,687):
//     8 x 8 x 10 = 640 each: 3 x 640 = 1,920, + 512 + 8 x 8 = 2,496.
// Taken as fetched during a layer before (ahead infinite, the estimate before), no fetch counts:
// P = 8 the cheapest, as it ran, 18,947 cycles with the host link out of play, where P = 1 ran
// 14,076 (bench/packing_scan --detail). With nothing before the layer (ahead 0) the first tile's
// fetch, latency and shift come first: P = 1 + 190 + 100 + 256 = 5,738; P = 2 + 862 = 4,702; P =
// 3 + 1,305 = 4,697; P = 4: tile 0 arrives at 1,112 and is switched in at 1,368, tile 1 (fetched
// 1,012 + 506 = 1,518) arrives at 1,618 and shifts at max(1,618, 1,368 + 255) = 1,623, switched in
// at max(1,368 + 1,536, 1,879) = 2,904: 2,904 + 768 + 640 = 4,312; P = 8: switches at 1,687 + 100
// + 256 = 2,043, then when tiles 1 and 2 are in (fetched at 3,374 and 5,061): 3,374 + 100 + 256
// = 3,730, 5,061 + 356 = 5,417: 5,417 + 640 + 576 = 6,633. P = 4 is the cheapest.
TEST_CASE("the packing estimate charges the first weight-FIFO fetches of a layer that nothing hides") {
  sim::Arch a;  // tpu-v1
  a.array_rows = 256;
  a.weight_mem_gbps = 8.5;
  compiler::ConvShape cv{16, 16, 3, 3, 1, 8, 8, 8};
  const auto estimates = [&] {
    std::vector<std::pair<uint64_t, double>> out;  // P (0: no packing), estimate
    for (const compiler::PackingOption& o : compiler::packing_options(cv, a, 512))
      if (!o.packing || o.packing->p <= 4 || o.packing->p == 8) out.push_back({o.packing ? o.packing->p : 0, o.cycles});
    return out;
  };
  using E = std::vector<std::pair<uint64_t, double>>;
  // No packing: 9 tiles of 16 x 16 (22 cycles each) streaming 512 vectors: 9 x 512 + 584 = 5,192;
  // with nothing before, + 22 + 100 + 256 = 5,570.
  CHECK(estimates() == E{{0, 5192}, {1, 5192}, {2, 3840}, {3, 3392}, {4, 2944}, {8, 2496}});
  CHECK(compiler::choose_packing(cv, a, 512)->p == 8);
  cv.ahead = 0;
  CHECK(estimates() == E{{0, 5570}, {1, 5738}, {2, 4702}, {3, 4697}, {4, 4312}, {8, 6633}});
  CHECK(compiler::choose_packing(cv, a, 512)->p == 4);
  SECTION("700 cycles of other work hide as many of the fetches") {
    // P = 8: 2,043 - 700 = 1,343, then 3,030 and 4,717: 4,717 + 1,216 = 5,933. P = 4: tile 0 in at
    // 668, tile 1 arrives at 918, shifts at 923: 668 + 1,536 + 768 + 640 = 3,612.
    cv.ahead = 700;
    CHECK(estimates()[4] == std::pair<uint64_t, double>{4, 3612});
    CHECK(estimates()[5] == std::pair<uint64_t, double>{8, 5933});
  }
  SECTION("in 2 runs (the batch's pieces) the second's fetches are hidden: the mean") {
    // P = 8: (6,633 + 2,496) / 2 = 4,564.5.
    cv.runs = 2;
    CHECK(estimates()[5] == std::pair<uint64_t, double>{8, 4564.5});
  }
  SECTION("the model: the stem, its first layer, after only its input's load") {
    // With the host link out of play, the load before the stem takes ceil(8,192 x 700 / 10^9) = 1
    // cycle (ahead 1, packing_for): P = 4, and the model runs 13,094 cycles (P = 8 before: 18,947).
    a.host_gbps = 1e6;
    a.host_latency_cycles = 0;
    const compiler::Compiled c = compiler::compile_file(kWorkloads / "small/resblock.toml", a, {});
    REQUIRE(c.program.meta["mapping"][0]["layer"] == "stem");
    CHECK(c.program.meta["mapping"][0]["packing"] == "4 pixels per vector, 6 input pixels x 2 kernel rows gathered");
    CHECK(sim::simulate(c.program, a, {sim::Engine::timing, 0}).cycles == 13'094);
  }
}

// The weight FIFO across a layer boundary (ConvShape::held): resblock at batch 3 on tpu-v1 (256 x
// 256, 34 GB/s: a fetch of b bytes ceil(b x 700 / 34,000) cycles; 4 slots; the shift skewed: 256
// cycles, none after a switch) with weight_mem_latency_cycles = 10,000 and the host link at 20
// GB/s. stem and branch_a1 are both 3 x 3, 16 -> 16, 8 x 8 out; the activation unit 192 rows + 8
// an activate.
//   stem (the first layer: ahead = the input's load, 700 + ceil(3,072 x 700 / 20,000) = 808), P = 4
//     (2 tiles: 192 x 64 = 12,288 bytes, 253 cycles, streaming 8 x 3 x 2 groups x 12 = 576; 96 x 64
//     = 6,144, 127, streaming 288): tile 0 fetched at -808 + 253 = -555, arrives at 9,445, shifts
//     until 9,701 (its switch); tile 1 fetched at -428, arrives at 9,572, shifts at 9,701, switched
//     at 10,277: 10,565, + 192 + 16 x 8 = 10,885. Its slots free at 9,701 and 9,957.
//   branch_a1 after it: ahead 10,885 - 0 (its last fetch ended before its start), and the stem
//     still holds 2 of the 4 slots, freed at 9,701 - 10,885 = -1,184 and -928 (held).
//     P = 8 (3 tiles of 160 x 128 = 20,480 bytes, 422 cycles, each streaming 8 x 3 x 10 = 240):
//     tiles 0 and 1 fetched at -10,463 and -10,041, arrive at -463 and -41: switched at 0 and 256;
//     tile 2's fetch needs a slot: the stem's first tile's, at -1,184: fetched at -762, arrives at
//     9,238, switched at 9,494: 9,734, + 192 + 8 x 8 = 9,990. Without the held slots (the
//     estimate before) it was fetched at -9,619 and arrived at 381, switched at 637: 877 + 256 =
//     1,133, less than P = 4's 1,184 (tiles in at 0 and 576: 864, + 320), and P = 8 was taken at 20
//     GB/s (the run: 32,777 cycles) where at 10.74 GB/s (ahead 10,792: tile 2 arrives at 474, 1,226)
//     P = 4 was (24,990): a faster host link, a slower run.
TEST_CASE("the packing estimate's weight FIFO holds the slots of the layer before's tiles") {
  sim::Arch a;  // tpu-v1
  a.weight_mem_latency_cycles = 10'000;
  compiler::ConvShape cv{16, 16, 3, 3, 1, 8, 8, 3};
  const auto estimate = [&](uint64_t p) {
    for (const compiler::PackingOption& o : compiler::packing_options(cv, a, 192))
      if (o.packing && o.packing->p == p) return o.cycles;
    return -1.0;
  };
  cv.ahead = 808;  // the stem
  CHECK(estimate(4) == 10'885);
  CHECK(compiler::choose_packing(cv, a, 192)->p == 4);
  cv.ahead = 10'885;  // branch_a1, the held slots not counted
  CHECK(estimate(4) == 1'184);
  CHECK(estimate(8) == 1'133);
  CHECK(compiler::choose_packing(cv, a, 192)->p == 8);
  cv.held = {-1'184, -928};
  CHECK(estimate(4) == 1'184);
  CHECK(estimate(8) == 9'990);
  CHECK(compiler::choose_packing(cv, a, 192)->p == 4);
  SECTION("the model: branch_a1 packs 4 pixels at both host links, as fast at 20 GB/s as at 10.74") {
    compiler::LoadOptions lo;
    lo.batch = 3;
    for (const double host : {10.74, 20.0}) {
      a.host_gbps = host;
      const compiler::Compiled c = compiler::compile_file(kWorkloads / "small/resblock.toml", a, lo);
      INFO(host << " GB/s");
      REQUIRE(c.program.meta["mapping"][1]["layer"] == "branch_a1");
      CHECK(c.program.meta["mapping"][1]["packing"] == "4 pixels per vector, 6 input pixels x 2 kernel rows gathered");
      CHECK(sim::simulate(c.program, a, {sim::Engine::timing, 0}).cycles == 24'990);
    }
  }
}

TEST_CASE("the packing estimate counts each weight tile's shift into the array that short matmuls leave exposed") {
  // tiny_cnn at batch 1 on 128 x 128 (tpu-v1 otherwise): conv2 is 3 x 3, 16 -> 32 channels, 6 x 6
  // out. A tile switch follows the one before it by at least 128 + 128 - 1 = 255 cycles (its shift
  // begins 127 cycles after that switch and takes 128: docs/timing.md), whatever the matmuls
  // between stream; the layer's last tile streams alone. The activation unit: 36 rows + 8 cycles
  // a activate.
  //   P = 1 (3 input pixels x 16 = 48 rows: 2 kernel rows a tile, then 1; 2 tiles): 6 output rows
  //     x 6 pixels x 6 segments = 216 cycles, then 6 x 6 x 3 = 108: max(216, 255) + 108 = 363,
  //     + 36 + (1 chunk + 6 rows) x 8 = 455.
  //   P = 3 (5 input pixels x 16 = 80 rows: one kernel row a tile, 3 tiles): 6 x 2 groups x 5 =
  //     60 cycles each: 255 + 255 + 60 = 570, + 36 + 12 activates x 8 = 702.
  // At 136 GB/s (194.3 bytes a cycle: 84.3 cycles a 16 KiB tile) the fetches bound neither. Counted
  // without the shifts (max(streaming, fetches)), P = 3 looked cheaper, 253 + 132 = 385 against
  // 324 + 92 = 416, and ran 12,854 cycles (weight shift 4.35% -> 5.94%) against P = 1's 12,682 at
  // 34 GB/s: the faster memory made the compile slower (tests/sweep/laws_test.py). (12,682 at both
  // until pool1's padded output went to rows never written: its border no longer zeroed; 12,596
  // until input streaming counted the load's DMA starts, docs/compiler.md "Input streaming": the
  // padded 12 x 12 input's 12 DMAs now stream into conv1.)
  // (This is the unskewed shift's rule, weight_shift_skewed = 0, which the test pins; with tpu-v1's
  // shift skewed by column a switch follows the one before by 128 cycles.)
  for (const double gbps : {34.0, 136.0}) {
    sim::Arch a;  // tpu-v1, every column shifting at once
    a.weight_shift_skewed = 0;
    a.array_rows = a.array_cols = 128;
    a.weight_mem_gbps = gbps;
    compiler::LoadOptions lo;
    lo.batch = 1;
    const compiler::Compiled c = compiler::compile_file(kWorkloads / "small/tiny_cnn.toml", a, lo);
    const isa::Program& p = c.program;
    INFO(gbps << " GB/s");
    REQUIRE(p.meta["mapping"][2]["layer"] == "conv2");
    CHECK(p.meta["mapping"][2]["packing"] == "1 pixel per vector, 3 input pixels x 2 kernel rows gathered");
    CHECK(p.meta["mapping"][2]["weight_tiles"] == 2);
    CHECK(sim::simulate(p, a, {sim::Engine::timing, 0}).cycles == 12'251);
  }
}

TEST_CASE("a padded map goes where its border holds no data: no zeroing, and a larger buffer is never slower") {
  // tiny_cnn at batch 64 on 128 x 128 (tpu-v1 otherwise): pool1's output is stored padded (conv2
  // reads it with a 1-pixel border: 8 x 8 stored pixels x 64 samples, 6 x 6 of them written).
  // It is allocated at the bottom, away from conv1's output at the top, where the model's input
  // was: with 256 KiB the input's rows are still in use there and the first fit is past them, on
  // rows never written; with 2 MiB the input's freed rows come first. On those written rows the
  // border had to be zeroed: 5 `vec sub` (top border and first left pixel, 5 runs of right and
  // left pixels between the 6 image rows... as border_ranges cuts them) and a `sync` on the matrix
  // unit, still reading the input, in front of pool1: 65,084 cycles against 64,132. Now the map
  // goes, from the same end, to the first place where its border rows hold no data (the
  // allocator keeps which rows may: every row allocated, less the zero borders): no `vec`, the
  // same 5 syncs and 64,132 cycles with either buffer. Since input streaming counts the load's DMA
  // starts (docs/compiler.md "Input streaming"), the padded input's 12 DMAs stream into conv1: 10
  // syncs more, 55,622 cycles with either buffer; 55,492 since tpu-v1's shift is skewed by column.
  for (const uint64_t ub : {uint64_t{256} << 10, uint64_t{2} << 20}) {
    sim::Arch a;  // tpu-v1
    a.array_rows = a.array_cols = 128;
    a.ub_bytes = ub;
    compiler::LoadOptions lo;
    lo.batch = 64;
    const compiler::Compiled c = compiler::compile_file(kWorkloads / "small/tiny_cnn.toml", a, lo);
    const isa::Program& p = c.program;
    INFO(ub << " UB bytes");
    CHECK(count(p, Opcode::vector) == 0);
    CHECK(count(p, Opcode::sync) == 15);
    CHECK(sim::simulate(p, a, {sim::Engine::timing, 0}).cycles == 55'492);
  }
}

TEST_CASE("outputs larger than the accumulators are chunked, and each chunk fetches the tiles again") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(6, 6, 4)), y = b.tensor("y", map_shape(6, 6, 10));
  b.add(b.matmul({whole(x)}, whole(y), 1, 1), "pointwise");
  b.g.output = y;
  sim::Arch a = arch8x8();
  a.acc_entries = 32;  // 72 output rows > 32: chunks of half the accumulators, 16 rows = 8 pixels
  const isa::Program p = lower_and_check(b.g, a);
  // 36 pixels / 8 = 5 chunks (4 of 8 pixels, one of 4); 2 N tiles: 10 passes of 1 tile each.
  CHECK(count(p, Opcode::matmul) == 10);
  CHECK(count(p, Opcode::read_weights) == 10);
  CHECK(p.weights.size() == 4 * 8 + 4 * 2);  // the two tiles stored once, as their 4 x 8 and 4 x 2 boxes
}

TEST_CASE("identical weight tiles are stored once and fetched for every use") {
  GraphBuilder b(1);
  const int x = b.input(vector_shape(8)), h = b.tensor("h", vector_shape(8)), y = b.tensor("y", vector_shape(8));
  compiler::MatmulOp m1 = b.matmul({whole(x)}, whole(h));
  compiler::MatmulOp m2 = m1;
  m2.inputs = {whole(h)};
  m2.output = whole(y);
  b.add(m1, "a");
  b.add(m2, "b");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8x8());
  CHECK(p.weights.size() == 64);
  CHECK(count(p, Opcode::read_weights) == 2);
  // The syncs, in order (mask bits: host 1, matrix 4, act 8): layer a's matmul reads the input
  // DMA's rows (RAW on host); layer b's matmul reads layer a's activate output (RAW on act);
  // layer b's activate writes y into the rows x had, which layer a's matmul read (WAR on matrix);
  // the output DMA reads y (RAW on act).
  std::vector<uint64_t> masks;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::sync) masks.push_back(in[Field::units]);
  CHECK(masks == std::vector<uint64_t>{1, 8, 4, 8});
}

TEST_CASE("time steps read and write pixels of sequences through views") {
  // h_t = relu(W [x_t, h_{t-1}]) over 3 steps, h_{-1} left out at t = 0.
  GraphBuilder b(2);
  const int x = b.input(sequence_shape(3, 5)), h = b.tensor("h", sequence_shape(3, 6));
  for (uint64_t t = 0; t < 3; ++t) {
    std::vector<compiler::View> in{{x, t, 1}};
    if (t) in.push_back({h, t - 1, 1});
    b.add(b.matmul(in, {h, t, 1}), "rnn");
  }
  b.g.output = h;
  const isa::Program p = lower_and_check(b.g, arch8x8());
  CHECK(count(p, Opcode::matmul) == 1 + 2 + 2);
  CHECK(count(p, Opcode::activate) == 3);
}

TEST_CASE("pooling, element-wise ops and a padded consumer share the unified buffer correctly") {
  // conv (pad 1) -> max pool 2 -> conv (pad 1, so the pool writes padded rows one by one) ->
  // add with the pooled map -> avg pool. Buffers are reused, so borders must be cleared.
  GraphBuilder b(2);
  const int x = b.input(map_shape(8, 8, 3));
  const int c1 = b.tensor("c1", map_shape(8, 8, 8)), p1 = b.tensor("p1", map_shape(4, 4, 8));
  const int c2 = b.tensor("c2", map_shape(4, 4, 8)), s = b.tensor("s", map_shape(4, 4, 8));
  const int out = b.tensor("out", map_shape(2, 2, 8));
  compiler::MatmulOp m1 = b.matmul({whole(x)}, whole(c1), 3, 3, true);
  m1.pad = 1;
  b.add(m1, "conv1");
  b.add(compiler::PoolOp{whole(c1), whole(p1), isa::PoolKind::max, 2, 2}, "pool1");
  compiler::MatmulOp m2 = b.matmul({whole(p1)}, whole(c2), 3, 3);
  m2.pad = 1;
  b.add(m2, "conv2");
  compiler::VectorOp add{isa::VecOp::add, whole(c2), whole(p1), whole(s), 1, 1, isa::Func::identity};
  b.add(add, "add");
  b.add(compiler::PoolOp{whole(s), whole(out), isa::PoolKind::avg, 2, 2}, "pool2");
  b.g.output = out;
  // Loaded whole (whole_input): streaming the input would cut conv1's activates into chunks.
  const isa::Program p = lower_and_check(b.g, arch8x8(), whole_input({false}));
  CHECK(count(p, Opcode::pool) == 4 + 1);  // pool1 one output row at a time (padded), pool2 whole
  // Fused (compiler/lower.cpp fusion_for): conv1's activates pool into p1, one per pooled row
  // (padded); pool2 reads the add's output: a pool of its own.
  const isa::Program fused = lower_and_check(b.g, arch8x8(), whole_input());
  CHECK(count(fused, Opcode::pool) == 1);
  CHECK(count(fused, Opcode::activate) == count(p, Opcode::activate) - 1 + 4);
}

TEST_CASE("dead tensors give their rows back: a deep chain runs in a buffer that holds three of its tensors") {
  // Six dense layers of 64 channels (8 slices of 8) at batch 4: every tensor takes 32 UB rows,
  // seven tensors take 224; the UB has 100 rows.
  GraphBuilder b(4);
  int x = b.input(vector_shape(64));
  for (int l = 0; l < 6; ++l) {
    const std::string n = std::to_string(l);  // (GCC 12 warns falsely on "y" + std::to_string)
    const int y = b.tensor(std::string("y").append(n), vector_shape(64));
    b.add(b.matmul({whole(x)}, whole(y)), std::string("fc").append(n));
    x = y;
  }
  b.g.output = x;
  sim::Arch a = arch8x8();
  a.ub_bytes = 100 * 8;
  const isa::Program p = lower_and_check(b.g, a);
  CHECK(count(p, Opcode::matmul) == 6 * 64);  // 8 K tiles x 8 N tiles per layer
}

TEST_CASE("a batch that does not fit the unified buffer runs in pieces, a sample that does not fit in bands of rows") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(40, 40, 8)), y = b.tensor("big", map_shape(40, 40, 8));
  b.add(b.matmul({whole(x)}, whole(y)), "conv_big");
  b.g.output = y;
  // In 4096 rows, batch 2 needs 2 x 3200: tried, then pieces of 2 x 896 / 3200 -> 1 sample.
  sim::Arch a = arch8x8();
  a.ub_bytes = 4096 * 8;
  const isa::Program p = lower_and_check(b.g, a, whole_input());
  CHECK(p.meta["batch_piece"] == 1);
  CHECK(p.meta["bands"] == 0);
  // Per piece, 1600 output rows in chunks of half the 256 accumulator rows: ceil(1600 / 128) = 13
  // passes of the one tile, fetched again by each.
  CHECK(count(p, Opcode::matmul) == 2 * 13);
  CHECK(count(p, Opcode::read_weights) == 2 * 13);
  CHECK(count(p, Opcode::write_host) == 2);    // each piece's output to its place in the region

  // 40 x 40 = 1600 rows per sample and tensor: in 2048 UB rows the input of one sample fits, its
  // output beside it does not. Both stay in host memory and the layer runs in bands of output
  // rows: a band of n image rows takes 40 n input + 40 n output UB rows, two bands at once (the
  // next band's input loads while the previous one computes): 2 x 80 n <= 2048 -> n = 12; bands
  // of 12, 12, 12 and 4 rows per sample.
  a.ub_bytes = 2048 * 8;
  const isa::Program banded = lower_and_check(b.g, a);
  CHECK(banded.meta["batch_piece"] == 1);
  CHECK(banded.meta["bands"] == 2 * 4);
  // Per band of 12 rows, 480 output rows in chunks of 128 (4 passes); the band of 4 rows, 160 <=
  // 256 accumulator rows, in two chunks of 80 (compiler::pass_budget: one pass would drain its
  // first 80 rows with the matrix unit waiting, and the one tile's second fetch, a 64-byte box,
  // costs a few cycles, its shift hidden behind 80 vectors): 14 per sample (13 with one pass).
  CHECK(count(banded, Opcode::matmul) == 2 * 14);
  CHECK(count(banded, Opcode::read_host) == 2 * 4);   // each band's input rows (unpadded: one DMA)
  CHECK(count(banded, Opcode::write_host) == 2 * 4);  // each band's output rows
  CHECK(banded.meta["mapping"][0]["ub_bytes"] == 2 * 12 * 80 * 8);  // two bands at most

  // Where two bands do not fit at once, one does: in 120 UB rows a band of 1 image row takes 80,
  // two take 160. Each band then takes the rows of the one before it (the emitter's syncs order
  // the previous band's write-back before the next band's input DMA): 40 bands of 1 row per
  // sample, each one pass (40 output rows <= 128), bit-exact (lower_and_check).
  a.ub_bytes = 120 * 8;
  const isa::Program single = lower_and_check(b.g, a);
  CHECK(single.meta["bands"] == 2 * 40);
  CHECK(count(single, Opcode::matmul) == 2 * 40);
  CHECK(count(single, Opcode::write_host) == 2 * 40);
  CHECK(single.meta["mapping"][0]["ub_bytes"] == 80 * 8);  // one band at a time

  // A sample of which not even one output row fits is refused, with the numbers: a row of 200
  // pixels takes 200 input + 200 output rows, 400 > 300.
  GraphBuilder w(1);
  const int wx = w.input(map_shape(4, 200, 8)), wy = w.tensor("wide", map_shape(4, 200, 8));
  w.add(w.matmul({whole(wx)}, whole(wy)), "conv_wide");
  w.g.output = wy;
  a.ub_bytes = 300 * 8;
  CHECK_THROWS_WITH(compiler::lower(w.g, a),
                    Catch::Contains("layer conv_wide: even one output row of tensor wide ([4, 200, 8]) does not fit") &&
                        Catch::Contains("it needs 400 UB rows, the largest free block is 300 rows"));
}

TEST_CASE("a padded convolution in bands reads each band's rows with their halo, the border where the band meets it") {
  GraphBuilder b(1);
  const int x = b.input(map_shape(20, 12, 5)), y = b.tensor("y", map_shape(20, 12, 7));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3);
  m.pad = 1;
  b.add(m, "conv");
  b.g.output = y;
  sim::Arch a = arch8x8();
  // The input stored padded takes 22 x 14 = 308 rows and the output 240: not both in 400. A band
  // of n output rows reads n + 2 stored rows of 14 pixels and writes n rows of 12: 26 n + 28
  // rows; two bands: 52 n + 56 <= 400 -> n = 6: bands of 6, 6, 6, 2 rows.
  a.ub_bytes = 400 * 8;
  const isa::Program p = lower_and_check(b.g, a);
  CHECK(p.meta["bands"] == 4);
  // One DMA per image row inside the band's stored rows (padded rows 0-7, 6-13, 12-19, 18-21 of
  // the 22: rows 0 and 21 are the border): 7 + 8 + 8 + 3 = 26; one write per band.
  CHECK(count(p, Opcode::read_host) == 26);
  CHECK(count(p, Opcode::write_host) == 4);
  // Per band, one matmul per kernel position streams its rows: 4 x 9.
  CHECK(count(p, Opcode::matmul) == 4 * 9);
}

TEST_CASE("a 1 x 1 convolution with padding 1 in bands reads the map's bottom padding inside its last band as zeros") {
  // Inception's pool projection (small/inception.toml m1_proj): a 1 x 1 kernel, padding 1, over a
  // 6 x 6 map gives 8 x 8, the border pixels the bias alone. A band of n output rows reads n
  // stored rows, fewer than its storage's 2 x 1 border rows + 1 for n < 3: a band of 2 is stored
  // 3 rows tall (band_storages), its last row a border. The last band, output rows 6-7, reads
  // padded rows 6 (map row 5) and 7 (the map's bottom padding): its stored row 1 is padding but
  // not the band's border, and no DMA writes it: until the lowering zeroed it (band_padding_rows)
  // it held what an earlier band had left in those UB rows, and output row 7 came out as the
  // weights times those pixels instead of the bias alone (small/inception.toml on a 4 x 4 array
  // with ub_bytes=8192: a wrong score).
  GraphBuilder b(1);
  const int x = b.input(map_shape(6, 6, 8)), y = b.tensor("y", map_shape(8, 8, 8));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 1, 1);
  m.pad = 1;
  b.add(m, "proj");
  b.g.output = y;
  sim::Arch a = arch8x8();
  // The input stored padded takes 8 x 8 = 64 rows and the output 64: not both in 100. A band of n
  // output rows stores max(n, 3) rows of 8 pixels and writes n rows of 8: two bands of 2 take
  // 2 x (24 + 16) = 80 <= 100, of 3 take 2 x (24 + 24) = 96 <= 100: bands of 3, 3, 2 rows. The
  // last band (rows 6-7) is stored 3 rows tall from padded row 6: stored row 1 is padded row 7.
  a.ub_bytes = 100 * 8;
  const isa::Program p = lower_and_check(b.g, a);
  CHECK(p.meta["bands"] == 3);
  // (the same with bands of 2: two of 2 rows at once in 80 to 95 rows: bands of 2, 2, 2, 2, the
  // last from padded row 6 as above)
  a.ub_bytes = 90 * 8;
  const isa::Program p2 = lower_and_check(b.g, a);
  CHECK(p2.meta["bands"] == 4);

  // Every kernel smaller than twice its padding (1 x 1 padding 1 or 2, 2 x 2 padding 1 or 2, 3 x 3
  // padding 2), strided or not, on maps of 5 to 7 rows at batch 2, with buffers from half the
  // padded input to nearly input and output together (in bands of every height, or in pieces):
  // bit-exact on every engine, some of them in bands.
  const std::tuple<uint64_t, uint64_t, uint64_t> cases[] = {{1, 1, 1}, {1, 2, 1}, {2, 1, 1}, {2, 2, 1},
                                                            {3, 2, 1}, {1, 1, 2}, {2, 1, 2}, {3, 2, 2}};
  for (const auto& [k, pad, stride] : cases)
    for (uint64_t h = 5; h <= 7; ++h) {
      GraphBuilder g(2);
      g.rng.seed(h * 100 + k * 10 + pad);
      const uint64_t oh = (h + 2 * pad - k) / stride + 1, ow = (6 + 2 * pad - k) / stride + 1;
      const int gx = g.input(map_shape(h, 6, 5)), gy = g.tensor("y", map_shape(oh, ow, 3));
      compiler::MatmulOp gm = g.matmul({whole(gx)}, whole(gy), k, k);
      gm.pad = pad;
      gm.stride = stride;
      g.add(gm, "conv");
      g.g.output = gy;
      const uint64_t in_rows = (h + 2 * pad) * (6 + 2 * pad) * 2, out_rows = oh * ow * 2;
      uint64_t banded = 0;
      for (uint64_t rows = in_rows / 2; rows < in_rows + out_rows; rows += 8) {
        a.ub_bytes = rows * 8;
        INFO("kernel " << k << ", padding " << pad << ", stride " << stride << ", " << h << " rows, " << rows
                       << " UB rows");
        isa::Program gp;
        try {
          gp = lower_and_check(g.g, a);
        } catch (const InputError&) {  // not even one band fits
          continue;
        }
        banded += gp.meta["bands"].get<uint64_t>() > 0;  // (else in pieces of one sample)
      }
      INFO("kernel " << k << ", padding " << pad << ", stride " << stride << ", " << h << " rows");
      CHECK(banded > 0);
    }
}

TEST_CASE("random chains of grouped convolutions, pools and element-wise ops in bands are bit-exact on every engine") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 10; ++trial) {
    std::uniform_int_distribution<int> d(0, 1 << 20);
    const uint64_t h = 9 + d(rng) % 14, w = 5 + d(rng) % 10, c = 2 + d(rng) % 12;
    const uint64_t n = trial % 2 ? c : 2 + d(rng) % 12;  // odd trials can be depthwise
    const uint64_t k = 1 + d(rng) % 3, stride = 1 + d(rng) % 2, pad = d(rng) % 2 ? k / 2 : 0;
    const uint64_t batch = 1 + d(rng) % 2;
    GraphBuilder b(batch);
    b.rng.seed(trial);
    const int x = b.input(map_shape(h, w, c));
    const uint64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
    const int y = b.tensor("y", map_shape(oh, ow, n));
    compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), k, k, trial % 2 == 0);
    m.pad = pad;
    m.stride = stride;
    // Grouped (the largest common divisor of c and n among 1, 2, 3, ...; depthwise when c = n
    // divides it): the weights zero across groups, as expand_groups holds them.
    for (uint64_t g = 1; g <= std::min(c, n); ++g)
      if (c % g == 0 && n % g == 0 && d(rng) % 2) m.groups = g;
    for (uint64_t rs = 0; rs < k * k; ++rs)
      for (uint64_t i = 0; i < c; ++i)
        for (uint64_t j = 0; j < n; ++j)
          if (i / (c / m.groups) != j / (n / m.groups)) m.weights[(rs * c + i) * n + j] = 0;
    b.add(m, "conv");
    const int p = b.tensor("p", map_shape(oh / 2, ow / 2, n));
    b.add(compiler::PoolOp{whole(y), whole(p), isa::PoolKind::max, 2, 2}, "pool");
    const int s = b.tensor("s", map_shape(oh / 2, ow / 2, n));
    compiler::VectorOp v;
    v.op = isa::VecOp::add;
    v.a = v.b = whole(p);
    v.output = whole(s);
    v.shift = 1;
    b.add(v, "add");
    b.g.output = s;
    sim::Arch a = arch8x8();
    // The stored input and the conv's output together exceed the buffer: everything in bands.
    const uint64_t in_rows = (h + 2 * pad) * (w + 2 * pad) * ((c + 7) / 8), out_rows = oh * ow * ((n + 7) / 8);
    a.ub_bytes = (std::max(in_rows, out_rows) + 8) * 8;
    INFO("trial " << trial << ": " << h << "x" << w << "x" << c << " -> " << n << ", kernel " << k << ", stride "
                  << stride << ", pad " << pad << ", groups " << m.groups << ", batch " << batch);
    // (Unfused: with the pool fused into the conv's activates, the full-size map never exists
    // and the model may fit without bands; it must stay bit-exact too.)
    const isa::Program prog = lower_and_check(b.g, a, {false});
    CHECK(prog.meta["bands"].get<uint64_t>() > 0);
    lower_and_check(b.g, a);
  }
}

TEST_CASE("the batch runs in the fewest pieces that fit, not the proportional guess") {
  GraphBuilder b(6);
  const int x = b.input(map_shape(40, 40, 8)), y = b.tensor("big", map_shape(40, 40, 8));
  b.add(b.matmul({whole(x)}, whole(y)), "conv_big");
  b.g.output = y;
  sim::Arch a = arch8x8();
  a.ub_bytes = 10000 * 8;
  // 1600 rows per sample and tensor. Batch 6 (6 x 3200 = 19200 rows) does not fit 10000: the
  // input takes 9600, the output finds 400 free of 9600 needed, a guess of 6 x 400 / 9600 -> 1
  // sample (6 pieces), which fits. Bisection between 1 piece (fails) and 6 (fits): 3 pieces of 2
  // (6400 rows) fit, 2 pieces of 3 (9600 rows) fit: 2 pieces of 3.
  const isa::Program p = lower_and_check(b.g, a);
  CHECK(p.meta["batch_piece"] == 3);
  CHECK(count(p, Opcode::write_host) == 2);
}

TEST_CASE("a batch larger than half the accumulators runs in pieces of half the accumulators") {
  GraphBuilder b(40);
  const int x = b.input(vector_shape(8)), y = b.tensor("y", vector_shape(8));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  sim::Arch a = arch8x8();
  a.acc_entries = 64;
  const isa::Program p = lower_and_check(b.g, a);
  // At most 64 / 2 = 32 samples per piece: ceil(40 / 32) = 2 pieces of 20.
  CHECK(p.meta["batch"] == 40);
  CHECK(p.meta["batch_piece"] == 20);
  CHECK(count(p, Opcode::matmul) == 2);
  CHECK(nth(p, Opcode::matmul, 0)[Field::rows] == 20);
  CHECK(nth(p, Opcode::matmul, 1)[Field::rows] == 20);
  CHECK(count(p, Opcode::read_host) == 2);
  CHECK(count(p, Opcode::write_host) == 2);
}

TEST_CASE("independent inputs are loaded when first read, so their layers reuse the unified buffer") {
  // Two independent layers, each reading its own 40 x 40 x 8 input (1600 rows at batch 1): all
  // four tensors together need 6400 rows; one layer's input and output 3200 of the 4096.
  GraphBuilder b(1);
  const int x0 = b.input(map_shape(40, 40, 8)), y0 = b.tensor("y0", map_shape(40, 40, 8));
  const int x1 = b.input(map_shape(40, 40, 8)), y1 = b.tensor("y1", map_shape(40, 40, 8));
  b.add(b.matmul({whole(x0)}, whole(y0)), "a");
  b.add(b.matmul({whole(x1)}, whole(y1)), "b");
  b.g.output = y1;
  sim::Arch a = arch8x8();
  a.ub_bytes = 4096 * 8;
  const isa::Program p = lower_and_check(b.g, a);
  // input1's DMA comes after layer a's matmul: it was not loaded at the start.
  size_t matmul_at = 0, second_load_at = 0, loads = 0;
  for (size_t i = 0; i < p.code.size(); ++i) {
    if (p.code[i].opcode == Opcode::matmul && !matmul_at) matmul_at = i;
    if (p.code[i].opcode == Opcode::read_host && ++loads == 2) second_load_at = i;
  }
  CHECK(second_load_at > matmul_at);
}

}  // namespace tpusim::test

namespace tpusim::test {

namespace {

// A 3x3 convolution of a 5 x 5 x 20 map (batch 2, padding 1) into 20 channels in `groups`
// groups, its weights zero across groups (as expand_groups holds them).
compiler::QGraph grouped_conv(uint64_t groups) {
  GraphBuilder b(2);
  const int x = b.input(map_shape(5, 5, 20)), y = b.tensor("y", map_shape(5, 5, 20));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3);
  m.pad = 1;
  m.groups = groups;
  const uint64_t per = 20 / groups;
  for (uint64_t rs = 0; rs < 9; ++rs)
    for (uint64_t k = 0; k < 20; ++k)
      for (uint64_t j = 0; j < 20; ++j)
        if (k / per != j / per) m.weights[(rs * 20 + k) * 20 + j] = 0;
  b.add(m, "grouped");
  b.g.output = y;
  return b.g;
}

}  // namespace

TEST_CASE("a grouped convolution computes only the tiles whose K rows and N columns share a group") {
  // 20 channels on an 8 x 8 array: K and N tiles of channels 0-7, 8-15, 16-19; 9 kernel positions.
  // The output (25 pixels x batch 2 = 50 rows) is one chunk: one matmul per computed tile.
  const isa::Program dense = lower_and_check(grouped_conv(1), arch8x8(), whole_input());
  CHECK(count(dense, Opcode::matmul) == 9 * 3 * 3);  // 81
  CHECK(dense.meta["macs"] == 50 * 9 * 20 * 20);
  // Depthwise (20 groups of 1): only the 3 diagonal tiles per kernel position.
  const isa::Program dw = lower_and_check(grouped_conv(20), arch8x8(), whole_input());
  CHECK(count(dw, Opcode::matmul) == 9 * 3);                                // 27
  CHECK(count(dw, Opcode::read_weights) == 9 * 3);
  CHECK(count(dw, Opcode::matmul, Field::accumulate, 1) == 9 * 3 - 3);     // all but each N tile's first
  CHECK(dw.meta["macs"] == 50 * 9 * 20);                                    // one input channel per output
  CHECK(dw.meta["mapping"][0]["array_macs"] == 27 * 50 * 64);
  // 2 groups of 10 (channels 0-9, 10-19): K tile 0-7 meets N tiles 0-7 and 8-15 (channels 8, 9),
  // K tile 8-15 all three, K tile 16-19 N tiles 8-15 and 16-19: 7 of 9 per kernel position.
  const isa::Program g2 = lower_and_check(grouped_conv(2), arch8x8(), whole_input());
  CHECK(count(g2, Opcode::matmul) == 9 * 7);                                // 63
  CHECK(g2.meta["macs"] == 50 * 9 * 2 * 10 * 10);
  // Groups the channels do not divide are refused, naming the layer.
  compiler::QGraph bad = grouped_conv(1);
  std::get<compiler::MatmulOp>(bad.ops[0]).groups = 3;
  CHECK_THROWS_WITH(compiler::lower(bad, arch8x8()), Catch::Contains("layer grouped: 3 groups for 20 input and 20 output"));
}

}  // namespace tpusim::test

namespace tpusim::test {

TEST_CASE("narrow tensors are stored dense: several samples per UB row, fewer rows, the same bits") {
  // arch8x8 (8 x 8 array, 8-byte UB rows, act and pool 4 values per cycle after 2 cycles). Batch 4:
  //   x  4 x 4 x 2: q = 4 (the largest divisor of 4 with 2q <= 8): 1 UB row per pixel, 16 rows
  //                 (64 one per (pixel, sample));
  //   y  4 x 4 x 3 (1x1 conv, relu): q = 2 (3 x 4 > 8): 2 UB rows per pixel, 32 rows (64);
  //   p  2 x 2 x 3 (max pool 2): q = 2: 8 rows (16).
  GraphBuilder b(4);
  const int x = b.input(map_shape(4, 4, 2)), y = b.tensor("y", map_shape(4, 4, 3));
  const int p = b.tensor("p", map_shape(2, 2, 3));
  b.add(b.matmul({whole(x)}, whole(y)), "conv");
  b.add(compiler::PoolOp{whole(y), whole(p), isa::PoolKind::max, 2, 2}, "pool");
  b.g.output = p;
  const isa::Program dense = lower_and_check(b.g, arch8x8(), whole_input());
  compiler::LowerOptions off;
  off.dense = false;
  const isa::Program plain = lower_and_check(b.g, arch8x8(), whole_input(off));
  // UB use per layer (meta.mapping ub_bytes, 8-byte rows): conv holds x and y, pool y and p.
  CHECK(dense.meta["mapping"][0]["ub_bytes"] == (16 + 32) * 8);
  CHECK(plain.meta["mapping"][0]["ub_bytes"] == (64 + 64) * 8);
  CHECK(dense.meta["mapping"][1]["ub_bytes"] == (32 + 8) * 8);
  CHECK(plain.meta["mapping"][1]["ub_bytes"] == (64 + 16) * 8);
  // The input DMA: 16 UB rows of q x c = 8 host bytes; the output: 8 rows of 2 x 3 = 6 bytes.
  CHECK(nth(dense, Opcode::read_host, 0)[Field::rows] == 16);
  CHECK(nth(dense, Opcode::write_host, 0)[Field::rows] == 8);
  // The matmul reads 64 logical rows through a 1 x 1 dense gather of the field's 2 bytes; the
  // activate writes 64 logical rows, 2 fields of 3 bytes per UB row.
  const auto reg = [&](const isa::Program& q, isa::ConfigReg r) {
    return q.code[index_of_setcfg(q, r)][Field::value];
  };
  CHECK(nth(dense, Opcode::matmul, 0)[Field::rows] == 64);
  CHECK(reg(dense, isa::ConfigReg::gather_bytes) == 2);
  CHECK(reg(dense, isa::ConfigReg::dense_rows) == 4);
  CHECK(reg(dense, isa::ConfigReg::dense_bytes) == 2);
  CHECK(reg(dense, isa::ConfigReg::act_dense_rows) == 2);
  CHECK(reg(dense, isa::ConfigReg::act_dense_bytes) == 3);
  CHECK(count(plain, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::dense_rows)) == 0);
  // The pool works on whole rows: batch = rows per pixel = 2 instead of 4. Its cycles: latency 2 +
  // out_h x out_w x batch x window^2 x ceil(8 / 4): 2 + 2 x 2 x 2 x 4 x 2 = 66 (plain: 2 + 2 x 2 x 4
  // x 4 x 2 = 130). The matmul and the activate take what they take without dense rows.
  CHECK(nth(dense, Opcode::pool, 0)[Field::batch] == 2);
  const sim::RunResult rd = sim::simulate(dense, arch8x8(), {sim::Engine::timing, 0});
  const sim::RunResult rp = sim::simulate(plain, arch8x8(), {sim::Engine::timing, 0});
  const auto duration = [](const isa::Program& q, const sim::RunResult& r, Opcode op) {
    for (size_t i = 0; i < q.code.size(); ++i)
      if (q.code[i].opcode == op) return r.timeline[i].end - r.timeline[i].start;
    return uint64_t{0};
  };
  CHECK(duration(dense, rd, Opcode::pool) == 66);
  CHECK(duration(plain, rp, Opcode::pool) == 130);
  CHECK(duration(dense, rd, Opcode::matmul) == duration(plain, rp, Opcode::matmul));
  CHECK(duration(dense, rd, Opcode::activate) == duration(plain, rp, Opcode::activate));
  CHECK(rd.cycles < rp.cycles);
}

TEST_CASE("a dense pool whose rows per pixel pass the pool's 255 runs the batch in smaller pieces") {
  // 2 channels at batch 257 (a prime) with 1024 accumulators (one piece could hold 512 samples):
  // no q > 1 divides 257, so its pool would need 257 rows per pixel. The piece search tries
  // smaller pieces: in proportion, 257 x 255 / 257 = 255 samples, i.e. 2 pieces of 129 (q = 3:
  // 43 rows per pixel; the last piece of 128 has q = 4, 32 rows per pixel); the model runs
  // bit-exact.
  GraphBuilder b(257);
  const int x = b.input(map_shape(2, 2, 2)), p = b.tensor("p", map_shape(1, 1, 2));
  b.add(compiler::PoolOp{whole(x), whole(p), isa::PoolKind::max, 2, 2}, "pool");
  b.g.output = p;
  sim::Arch a = arch8x8();
  a.acc_entries = 1024;
  const isa::Program prog = lower_and_check(b.g, a);
  CHECK(prog.meta["batch_piece"] == 129);
  CHECK(nth(prog, Opcode::pool, 0)[Field::batch] == 43);
  CHECK(nth(prog, Opcode::pool, 1)[Field::batch] == 32);
}

}  // namespace tpusim::test

namespace tpusim::test {

// Input streaming (docs/compiler.md "Input streaming"): a 3 x 1 convolution over a 10 x 1 map of
// 8 channels at batch 4 on the 8 x 8 array (small_arch() timing: 1 host byte per cycle, 10
// cycles per DMA start, one issue cycle). Its streaming is C = 8 output rows x 4 samples x 3
// kernel positions = 96 vectors and its input T = 10 x 4 x 8 = 320 bytes (320 cycles), so
// k = floor(sqrt(min(96, 320) / 10)) = 3 parts of ceil(10 / 3) = 4 image rows: map rows [0, 4),
// [4, 8), [8, 10), 16, 16 and 8 UB rows (one per pixel and sample).
TEST_CASE("a streamed input: the first convolution starts on the rows already loaded, each sync waiting for one part") {
  GraphBuilder b(4);
  const int x = b.input(map_shape(10, 1, 8)), y = b.tensor("y", map_shape(8, 1, 8));
  b.add(b.matmul({whole(x)}, whole(y), 3, 1), "conv");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8x8());
  compiler::LowerOptions off;
  off.stream_input = false;
  const isa::Program q = lower_and_check(b.g, arch8x8(), off);
  CHECK(!p.meta.contains("mapper"));
  CHECK(q.meta["mapper"]["stream"] == false);
  // Three input DMAs instead of one.
  REQUIRE(count(p, Opcode::read_host) == 3);
  CHECK(count(q, Opcode::read_host) == 1);
  CHECK(nth(p, Opcode::read_host, 0)[Field::rows] == 16);
  CHECK(nth(p, Opcode::read_host, 1)[Field::rows] == 16);
  CHECK(nth(p, Opcode::read_host, 2)[Field::rows] == 8);
  // Output row y reads map rows y..y+2, so the chunks end where they reach a later part: rows
  // [0, 2) (part 0), [2, 6) (part 1), [6, 8) (part 2), each switching in the 3 tiles again (9
  // fetches instead of 3). Within a chunk a matmul is cut where its groups reach a part that has
  // not arrived yet: chunk 1's kernel row 0 (map rows 2-3 | 4-5) and chunk 2's kernel row 1
  // (row 7 | row 8). 11 matmuls: (repeat, accumulator row) in order:
  const uint64_t mms[][2] = {{2, 0},   {2, 0},   {2, 0},  // chunk 0 (acc 0): kernel rows 0, 1, 2
                             {2, 128}, {2, 136}, {4, 128}, {4, 128},  // chunk 1 (the other half)
                             {2, 0},   {1, 0},   {1, 4},   {2, 0}};   // chunk 2
  REQUIRE(count(p, Opcode::matmul) == 11);
  CHECK(count(q, Opcode::matmul) == 3);
  for (size_t i = 0; i < 11; ++i) {
    CHECK(nth(p, Opcode::matmul, i)[Field::repeat] == mms[i][0]);
    CHECK(nth(p, Opcode::matmul, i)[Field::acc] == mms[i][1]);
  }
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 9);
  // In program order: part 0, then per part a sync on the host (mask bit 0) right before the
  // first matmul that reads it, and the next part right after that matmul.
  std::string order;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::read_host) order += 'H';
    else if (in.opcode == Opcode::sync && in[Field::units] == 1) order += 'S';
    else if (in.opcode == Opcode::matmul) order += 'M';
  CHECK(order == "HSMHMMMSMHMMMMSMM");
  const EngineRuns r = run_all(p, arch8x8()), rq = run_all(q, arch8x8());
  // A part of 16 rows x 8 bytes takes 10 + 128 = 138 cycles, part 2 (8 rows) 10 + 64 = 74.
  // Part 0 starts at 9 (after 4 rw, a tag and 2 setcfg, then its own issue cycle): [9, 147). The
  // sync holds issue until 147; the first matmul issues then and starts at 148; part 1 issues
  // right after it and starts at 149: [149, 287); part 2 the same after chunk 1's cut matmul,
  // [289, 363). The host link is idle 2 cycles between parts.
  CHECK(at(p, r, Opcode::read_host, 0).start == 9);
  CHECK(at(p, r, Opcode::read_host, 0).end == 147);
  CHECK(at(p, r, Opcode::matmul, 0).start == 148);
  CHECK(at(p, r, Opcode::read_host, 1).start == 149);
  CHECK(at(p, r, Opcode::read_host, 1).end == 287);
  CHECK(at(p, r, Opcode::matmul, 4).start == 288);  // chunk 1's first matmul on part 1
  CHECK(at(p, r, Opcode::read_host, 2).start == 289);
  CHECK(at(p, r, Opcode::read_host, 2).end == 363);
  // Chunk 2: its matmuls on rows 6-7 ran while part 2 moved; the one on row 8 issues when part 2
  // is in (363) and starts at 364 (4 vectors), the last kernel row's (8 vectors, its tile shifted
  // in meanwhile) follows at 368 and ends at 368 + 8 + 8 + 8 - 1 = 391; the chunk's act takes
  // 2 + 8 rows x 2 = 18 cycles, [391, 409), and the output (8 rows x 4 samples x 8 bytes = 256
  // bytes) 10 + 256 = 266 cycles from 410: 676 cycles.
  CHECK(at(p, r, Opcode::matmul, 9).start == 364);
  CHECK(at(p, r, Opcode::matmul, 10).start == 368);
  CHECK(at(p, r, Opcode::matmul, 10).end == 391);
  CHECK(at(p, r, Opcode::activate, 2).end == 409);
  CHECK(r.fast.cycles == 676);
  // Loaded whole (3 rw before it: it starts at 8): the input DMA is [8, 338) (10 + 320); the 3
  // matmuls of 32 vectors each stream back to back from 339 (each tile's shift hidden behind the
  // 32 vectors before it), the last one [403, 403 + 32 + 15) = [403, 450); the act of 32 rows
  // [450, 450 + 2 + 64) = [450, 516); after the sync's issue cycle the output [517, 783).
  // Streaming saves 783 - 676 = 107 cycles: everything but the last chunk ran while the input
  // moved.
  CHECK(at(q, rq, Opcode::read_host, 0).end == 338);
  CHECK(at(q, rq, Opcode::matmul, 0).start == 339);
  CHECK(at(q, rq, Opcode::matmul, 2).end == 450);
  CHECK(at(q, rq, Opcode::activate, 0).end == 516);
  CHECK(rq.fast.cycles == 783);
  // The input stall counter: cycles a sync on the host holds issue while no matmul streams or
  // waits for its tile: [10, 147), [156, 287) less chunk 1's matmuls, ...; less than loaded whole.
  CHECK(r.fast.matrix.input_stall < rq.fast.matrix.input_stall);
}

}  // namespace tpusim::test

namespace tpusim::test {

// An input read one time step at a time (an LSTM's sequence; docs/compiler.md "Input
// streaming"): a recurrence y_t = relu([x_t, y_(t-1)] W) over 3 steps of 16 channels at batch 4
// on the 8 x 8 array (small_arch() timing: 1 host byte per cycle, 10 cycles per DMA start; a
// 64-byte tile takes 64 / 4 = 16 cycles from weight memory). x is 2 slices of 8 channels; each
// step's matmul has 2 K tiles over x_t (3 over [x_t, y_(t-1)] after step 0) and 3 N tiles.
TEST_CASE("an input read step by step is loaded step by step, the next step's DMAs paced under this step's tiles") {
  // (The timings below are the unskewed shift's: unskewed().)
  GraphBuilder b(4);
  const int x = b.input(sequence_shape(3, 16));
  int prev = -1;
  for (uint64_t t = 0; t < 3; ++t) {
    const int y = b.tensor(std::string(1, char('a' + t)), vector_shape(24));
    std::vector<compiler::View> in{{x, t, 1}};
    if (prev >= 0) in.push_back(whole(prev));
    b.add(b.matmul(in, whole(y)), "rnn");
    prev = y;
  }
  b.g.output = prev;
  const isa::Program p = lower_and_check(b.g, unskewed(arch8x8()));
  const isa::Program q = lower_and_check(b.g, unskewed(arch8x8()), whole_input());
  // One DMA per step and slice (4 samples x 8 bytes), step 0's first: UB rows 0 and 12 (slice 1
  // starts 3 steps x 4 rows later), then step 1's 4 and 16, step 2's 8 and 20. Loaded whole: one
  // DMA per slice of the 3 steps.
  REQUIRE(count(p, Opcode::read_host) == 6);
  CHECK(count(q, Opcode::read_host) == 2);
  const uint64_t rows[] = {0, 12, 4, 16, 8, 20};
  for (size_t i = 0; i < 6; ++i) {
    CHECK(nth(p, Opcode::read_host, i)[Field::ub] == rows[i]);
    CHECK(nth(p, Opcode::read_host, i)[Field::rows] == 4);
  }
  // In program order (H a DMA, S a sync on the host, M a switching matmul, A an act): step 0's
  // first N tile waits for its two parts one at a time (each sync right before the matmul that
  // reads the part, the next part right after it: the last of them is step 1's first); then,
  // after 3 switching matmuls that needed no part (pace = ceil((10 + 32) / 16) = 3: a part's DMA
  // against a tile's fetch), step 1's second part. Step 1's first matmul waits for both, and step
  // 2's parts are paced in the same way under step 1's 15 tiles; step 2's sync finds them in.
  std::string order;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::read_host) order += 'H';
    else if (in.opcode == Opcode::sync && in[Field::units] == 1) order += 'S';
    else if (in.opcode == Opcode::matmul) order += 'M';
    else if (in.opcode == Opcode::activate) order += 'A';
  CHECK(order == "HSMHSMHAMMAMHMASMMMMHMAMMHMMMAMMMMMASMMMMMAMMMMMAMMMMMA");
  const EngineRuns r = run_all(p, unskewed(arch8x8())), rq = run_all(q, unskewed(arch8x8()));
  // A part takes 10 + 4 x 8 = 42 cycles. Part 0 [9, 51) (after 4 rw, 2 tags, 2 setcfg); the
  // first matmul starts at 52 and part 1 issues right after it: [53, 95); step 0's second K
  // tile's matmul starts at 96, and step 1's first part [97, 139) right after it; its second,
  // paced, waits for the host link: [139, 181).
  CHECK(at(p, r, Opcode::read_host, 0).start == 9);
  CHECK(at(p, r, Opcode::read_host, 0).end == 51);
  CHECK(at(p, r, Opcode::matmul, 0).start == 52);
  CHECK(at(p, r, Opcode::read_host, 1).start == 53);
  CHECK(at(p, r, Opcode::matmul, 1).start == 96);
  CHECK(at(p, r, Opcode::read_host, 2).start == 97);
  CHECK(at(p, r, Opcode::read_host, 3).end == 181);
  // Step 1 (matmuls 6..20) starts when its parts are in (its sync ends at 181); step 2's parts
  // move under it, [190, 232) and [232, 274), long before step 2's first matmul (21) issues at
  // 347: its sync on the host holds issue 1 cycle.
  CHECK(at(p, r, Opcode::matmul, 6).start == 182);
  CHECK(at(p, r, Opcode::read_host, 4).start == 190);
  CHECK(at(p, r, Opcode::read_host, 5).end == 274);
  CHECK(at(p, r, Opcode::matmul, 21).issue == 347);
  // Loaded whole, the first matmul waits for both slices' DMAs, 10 + 3 x 4 x 8 = 106 cycles
  // each: [9, 115), [115, 221), and starts at 222, 170 cycles later; the run ends at 910 instead
  // of 780 (the output's 3 DMAs of 42 cycles after the last act: 654 + 126 = 780).
  CHECK(at(q, rq, Opcode::read_host, 1).end == 221);
  CHECK(at(q, rq, Opcode::matmul, 0).start == 222);
  CHECK(at(p, r, Opcode::activate, 8).end == 653);
  CHECK(r.fast.cycles == 780);
  CHECK(rq.fast.cycles == 910);
  // Input stall (docs/timing.md, "Counters"): the cycles the syncs on the host hold issue, step
  // 0's two and step 1's, less those in which a matmul streams or waits for its tile: 100, against
  // 209 loaded whole.
  CHECK(r.fast.matrix.input_stall == 100);
  CHECK(rq.fast.matrix.input_stall == 209);
}

}  // namespace tpusim::test

namespace tpusim::test {

// Streaming into the second layer (docs/compiler.md "Input streaming"): the streamed 3 x 1
// convolution above (conv1: 10 x 1 -> 8 x 1, 8 channels, batch 4, the 8 x 8 array) followed by a
// 3 x 3 "same" one (conv2, padding 1) over its 8 x 1 output. Both stream: C = 8 rows x 4 samples x
// (3 + 9) tiles = 96 + 288 = 384 vectors against T = 320 bytes (320 cycles), so
// floor(sqrt(min(384, 320) / 10)) = 5 parts by the DMA starts, but each part beyond the first
// fetches both layers' 12 tiles again (12 x 64 bytes at 4 bytes a cycle = 192 cycles), which
// must take less than T: ceil(320 / 192) = 2 parts of 5 image rows (20 UB rows, 160 bytes each).
TEST_CASE("a streamed input: the second convolution's chunks run between the first's as their rows are written") {
  // (The timings below are the unskewed shift's: unskewed().)
  GraphBuilder b(4);
  const int x = b.input(map_shape(10, 1, 8)), y = b.tensor("y", map_shape(8, 1, 8)), z = b.tensor("z", map_shape(8, 1, 8));
  b.add(b.matmul({whole(x)}, whole(y), 3, 1), "conv1");
  compiler::MatmulOp m2 = b.matmul({whole(y)}, whole(z), 3, 3);
  m2.pad = 1;
  b.add(m2, "conv2");
  b.g.output = z;
  const isa::Program p = lower_and_check(b.g, unskewed(arch8x8()));
  const isa::Program q = lower_and_check(b.g, unskewed(arch8x8()), whole_input());
  REQUIRE(count(p, Opcode::read_host) == 2);
  CHECK(nth(p, Opcode::read_host, 0)[Field::rows] == 20);
  CHECK(nth(p, Opcode::read_host, 1)[Field::rows] == 20);
  // conv1's output row y reads input rows y..y+2: chunks [0, 3) (part 0) and [3, 8). conv2's row
  // y reads conv1's rows up to y + 1: chunk [0, 2) needs conv1's first chunk only and runs right
  // after it, before conv1's second chunk; chunk [2, 8) after that. Each chunk fetches its
  // layer's tiles: 2 x 3 + 2 x 9 = 24 fetches (switching matmuls M; m: conv1's kernel row 0 cut
  // where it reaches part 1). In program order (T: the layers' tags; S1: a sync on the host, S8 on
  // the activation unit; A: an act, one per stored row of conv1's padded output):
  std::string order;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::read_host) order += 'H';
    else if (in.opcode == Opcode::sync) order += 'S', order += std::to_string(in[Field::units]);
    else if (in.opcode == Opcode::matmul) order += in[Field::switch_weights] ? 'M' : 'm';
    else if (in.opcode == Opcode::activate) order += 'A';
    else if (in.opcode == Opcode::debug_tag) order += 'T', order += std::to_string(in[Field::tag]);
  // (conv2's chunk [2, 8) starts with kernel column 0, which on a map 1 pixel wide reads only the
  // zero border: no sync before it.)
  CHECK(order == "T0T1HS1MHMMAAAT2MS8MMMMMMMMAT1MS1mMMAAAAAT2MS8MMMMMMMMAS8T3");
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 24);
  CHECK(count(q, Opcode::matmul, Field::switch_weights, 1) == 12);
  const EngineRuns r = run_all(p, unskewed(arch8x8())), rq = run_all(q, unskewed(arch8x8()));
  // Part 0 (10 + 160 cycles) from 9 (4 rw, 2 tags, 2 setcfg, its issue cycle): [9, 179); part 1
  // issues right after conv1's first matmul (180): [181, 351). conv1's first chunk (3 matmuls of
  // 3 rows x 4 samples) ends at 237 and its 3 acts of 4 rows (2 + 4 x 2 cycles each) at 267.
  CHECK(at(p, r, Opcode::read_host, 0).start == 9);
  CHECK(at(p, r, Opcode::read_host, 0).end == 179);
  CHECK(at(p, r, Opcode::read_host, 1).start == 181);
  CHECK(at(p, r, Opcode::read_host, 1).end == 351);
  CHECK(at(p, r, Opcode::activate, 2).end == 267);
  // conv2's first chunk runs while part 1 still moves: its kernel position (0, 0) reads only the
  // zero border (no sync) and starts at 225, the next after the sync on those acts at 268; its 9
  // tiles of 8 vectors (each fetched in 3 + 16 cycles, the last 5 while the ones before stream)
  // end at 396, its act of 8 rows (2 + 16) at 414.
  CHECK(at(p, r, Opcode::matmul, 3).start == 225);
  CHECK(at(p, r, Opcode::matmul, 4).start == 268);
  CHECK(at(p, r, Opcode::matmul, 11).end == 396);
  CHECK(at(p, r, Opcode::activate, 3).end == 414);
  // conv2's last chunk (9 matmuls of 6 rows x 4 samples = 24 vectors) ends at 721, its act of 24
  // rows (2 + 48) at 771, and the output (8 rows x 4 samples x 8 bytes) takes 10 + 256 cycles
  // after the sync's issue cycle: [772, 1038).
  CHECK(at(p, r, Opcode::matmul, 24).end == 721);
  CHECK(at(p, r, Opcode::activate, 9).end == 771);
  CHECK(r.fast.cycles == 1038);
  // Loaded whole: [9, 339) (10 + 320 cycles) before conv1's first matmul, then the two layers one
  // after the other: 1137 cycles. (With only conv1 streamed, in the same 2 parts: 1075.)
  CHECK(at(q, rq, Opcode::read_host, 0).end == 339);
  CHECK(rq.fast.cycles == 1137);
  CHECK(r.fast.matrix.input_stall < rq.fast.matrix.input_stall);
}

// Emitter::stream_part answers from an index of the stream's parts; here against its definition,
// a scan of the parts from the last down to the first not yet arrived, on random parts (some
// overlapping, some empty) and random spans, while reads of the stream make parts arrive.
TEST_CASE("the stream's part for a span is the last one not arrived that writes one of its rows") {
  std::mt19937_64 rng(18);
  for (int round = 0; round < 20; ++round) {
    const sim::Arch arch;
    compiler::Emitter em(arch, 4, false);
    struct Part {
      uint64_t ub, rows;
    };
    std::vector<Part> parts(1 + rng() % 40);
    em.stream_begin();
    for (Part& pt : parts) {
      pt = {rng() % 1000, rng() % 7 == 0 ? 0 : 1 + rng() % 60};
      em.host_dma(false, 0, pt.ub, pt.rows, 256, 256);
    }
    em.stream_end();
    // The emitter's protocol (emitter.h): part 0 is emitted at the end of the stream; a read
    // of a part's rows emits the parts up to it, and its sync on the host makes them arrive;
    // reading the latest part emitted emits the next.
    size_t emitted = 1, arrived = 0;
    const auto plain = [&](uint64_t first, uint64_t rows) -> int64_t {
      for (size_t i = parts.size(); i-- > arrived;)
        if (rows && first < parts[i].ub + parts[i].rows && parts[i].ub < first + rows) return int64_t(i);
      return -1;
    };
    for (int q = 0; q < 200; ++q) {
      const uint64_t first = rng() % 1100, rows = rng() % 5 == 0 ? rng() % 300 : rng() % 4;
      const int64_t want = plain(first, rows);
      REQUIRE(em.stream_part({first, rows}) == want);
      if (q % 10 != 9 || want < 0) continue;
      isa::Instruction v = isa::make_instruction(Opcode::vector);
      v[Field::op] = uint64_t(isa::VecOp::pass);
      v[Field::src] = first, v[Field::ub] = 5000, v[Field::rows] = rows;
      em.activation(v, {{first, rows}}, {5000, rows});  // (its write: rows no part touches)
      emitted = std::max(emitted, size_t(want) + 1);
      // (a sync on the host when it reads rows a part emitted since the last one wrote: not
      // where the part it needed writes no rows and no other does)
      for (size_t i = arrived; i < emitted; ++i)
        if (parts[i].rows && first < parts[i].ub + parts[i].rows && parts[i].ub < first + rows) arrived = emitted;
      if (size_t(want) + 1 == emitted && emitted < parts.size()) ++emitted;
    }
  }
}

// Compiler-built tiles are numbered by contents once per compile (ContentTiles) and stored once
// per number in each try's weight image: equal bytes, one number and one stored tile; other bytes,
// another; each with its useful box (a 4 x 4 array, compact storage).
TEST_CASE("content tiles: equal bytes get one number and one place in the image, others their own") {
  compiler::ContentTiles tiles(4, 4);
  std::vector<uint8_t> a(16, 0), b(16, 0);
  a[0 * 4 + 1] = 5, a[2 * 4 + 0] = 7;  // rows 0..2, columns 0..1: a 3 x 2 box, 2 cells
  b[3 * 4 + 3] = 1;                    // the whole 4 x 4 box, 1 cell
  const size_t na = tiles.number(a), nb = tiles.number(b), na2 = tiles.number(a);
  CHECK(na == na2);
  CHECK(na != nb);
  CHECK(tiles.use(na).rows == 3);
  CHECK(tiles.use(na).cols == 2);
  CHECK(tiles.use(na).spans == 2);
  CHECK(tiles.use(nb).rows == 4);
  CHECK(tiles.use(nb).cols == 4);
  CHECK(tiles.bytes(nb) == b);
  compiler::WeightImage image(4, 4, true, true);
  const auto sa = image.content(tiles, na), sb = image.content(tiles, nb), sa2 = image.content(tiles, na2);
  CHECK(sa.waddr == 0);
  CHECK(sa.rows == 3);
  CHECK(sa.cols == 2);
  CHECK(sb.waddr == 6);  // after a's 3 x 2 box
  CHECK(sa2.waddr == sa.waddr);
  CHECK(image.tiles() == 2);
  CHECK(image.bytes() == 6 + 16);
}

}  // namespace tpusim::test
