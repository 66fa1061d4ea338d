// The matrix unit's 16-bit modes (setcfg mm_in_hi, mm_weight_hi; docs/isa.md, docs/timing.md
// "16-bit operands"): 8 x 16 and 16 x 16-bit products as passes over byte planes through the
// 8-bit array, at half and quarter speed. Exact cycles on every engine, results bit-exact against
// a plain int64 loop (and the engines against the reference executor: run_all), the energy
// counts, and the refusal of bad register values.
// Machine: machine_support.h small_arch() (4x4 array, N = M = 4; a tile is usable 7 cycles after
// it is requested and shifts in 4 cycles; a matmul of B vectors streams B cycles and ends
// B + N + M - 1 = B + 7 after its start).
#include <catch2/catch.hpp>

#include "machine_support.h"
#include "sim/energy.h"
#include "sim/pack.h"
#include "sim/reference.h"

using namespace tpusim;
using namespace tpusim::test;
using Catch::Matchers::Contains;
using sim::InstructionTiming;

namespace {

// Two tiles: a 16-bit weight matrix's low byte plane (tile 0, fetched unsigned) and high plane.
const std::string kPlanes = ".weights w, 0, 32, init=random(3)\n";

// The 16-bit value of byte planes lo (unsigned) and hi (int8, or uint8 when hi_unsigned).
int64_t value16(uint8_t lo, uint8_t hi, bool hi_unsigned = false) {
  return int64_t{lo} + 256 * (hi_unsigned ? int64_t{hi} : int64_t{int8_t(hi)});
}

}  // namespace

TEST_CASE("16-bit inputs stream every vector twice - half speed", "[machine][wide]") {
  const auto r = run_all(assemble(kTile + R"(
    rw waddr=w, tiles=1
    setcfg reg=mm_in_hi, value=4
    matmul ub=0, acc=0, rows=3, switch
    halt)"),
                         small_arch());
  // rw issued 0, requests its tile at 1: bus [1, 5), usable 8, shifted in during [8, 12).
  // setcfg issued 1; matmul issued 2, at the matrix unit from 3: t0 = 12 (weight stall [3, 8) = 5,
  // weight shift [8, 12) = 4). Two byte-plane passes of 3 vectors: 2 x 3 = 6 cycles of stream
  // (the 8-bit matmul of the same rows streams 3: machine_test.cpp), end = 12 + 6 + 7 = 25.
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 12, 25});
  CHECK(r.fast.cycles == 25);
  CHECK(r.fast.matrix.array_active == 6);
  CHECK(r.fast.matrix.weight_stall == 5);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.array_macs == 6 * 16);  // 8-bit MACs: 6 vectors through the 4 x 4 array
}

TEST_CASE("16-bit weights are two tiles and two matmuls - with 16-bit inputs quarter speed",
          "[machine][wide]") {
  const std::string program = kPlanes + R"(
    rw unsigned, waddr=w, tiles=1
    rw waddr=w+16, tiles=1
    setcfg reg=mm_in_hi, value=4
    matmul ub=0, acc=0, rows=3, switch
    setcfg reg=mm_weight_hi, value=1
    matmul ub=0, acc=0, rows=3, accumulate, switch
    halt)";
  // Tile 0 (low plane) requested at 1: bus [1, 5), usable 8, shift s0 = 8. Tile 1 (high plane):
  // rw issued 1, requests at 2: bus [5, 9), usable 12.
  // Matmul 3 (issued 3, at the unit from 4): t0 = s0 + N = 12 (stall [4, 8) = 4, shift 4);
  // 2 passes x 3 vectors = 6: port free at 18, end 12 + 6 + 7 = 25.
  // Matmul 5 (issued 5), with the shift skewed by column (tpu-v1's): the shadow frees at matmul
  // 3's switch, 12, and tile 1 is usable then: s1 = 12, shifted in by 16, before the port frees:
  // t0 = 18, no wait, end = 18 + 6 + 7 = 31. In all 4 x 3 = 12 stream cycles for 3 16 x 16-bit
  // vectors: a quarter of the 8-bit rate.
  const auto r = run_all(assemble(program), small_arch());
  CHECK(r.fast.timeline[3] == InstructionTiming{3, 12, 25});
  CHECK(r.fast.timeline[5] == InstructionTiming{5, 18, 31});
  CHECK(r.fast.cycles == 31);
  CHECK(r.fast.matrix.array_active == 12);
  CHECK(r.fast.matrix.weight_stall == 4);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.array_macs == 12 * 16);
  CHECK(r.fast.weight_mem_busy == 2 * 4);  // two tiles cross the memory bus: twice the bytes
  // Every column shifting at once, the shadow frees once matmul 3's switch reached every column,
  // 12 + M - 1 = 15: s1 = 15, shifted in by 19: weight shift [18, 19) = 1, t0 = 19, end 32.
  const auto u = run_all(assemble(program), small_arch_unskewed());
  CHECK(u.fast.timeline[5] == InstructionTiming{5, 19, 32});
  CHECK(u.fast.cycles == 32);
  CHECK(u.fast.matrix.weight_shift == 4 + 1);
}

