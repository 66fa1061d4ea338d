// The mapper's host_loop (docs/compiler.md, "Host-driven loops"): an LSTM's layer-steps as
// program segments the host launches, each ended by `int`; bit-exact on every engine either way.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "e2e_support.h"
#include "sim/host_model.h"

namespace tpusim::test {

using isa::Field;
using isa::Opcode;

namespace {

compiler::Compiled compiled(const sim::Arch& arch, const compiler::LowerOptions& options) {
  compiler::Compiled c = compiler::prepare_model(wide_lstm_model("", ""));
  compiler::lower_for(c, arch, options);
  return c;
}

}  // namespace

TEST_CASE("host_loop: an LSTM's layer-steps are segments the host launches, off: one program", "[host_loop]") {
  const sim::Arch a = square(8);
  const compiler::Compiled on = compiled(a, {});
  const compiler::Compiled off = compiled(a, compiler::LowerOptions{.host_loop = false});
  // 2 stacked layers x 4 steps = 8 layer-steps: a segment each, the first begun by the launch of
  // the program itself (the first segment also holds the input's load), so 7 ints.
  CHECK(count(on.program, Opcode::interrupt) == 7);
  CHECK(on.program.meta["host_segments"] == 8);
  CHECK_FALSE(on.program.meta.contains("mapper"));
  CHECK(count(off.program, Opcode::interrupt) == 0);
  CHECK_FALSE(off.program.meta.contains("host_segments"));
  CHECK(off.program.meta["mapper"] == nlohmann::json{{"host_loop", false}});
  // The same tiles fetched either way, but no read_weights hoisted across an int: every tile
  // fetched before an int is switched to before it.
  CHECK(count(on.program, Opcode::read_weights) == count(off.program, Opcode::read_weights));
  uint64_t fetched = 0, switched = 0;
  for (const isa::Instruction& in : on.program.code) {
    if (in.opcode == Opcode::read_weights) fetched += in[Field::tiles];
    if (in.opcode == Opcode::matmul && in[Field::switch_weights]) ++switched;
    if (in.opcode == Opcode::interrupt) CHECK(fetched == switched);
  }
  // Bit-exact against the golden model on every engine, on and off.
  const uint64_t cycles_on = check_model(wide_lstm_model("", ""), a, true);
  const uint64_t cycles_off = check_model(wide_lstm_model("", ""), a, true, compiler::LowerOptions{.host_loop = false});
  // The held cycles: at each int, the driver and the next segment's download (host_model.h),
  // exactly; counted as host_launch, part of non-matrix (the drain before it is RAW stall:
  // tests/sim/machine_test.cpp).
  const sim::RunResult r = sim::simulate(on.program, a, {sim::Engine::timing, 0});
  uint64_t held = 0;
  for (uint64_t i = 0; i < on.program.code.size(); ++i)
    if (on.program.code[i].opcode == Opcode::interrupt)
      held += sim::launch_cycles(a, sim::segment_length(on.program.code, i + 1));
  CHECK(r.cycles == cycles_on);
  CHECK(r.matrix.host_launch == held);
  CHECK(held > 7 * 10000);  // (the driver alone: 10 us at 1000 MHz per launch)
  CHECK(cycles_on > cycles_off + held);  // (plus the drains and the refilled weight FIFO)
  const sim::RunResult r_off = sim::simulate(off.program, a, {sim::Engine::timing, 0});
  CHECK(r_off.matrix.host_launch == 0);
}

TEST_CASE("host_loop's default is the machine's driver_host_loop, and a switch given wins", "[host_loop]") {
  sim::Arch on_chip = square(8);  // a machine whose software runs the loop as one program
  on_chip.driver_host_loop = 0;
  const compiler::Compiled unrolled = compiled(on_chip, {});
  CHECK(count(unrolled.program, Opcode::interrupt) == 0);
  CHECK_FALSE(unrolled.program.meta.contains("mapper"));  // the machine's default: nothing given
  // The same code as host_loop=off on tpu-v1's setting of the parameter (square(8) keeps 1).
  REQUIRE(square(8).driver_host_loop == 1);
  CHECK(unrolled.program.code == compiled(square(8), compiler::LowerOptions{.host_loop = false}).program.code);
  const compiler::Compiled given = compiled(on_chip, compiler::LowerOptions{.host_loop = true});
  CHECK(count(given.program, Opcode::interrupt) == 7);  // 8 layer-steps, as above
  CHECK(given.program.meta["mapper"] == nlohmann::json{{"host_loop", true}});
}

}  // namespace tpusim::test
