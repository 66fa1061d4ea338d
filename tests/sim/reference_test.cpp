// The golden reference executor (sim/reference.h), matmul_reference, the static program check and
// weight tiles: the committed example programs against the math their header comments state,
// computed here with plain loops, and every error a program can run into.
#include "sim/reference.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "sim_support.h"
#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "isa/assembler.h"
#include "tests/test_support.h"

namespace tpusim::sim {
namespace {

using Catch::Contains;
using test::host_region;
using test::make;
using test::set_acc;
using test::set_row;
using test::tiny;
using isa::Field;
using isa::Opcode;

std::vector<int32_t> acc_of(const MachineState& s, uint64_t row) {
  return std::vector<int32_t>(s.acc_row(row), s.acc_row(row) + s.arch.array_cols);
}

// W[k][j] = data[k * 4 + j]:  k0: 1 0 0 -128   k1: 0 1 0 2   k2: 0 0 1 3   k3: 1 1 1 -1
const std::vector<uint8_t> kTile = {1, 0, 0, 0x80, 0, 1, 0, 2, 0, 0, 1, 3, 1, 1, 1, 0xff};

TEST_CASE("matmul_reference: signed and unsigned operands, overwrite and accumulate", "[reference]") {
  MachineState s = make_state({}, tiny());
  set_row(s, 0, {1, -2, 3, -4});
  const auto mm = make(Opcode::matmul, {{Field::ub, 0}, {Field::acc, 5}, {Field::rows, 1}});
  set_acc(s, 5, {7, 7, 7, 7});
  matmul_reference(s, mm, WeightTile{kTile.data(), 0, false});
  // j0: 1 - 4 = -3   j1: -2 - 4 = -6   j2: 3 - 4 = -1   j3: -128 - 4 + 9 + 4 = -119
  CHECK(acc_of(s, 5) == std::vector<int32_t>{-3, -6, -1, -119});
  // Weights as uint8: W[0][3] = 128, W[3][3] = 255: j3 = 128 - 4 + 9 - 1020 = -887
  matmul_reference(s, mm, WeightTile{kTile.data(), 0, true});
  CHECK(acc_of(s, 5) == std::vector<int32_t>{-3, -6, -1, -887});
  // Inputs as uint8: x = 1, 254, 3, 252: j0 = 253, j1 = 506, j2 = 255, j3 = -128 + 508 + 9 - 252 = 137;
  // accumulated onto 10, 20, 30, 40.
  set_acc(s, 5, {10, 20, 30, 40});
  auto mm_u = mm;
  mm_u[Field::unsigned_data] = mm_u[Field::accumulate] = 1;
  matmul_reference(s, mm_u, WeightTile{kTile.data(), 0, false});
  CHECK(acc_of(s, 5) == std::vector<int32_t>{263, 526, 285, 177});
}

TEST_CASE("matmul_reference: int32 wrap-around, groups with a stride", "[reference]") {
  MachineState s = make_state({}, tiny());
  set_row(s, 0, {1, 0, 0, 0});
  set_acc(s, 0, {INT32_MAX, INT32_MIN, 0, 0});
  auto mm = make(Opcode::matmul, {{Field::rows, 1}, {Field::accumulate, 1}});
  const std::vector<uint8_t> w = {1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  matmul_reference(s, mm, WeightTile{w.data(), 0, false});
  CHECK(acc_of(s, 0) == std::vector<int32_t>{INT32_MIN, INT32_MAX, 0, 0});  // +1 and -1 wrap
  // rows=2, repeat=2, stride=3 read UB rows 0, 1, 3, 4: unit vectors pick the rows of W.
  set_row(s, 0, {1, 0, 0, 0});
  set_row(s, 1, {0, 1, 0, 0});
  set_row(s, 2, {9, 9, 9, 9});  // skipped
  set_row(s, 3, {0, 0, 1, 0});
  set_row(s, 4, {0, 0, 0, 1});
  mm = make(Opcode::matmul, {{Field::acc, 8}, {Field::rows, 2}, {Field::repeat, 2}, {Field::stride, 3}});
  matmul_reference(s, mm, WeightTile{kTile.data(), 0, false});
  CHECK(acc_of(s, 8) == std::vector<int32_t>{1, 0, 0, -128});
  CHECK(acc_of(s, 9) == std::vector<int32_t>{0, 1, 0, 2});
  CHECK(acc_of(s, 10) == std::vector<int32_t>{0, 0, 1, 3});
  CHECK(acc_of(s, 11) == std::vector<int32_t>{1, 1, 1, -1});
}

TEST_CASE("matmul_reference on a 2 x 4 array reads only the first 2 bytes of each row", "[reference]") {
  MachineState s = make_state({}, tiny(2, 4));
  set_row(s, 0, {1, 2, 99, 99});
  const std::vector<uint8_t> w = {1, 2, 3, 4, 5, 6, 7, 8};
  matmul_reference(s, make(Opcode::matmul, {{Field::rows, 1}}), WeightTile{w.data(), 0, false});
  CHECK(acc_of(s, 0) == std::vector<int32_t>{11, 14, 17, 20});  // row0 + 2 * row1
}

TEST_CASE("matmul_reference refuses rows outside the UB or the accumulators", "[reference]") {
  MachineState s = make_state({}, tiny());
  const WeightTile t{kTile.data(), 0, false};
  auto mm = make(Opcode::matmul, {{Field::rows, 30}, {Field::repeat, 2}, {Field::stride, 40}});
  REQUIRE_THROWS_WITH(matmul_reference(s, mm, t),
                      Contains("reads UB rows 0..69, but the unified buffer has 64 rows"));
  mm = make(Opcode::matmul, {{Field::acc, 10}, {Field::rows, 4}, {Field::repeat, 2}});
  REQUIRE_THROWS_WITH(matmul_reference(s, mm, t),
                      "matmul ub=0, acc=10, rows=4, repeat=2: writes accumulator rows 10..17, but the "
                      "accumulators have 16 rows");
}

// round_half_away(v / 2^s) by division (independent of the library's shift-based rounding),
// saturated to int8.
int requant(int64_t v, int s) {
  const int64_t d = int64_t{1} << s, q = (2 * std::llabs(v) + d) / (2 * d);
  return static_cast<int>(std::clamp<int64_t>(v < 0 ? -q : q, -128, 127));
}

std::vector<int8_t> random_int8(uint64_t seed, size_t n) {
  const std::vector<uint8_t> b = test::splitmix_bytes(seed, n);
  return {b.begin(), b.end()};
}

const HostBuffer& region(const MachineState& s, const std::string& name) {
  for (const HostBuffer& b : s.host)
    if (b.name == name) return b;
  FAIL("no host region " << name);
  return s.host.front();
}

TEST_CASE("run_reference: workloads/asm/matmul.s computes its stated Y", "[reference]") {
  const isa::Program p = isa::assemble_file(test::source_dir() / "workloads/asm/matmul.s");
  const MachineState s = run_reference(p, Arch{});
  // Y[b][n] = clamp(round_half_away(sum_k X[b][k] * W[k][n] / 2^8)), X 8 x 256 seed 1, W seed 2.
  const std::vector<int8_t> x = random_int8(1, 8 * 256), w = random_int8(2, 256 * 256);
  std::vector<uint8_t> y(8 * 256);
  for (int b = 0; b < 8; ++b)
    for (int n = 0; n < 256; ++n) {
      int64_t sum = 0;
      for (int k = 0; k < 256; ++k) sum += x[b * 256 + k] * w[k * 256 + n];
      y[b * 256 + n] = static_cast<uint8_t>(requant(sum, 8));
    }
  CHECK(region(s, "y").bytes == y);
  CHECK(std::count(y.begin(), y.end(), 0) < 64);  // not trivially zero
}

TEST_CASE("run_reference: workloads/asm/mlp2.s computes its stated Y", "[reference]") {
  const isa::Program p = isa::assemble_file(test::source_dir() / "workloads/asm/mlp2.s");
  const MachineState s = run_reference(p, Arch{});
  const std::vector<int8_t> x = random_int8(1, 16 * 512), w1 = random_int8(2, 512 * 256),
                            w2 = random_int8(3, 256 * 256);
  std::vector<uint8_t> y(16 * 10);
  for (int b = 0; b < 16; ++b) {
    std::vector<int64_t> h(256);  // H = min(127, max(0, round(X * W1 / 2^11)))
    for (int j = 0; j < 256; ++j) {
      int64_t sum = 0;
      for (int k = 0; k < 512; ++k) sum += x[b * 512 + k] * w1[k * 256 + j];
      h[j] = std::max(requant(sum, 11), 0);
    }
    for (int n = 0; n < 10; ++n) {  // Y = round(H * W2 / 2^10)
      int64_t sum = 0;
      for (int j = 0; j < 256; ++j) sum += h[j] * w2[j * 256 + n];
      y[b * 10 + n] = static_cast<uint8_t>(requant(sum, 10));
    }
  }
  CHECK(region(s, "y").bytes == y);
  CHECK(std::count(y.begin(), y.end(), 0) < 16);
  CHECK(std::count(y.begin(), y.end(), 127) + std::count(y.begin(), y.end(), 128) <
        16);                                                         // mostly unsaturated
  CHECK(region(s, "x").bytes == test::splitmix_bytes(1, 16 * 512));  // inputs untouched
}

// A tiny program: weight image of `weights` bytes 0, 1, 2, ..., no host regions.
isa::Program tiny_program(std::vector<isa::Instruction> code, size_t weights = 32) {
  isa::Program p;
  p.code = std::move(code);
  for (size_t i = 0; i < weights; ++i) p.weights.push_back(static_cast<uint8_t>(i));
  return p;
}

TEST_CASE("run_reference: tiles leave the FIFO in order - matmul without switch keeps the tile",
          "[reference]") {
  // Input row 0 = e0 picks row 0 of the active tile: tile t starts at weight byte 16t, so its
  // row 0 is 16t .. 16t + 3.
  isa::Program p =
      tiny_program({make(Opcode::read_weights, {{Field::tiles, 2}}),
                    make(Opcode::matmul, {{Field::rows, 1}, {Field::switch_weights, 1}}),
                    make(Opcode::matmul, {{Field::acc, 1}, {Field::rows, 1}}),
                    make(Opcode::matmul, {{Field::acc, 2}, {Field::rows, 1}, {Field::switch_weights, 1}}),
                    make(Opcode::halt), make(Opcode::matmul, {{Field::acc, 3}, {Field::rows, 1}})});
  p.host_regions = {host_region("x", 0, 4, {1, 0, 0, 0})};
  p.code.insert(p.code.begin(), make(Opcode::read_host, {{Field::rows, 1}}));
  const MachineState s = run_reference(p, tiny());
  CHECK(std::vector<int32_t>(s.acc_row(0), s.acc_row(0) + 4) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(std::vector<int32_t>(s.acc_row(1), s.acc_row(1) + 4) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(std::vector<int32_t>(s.acc_row(2), s.acc_row(2) + 4) == std::vector<int32_t>{16, 17, 18, 19});
  CHECK(std::vector<int32_t>(s.acc_row(3), s.acc_row(3) + 4) ==
        std::vector<int32_t>{0, 0, 0, 0});  // after halt
}

TEST_CASE("run_reference: program errors", "[reference]") {
  REQUIRE_THROWS_WITH(
      run_reference(tiny_program({make(Opcode::nop), make(Opcode::sync, {{Field::units, 1}})}), tiny()),
      "instruction 2 (past the last instruction): the program ends without halt");
  REQUIRE_THROWS_WITH(
      run_reference(tiny_program({make(Opcode::matmul, {{Field::rows, 1}, {Field::switch_weights, 1}}),
                                  make(Opcode::halt)}),
                    tiny()),
      "instruction 0 (matmul ub=0, acc=0, rows=1, switch): switches to the next weight tile, but no "
      "read_weights has fetched one");
  REQUIRE_THROWS_WITH(
      run_reference(tiny_program({make(Opcode::read_weights, {{Field::tiles, 1}}),
                                  make(Opcode::matmul, {{Field::rows, 1}}), make(Opcode::halt)}),
                    tiny()),
      "instruction 1 (matmul ub=0, acc=0, rows=1): multiplies before any weight tile was "
      "made active (the first matmul needs `switch`)");
  try {
    run_reference(tiny_program({make(Opcode::nop)}), tiny());
    FAIL("no SimError");
  } catch (const SimError& e) {
    CHECK(e.index == 1);
  }
}

TEST_CASE("run_reference checks the whole program before running any of it", "[reference]") {
  // Instruction 0 would fail at run time (no tile), but instruction 2's bad range is found first.
  const isa::Program p = tiny_program({make(Opcode::matmul, {{Field::rows, 1}}), make(Opcode::halt),
                                       make(Opcode::activate, {{Field::acc, 16}, {Field::rows, 1}})});
  REQUIRE_THROWS_WITH(run_reference(p, tiny()),
                      "instruction 2 (act acc=16, ub=0, rows=1): reads accumulator rows 16..16, but the "
                      "accumulators have 16 rows");
}

TEST_CASE("check_static follows setcfg and checks weight fetches", "[reference]") {
  isa::Program p = tiny_program({make(Opcode::set_config, {{Field::reg, 0}, {Field::value, 8}}),
                                 make(Opcode::read_host, {{Field::rows, 2}}), make(Opcode::halt)});
  p.host_regions = {host_region("x", 0, 8)};
  REQUIRE_THROWS_WITH(check_static(p, tiny()),
                      "instruction 1 (rhm host=0x0, ub=0, rows=2): reads host bytes 0x8..0xb (row 1 of 2), "
                      "which do not lie inside one host region (host regions: x 0x0..0x7)");
  p.code[0][Field::value] = 4;  // rows 0..3 and 4..7
  REQUIRE_NOTHROW(check_static(p, tiny()));
  p.code[0] = make(Opcode::set_config, {{Field::reg, 1}, {Field::value, 5}});
  REQUIRE_THROWS_WITH(
      check_static(p, tiny()),
      Contains(
          "instruction 1 (rhm host=0x0, ub=0, rows=2): host_row_bytes = 5 is wider than a UB row (4 bytes)"));

  Arch a = tiny();
  a.weight_mem_bytes = 32;
  const isa::Program rw = tiny_program(
      {make(Opcode::read_weights, {{Field::waddr, 16}, {Field::tiles, 2}}), make(Opcode::halt)}, 48);
  REQUIRE_THROWS_WITH(check_static(rw, a),
                      "instruction 0 (rw waddr=0x10, tiles=2): reads weight bytes 0x10..0x2f, but weight "
                      "memory has 32 bytes");
  REQUIRE_THROWS_WITH(
      check_static(tiny_program({make(Opcode::read_weights, {{Field::waddr, 16}, {Field::tiles, 2}})}, 40),
                   tiny()),
      "instruction 0 (rw waddr=0x10, tiles=2): reads weight bytes 0x10..0x2f, but the weight image "
      "holds only 40 bytes (never loaded)");
  // A partial tile's box: within the array, and its compact bytes within the image (2 x 3 x 4 = 24
  // bytes from 16 fit 40; a whole tile's 2 x 16 would not).
  CHECK_NOTHROW(check_static(tiny_program({make(Opcode::read_weights, {{Field::waddr, 16}, {Field::tiles, 4},
                                                                       {Field::tile_rows, 2}, {Field::tile_cols, 3}}),
                                           make(Opcode::halt)},
                                          40),
                             tiny()));
  REQUIRE_THROWS_WITH(
      check_static(tiny_program({make(Opcode::read_weights, {{Field::tiles, 1}, {Field::tile_rows, 5}})}, 40), tiny()),
      "instruction 0 (rw waddr=0x0, tiles=1, tile_rows=5): tile_rows = 5, but the array has 4 rows");
  REQUIRE_THROWS_WITH(
      check_static(tiny_program({make(Opcode::read_weights, {{Field::tiles, 1}, {Field::tile_cols, 9}})}, 40), tiny()),
      "instruction 0 (rw waddr=0x0, tiles=1, tile_cols=9): tile_cols = 9, but the array has 4 columns");
  REQUIRE_THROWS_WITH(
      check_static(tiny_program({make(Opcode::read_weights, {{Field::waddr, 16}, {Field::tiles, 5},
                                                             {Field::tile_rows, 2}, {Field::tile_cols, 3}})},
                                40),
                   tiny()),
      "instruction 0 (rw waddr=0x10, tiles=5, tile_rows=2, tile_cols=3): reads weight bytes 0x10..0x2d, but the "
      "weight image holds only 40 bytes (never loaded)");
}

TEST_CASE("no error depends on data - a perchan shift byte uses its low 6 bits", "[reference]") {
  // A table whose shift byte is 64 + 3 runs like one with 3: what check_static accepts runs, so the
  // timing engine (which sees no data) refuses exactly the programs the other engines refuse.
  isa::Program p =
      tiny_program({make(Opcode::activate, {{Field::per_channel, 1}, {Field::qtable, 8}, {Field::rows, 1}}),
                    make(Opcode::halt)});
  p.host_regions = {host_region("t", 0, 28, std::vector<uint8_t>(28, 0))};
  p.host_regions[0].init[0] = 0x20;  // bias[0] = 800 (little-endian)
  p.host_regions[0].init[1] = 0x03;
  p.host_regions[0].init[16] = 1;       // mult[0] = 1
  p.host_regions[0].init[24] = 64 + 3;  // shift[0]
  p.code.insert(p.code.begin(), make(Opcode::read_host, {{Field::ub, 8}, {Field::rows, 7}}));
  REQUIRE_NOTHROW(check_static(p, tiny()));
  const MachineState high = run_reference(p, tiny());
  p.host_regions[0].init[24] = 3;
  const MachineState low = run_reference(p, tiny());
  const uint64_t w = tiny().ub_row_bytes();  // the act's output row 0 (the tables differ, of course)
  CHECK(int8_t(high.ub_row(0)[0]) == 100);   // round_half_away((0 + 800) * 1 / 2^3)
  CHECK(std::vector<uint8_t>(high.ub_row(0), high.ub_row(0) + w) ==
        std::vector<uint8_t>(low.ub_row(0), low.ub_row(0) + w));
}

TEST_CASE("weight_tile: tile t of an rw, and reads past the weight image", "[reference]") {
  const isa::Program p = tiny_program({}, 40);
  const MachineState s = make_state(p, tiny());
  const auto rw =
      make(Opcode::read_weights, {{Field::unsigned_data, 1}, {Field::waddr, 4}, {Field::tiles, 3}});
  const WeightTile t1 = weight_tile(s, rw, 1);
  CHECK((t1.data == p.weights.data() + 20 && t1.waddr == 20 && t1.is_unsigned));
  CHECK(t1.weight(1, 2, 4) == 26);  // byte 20 + 1 * 4 + 2
  CHECK_FALSE(weight_tile(s, make(Opcode::read_weights, {{Field::tiles, 1}}), 0).is_unsigned);
  REQUIRE_THROWS_WITH(weight_tile(s, rw, 2),
                      Contains("rw waddr=0x4, tiles=3, unsigned: reads weight bytes 0x24..0x33, but the "
                               "weight image holds only 40 bytes (never loaded)"));
}

TEST_CASE("weight_tile: a partial tile's compact box, zeros outside it", "[reference]") {
  const isa::Program p = tiny_program({}, 40);  // weight byte i holds i
  const MachineState s = make_state(p, tiny());
  const auto rw = make(Opcode::read_weights,
                       {{Field::waddr, 4}, {Field::tiles, 3}, {Field::tile_rows, 2}, {Field::tile_cols, 3}});
  CHECK(tile_box(tiny(), rw).bytes() == 6);
  const WeightTile t1 = weight_tile(s, rw, 1);  // at 4 + 1 x 2 x 3 = 10
  CHECK((t1.waddr == 10 && t1.rows == 2 && t1.cols == 3 && t1.partial()));
  CHECK(t1.weight(1, 2, 4) == 15);  // byte 10 + 1 x 3 + 2: rows are 3 bytes apart
  CHECK(t1.weight(0, 3, 4) == 0);   // column 3: outside the box
  CHECK(t1.weight(2, 0, 4) == 0);   // row 2: outside the box
  std::vector<uint8_t> full;
  t1.expand(4, 4, full);
  CHECK(full == std::vector<uint8_t>{10, 11, 12, 0, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // A whole tile (tile_rows = tile_cols = 0) is the array's 4 x 4.
  CHECK_FALSE(weight_tile(s, make(Opcode::read_weights, {{Field::tiles, 1}}), 0).partial());
}

TEST_CASE("same_memories names the first difference", "[reference]") {
  isa::Program p;
  p.host_regions = {host_region("y", 0x40, 8, {}, true)};
  const MachineState a = make_state(p, tiny());
  MachineState b = a;
  std::string why = "stale";
  CHECK(same_memories(a, b, &why));
  CHECK(why.empty());
  b.ub_row(3)[1] = 0xfc;
  CHECK_FALSE(same_memories(a, b, &why));
  CHECK(why == "UB row 3 byte 1: 0 != -4");
  b = a;
  b.acc_row(2)[3] = -70000;
  CHECK_FALSE(same_memories(a, b, &why));
  CHECK(why == "accumulator row 2 column 3: 0 != -70000");
  b = a;
  b.host[0].bytes[5] = 12;
  CHECK_FALSE(same_memories(b, a, &why));
  CHECK(why == "host region y byte 5: 12 != 0");
  CHECK_FALSE(same_memories(a, make_state({}, tiny())));
}

}  // namespace
}  // namespace tpusim::sim
