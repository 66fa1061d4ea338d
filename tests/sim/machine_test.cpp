// Exact cycle counts for each instruction and each stall kind, on every engine, with the
// arithmetic beside them. Machine: tests/sim/machine_support.h small_arch() (4x4 array,
// N = M = 4; tile transfer 4 cycles + 3 latency; host 1 byte/cycle + 10; act 1 row/cycle + 2).
// A matmul of B vectors starting at t0 ends at t0 + B + N + M - 1 = t0 + B + 7.
#include <fmt/format.h>

#include "machine_support.h"
#include "sim/host_model.h"
#include "tools/source_dir.h"

using namespace tpusim;
using namespace tpusim::test;
using sim::InstructionTiming;

namespace {
const std::string kTwoTiles = ".weights w, 0, 32, init=random(1)\n";
}  // namespace

TEST_CASE("lone matmul - weight stall and weight shift and fill and drain", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw waddr=w, tiles=1
    matmul ub=0, acc=0, rows=3, switch
    halt)"),
                         small_arch());
  // rw: issued 0, starts 1 (issue takes 1 cycle), requests its tile at 1, done at 2.
  // The tile transfers in [1, 5) and is usable at 5 + 3 = 8; its shift starts at s = 8.
  // matmul: issued 1, at the matrix unit from 2; with switch it starts once the tile has
  // shifted in, one row per cycle: s + N = 12. It waited [2, 8) for the tile (weight stall 6)
  // and [8, 12) for the shift (weight shift 4). end = 12 + 3 + 4 + 4 - 1 = 22 = halt's end.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 2});
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 12, 22});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 2, 22});
  CHECK(r.fast.cycles == 22);
  CHECK(r.fast.matrix.array_active == 3);
  CHECK(r.fast.matrix.weight_stall == 6);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.matrix.non_matrix == 22 - 3 - 6 - 4);
  CHECK(r.fast.weight_mem_busy == 4);
  CHECK(r.stepped.array_steps > 0);
}

// `int` (interrupt host) drains the machine as barrier, then holds issue for the host's launch
// of the next segment: host_driver_us x clock + host_latency_cycles + the segment's download.
TEST_CASE("int - drain, then the host's launch of the next segment", "[machine]") {
  sim::Arch a = small_arch();
  a.host_driver_us = 0.05;  // 50 cycles at 1000 MHz
  const isa::Program p = assemble(kTile + R"(
    rw waddr=w, tiles=1
    matmul ub=0, acc=0, rows=3, switch
    int
    nop
    int
    halt)");
  const auto r = run_all(p, a);
  // rw and matmul as in the lone matmul above: the matmul ends at 22.
  // int 2: issued 2, its issue cycle ends 3; every unit is idle at 22 (the drain); then the host:
  // driver 50 + download of the next segment (nop, int: 2 x 16 bytes at 1 byte/cycle = 32, + 10)
  // = 92: issue resumes at 22 + 92 = 114. nop: [114, 115). int 4: issued 115, nothing to drain,
  // held from the end of its issue cycle, 116, for 50 + (halt: 16 bytes) 16 + 10 = 76: to 192.
  // halt: issued 192, ends 193.
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 12, 22});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 2, 114});
  CHECK(r.fast.timeline[3] == InstructionTiming{114, 114, 115});
  CHECK(r.fast.timeline[4] == InstructionTiming{115, 115, 192});
  CHECK(r.fast.timeline[5] == InstructionTiming{192, 192, 193});
  CHECK(r.fast.cycles == 193);
  // Host launch: [22, 114) and [116, 192) = 92 + 76 cycles, in non-matrix, not RAW or input stall.
  // int 2's drain (docs/timing.md, "Counters": as a sync on the matrix and activation units, from
  // the end of its issue cycle until they are idle) is [3, 22): RAW stall where no matmul streams
  // or waits, the matmul's fill and drain [15, 22) = 7 (it waited for its tile [2, 8), its shift
  // [8, 12), streamed [12, 15)). int 4 issues at 115 with every unit idle: its drain is empty.
  CHECK(r.fast.matrix.host_launch == 92 + 76);
  CHECK(r.fast.matrix.raw_stall == 7);
  CHECK(r.fast.matrix.input_stall == 0);
  CHECK(r.fast.matrix.non_matrix == 193 - 3 - 6 - 4);
  // The segments the host launches: the first (rw, matmul, int) is the batch's download
  // (host_model.h); the others' downloads are in the held cycles.
  CHECK(sim::segment_length(p.code, 0) == 3);
  CHECK(sim::segment_length(p.code, 3) == 2);
  CHECK(sim::segment_length(p.code, 5) == 1);
  CHECK(sim::launch_cycles(a, 2) == 92);
  CHECK(sim::launch_cycles(a, 1) == 76);
}

TEST_CASE("back-to-back matmuls on one tile stream without a gap", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw waddr=w, tiles=1
    matmul ub=0, acc=0, rows=3, switch
    matmul ub=3, acc=3, rows=2
    halt)"),
                         small_arch());
  // First as above: t0 = 12, end 22. The second enters as the first's last vector has:
  // t0 = 12 + 3 = 15, end = 15 + 2 + 7 = 24.
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 12, 22});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 15, 24});
  CHECK(r.fast.cycles == 24);
  CHECK(r.fast.matrix.array_active == 5);
  CHECK(r.fast.matrix.weight_stall == 6);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.macs == 5 * 16);
}

