// The packing registers (sim/pack.h, docs/isa.md setcfg gather_* and act_groups): what a
// gathering matmul computes (against a plain im2col loop), what a scattering activate writes,
// their exact cycles on every engine, and the checks that refuse bad settings.
// Machine: machine_support.h small_arch() (4x4 array, N = M = 4; tile usable 8 cycles after its
// read_weights issues and shifted in by 12; act 1 row per cycle after 2).
#include "sim/energy.h"
#include "sim/pack.h"

#include <catch2/catch.hpp>

#include "machine_support.h"
#include "sim/reference.h"

using namespace tpusim;
using namespace tpusim::test;
using Catch::Matchers::Contains;
using sim::InstructionTiming;

namespace {

// gather_bytes 1, 2 x 2 segments: across one UB row apart, down 4 rows apart (a 2x2 kernel on a
// map 4 pixels wide, 1 channel, batch 1).
const std::string kGather = R"(
    setcfg reg=gather_bytes, value=1
    setcfg reg=gather_cols, value=2
    setcfg reg=gather_rows, value=2
    setcfg reg=gather_col_step, value=1
    setcfg reg=gather_row_step, value=4
)";

}  // namespace

TEST_CASE("a gathering matmul streams a vector every ceil(D / gather_rows_per_cycle) cycles",
          "[machine][pack]") {
  const isa::Program program = assemble(kTile + "    rw waddr=w, tiles=1\n" + kGather + R"(
    matmul ub=0, acc=0, rows=3, switch
    halt)");
  const auto r = run_all(program, small_arch());
  // rw issued 0; five setcfg issued 1..5; matmul issued 6, at the matrix unit from 7. Its tile is
  // usable at 8 and shifted in by 12: t0 = 12 (weight stall [7, 8) = 1, shift [8, 12) = 4).
  // D = 2 x 2 = 4 UB rows per vector, one per cycle: 3 vectors stream in 3 x 4 = 12 cycles,
  // the last entering at 12 + 11 = 23; end = 12 + 12 + N + M - 1 = 31 = halt.
  CHECK(r.fast.timeline[6] == InstructionTiming{6, 12, 31});
  CHECK(r.fast.cycles == 31);
  CHECK(r.fast.matrix.array_active == 12);
  CHECK(r.fast.matrix.weight_stall == 1);
  CHECK(r.fast.matrix.weight_shift == 4);
  CHECK(r.fast.array_macs == 3 * 16);  // 3 vectors through the 4 x 4 array
  // Useful MACs of a gathering matmul: per vector, the sum of the tile's rows' nonzero spans.
  uint64_t spans = 0;
  for (uint64_t k = 0; k < 4; ++k) {
    int64_t first = -1, last = -1;
    for (int64_t j = 0; j < 4; ++j)
      if (program.weights[k * 4 + j]) last = j, first = first < 0 ? j : first;
    spans += first < 0 ? 0 : uint64_t(last - first + 1);
  }
  CHECK(r.fast.macs == 3 * spans);
  // Energy: each vector reads its 4 segments' UB rows of 4 bytes.
  const sim::ActionCounts c = sim::count_actions(program, small_arch(), 8, r.fast.array_macs);
  CHECK(c[sim::EnergyAction::ub_read] == 3 * 4 * 4);
  CHECK(c[sim::EnergyAction::mac] == 3 * 16);

  // Two rows per cycle: ceil(4 / 2) = 2 cycles per vector: end = 12 + 3 x 2 + 7 = 25.
  sim::Arch a = small_arch();
  a.gather_rows_per_cycle = 2;
  const auto two = run_all(assemble(kTile + "    rw waddr=w, tiles=1\n" + kGather + R"(
    matmul ub=0, acc=0, rows=3, switch
    halt)"),
                           a);
  CHECK(two.fast.timeline[6] == InstructionTiming{6, 12, 25});
  CHECK(two.fast.matrix.array_active == 6);
}