TEST_CASE("a long 16 x 16 matmul hides the high plane's shift: exactly 4 x B stream cycles", "[machine][wide]") {
  const auto r = run_all(assemble(kPlanes + R"(
    rw unsigned, waddr=w, tiles=1
    rw waddr=w+16, tiles=1
    setcfg reg=mm_in_hi, value=8
    matmul ub=0, acc=0, rows=8, switch
    setcfg reg=mm_weight_hi, value=1
    matmul ub=0, acc=0, rows=8, accumulate, switch
    halt)"),
                         small_arch());
  // Matmul 3: t0 = 12, 2 x 8 = 16 cycles of stream, port free 28. The high plane's tile shifts in
  // during [15, 19), long before: matmul 5 starts at 28 with no stall, ends 28 + 16 + 7 = 51.
  // Stream 12 .. 44 = 32 cycles = 4 x 8: quarter speed.
  CHECK(r.fast.timeline[3] == InstructionTiming{3, 12, 35});
  CHECK(r.fast.timeline[5] == InstructionTiming{5, 28, 51});
  CHECK(r.fast.matrix.array_active == 32);
  CHECK(r.fast.matrix.weight_shift == 4);
}

TEST_CASE("8 x 16 and 16 x 16-bit products are bit-exact against an int64 loop", "[machine][wide]") {
  // x: 4 vectors of 4 16-bit values, low planes in UB rows 0..3, high planes in rows 4..7;
  // W: 4 x 4 16-bit weights, low plane tile 0 (unsigned), high plane tile 1.
  for (const bool in_unsigned : {false, true}) {
    const std::string flag = in_unsigned ? "unsigned, " : "";
    const isa::Program p = assemble(kPlanes + R"(
    .input  x, 0, 32, init=random(7)
    .output y, 64, 64
    rhm    host=x, ub=0, rows=8
    rw     unsigned, waddr=w, tiles=1
    rw     waddr=w+16, tiles=1
    rw     waddr=w+16, tiles=1
    sync   units=host
    setcfg reg=mm_in_hi, value=4
    matmul )" + flag + R"(ub=0, acc=0, rows=4, switch
    setcfg reg=mm_weight_hi, value=1
    matmul )" + flag + R"(ub=0, acc=0, rows=4, accumulate, switch
    setcfg reg=mm_in_hi, value=0
    matmul ub=0, acc=4, rows=4, switch
    halt)");
    run_all(p, small_arch());  // every engine leaves the reference executor's memories
    const sim::MachineState s = sim::run_reference(p, small_arch());
    const uint8_t* w = p.weights.data();
    INFO((in_unsigned ? "uint16 inputs" : "int16 inputs"));
    for (uint64_t v = 0; v < 4; ++v)
      for (uint64_t j = 0; j < 4; ++j) {
        int64_t wide = 0, narrow = 0;  // 16 x 16; 8-bit (int8 high plane) x 8-bit weights' high plane
        for (uint64_t k = 0; k < 4; ++k) {
          const int64_t xk = value16(s.ub_row(v)[k], s.ub_row(4 + v)[k], in_unsigned);
          const int64_t wk = value16(w[k * 4 + j], w[16 + k * 4 + j]);
          wide += xk * wk;
          narrow += int64_t{int8_t(s.ub_row(v)[k])} * int64_t{int8_t(w[16 + k * 4 + j])} * 256;
        }
        INFO("vector " << v << " column " << j << " int64 " << wide);
        // The accumulators are int32 and wrap (docs/timing.md): the int64 sum modulo 2^32.
        CHECK(s.acc_row(v)[j] == int32_t(uint32_t(uint64_t(wide))));
        // 8-bit inputs with mm_weight_hi = 1: the high plane's products x 256.
        CHECK(s.acc_row(4 + v)[j] == int32_t(uint32_t(uint64_t(narrow))));
      }
  }
}

TEST_CASE("a gathering matmul with 16-bit inputs gathers both planes", "[machine][wide]") {
  // gather 2 x 2 segments of 1 byte (a 2x2 kernel on a 4-wide 1-channel map in rows 0..15, high
  // planes in rows 16..31), 3 output pixels: bit-exact against an int64 im2col loop.
  const isa::Program p = assemble(kTile + R"(
    .input  x, 0, 32, init=random(9)
    setcfg reg=host_row_bytes, value=1
    setcfg reg=host_stride, value=1
    rhm    host=x, ub=0, rows=32
    rw     waddr=w, tiles=1
    sync   units=host
    setcfg reg=gather_bytes, value=1
    setcfg reg=gather_cols, value=2
    setcfg reg=gather_rows, value=2
    setcfg reg=gather_col_step, value=1
    setcfg reg=gather_row_step, value=4
    setcfg reg=mm_in_hi, value=16
    matmul ub=0, acc=0, rows=1, repeat=3, stride=1, switch
    halt)");
  const auto r = run_all(p, small_arch());
  // 4 segments a vector, one UB row per cycle: 4 cycles a vector, 3 vectors, 2 planes = 24.
  CHECK(r.fast.matrix.array_active == 24);
  const sim::MachineState s = sim::run_reference(p, small_arch());
  for (uint64_t ox = 0; ox < 3; ++ox)
    for (uint64_t j = 0; j < 4; ++j) {
      int64_t sum = 0;
      for (uint64_t u = 0; u < 2; ++u)
        for (uint64_t rr = 0; rr < 2; ++rr) {
          const uint64_t row = 4 * rr + ox + u;
          sum += value16(s.ub_row(row)[0], s.ub_row(16 + row)[0]) * int64_t{int8_t(p.weights[(u * 2 + rr) * 4 + j])};
        }
      CHECK(s.acc_row(ox)[j] == sum);  // |sum| < 4 x 2^15 x 2^7: no wrap
    }
}