TEST_CASE("a second tile - shift not hidden behind a short matmul", "[machine]") {
  const std::string program = kTwoTiles + R"(
    rw waddr=w, tiles=2
    matmul ub=0, acc=0, rows=2, switch
    matmul ub=2, acc=2, rows=2, switch
    halt)";
  // Tile 0: requested 1, bus [1, 5), usable 8, shift s0 = 8. Tile 1: requested 2, bus [5, 9),
  // usable 12. Matmul 1: t0 = s0 + N = 12, port free at 14, end 12 + 2 + 7 = 21.
  // With the shift skewed by column (tpu-v1's weight_shift_skewed = 1), cell (r, j) of tile 1 is
  // written at s1 + r + j, behind matmul 1's switch wave (t0 + r + j): the shadow is free at
  // s1 >= t0 = 12; also s1 >= s0 + N = 12 and usable at 12: s1 = 12. Matmul 2 at the matrix
  // unit from 14: weight shift [14, 16), t0 = s1 + N = 16, end = 16 + 2 + 7 = 25.
  const auto r = run_all(assemble(program), small_arch());
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 3});
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 12, 21});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 16, 25});
  CHECK(r.fast.matrix.weight_stall == 6);
  CHECK(r.fast.matrix.weight_shift == 4 + 2);
  CHECK(r.fast.cycles == 25);
  // Every column shifting at once (weight_shift_skewed = 0), shadow row r is rewritten at the end
  // of cycle s1 + r, after cell (r, M-1) copied it at 12 + r + M - 1: s1 >= 12 + M - 1 = 15.
  // Matmul 2: weight shift [14, 19), t0 = s1 + N = 19, end = 19 + 2 + 7 = 28.
  const auto u = run_all(assemble(program), small_arch_unskewed());
  CHECK(u.fast.timeline[1] == InstructionTiming{1, 12, 21});
  CHECK(u.fast.timeline[2] == InstructionTiming{2, 19, 28});
  CHECK(u.fast.matrix.weight_stall == 6);
  CHECK(u.fast.matrix.weight_shift == 4 + 5);
  CHECK(u.fast.cycles == 28);
}

TEST_CASE("the tile shift hides behind a matmul of at least N vectors with the skewed shift", "[machine]") {
  // Matmul 1: t0 = 12, 4 = N vectors, port free 16. Tile 1 usable 12, shadow free at the switch
  // (skewed shift): s1 = 12, shifted in by 16 = exactly when the port frees: matmul 2 starts at
  // 16, no stall at all. (Unskewed, the shadow frees at 15 and matmul 2 waits [16, 19).)
  const std::string program = kTwoTiles + R"(
    rw waddr=w, tiles=2
    matmul ub=0, acc=0, rows=4, switch
    matmul ub=4, acc=4, rows=4, switch
    halt)";
  const auto r = run_all(assemble(program), small_arch());
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 16, 16 + 4 + 7});
  CHECK(r.fast.matrix.weight_shift == 4);
  const auto u = run_all(assemble(program), small_arch_unskewed());
  CHECK(u.fast.timeline[2] == InstructionTiming{2, 19, 19 + 4 + 7});
  CHECK(u.fast.matrix.weight_shift == 4 + 3);
}

TEST_CASE("the tile shift hides behind a matmul of at least N + M - 1 vectors, unskewed", "[machine]") {
  const auto r = run_all(assemble(kTwoTiles + R"(
    rw waddr=w, tiles=2
    matmul ub=0, acc=0, rows=7, switch
    matmul ub=7, acc=7, rows=7, switch
    halt)"),
                         small_arch_unskewed());
  // Matmul 1: t0 = 12, port free 19. Tile 1 usable 12, shadow free 12 + 3 = 15: s1 = 15,
  // shifted in by 19 = exactly when the port frees: matmul 2 starts at 19, no stall at all.
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 19, 19 + 7 + 7});
  CHECK(r.fast.matrix.weight_stall == 6);
  CHECK(r.fast.matrix.weight_shift == 4);
}

TEST_CASE("a full weight FIFO holds read_weights until a tile shifts out", "[machine]") {
  sim::Arch arch = small_arch();
  arch.weight_fifo_tiles = 1;
  const auto r = run_all(assemble(kTwoTiles + R"(
    rw waddr=w, tiles=2
    matmul ub=0, acc=0, rows=2, switch
    matmul ub=2, acc=2, rows=2, switch
    halt)"),
                         arch);
  // Tile 0 holds the only slot from its request (1) until its shift ends (s0 + N = 12).
  // Tile 1 is requested at 12: bus [12, 16), usable 19; rw ends at 13. Matmul 1 runs from
  // 12 (port free 14); the shadow frees at 15. Matmul 2 at the unit from 14: stall [14, 19),
  // shift s1 = 19 .. t0 = 23; end 23 + 2 + 7 = 32.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 13});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 23, 32});
  CHECK(r.fast.matrix.weight_stall == 6 + 5);
  CHECK(r.fast.matrix.weight_shift == 4 + 4);
}

