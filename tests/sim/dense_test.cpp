// Dense rows (sim/pack.h, docs/isa.md setcfg dense_rows / dense_bytes, act_dense_rows /
// act_dense_bytes): several logical rows side by side in one UB row. What a dense matmul reads
// (against plain loops over the logical rows), what a dense activate writes, their exact cycles on
// every engine (the same as without dense rows), energy, hazard spans and the refused settings.
// Machine: machine_support.h small_arch() (4x4 array, 4-byte UB rows, 256 of them; tile usable 8
// cycles after its read_weights issues and shifted in by 12; act 1 row per cycle after 2).
#include <catch2/catch.hpp>

#include "machine_support.h"
#include "sim/energy.h"
#include "sim/hazards.h"
#include "sim/pack.h"
#include "sim/reference.h"

using namespace tpusim;
using namespace tpusim::test;
using Catch::Matchers::Contains;
using sim::InstructionTiming;

namespace {

// machine_support.h kTile, drawn from seed 3
const std::string kTile3 = ".weights w, 0, 16, init=random(3)\n";

int32_t s8(uint8_t b) { return int8_t(b); }

}  // namespace

TEST_CASE("a dense matmul reads logical row L from byte (L mod Q) x dense_bytes of UB row ub + L / Q",
          "[machine][pack][dense]") {
  // A 1-channel 4 x 4 map of 4 samples, dense: logical row (pixel * 4 + n) is byte n of UB row
  // pixel (Q = 4 rows of 1 byte per 4-byte UB row): 16 UB rows instead of 64.
  // 2 x 2 kernel, gather 2 x 2 segments of 1 byte: across one pixel (4 logical rows), down one image
  // row (16 logical rows). matmul rows = 4 samples, repeat 3 output pixels (0,0), (0,1), (0,2),
  // stride one pixel (4 logical rows); then output pixel (1, 0) from ub = 4.
  const isa::Program p = assemble(kTile3 + R"(
    .input  x, 0, 64, init=random(11)
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=16
    sync   units=host
    setcfg reg=gather_bytes, value=1
    setcfg reg=gather_cols, value=2
    setcfg reg=gather_rows, value=2
    setcfg reg=gather_col_step, value=4
    setcfg reg=gather_row_step, value=16
    setcfg reg=dense_rows, value=4
    setcfg reg=dense_bytes, value=1
    matmul ub=0, acc=0, rows=4, repeat=3, stride=4, switch
    matmul ub=4, acc=12, rows=4
    halt)");
  const auto r = run_all(p, small_arch());  // every engine equals the reference executor
  const sim::MachineState ref = sim::run_reference(p, small_arch());
  // x(n, y, x) is host byte (y * 4 + x) * 4 + n (rhm: 16 whole rows of 4 bytes).
  const auto x = [&](uint64_t n, uint64_t y, uint64_t xx) { return s8(ref.ub_row(y * 4 + xx)[n]); };
  const auto w = [&](uint64_t k, uint64_t j) { return s8(p.weights[k * 4 + j]); };
  const uint64_t pixels[4][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}};
  for (uint64_t o = 0; o < 4; ++o)
    for (uint64_t n = 0; n < 4; ++n)
      for (uint64_t j = 0; j < 4; ++j) {
        int32_t sum = 0;  // element (u * 2 + r) of the vector = x(n, oy + r, ox + u)
        for (uint64_t u = 0; u < 2; ++u)
          for (uint64_t rr = 0; rr < 2; ++rr) sum += x(n, pixels[o][0] + rr, pixels[o][1] + u) * w(u * 2 + rr, j);
        INFO("output pixel " << o << " sample " << n << " column " << j);
        CHECK(ref.acc_row(o * 4 + n)[j] == sum);
      }
  // Timing: a dense segment is one UB row read, as any gather's: 4 segments per vector, one per
  // cycle. The matmuls are instructions 10 and 11 (rw 0, rhm 1, sync 2, setcfg 3..9).
  REQUIRE(p.code[10].opcode == isa::Opcode::matmul);
  // 12 vectors x 4 cycles = 48 cycles of streaming; the second matmul's 4 vectors another 16.
  const InstructionTiming& a = r.fast.timeline[10];
  const InstructionTiming& b = r.fast.timeline[11];
  CHECK(r.fast.matrix.array_active == 12 * 4 + 4 * 4);
  CHECK(b.start == a.start + 48);
  CHECK(b.end == b.start + 16 + 4 + 4 - 1);  // stream, then the array's N + M - 1 drain
  // The same program without dense rows, each logical row in a UB row of its own (64 rows, the
  // steps and origins in UB rows are the logical ones): the same cycles for the matmuls.
  const isa::Program plain = assemble(kTile3 + R"(
    .input  x, 0, 64, init=random(11)
    rw     waddr=w, tiles=1
    setcfg reg=host_row_bytes, value=1
    setcfg reg=host_stride, value=1
    rhm    host=x, ub=0, rows=64
    sync   units=host
    setcfg reg=gather_bytes, value=1
    setcfg reg=gather_cols, value=2
    setcfg reg=gather_rows, value=2
    setcfg reg=gather_col_step, value=4
    setcfg reg=gather_row_step, value=16
    matmul ub=0, acc=0, rows=4, repeat=3, stride=4, switch
    matmul ub=16, acc=12, rows=4
    halt)");
  const auto rp = run_all(plain, small_arch());
  const sim::MachineState pref = sim::run_reference(plain, small_arch());
  for (uint64_t i = 0; i < 16; ++i)
    for (uint64_t j = 0; j < 4; ++j) CHECK(pref.acc_row(i)[j] == ref.acc_row(i)[j]);
  REQUIRE(plain.code[11].opcode == isa::Opcode::matmul);
  CHECK(rp.fast.timeline[11].end - rp.fast.timeline[11].start == b.end - b.start);
  CHECK(rp.fast.matrix.array_active == r.fast.matrix.array_active);
  // Energy: the gathers read 16 vectors x 4 segments of a 4-byte row either way; the dense input
  // took 16 UB rows written by the host instead of 64.
  const sim::ActionCounts e = sim::count_actions(p, small_arch(), p.code.size(), r.fast.array_macs);
  const sim::ActionCounts ep = sim::count_actions(plain, small_arch(), plain.code.size(), rp.fast.array_macs);
  CHECK(e[sim::EnergyAction::ub_read] == 16 * 4 * 4);
  CHECK(ep[sim::EnergyAction::ub_read] == 16 * 4 * 4);
  CHECK(e[sim::EnergyAction::ub_write] == 16 * 4);
  CHECK(ep[sim::EnergyAction::ub_write] == 64 * 4);
  // Hazard spans: the first matmul reads logical rows 0 .. 2 x 4 + 4 + reach (4 + 16) - 1 = 31:
  // UB rows 0..7; the second logical 0..23 from ub 4: UB rows 4..9.
  const sim::PackTimeline t(p.code);
  const auto reads = [&](uint64_t i) { return sim::accesses(p.code[i], small_arch(), t.at(i)).ub_reads; };
  REQUIRE(reads(10).size() == 1);
  CHECK(reads(10)[0].first == 0);
  CHECK(reads(10)[0].rows == 8);
  CHECK(reads(11)[0].first == 4);
  CHECK(reads(11)[0].rows == 6);
}