TEST_CASE("a gathering matmul computes the im2col product and a scattering act writes each group to its row",
          "[machine][pack]") {
  // A 1-channel 4 x 4 map in UB rows 0..15 (pixel (y, x) = row 4y + x, byte 0), a 2x2 kernel,
  // output pixels (0, 0), (0, 1), (0, 2) (repeat 3, stride 1) and (1, 0) (a second matmul).
  const isa::Program p = assemble(kTile + R"(
    .input  x, 0, 64, init=random(7)
    .output y, 256, 64
    setcfg reg=host_row_bytes, value=1
    setcfg reg=host_stride, value=1
    rhm    host=x, ub=0, rows=16
    rw     waddr=w, tiles=1
    sync   units=host)" + kGather +
                                  R"(
    matmul ub=0, acc=0, rows=1, repeat=3, stride=1, switch
    matmul ub=4, acc=3, rows=1
    setcfg reg=act_groups, value=2
    setcfg reg=act_group_cols, value=2
    act    acc=0, ub=20, rows=4
    sync   units=act
    setcfg reg=host_row_bytes, value=0
    setcfg reg=host_stride, value=0
    whm    host=y, ub=16, rows=16
    halt)");
  const auto r = run_all(p, small_arch());  // every engine equals the reference executor
  const sim::MachineState ref = sim::run_reference(p, small_arch());
  const auto x = [&](uint64_t y, uint64_t c) { return int32_t(int8_t(ref.ub_row(4 * y + c)[0])); };
  const auto w = [&](uint64_t k, uint64_t j) { return int32_t(int8_t(p.weights[k * 4 + j])); };
  // Vector of output pixel (oy, ox): element (u * 2 + r) = x(oy + r, ox + u); element 4.. none (4 rows).
  const uint64_t pixels[4][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}};
  for (uint64_t i = 0; i < 4; ++i)
    for (uint64_t j = 0; j < 4; ++j) {
      int32_t sum = 0;
      for (uint64_t u = 0; u < 2; ++u)
        for (uint64_t rr = 0; rr < 2; ++rr) sum += x(pixels[i][0] + rr, pixels[i][1] + u) * w(u * 2 + rr, j);
      INFO("accumulator row " << i << " column " << j);
      CHECK(ref.acc_row(i)[j] == sum);
    }
  // act with 2 groups of 2 columns, 4 rows: group p of accumulator row i goes to UB row
  // 20 + p x 4 + i, bytes 0..1 (mult 1, shift 0: saturated to int8); bytes 2..3 kept (zero).
  for (uint64_t i = 0; i < 4; ++i)
    for (uint64_t g = 0; g < 2; ++g)
      for (uint64_t c = 0; c < 4; ++c) {
        const int32_t v = c < 2 ? std::clamp(ref.acc_row(i)[g * 2 + c], -128, 127) : 0;
        INFO("row " << 20 + g * 4 + i << " byte " << c);
        CHECK(int8_t(ref.ub_row(20 + g * 4 + i)[c]) == v);
      }
  // The act: 4 accumulator rows x 2 groups = 8 UB rows, one per cycle, after 2: 10 cycles.
  const uint64_t act = 14;
  REQUIRE(p.code[act].opcode == isa::Opcode::activate);
  CHECK(r.fast.timeline[act].end - r.fast.timeline[act].start == 2 + 8);
  // Energy: the act writes 8 UB rows of 4 bytes; rhm wrote 16 whole rows, the gathers read 4 vectors
  // x 4 rows of 4 bytes and whm 16 rows.
  const sim::ActionCounts e = sim::count_actions(p, small_arch(), p.code.size(), r.fast.array_macs);
  CHECK(e[sim::EnergyAction::ub_write] == 16 * 4 + 8 * 4);
  CHECK(e[sim::EnergyAction::ub_read] == 4 * 4 * 4 + 16 * 4);
}

TEST_CASE("gather and scatter settings that do not fit the machine are refused", "[machine][pack]") {
  const auto refused = [](const std::string& body, const std::string& what) {
    const isa::Program p = assemble(kTile + "    rw waddr=w, tiles=1\n" + body + "\n    halt");
    REQUIRE_THROWS_WITH(sim::check_static(p, small_arch()), Contains(what));
  };
  // 3 x 2 segments of 1 byte: 6 elements > array_rows 4.
  refused(kGather + "    setcfg reg=gather_cols, value=3\n    matmul ub=0, acc=0, rows=1, switch",
          "gather of 3 x 2 segments of 1 bytes (setcfg gather_*) is longer than an input vector (array_rows "
          "= 4)");
  // Segments reach row 0 + 1 + 4 = 5 from vector 0's origin: 255 + 5 passes the 256 rows.
  refused(kGather + "    matmul ub=255, acc=0, rows=1, switch", "reads UB rows 255..260");
  // lane 3 + 2 bytes > a 4-byte row.
  refused("    setcfg reg=gather_bytes, value=2\n    matmul ub=0, acc=0, rows=1, lane=3, switch",
          "reads bytes 3..4 of each UB row (lane 3)");
  // 3 groups of 2 columns > 4 columns; 2 groups x 4 rows from row 250 pass row 255.
  refused(
      "    setcfg reg=act_groups, value=3\n    setcfg reg=act_group_cols, value=2\n    act acc=0, ub=0, "
      "rows=1",
      "scatter of 3 groups of 2 columns (setcfg act_groups, act_group_cols) does not fit an accumulator row "
      "of 4");
  refused(
      "    setcfg reg=act_groups, value=2\n    setcfg reg=act_group_cols, value=2\n    act acc=0, ub=250, "
      "rows=4",
      "writes UB rows 250..257");
}

TEST_CASE("the packing registers each instruction is issued with", "[pack]") {
  const isa::Program p = assemble(kTile + "    rw waddr=w, tiles=1\n" + kGather + R"(
    matmul ub=0, acc=0, rows=1, switch
    setcfg reg=gather_bytes, value=0
    matmul ub=0, acc=0, rows=1
    halt)");
  const sim::PackTimeline t(p.code);
  CHECK(t.at(0).segments() == 1);
  CHECK(t.at(6).segments() == 4);
  CHECK(t.at(6).reach() == 1 + 4);
  CHECK(vector_cycles(t.at(6), small_arch()) == 4);
  CHECK(t.at(8).segments() == 1);  // gather_bytes 0: no gather, whatever the other registers hold
  CHECK(t.at(8).reach() == 0);
}