TEST_CASE("a partial tile - only its stored box crosses the weight memory link", "[machine]") {
  isa::Program p = assemble(R"(
    .weights w, 0, 6, init=zero
    rw waddr=w, tiles=1, tile_rows=2, tile_cols=3
    matmul ub=0, acc=0, rows=3, switch
    halt)");
  p.weights = {1, 2, 3, 4, 5, 6};  // W[0][0..2] = 1 2 3, W[1][0..2] = 4 5 6; the rest zero-filled
  const auto r = run_all(p, small_arch());
  // rw: issued 0, starts 1, requests its tile at 1, done at 2. The tile is 2 x 3 = 6 bytes:
  // ceil(6 x 1000 / 4000) = 2 cycles on the bus, [1, 3) (a whole tile: 4), usable 3 + 3 = 6;
  // its shift still takes N = 4 rows: s = 6, matmul t0 = 10 (weight stall [2, 6) = 4, weight
  // shift [6, 10) = 4), end = 10 + 3 + 7 = 20.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 2});
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 10, 20});
  CHECK(r.fast.cycles == 20);
  CHECK(r.fast.weight_mem_busy == 2);
  CHECK(r.fast.matrix.weight_stall == 4);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.matrix.array_active == 3);
  // Useful MACs: 3 vectors x the 2 x 3 box; the array's 4 x 4 cells all compute.
  CHECK(r.fast.macs == 3 * 6);
  CHECK(r.fast.array_macs == 3 * 16);
}

TEST_CASE("a partial tile computes as the whole tile with zeros outside its box", "[machine]") {
  // A whole tile (random, nonzero cells everywhere) is active first, so the partial tile's zero
  // fill must overwrite every cell outside its box in the shadow. The same program with the
  // partial tile stored whole (its box, zeros around it) gives the same accumulators.
  const std::string body = R"(
    .input  x, 0, 16, init=random(5)
    rhm    host=x, ub=0, rows=4
    sync   units=host
    rw     waddr=w, tiles=1
    rw     waddr=w2, tiles=1{}
    matmul ub=0, acc=0, rows=4, switch
    matmul ub=0, acc=4, rows=4, switch
    matmul ub=0, acc=4, rows=4, accumulate
    halt)";
  isa::Program compact = assemble(".weights w, 0, 16, init=random(1)\n.weights w2, 16, 6, init=zero\n" +
                                  fmt::format(fmt::runtime(body), ", tile_rows=3, tile_cols=2"));
  isa::Program whole = assemble(".weights w, 0, 16, init=random(1)\n.weights w2, 16, 16, init=zero\n" +
                                fmt::format(fmt::runtime(body), ""));
  const uint8_t box[3][2] = {{0x81, 7}, {0, 0x7f}, {0xfe, 3}};  // 3 x 2, W[k][j]
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j) {
      compact.weights[16 + k * 2 + j] = box[k][j];
      whole.weights[16 + k * 4 + j] = box[k][j];
    }
  const auto a = run_all(compact, small_arch());  // each: every engine, bit-exact with the reference
  const auto b = run_all(whole, small_arch());
  std::string why;
  CHECK(sim::same_memories(*a.fast.state, *b.fast.state, &why));
  INFO(why);
  const sim::MachineState& s = *a.fast.state;
  for (uint64_t i = 4; i < 8; ++i) {
    CHECK(s.acc_row(i)[2] == 0);  // columns 2, 3: outside the box
    CHECK(s.acc_row(i)[3] == 0);
  }
  // The partial tile moves 6 bytes (2 cycles) instead of 16 (4): the whole tile's run is longer.
  CHECK(a.fast.weight_mem_busy == 4 + 2);
  CHECK(b.fast.weight_mem_busy == 4 + 4);
}

// An int's drain is counted as a sync naming the units it waits for: from the end of its issue
// cycle until the matrix and activation units are idle (what the segment computed, which the next
// one reads): RAW stall; then a host DMA still under way: input stall. Then the host's launch.
TEST_CASE("int - its drain as RAW stall, then input stall, then the host's launch", "[machine]") {
  sim::Arch a = small_arch();
  a.host_driver_us = 0.05;  // 50 cycles at 1000 MHz
  const auto r = run_all(assemble(kTile + R"(
    .input  x, 0, 8, init=random(2)
    .output y, 16, 8
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=2
    sync   units=host
    matmul ub=0, acc=0, rows=2, switch
    act    acc=0, ub=8, rows=2, func=relu, shift=4
    whm    host=y, ub=4, rows=2
    int
    halt)"),
                         a);
  // As in the test below up to the act: rhm [2, 20), sync host holds issue [3, 20), matmul
  // issued 20, streams [21, 23), ends 30; act issued 21, [30, 34). whm (rows no one writes):
  // issued 22, starts 23, 10 + 8 bytes: ends 41. int: issued 23, its issue cycle ends 24; the
  // matrix and activation units are idle at 34, the host DMA at 41; then the host: 50 + the
  // next segment's download (halt: 16 bytes) 16 + 10 = 76: issue resumes at 41 + 76 = 117.
  CHECK(r.fast.timeline[5] == InstructionTiming{22, 23, 41});
  CHECK(r.fast.timeline[6] == InstructionTiming{23, 23, 117});
  CHECK(r.fast.cycles == 118);
  // RAW: from the end of the int's issue cycle, [24, 34) = 10 (the activate waiting for the
  // matmul's fill and drain, then running; the int's own issue cycle [23, 24) is not a hold, as a
  // sync's is not).
  // Input: the sync's [3, 20) = 17 and the drain's [34, 41) = 7. Host launch: [41, 117) = 76.
  CHECK(r.fast.matrix.raw_stall == 10);
  CHECK(r.fast.matrix.input_stall == 17 + 7);
  CHECK(r.fast.matrix.host_launch == 76);
  CHECK(r.fast.matrix.array_active == 2);
  CHECK(r.fast.matrix.non_matrix == 118 - 2);
}