TEST_CASE("a dense activate writes each row into its field and Q rows share one UB row write",
          "[machine][pack][dense]") {
  // 1 x 1 dense read of 8 one-byte logical rows (UB rows 0..1), weights w, then:
  //   act A: 8 rows, act_dense_rows 2 x act_dense_bytes 2, act_lane 0: accumulator row i columns
  //     0..1 (the field's 2 bytes) to UB row 10 + i / 2, bytes (i % 2) x 2 ..;
  //   act B: 8 rows, scatter 2 groups of 1 column, act_dense_rows 4 x 1 byte: group p of row i is
  //     written row j = p x 8 + i: UB row 20 + j / 4, byte j % 4;
  //   act C: 8 rows, act_dense_rows 2 x 2 bytes, act_lane 1: column 0 to byte (i % 2) x 2 + 1.
  const isa::Program p = assemble(kTile3 + R"(
    .input  x, 0, 8, init=random(5)
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=2
    sync   units=host
    setcfg reg=gather_bytes, value=1
    setcfg reg=dense_rows, value=4
    setcfg reg=dense_bytes, value=1
    matmul ub=0, acc=0, rows=8, switch
    setcfg reg=act_dense_rows, value=2
    setcfg reg=act_dense_bytes, value=2
    act    acc=0, ub=10, rows=8
    setcfg reg=act_groups, value=2
    setcfg reg=act_group_cols, value=1
    setcfg reg=act_dense_rows, value=4
    setcfg reg=act_dense_bytes, value=1
    act    acc=0, ub=20, rows=8
    setcfg reg=act_groups, value=0
    setcfg reg=act_dense_rows, value=2
    setcfg reg=act_dense_bytes, value=2
    setcfg reg=act_lane, value=1
    act    acc=0, ub=30, rows=8
    halt)");
  const auto r = run_all(p, small_arch());
  const sim::MachineState ref = sim::run_reference(p, small_arch());
  const auto w = [&](uint64_t j) { return s8(p.weights[j]); };  // tile row 0 (1-element vectors)
  for (uint64_t i = 0; i < 8; ++i) {
    const int32_t xi = s8(ref.ub_row(i / 4)[i % 4]);
    for (uint64_t j = 0; j < 4; ++j) REQUIRE(ref.acc_row(i)[j] == xi * w(j));
  }
  const auto sat = [](int32_t v) { return std::clamp(v, -128, 127); };
  for (uint64_t i = 0; i < 8; ++i) {
    INFO("accumulator row " << i);
    for (uint64_t c = 0; c < 2; ++c) CHECK(s8(ref.ub_row(10 + i / 2)[(i % 2) * 2 + c]) == sat(ref.acc_row(i)[c]));
    for (uint64_t g = 0; g < 2; ++g) {
      const uint64_t j = g * 8 + i;
      CHECK(s8(ref.ub_row(20 + j / 4)[j % 4]) == sat(ref.acc_row(i)[g]));
    }
    CHECK(s8(ref.ub_row(30 + i / 2)[(i % 2) * 2 + 1]) == sat(ref.acc_row(i)[0]));
    CHECK(ref.ub_row(30 + i / 2)[(i % 2) * 2] == 0);  // the field's byte 0: kept
  }
  CHECK(ref.ub_row(14)[0] == 0);  // act A wrote UB rows 10..13 only
  // Cycles: as without dense rows, one accumulator row per cycle after 2 (act A: 2 + 8; act B,
  // scattering 2 groups: 2 + 8 x 2).
  const uint64_t act_a = 9, act_b = 14;  // (rw, rhm, sync, 3 setcfg, matmul, 2 setcfg, act A)
  REQUIRE(p.code[act_a].opcode == isa::Opcode::activate);
  REQUIRE(p.code[act_b].opcode == isa::Opcode::activate);
  CHECK(r.fast.timeline[act_a].end - r.fast.timeline[act_a].start == 2 + 8);
  CHECK(r.fast.timeline[act_b].end - r.fast.timeline[act_b].start == 2 + 16);
  // Energy: the UB is written once per UB row: rhm 2 rows, act A 4, act B 16 / 4 = 4, act C 4.
  const sim::ActionCounts e = sim::count_actions(p, small_arch(), p.code.size(), r.fast.array_macs);
  CHECK(e[sim::EnergyAction::ub_write] == (2 + 4 + 4 + 4) * 4);
  const sim::PackTimeline t(p.code);
  const auto writes = [&](uint64_t i) { return sim::accesses(p.code[i], small_arch(), t.at(i)).ub_writes.at(0); };
  CHECK(writes(act_a).first == 10);
  CHECK(writes(act_a).rows == 4);
  CHECK(writes(act_b).first == 20);
  CHECK(writes(act_b).rows == 4);
}