TEST_CASE("16-bit modes: energy counts each byte-plane pass", "[machine][wide][energy]") {
  const isa::Program p = assemble(kTile + R"(
    rw waddr=w, tiles=1
    setcfg reg=mm_in_hi, value=4
    matmul ub=0, acc=0, rows=3, switch
    matmul ub=0, acc=0, rows=3, accumulate
    halt)");
  const auto r = run_all(p, small_arch());
  const sim::ActionCounts c = sim::count_actions(p, small_arch(), p.code.size(), r.fast.array_macs);
  // Two matmuls x 2 planes x 3 vectors: 12 array passes of 16 MACs, 12 UB rows of 4 bytes read,
  // 12 accumulator rows of 16 bytes written; read back: the second pass of each (3 + 3) and the
  // accumulating matmul's first pass (3).
  CHECK(c[sim::EnergyAction::mac] == 12 * 16);
  CHECK(c[sim::EnergyAction::ub_read] == 12 * 4);
  CHECK(c[sim::EnergyAction::acc_write] == 12 * 16);
  CHECK(c[sim::EnergyAction::acc_read] == 9 * 16);
}

TEST_CASE("16-bit inputs: the high plane's rows are checked and ordered like the low plane's",
          "[machine][wide]") {
  // The high plane (rows 250..253 + 4 = 254..257) lies outside the 256-row UB: refused before the run.
  const isa::Program out = assemble(kTile + R"(
    rw waddr=w, tiles=1
    setcfg reg=mm_in_hi, value=4
    matmul ub=250, acc=0, rows=4, switch
    halt)");
  REQUIRE_THROWS_WITH(sim::check_static(out, small_arch()),
                      Contains("instruction 2 (matmul ub=250, acc=0, rows=4, switch): reads the high byte plane "
                               "(mm_in_hi) from UB rows 254..257, but the unified buffer has 256 rows"));
  // An rhm writing the high plane's rows while the matmul streams: a hazard on every engine.
  const isa::Program hazard = assemble(kTile + R"(
    .input x, 0, 16
    rw waddr=w, tiles=1
    setcfg reg=mm_in_hi, value=8
    rhm host=x, ub=8, rows=4
    matmul ub=0, acc=0, rows=4, switch
    halt)");
  for (const sim::Engine e : {sim::Engine::fast, sim::Engine::stepped, sim::Engine::timing})
    REQUIRE_THROWS_WITH(sim::simulate(hazard, small_arch(), {e, 0}),
                        Contains("instruction 3 (matmul ub=0, acc=0, rows=4, switch): reads UB rows that "
                                 "instruction 2 (rhm host=0x0, ub=8, rows=4)"));
  // The same rows without the high plane (mm_in_hi = 0) are not read: no hazard.
  const isa::Program plain = assemble(kTile + R"(
    .input x, 0, 16
    rw waddr=w, tiles=1
    rhm host=x, ub=8, rows=4
    matmul ub=0, acc=0, rows=4, switch
    halt)");
  run_all(plain, small_arch());
}

TEST_CASE("16-bit mode registers out of range are refused", "[machine][wide]") {
  const auto refused = [](const std::string& body, const std::string& what) {
    const isa::Program p = assemble(kTile + "    rw waddr=w, tiles=1\n" + body + "\n    halt");
    REQUIRE_THROWS_WITH(sim::check_static(p, small_arch()), Contains(what));
    REQUIRE_THROWS_WITH(sim::run_reference(p, small_arch()), Contains(what));
  };
  refused("    setcfg reg=mm_weight_hi, value=2\n    matmul ub=0, acc=0, rows=1, switch",
          "instruction 2 (matmul ub=0, acc=0, rows=1, switch): mm_weight_hi = 2 (setcfg register), expected 0 "
          "(8-bit weights or the low plane of 16-bit ones) or 1 (the high plane)");
  refused("    setcfg reg=mm_in_hi, value=0x10000000000\n    matmul ub=0, acc=0, rows=1, switch",
          "mm_in_hi = 1099511627776 (setcfg register): a high plane that many UB rows away is beyond any unified "
          "buffer");
  // Registers are read by the matmuls issued after them: a bad value no matmul uses is harmless.
  const isa::Program unused = assemble(kTile + "    rw waddr=w, tiles=1\n    matmul ub=0, acc=0, rows=1, switch\n"
                                               "    setcfg reg=mm_weight_hi, value=7\n    halt");
  CHECK_NOTHROW(sim::check_static(unused, small_arch()));
}