TEST_CASE("DMA and activate and syncs - input stall and RAW stall", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    .input  x, 0, 8, init=random(2)
    .output y, 16, 8
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=2
    sync   units=host
    matmul ub=0, acc=0, rows=2, switch
    act    acc=0, ub=8, rows=2, func=relu, shift=4
    sync   units=act
    whm    host=y, ub=8, rows=2
    halt)"),
                         small_arch());
  // (The tile is usable at 8 and shifted in by 12, long before.)
  // rhm: issued 1, starts 2, moves 2 rows x 4 bytes = 8 cycles after 10: ends 20.
  // sync host: issued 2, holds issue until 20. matmul: issued 20, starts 21 (its tile landed
  // long before), ends 21 + 2 + 7 = 30. act: issued 21, waits for the matmul writing its
  // accumulator rows: starts 30, takes 2 + 2 rows x 1 = 4: ends 34. sync act holds issue
  // [22, 34). whm: issued 34, starts 35, ends 35 + 10 + 8 = 53 = halt.
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 2, 20});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 2, 20});
  CHECK(r.fast.timeline[3] == InstructionTiming{20, 21, 30});
  CHECK(r.fast.timeline[4] == InstructionTiming{21, 30, 34});
  CHECK(r.fast.timeline[5] == InstructionTiming{22, 22, 34});
  CHECK(r.fast.timeline[6] == InstructionTiming{34, 35, 53});
  CHECK(r.fast.cycles == 53);
  // Input stall: issue held on `host` beyond the sync's own issue cycle, [3, 20): 17.
  // RAW stall: held on `act` over [23, 34), less the array streaming [21, 23): 11.
  CHECK(r.fast.matrix.input_stall == 17);
  CHECK(r.fast.matrix.raw_stall == 11);
  CHECK(r.fast.matrix.array_active == 2);
  CHECK(r.fast.matrix.non_matrix == 51);
}

// A matmul that waits both for an activate's rows (behind `sync units=act`) and for its weight
// tile. The matmul is not issued while the sync holds issue, so its wait for the tile starts at
// its arrival at the matrix unit: the cycles it waits for both count as RAW stall (and
// non-matrix), the cycles after the sync as weight stall and weight shift; RAW and weight stall
// never count the same cycle (docs/timing.md, "Counters").
TEST_CASE("matmul waiting for an activate's rows and for its tile - RAW stall then weight stall", "[machine]") {
  sim::Arch a = small_arch();
  a.weight_mem_gbps = 0.5;  // a 16-byte tile takes 32 cycles on the bus
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    act    acc=0, ub=8, rows=16, func=relu
    sync   units=act
    matmul ub=8, acc=16, rows=2, switch
    halt)"),
                         a);
  // rw: issued 0, starts 1; the tile is on the bus [1, 33), usable at 33 + 3 = 36, shifted in
  // [36, 40). act: issued 1, starts 2 (no matmul writes its accumulator rows), takes 2 + 16 rows
  // x 1 = 18: ends 20. sync act: issued 2, holds issue [3, 20). matmul: issued 20, at the matrix
  // unit from 21; starts at 40 (tile shifted in), ends 40 + 2 + 7 = 49 = halt's end.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 2});
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 2, 20});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 2, 20});
  CHECK(r.fast.timeline[3] == InstructionTiming{20, 40, 49});
  CHECK(r.fast.cycles == 49);
  // RAW stall: issue held on `act` [3, 20) = 17 cycles, no matmul streaming or waiting then
  // (the matmul is behind the sync although its tile is still on the bus: waits for both).
  // Weight stall [21, 36) = 15, weight shift [36, 40) = 4, array active [40, 42) = 2.
  // Non-matrix = 49 - 2 - 15 - 4 = 28 (it holds the RAW stall: 17 of the 28).
  CHECK(r.fast.matrix.raw_stall == 17);
  CHECK(r.fast.matrix.weight_stall == 15);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.matrix.array_active == 2);
  CHECK(r.fast.matrix.non_matrix == 28);
  CHECK(r.fast.matrix.input_stall == 0);
}

