// Co-simulation: compiled models run on the SystemC machine with the Verilated RTL array
// (hw/cosim_array.h, `verilator --sc`) in place of the stepped engine's C++ array, and must give
// the stepped engine's run exactly: every instruction's issue, start and end cycle, the counters,
// the memories (equal to the ISA reference executor's) and the model's output (equal to the golden
// reference). Negative checks show these comparisons catch an array that behaves differently.
//
// The SystemC kernel elaborates once per process and a --sc module must join the design before
// it does, so each TEST_CASE creates its arrays first, and CTest runs each in its own process.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "compiler/compile.h"
#include "hw/cosim_array.h"
#include "sim/machine.h"
#include "sim/reference.h"
#include "tests/sim/same_run.h"
#include "tools/source_dir.h"

namespace tpusim::test {
namespace {

// A small square machine whose arithmetic is easy to follow (1 GHz: gbps = bytes per cycle).
sim::Arch square(uint64_t n) {
  sim::Arch a;
  a.name = "cosim-" + std::to_string(n);
  a.array_rows = a.array_cols = n;
  a.clock_mhz = 1000;
  a.ub_bytes = 8192 * n;
  a.acc_entries = 256;
  a.weight_fifo_tiles = 4;
  a.weight_mem_gbps = 8;
  a.weight_mem_latency_cycles = 5;
  a.host_gbps = 8;
  a.host_latency_cycles = 10;
  a.activation_lanes = n;
  a.weight_mem_bytes = 1 << 24;
  return a;
}

compiler::Compiled workload(const char* rel, uint64_t batch, const sim::Arch& arch) {
  compiler::LoadOptions o;
  o.batch = batch;
  return compiler::compile_file(std::filesystem::path(tpusim::source_dir()) / "workloads" / rel, arch, o);
}

// A conv, pool and dense model with signed inputs into the first layer and uint8 (ReLU) ones after.
compiler::Compiled tiny_model(const sim::Arch& arch) {
  const char* text = R"(
[model]
name = "cosim_tiny"
batch = 2
input = [6, 6, 3]

[[layer]]
name = "conv"
type = "conv2d"
filters = 6
kernel = 3
padding = "same"
activation = "relu"

[[layer]]
name = "pool"
type = "max_pool"
size = 2

[[layer]]
name = "flatten"
type = "flatten"

[[layer]]
name = "fc"
type = "dense"
units = 5
)";
  return compiler::compile_model(compiler::parse_model(text, "cosim_tiny.toml", "."), arch);
}

const sim::HostBuffer& output_region(const sim::RunResult& r) {
  for (const sim::HostBuffer& h : r.state->host)
    if (h.name == "output") return h;
  FAIL("the program has no output region");
  throw;
}

// Runs `c` on the stepped engine with its C++ array and with `rtl`, and on the fast engine;
// requires one identical run, memories equal to the reference executor and the golden output.
void check_cosim(compiler::Compiled c, const sim::Arch& arch, sim::ArrayModel& rtl) {
  const sim::RunResult stepped = sim::simulate(c.program, arch, {sim::Engine::stepped, 0});
  const sim::RunResult cosim = sim::simulate(c.program, arch, {sim::Engine::stepped, 0, &rtl});
  const sim::RunResult fast = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
  INFO(c.model.name << " on " << arch.name << ": " << cosim.cycles << " cycles, " << cosim.array_steps
                    << " array steps, " << c.program.code.size() << " instructions");
  WARN(c.model.name << " on " << arch.name << ": " << cosim.cycles << " cycles, " << cosim.array_steps
                    << " RTL array steps; wall " << stepped.host_seconds << " s stepped, " << cosim.host_seconds
                    << " s co-simulated");
  REQUIRE(cosim.array_steps > 0);
  require_same_run(cosim, stepped);
  REQUIRE(fast.cycles == cosim.cycles);
  REQUIRE(fast.timeline == cosim.timeline);
  std::string why;
  const bool same_as_reference = sim::same_memories(*cosim.state, sim::run_reference(c.program, arch), &why);
  INFO(why);
  REQUIRE(same_as_reference);
  const compiler::OutputCheck check = compiler::check_output(c, output_region(cosim).bytes, arch);
  INFO(check.first_difference);
  REQUIRE(check.matches);
}

// The co-simulated array with one fault: wrong results, or every result a cycle late.
class FaultyArray final : public sim::ArrayModel {
 public:
  enum Fault { wrong_value, late_result };
  FaultyArray(sim::ArrayModel& rtl, Fault fault) : rtl_(rtl), fault_(fault) {}
  uint64_t rows() const override { return rtl_.rows(); }
  uint64_t cols() const override { return rtl_.cols(); }
  void step(std::span<const int16_t> left, std::span<const uint8_t> flags, int64_t shadow_row,
            std::span<const int16_t> shadow) override {
    const auto b = rtl_.bottom();
    const auto v = rtl_.bottom_valid();
    late_bottom_.assign(b.begin(), b.end());
    late_valid_.assign(v.begin(), v.end());
    rtl_.step(left, flags, shadow_row, shadow);
    bottom_.assign(rtl_.bottom().begin(), rtl_.bottom().end());
    // From the 100th valid result of the first column on, every one is 2^24 too high (large
    // enough that neither ReLU nor requantization can hide it).
    if (fault_ == wrong_value && rtl_.bottom_valid()[0] && ++valid_seen_ >= 100)
      bottom_[0] = static_cast<int32_t>(static_cast<uint32_t>(bottom_[0]) + (1u << 24));
  }
  std::span<const int32_t> bottom() const override { return fault_ == late_result ? late_bottom_ : bottom_; }
  std::span<const uint8_t> bottom_valid() const override {
    return fault_ == late_result ? std::span<const uint8_t>(late_valid_) : rtl_.bottom_valid();
  }
  bool empty() const override { return rtl_.empty() && (fault_ != late_result || !has_valid(late_valid_)); }
  bool shift_pending() const override { return rtl_.shift_pending(); }
  void reset() override {
    rtl_.set_skewed_shift(skewed_shift_);  // (the matrix unit sets it on this wrapper)
    rtl_.reset();
    late_bottom_.assign(cols(), 0);
    late_valid_.assign(cols(), 0);
    bottom_.assign(cols(), 0);
    valid_seen_ = 0;
  }