TEST_CASE("a fused-pooling activate writes its pooled rows dense", "[machine][pack][dense]") {
  // 8 accumulator rows = a 2 x 2 map of 2 images (row (y * 2 + x) * 2 + n), max pool 2 x 2: 2 pooled
  // rows (one per image), written dense 2 x 2 bytes: both in UB row 40, bytes 0..1 and 2..3.
  const isa::Program p = assemble(kTile3 + R"(
    .input  x, 0, 8, init=random(9)
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=2
    sync   units=host
    setcfg reg=gather_bytes, value=1
    setcfg reg=dense_rows, value=4
    setcfg reg=dense_bytes, value=1
    matmul ub=0, acc=0, rows=8, switch
    setcfg reg=act_pool, value=1
    setcfg reg=act_pool_window, value=2
    setcfg reg=act_pool_stride, value=2
    setcfg reg=act_pool_width, value=2
    setcfg reg=act_pool_batch, value=2
    setcfg reg=act_dense_rows, value=2
    setcfg reg=act_dense_bytes, value=2
    act    acc=0, ub=40, rows=8
    halt)");
  run_all(p, small_arch());
  const sim::MachineState ref = sim::run_reference(p, small_arch());
  const auto sat = [](int32_t v) { return std::clamp(v, -128, 127); };
  for (uint64_t n = 0; n < 2; ++n)
    for (uint64_t c = 0; c < 2; ++c) {
      int32_t m = -128;
      for (uint64_t px = 0; px < 4; ++px) m = std::max(m, sat(ref.acc_row(px * 2 + n)[c]));
      CHECK(s8(ref.ub_row(40)[n * 2 + c]) == m);
    }
  CHECK(ref.ub_row(41)[0] == 0);
}