// The sync's producer waits for the matrix unit itself: an activate reading the accumulator rows
// of a matmul that waits for its tile. Issue is held on `act` all that time, but the cycles the
// matmul waits for weights are weight stall, not RAW stall: the dependency is the matrix unit's
// own pending work; RAW stall is what is left after the producer matmul has streamed.
TEST_CASE("sync on an activate that waits for a weight-stalled matmul - weight stall not RAW stall", "[machine]") {
  sim::Arch a = small_arch();
  a.weight_mem_gbps = 0.5;
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=2, switch
    act    acc=0, ub=8, rows=2, func=relu
    sync   units=act
    matmul ub=8, acc=4, rows=2
    halt)"),
                         a);
  // Tile usable at 36, shifted in [36, 40). matmul 1: issued 1, at the matrix unit from 2,
  // starts 40, ends 40 + 2 + 7 = 49. act: issued 2, waits for matmul 1 (its accumulator rows):
  // starts 49, takes 2 + 2 = 4: ends 53. sync act: issued 3, holds issue [4, 53). matmul 4
  // (same tile, no switch): issued 53, starts 54, ends 54 + 2 + 7 = 63 = halt's end.
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 40, 49});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 49, 53});
  CHECK(r.fast.timeline[3] == InstructionTiming{3, 3, 53});
  CHECK(r.fast.timeline[4] == InstructionTiming{53, 54, 63});
  CHECK(r.fast.cycles == 63);
  // Weight stall [2, 36) = 34, weight shift [36, 40) = 4, array active [40, 42) + [54, 56) = 4.
  // RAW stall: held [4, 53) = 49, less matrix spans [4, 42) = 38: [42, 53) = 11 (the drain of
  // matmul 1 and the activate). Non-matrix = 63 - 4 - 34 - 4 = 21.
  CHECK(r.fast.matrix.weight_stall == 34);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.matrix.array_active == 4);
  CHECK(r.fast.matrix.raw_stall == 11);
  CHECK(r.fast.matrix.non_matrix == 21);
}

// Issue held at a full activation queue, ahead of a matmul that reads what the queued activates
// write, is non-matrix but neither RAW nor input stall: only a sync's hold (or a segment's drain
// before `int`) is named (docs/timing.md, "Counters"; docs/validation.md, "What holds the idle matrix unit", measures
// such holds on the paper's apps and why they are not counted as RAW stalls).
TEST_CASE("issue held at a full activation queue - non-matrix, not RAW stall", "[machine]") {
  sim::Arch a = small_arch();
  a.station_queue_depth = 1;
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    act    acc=0, ub=8, rows=16, func=relu
    act    acc=0, ub=24, rows=4, func=relu
    act    acc=0, ub=28, rows=4, func=relu
    sync   units=act
    matmul ub=24, acc=16, rows=2, switch
    halt)"),
                         a);
  // The tile is usable at 8 and shifted in by 12. act 1: issued 1, starts 2 (leaving the queue),
  // takes 2 + 16 rows x 1 = 18: ends 20. act 2: issued 2, queued until the unit is free: starts
  // 20, ends 20 + 2 + 4 = 26. act 3: its queue (depth 1) holds act 2 until 20, so issue waits
  // [3, 20): issued 20, starts 26, ends 32. sync act: issued 21, holds issue [22, 32). matmul
  // (reads rows 24..25, act 2's): issued 32, starts 33, ends 33 + 2 + 7 = 42 = halt's end.
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 2, 20});
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 20, 26});
  CHECK(r.fast.timeline[3] == InstructionTiming{20, 26, 32});
  CHECK(r.fast.timeline[4] == InstructionTiming{21, 21, 32});
  CHECK(r.fast.timeline[5] == InstructionTiming{32, 33, 42});
  CHECK(r.fast.cycles == 42);
  // Array active [33, 35) = 2, no weight stall or shift: non-matrix 42 - 2 = 40. Of it, the
  // sync's hold [22, 32) = 10 is RAW stall; the full queue's [3, 20) = 17 is counted by neither.
  CHECK(r.fast.matrix.array_active == 2);
  CHECK(r.fast.matrix.weight_stall == 0);
  CHECK(r.fast.matrix.weight_shift == 0);
  CHECK(r.fast.matrix.non_matrix == 40);
  CHECK(r.fast.matrix.raw_stall == 10);
  CHECK(r.fast.matrix.input_stall == 0);
}

TEST_CASE("activation unit durations - activate and per-channel table and vector and pool", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=3, switch
    act    acc=0, ub=8, rows=3
    act    acc=0, ub=12, rows=3, perchan, qtable=40
    vec    op=add, src=8, src_b=12, ub=16, rows=3
    vec    op=pass, src=8, src_b=0, ub=20, rows=3
    pool   kind=max, src=8, ub=24, in_w=2, out_h=1, out_w=1, window=2, pstride=1
    halt)"),
                         small_arch());
  // act waits for the matmul (end 22): [22, 22 + 2 + 3 rows) = [22, 27).
  // perchan adds the table: ceil(7 x 4 / 4) = 7 rows: [27, 27 + 2 + 3 + 7) = [27, 39).
  // vec add reads two rows per output row: [39, 39 + 2 + 3 x 2) = [39, 47); pass: [47, 52).
  // pool: 1 output row x window^2 = 4 reads: [52, 52 + 2 + 4) = [52, 58).
  CHECK(r.fast.timeline[2].start == 22);
  CHECK(r.fast.timeline[2].end == 27);
  CHECK(r.fast.timeline[3].end == 39);
  CHECK(r.fast.timeline[4].end == 47);
  CHECK(r.fast.timeline[5].end == 52);
  CHECK(r.fast.timeline[6].end == 58);
  CHECK(r.fast.cycles == 58);
}