 private:
  static bool has_valid(const std::vector<uint8_t>& v) {
    for (uint8_t b : v)
      if (b) return true;
    return false;
  }
  sim::ArrayModel& rtl_;
  Fault fault_;
  std::vector<int32_t> bottom_, late_bottom_;
  std::vector<uint8_t> late_valid_;
  uint64_t valid_seen_ = 0;
};

}  // namespace

TEST_CASE("co-simulation: mnist_mlp on the 8 x 8 RTL array runs exactly as on the stepped engine", "[cosim]") {
  sim::ArrayModel& rtl = hw::cosim_array(8, 8);  // before the kernel elaborates
  const sim::Arch arch = square(8);
  check_cosim(workload("small/mnist_mlp.toml", 4, arch), arch, rtl);
}

TEST_CASE("co-simulation: a conv-pool-dense model on the 4 x 4 and 16 x 16 RTL arrays", "[cosim]") {
  sim::ArrayModel& rtl4 = hw::cosim_array(4, 4);
  sim::ArrayModel& rtl16 = hw::cosim_array(16, 16);
  for (auto [n, rtl] : {std::pair{4, &rtl4}, std::pair{16, &rtl16}}) {
    const sim::Arch arch = square(n);
    check_cosim(tiny_model(arch), arch, *rtl);
    check_cosim(tiny_model(arch), arch, *rtl);  // again: the RTL is reset between runs
  }
}

TEST_CASE("co-simulation: the checks catch an array with a wrong result or a late one", "[cosim]") {
  sim::ArrayModel& rtl = hw::cosim_array(4, 4);
  const sim::Arch arch = square(4);
  const compiler::Compiled c = tiny_model(arch);
  const sim::RunResult stepped = sim::simulate(c.program, arch, {sim::Engine::stepped, 0});
  {  // Wrong values: the timing still agrees, the memories and the output do not.
    FaultyArray faulty(rtl, FaultyArray::wrong_value);
    const sim::RunResult r = sim::simulate(c.program, arch, {sim::Engine::stepped, 0, &faulty});
    CHECK(r.timeline == stepped.timeline);
    CHECK_FALSE(sim::same_memories(*r.state, *stepped.state, nullptr));
    CHECK_FALSE(sim::same_memories(*r.state, sim::run_reference(c.program, arch), nullptr));
  }
  {  // Results one cycle late: every matmul ends a cycle later, or the run fails outright.
    FaultyArray faulty(rtl, FaultyArray::late_result);
    bool differs = false;
    try {
      const sim::RunResult r = sim::simulate(c.program, arch, {sim::Engine::stepped, 0, &faulty});
      differs = r.timeline != stepped.timeline;
    } catch (const sim::SimError& e) {
      INFO(e.what());
      differs = true;
    }
    CHECK(differs);
  }
  // The same RTL, unwrapped, still gives the exact run.
  require_same_run(sim::simulate(c.program, arch, {sim::Engine::stepped, 0, &rtl}), stepped);
}

TEST_CASE("co-simulation: misuse is a clear error", "[cosim]") {
  sim::ArrayModel& rtl = hw::cosim_array(4, 4);
  CHECK(&hw::cosim_array(4, 4) == &rtl);  // one per size
  CHECK_THROWS_WITH(hw::cosim_array(5, 5), Catch::Contains("no co-simulated array of 5 x 5"));
  const sim::Arch arch4 = square(4), arch8 = square(8);
  const compiler::Compiled c = tiny_model(arch4);
  CHECK_THROWS_WITH(sim::simulate(c.program, arch4, {sim::Engine::fast, 0, &rtl}),
                    Catch::Contains("RunOptions::array is for the stepped engine, not 'fast'"));
  CHECK_THROWS_WITH(sim::simulate(tiny_model(arch8).program, arch8, {sim::Engine::stepped, 0, &rtl}),
                    Catch::Contains("RunOptions::array is 4 x 4, the architecture's array is 8 x 8"));
  // The kernel has elaborated now: a new size can no longer join the design.
  sim::simulate(c.program, arch4, {sim::Engine::timing, 0});
  CHECK_THROWS_WITH(hw::cosim_array(8, 8), Catch::Contains("before the first sim::simulate()"));
  // Stepping outside the machine (no SystemC thread to wait in) is refused.
  const std::vector<int16_t> zeros(4, 0);
  const std::vector<uint8_t> flags(4, 0);
  CHECK_THROWS_WITH(rtl.step(zeros, flags, -1, zeros), Catch::Contains("must be called from a SystemC thread"));
}

}  // namespace tpusim::test