TEST_CASE("dense settings that do not fit are refused", "[machine][pack][dense]") {
  const auto refused = [](const std::string& body, const std::string& what) {
    const isa::Program p = assemble(kTile3 + "    rw waddr=w, tiles=1\n" + body + "\n    halt");
    REQUIRE_THROWS_WITH(sim::check_static(p, small_arch()), Contains(what));
  };
  const std::string dense = "    setcfg reg=dense_rows, value=4\n    setcfg reg=dense_bytes, value=1\n";
  refused(dense + "    matmul ub=0, acc=0, rows=1, switch", "a dense read (setcfg dense_rows = 4) needs a gather");
  refused("    setcfg reg=gather_bytes, value=1\n    setcfg reg=dense_rows, value=4\n    setcfg reg=dense_bytes, "
          "value=2\n    matmul ub=0, acc=0, rows=1, switch",
          "dense_rows x dense_bytes = 4 x 2 (setcfg) does not fit a UB row of 4 bytes");
  refused("    setcfg reg=gather_bytes, value=2\n" + dense + "    matmul ub=0, acc=0, rows=1, switch",
          "a dense read takes bytes 0..1 (lane 0, gather_bytes 2) of each logical row's field, but a field has "
          "dense_bytes = 1 bytes");
  // Logical rows 0..7 from UB row 255: UB rows 255..256 of 256.
  refused("    setcfg reg=gather_bytes, value=1\n" + dense + "    matmul ub=255, acc=0, rows=8, switch",
          "reads UB rows 255..256");
  refused("    setcfg reg=act_dense_rows, value=2\n    setcfg reg=act_dense_bytes, value=3\n    act acc=0, ub=0, rows=1",
          "act_dense_rows x act_dense_bytes = 2 x 3 (setcfg) does not fit a UB row of 4 bytes");
  refused("    setcfg reg=act_dense_rows, value=2\n    setcfg reg=act_dense_bytes, value=2\n    setcfg reg=act_lane, "
          "value=2\n    act acc=0, ub=0, rows=1",
          "a dense activate writes from byte act_lane = 2 in each logical row's field, but a field has "
          "act_dense_bytes = 2 bytes");
  refused("    setcfg reg=act_dense_rows, value=2\n    setcfg reg=act_dense_bytes, value=2\n    setcfg reg=act_groups, "
          "value=1\n    setcfg reg=act_group_cols, value=3\n    act acc=0, ub=0, rows=1",
          "a dense activate writes from byte act_lane = 0 groups of 3 columns");
  // 9 written rows, 2 per UB row, from row 251: UB rows 251..255 fit; from 252: 252..256 do not.
  refused("    setcfg reg=act_dense_rows, value=2\n    setcfg reg=act_dense_bytes, value=2\n    act acc=0, ub=252, rows=9",
          "writes UB rows 252..256");
  const isa::Program ok = assemble(kTile3 + R"(
    rw waddr=w, tiles=1
    setcfg reg=act_dense_rows, value=2
    setcfg reg=act_dense_bytes, value=2
    act acc=0, ub=251, rows=9
    halt)");
  CHECK_NOTHROW(sim::check_static(ok, small_arch()));
}