// An activate with fused 2 x 2 max pooling against an activate and a separate pool over a
// 4 x 4 map (16 accumulator rows, 1 image).
TEST_CASE("activation unit durations - fused pooling against activate then pool", "[machine]") {
  const std::string head = kTile + R"(
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=16, switch
  )";
  const auto fused = run_all(assemble(head + R"(
    setcfg reg=act_pool, value=1
    setcfg reg=act_pool_window, value=2
    setcfg reg=act_pool_stride, value=2
    setcfg reg=act_pool_width, value=4
    setcfg reg=act_pool_batch, value=1
    act    acc=0, ub=32, rows=16, func=relu
    halt)"),
                             small_arch());
  const auto plain = run_all(assemble(head + R"(
    act    acc=0, ub=16, rows=16, func=relu
    pool   kind=max, src=16, ub=32, in_w=4, out_h=2, out_w=2, window=2, pstride=2
    halt)"),
                             small_arch());
  // The matmul starts at 12 (as a lone one), ends 12 + 16 + 7 = 35; the act waits for it.
  // Fused: 16 accumulator rows in at 1 row per cycle, the 4 pooled rows written as their windows
  // close, within the reads: [35, 35 + 2 + 16) = [35, 53), the end of the program.
  CHECK(fused.fast.timeline[7].start == 35);
  CHECK(fused.fast.timeline[7].end == 53);
  CHECK(fused.fast.cycles == 53);
  // Unfused: the act [35, 53) writes 16 UB rows; the pool reads 4 outputs x 2 x 2 = 16 of them:
  // [53, 53 + 2 + 16) = [53, 71). Fusion saves the pool's 18 cycles and 12 UB rows.
  CHECK(plain.fast.timeline[2].end == 53);
  CHECK(plain.fast.timeline[3].end == 71);
  CHECK(plain.fast.cycles == 71);
  CHECK(fused.fast.ub_peak_rows == 16 + 4);  // the matmul's 16 input rows and 4 pooled rows
  CHECK(plain.fast.ub_peak_rows == 16 + 16 + 4);
}

TEST_CASE("a full station queue stalls issue", "[machine]") {
  sim::Arch arch = small_arch();
  arch.station_queue_depth = 1;
  const auto r = run_all(assemble(R"(
    .input x, 0, 12, init=random(3)
    rhm host=x, ub=0, rows=1
    rhm host=x, ub=1, rows=1
    rhm host=x, ub=2, rows=1
    halt)"),
                         arch);
  // Each rhm: 10 + 4 bytes = 14 cycles. The first runs [1, 15) and leaves the queue at 1; the
  // second is queued at 1 and starts at 15; the third waits for that slot: issued at 15,
  // starts when the second ends at 29, ends 43.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 1, 15});
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 15, 29});
  CHECK(r.fast.timeline[2] == InstructionTiming{15, 29, 43});
  CHECK(r.fast.timeline[3] == InstructionTiming{16, 16, 43});
}

TEST_CASE("unused MACs - cells outside a tile's nonzero weights", "[machine]") {
  isa::Program p = assemble(R"(
    .weights w, 0, 16, init=zero
    rw waddr=w, tiles=1
    matmul ub=0, acc=0, rows=4, switch
    halt)");
  p.weights[0 * 4 + 0] = 5;  // W[0][0]
  p.weights[2 * 4 + 1] = 7;  // W[2][1]: the nonzero box is rows 0..2, cols 0..1
  const auto r = run_all(p, small_arch());
  // 4 vectors x 3 x 2 useful cells = 24 MACs of 4 x 16 = 64; useful share 4 x 6 / 16 = 1.5 cycles.
  CHECK(r.fast.macs == 24);
  CHECK(r.fast.array_macs == 64);
  CHECK(r.fast.matrix.useful_mac_cycles == 1.5);
  CHECK(r.fast.matrix.array_active == 4);
}

TEST_CASE("tile_use is the bounding box of nonzero weights", "[machine]") {
  std::vector<uint8_t> t(12, 0);  // 3 x 4
  CHECK(sim::tile_use(t.data(), 3, 4).rows == 0);
  t[1 * 4 + 2] = 0xff;  // (1, 2)
  CHECK(sim::tile_use(t.data(), 3, 4).rows == 2);
  CHECK(sim::tile_use(t.data(), 3, 4).cols == 3);
  t[0 * 4 + 3] = 1;  // (0, 3)
  CHECK(sim::tile_use(t.data(), 3, 4).cols == 4);
  t[2 * 4 + 0] = 1;  // (2, 0)
  CHECK(sim::tile_use(t.data(), 3, 4).rows == 3);
  // Row spans from the first to the last nonzero: row 0 columns 3..3, row 1 2..2, row 2 0..0.
  CHECK(isa::tile_use_of(t.data(), 3, 4).spans == 1 + 1 + 1);
  t[2 * 4 + 2] = 1;  // (2, 2): row 2 spans 0..2
  CHECK(isa::tile_use_of(t.data(), 3, 4).spans == 1 + 1 + 3);
}

TEST_CASE("the example programs on the 256x256 tpu-v1 and every engine", "[machine]") {
  for (const char* name : {"matmul.s", "mlp2.s", "conv3x3.s", "lstm_cell.s"}) {
    INFO(name);
    const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/" + name);
    const auto r = run_all(p, sim::Arch{});
    CHECK(r.fast.cycles > 0);
  }
}

TEST_CASE("matmul.s on tpu-v1 - cycle count worked out by hand", "[machine]") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/matmul.s");
  const auto r = run_all(p, sim::Arch{});
  // tile transfer ceil(65536 x 700 / 34000) = 1350, usable 1 + 1350 + 100 = 1451.
  // rhm: 8 rows x 256 bytes: ceil(2048 x 700 / 10740) = 134 cycles + 700: [2, 836).
  // matmul: issued 836 after `sync units=host`, starts once the tile has shifted in,
  // s + 256 = 1707, ends 1707 + 8 + 256 + 256 - 1 = 2226. act: [2226, 2226 + 8 + 8) = [2226, 2242).
  // whm after `sync units=act`: issued 2242, [2243, 2243 + 834) = [2243, 3077).
  CHECK(r.fast.timeline[3] == InstructionTiming{836, 1707, 2226});
  CHECK(r.fast.timeline[4] == InstructionTiming{837, 2226, 2242});
  CHECK(r.fast.timeline[6] == InstructionTiming{2242, 2243, 3077});
  CHECK(r.fast.cycles == 3077);
  CHECK(r.fast.matrix.weight_stall == 1451 - 837);
  CHECK(r.fast.matrix.weight_shift == 256);
}

TEST_CASE("barrier waits for every unit and for fetched tiles to land", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw      waddr=w, tiles=1
    nop
    tag     tag=7
    setcfg  reg=host_stride, value=8
    barrier
    halt)"),
                         small_arch());
  // rw [1, 2) requests its tile at 1: on the bus [1, 5), usable at 8. nop, tag and setcfg take
  // one issue cycle each (1, 2, 3). The barrier, issued at 4, holds issue until the tile has
  // landed: 8. halt issues at 8 and ends at 9 (nothing left to wait for).
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 1, 2});
  CHECK(r.fast.timeline[3] == InstructionTiming{3, 3, 4});
  CHECK(r.fast.timeline[4] == InstructionTiming{4, 4, 8});
  CHECK(r.fast.timeline[5] == InstructionTiming{8, 8, 9});
  CHECK(r.fast.cycles == 9);
}

TEST_CASE("host_row_bytes narrows each DMA row", "[machine]") {
  const auto r = run_all(assemble(R"(
    .input x, 0, 16, init=random(4)
    setcfg reg=host_row_bytes, value=2
    rhm    host=x, ub=0, rows=3
    halt)"),
                         small_arch());
  // 3 rows x 2 bytes at 1 byte per cycle after 10: the rhm issued at 1 runs [2, 2 + 10 + 6).
  CHECK(r.fast.timeline[1] == InstructionTiming{1, 2, 18});
  CHECK(r.fast.cycles == 18);
}

TEST_CASE("a matmul waits for an earlier activate still reading its accumulator rows", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=2, switch
    act    acc=0, ub=8, rows=2
    matmul ub=2, acc=0, rows=2
    halt)"),
                         small_arch());
  // Matmul 1: t0 = 12 (tile usable 8, shifted in by 12), end 12 + 2 + 7 = 21. The act waits for
  // it: [21, 21 + 2 + 2) = [21, 25). Matmul 3 would start when the port frees at 14, but it
  // overwrites the rows the act reads: it starts at 25 and ends 25 + 2 + 7 = 34. The wait
  // [14, 25) is non-matrix time (neither weights nor their shift).
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 21, 25});
  CHECK(r.fast.timeline[3] == InstructionTiming{3, 25, 34});
  CHECK(r.fast.matrix.weight_stall == 6);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.matrix.non_matrix == 34 - 4 - 6 - 4);
}

TEST_CASE("issue_cycles and activation_lanes narrower than a row", "[machine]") {
  sim::Arch arch = small_arch();
  arch.issue_cycles = 2;
  arch.activation_lanes = 3;
  const auto r = run_all(assemble(R"(
    act    acc=0, ub=0, rows=3
    vec    op=add, src=0, src_b=4, ub=8, rows=2
    halt)"),
                         arch);
  // One instruction every 2 cycles. A row of 4 values takes ceil(4 / 3) = 2 cycles: the act
  // (available at 2) runs [2, 2 + 2 + 3 x 2) = [2, 10); the vec reads two rows per output row:
  // [10, 10 + 2 + 2 x 2 x 2) = [10, 20). halt, issued at 4, ends at 20.
  CHECK(r.fast.timeline[0] == InstructionTiming{0, 2, 10});
  CHECK(r.fast.timeline[1] == InstructionTiming{2, 10, 20});
  CHECK(r.fast.timeline[2] == InstructionTiming{4, 4, 20});
}

TEST_CASE("sync on the matrix unit waits for the drain and is no RAW or input stall", "[machine]") {
  const auto r = run_all(assemble(kTile + R"(
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=3, switch
    sync   units=matrix
    nop
    halt)"),
                         small_arch());
  // The matmul ends at 22 (lone matmul above); the sync issued at 2 holds issue until then.
  CHECK(r.fast.timeline[2] == InstructionTiming{2, 2, 22});
  CHECK(r.fast.timeline[3] == InstructionTiming{22, 22, 23});
  CHECK(r.fast.cycles == 24);
  CHECK(r.fast.matrix.raw_stall == 0);
  CHECK(r.fast.matrix.input_stall == 0);
}

// 16-bit elements (setcfg act_high, vec_high_a/b/out): exact int16 results on every engine (run_all
// also holds fast and stepped to the reference executor) and the activation unit's durations.
TEST_CASE("16-bit act and vec - exact results, saturation and durations on every engine", "[machine][wide]") {
  isa::Program p = assemble(R"(
    .input   x, 0, 8, init=random(3)
    .weights w, 0, 16, init=zero
    rhm    host=x, ub=0, rows=2
    sync   units=host
    rw     waddr=w, tiles=1
    matmul ub=0, acc=0, rows=2, switch
    setcfg reg=act_high, value=4
    act    acc=0, ub=8, rows=2, mult=300
    setcfg reg=vec_high_a, value=4
    setcfg reg=vec_high_b, value=4
    setcfg reg=vec_high_out, value=4
    vec    op=mul, src=8, src_b=8, ub=16, rows=2, shift=12
    setcfg reg=vec_high_b, value=0
    vec    op=add, src=16, src_b=0, ub=24, rows=2
    halt)");
  for (int k = 0; k < 4; ++k) p.weights[k * 4 + k] = 1;  // identity: the accumulators hold x
  p.host_regions[0].init = {1, 0xff, 100, 0x80, 120, 7, 0, static_cast<uint8_t>(-50)};  // x = [1 -1 100 -128], [120 7 0 -50]
  const auto r = run_all(p, small_arch());
  const auto s16 = [&](uint64_t row, uint64_t h) {
    std::vector<int> v;
    for (uint64_t i = 0; i < 4; ++i)
      v.push_back(int{r.fast.state->ub_row(row)[i]} + 256 * int{static_cast<int8_t>(r.fast.state->ub_row(row + h)[i])});
    return v;
  };
  // act: x x 300 = 300, -300, 30000, -38400 (saturates to -32768); 36000 (32767), 2100, 0, -15000.
  CHECK(s16(8, 4) == std::vector<int>{300, -300, 30000, -32768});
  CHECK(s16(9, 4) == std::vector<int>{32767, 2100, 0, -15000});
  // vec mul, int16 x int16 / 2^12: 90000 / 4096 = 21.97 -> 22; 9e8 / 4096 and 2^30 / 4096
  // saturate; 32767^2 / 4096 = 262128 saturates, 4,410,000 / 4096 = 1076.7 -> 1077, 0,
  // 2.25e8 / 4096 saturates.
  CHECK(s16(16, 4) == std::vector<int>{22, 22, 32767, 32767});
  CHECK(s16(17, 4) == std::vector<int>{32767, 1077, 0, 32767});
  // vec add, int16 + int8 (x at rows 0..1): 23, 21, 32767 + 100 saturates, 32767 - 128 = 32639;
  // 32767 + 120 saturates, 1084, 0, 32717.
  CHECK(s16(24, 4) == std::vector<int>{23, 21, 32767, 32639});
  CHECK(s16(25, 4) == std::vector<int>{32767, 1084, 0, 32717});
  // Durations (activation latency 2, one 4-byte UB row per cycle): the act writes two UB rows per
  // accumulator row: 2 + 2 x 2 = 6. The mul reads four UB rows per element row (two planes of
  // each operand): 2 + 2 x 4 = 10. The add reads three (a's two planes, b's one) and writes two:
  // 2 + 2 x 3 = 8. Each starts as the one before it on the unit ends.
  const auto& t = r.fast.timeline;
  CHECK(t[5].end - t[5].start == 6);
  CHECK(t[9].start == t[5].end);
  CHECK(t[9].end - t[9].start == 10);
  CHECK(t[11].start == t[9].end);
  CHECK(t[11].end - t[11].start == 8);
  CHECK(r.fast.cycles == t[11].end);
}

// Without a sync, a matmul reading rows an act's high plane writes is refused as a hazard.
TEST_CASE("16-bit act - the high plane's rows are hazards too", "[machine][wide]") {
  const isa::Program p = assemble(R"(
    .weights w, 0, 32, init=random(1)
    rw     waddr=w, tiles=2
    matmul ub=0, acc=0, rows=2, switch
    setcfg reg=act_high, value=10
    act    acc=0, ub=20, rows=2
    matmul ub=30, acc=4, rows=1, switch
    halt)");
  for (const sim::Engine e : {sim::Engine::fast, sim::Engine::stepped, sim::Engine::timing})
    CHECK_THROWS_WITH(sim::simulate(p, small_arch(), {e, 0}),
                      Catch::Contains("instruction 4 (matmul ub=30, acc=4, rows=1, switch): reads UB rows that "
                                      "instruction 3 (act acc=0, ub=20, rows=2) uses earlier in program order"));
}

// The timing engine starts a matmul ahead of simulated time when no other unit can act before it
// (docs/timing.md, "Events"). Issue run by the control unit's own process (after a sync) must
// still find the slot that start frees only from the start's cycle on: M4 issues when M2 starts
// (t0 of M1 + 32 vectors), as on the engines that wait for every start.
TEST_CASE("issue finds a queue slot freed by a matmul started ahead only from its start", "[machine]") {
  sim::Arch arch = small_arch();
  arch.station_queue_depth = 2;
  const isa::Program p = assemble(
      ".weights w, 0, 16, init=random(1)\nrw waddr=w, tiles=1\n"
      "matmul ub=0, acc=0, rows=32, switch\nmatmul ub=0, acc=32, rows=32\nmatmul ub=0, acc=0, rows=32\n"
      "sync units=host\nmatmul ub=0, acc=32, rows=32\nhalt");
  const test::EngineRuns r = test::run_all(p, arch);  // (every instruction's issue, start and end alike)
  CHECK(r.timing.timeline[5].issue == r.timing.timeline[2].start);
  CHECK(r.timing.timeline[2].start == r.timing.timeline[1].start + 32);
}
