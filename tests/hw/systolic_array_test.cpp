// The Verilated arrays (hw/rtl/tpusim_systolic_array.sv at 4x4, 8x8, 16x16, 4x8) against
// sim::SystolicArray, every cell's partial sum and weights compared every cycle; the systolic
// data setup (tpusim_systolic_setup.sv) as a delay line; and whole matmuls against plain loops.
// TPUSIM_VCD=path makes the 4x4 comparison write a VCD of its first cycles (hw/README.md).
#include <Vsa16x16.h>
#include <Vsa4x4.h>
#include <Vsa4x8.h>
#include <Vsa8x8.h>
#include <Vsetup8.h>
#include <verilated_vcd_c.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fmt/format.h>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/systolic_array.h"
#include "tests/hw/rtl_harness.h"

namespace {

using tpusim::sim::SystolicArray;
namespace hw = tpusim::hw;
using Matrix16 = std::vector<std::vector<int16_t>>;
using Matrix32 = std::vector<std::vector<int32_t>>;
constexpr uint8_t V = SystolicArray::kValid;
constexpr uint8_t S = SystolicArray::kSwitch;

// A VCD file written through hw::Tracer.
struct VcdTracer : hw::Tracer {
  VerilatedVcdC vcd;
  void dump(uint64_t time) override { vcd.dump(time); }
  ~VcdTracer() override { vcd.close(); }
};

int16_t random_operand(bool is_signed, std::mt19937& rng) {
  return static_cast<int16_t>(is_signed ? static_cast<int>(rng() % 256) - 128 : static_cast<int>(rng() % 256));
}

// One step's inputs for both models.
struct StepInputs {
  std::vector<int16_t> values, shadow;
  std::vector<uint8_t> flags, signedness;
  int64_t shadow_row = -1;
  bool shadow_signed = false;
};

// A random skewed stream: each cycle an unskewed vector (random validity, a rare kSwitch, one
// signedness), row k taking the vector of k cycles ago; a random shadow row write half the time.
class RandomStream {
 public:
  RandomStream(unsigned rows, unsigned cols, uint32_t seed) : rows_(rows), cols_(cols), rng_(seed) {}
  StepInputs next() {
    Vector v;
    v.is_signed = rng_() & 1;
    v.flags = static_cast<uint8_t>((rng_() % 8 != 0 ? V : 0) | (rng_() % 16 == 0 ? S : 0));
    for (unsigned k = 0; k < rows_; ++k) v.values.push_back(random_operand(v.is_signed, rng_));
    history_.push_front(std::move(v));
    if (history_.size() > rows_) history_.pop_back();
    StepInputs in;
    for (unsigned k = 0; k < rows_; ++k) {
      const bool have = k < history_.size();
      in.values.push_back(have ? history_[k].values[k] : 0);
      in.flags.push_back(have ? history_[k].flags : 0);
      in.signedness.push_back(have ? history_[k].is_signed : 0);
    }
    if (rng_() & 1) {
      in.shadow_row = rng_() % rows_;
      in.shadow_signed = rng_() & 1;
      for (unsigned j = 0; j < cols_; ++j) in.shadow.push_back(random_operand(in.shadow_signed, rng_));
    }
    return in;
  }
  void reset() { history_.clear(); }

 private:
  struct Vector {
    std::vector<int16_t> values;
    uint8_t flags = 0;
    bool is_signed = false;
  };
  unsigned rows_, cols_;
  std::mt19937 rng_;
  std::deque<Vector> history_;
};

// Every register both models expose, compared; returns a description of the first difference.
template <class Model>
std::string first_difference(hw::RtlArray<Model>& rtl, const SystolicArray& ref) {
  for (unsigned j = 0; j < rtl.cols(); ++j)
    if (rtl.bottom(j) != ref.bottom()[j] || rtl.bottom_valid(j) != ref.bottom_valid()[j])
      return fmt::format("bottom[{}]: rtl {} valid {}, model {} valid {}", j, rtl.bottom(j), rtl.bottom_valid(j),
                         ref.bottom()[j], ref.bottom_valid()[j]);
  // any_valid is what co-simulation reads for empty() (hw/cosim_array.h).
  if (rtl.any_valid() != !ref.empty())
    return fmt::format("any_valid: rtl {}, model empty() {}", rtl.any_valid(), ref.empty());
  if (rtl.shift_pending() != ref.shift_pending())
    return fmt::format("shift_pending: rtl {}, model {}", rtl.shift_pending(), ref.shift_pending());
  for (unsigned k = 0; k < rtl.rows(); ++k)
    for (unsigned j = 0; j < rtl.cols(); ++j) {
      if (rtl.psum(k, j) != ref.psum(k, j))
        return fmt::format("psum({}, {}): rtl {}, model {}", k, j, rtl.psum(k, j), ref.psum(k, j));
      if (rtl.weight(k, j) != ref.weight(k, j))
        return fmt::format("weight({}, {}): rtl {}, model {}", k, j, rtl.weight(k, j), ref.weight(k, j));
      if (rtl.shadow(k, j) != ref.shadow(k, j))
        return fmt::format("shadow({}, {}): rtl {}, model {}", k, j, rtl.shadow(k, j), ref.shadow(k, j));
    }
  return {};
}

// `cycles` cycles of a random stream through both models (a reset of both every ~1000 cycles).
// skewed: both shift by column (set_skewed_shift), where a shadow row given every other cycle
// leaves writes of several rows in flight at once.
template <class Model>
void compare_with_model(unsigned rows, unsigned cols, uint64_t cycles, uint32_t seed, bool skewed = false,
                        hw::Tracer* tracer = nullptr) {
  VerilatedContext context;
  hw::RtlArray<Model> rtl(context, rows, cols);
  rtl.set_skewed_shift(skewed);
  rtl.trace_to(tracer);
  SystolicArray ref(rows, cols, skewed);
  RandomStream stream(rows, cols, seed);
  std::mt19937 rng(seed + 1);
  uint64_t mismatches = 0;
  for (uint64_t c = 0; c < cycles; ++c) {
    if (rng() % 1000 == 0) {
      rtl.reset_all();
      ref.reset();
      stream.reset();
    } else {
      const StepInputs in = stream.next();
      rtl.step(in.values, in.flags, in.signedness, in.shadow_row, in.shadow, in.shadow_signed);
      ref.step(in.values, in.flags, in.shadow_row, in.shadow);
    }
    const std::string diff = first_difference(rtl, ref);
    if (!diff.empty() && ++mismatches <= 5) FAIL_CHECK("cycle " << c << ": " << diff);
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("4x4 array matches SystolicArray every cycle (TPUSIM_VCD writes a trace)") {
  std::unique_ptr<VcdTracer> tracer;
  if (const char* path = std::getenv("TPUSIM_VCD")) {
    Verilated::traceEverOn(true);
    tracer = std::make_unique<VcdTracer>();
    // The model must exist before trace(): trace a separate short run.
    VerilatedContext context;
    context.traceEverOn(true);
    hw::RtlArray<Vsa4x4> rtl(context, 4, 4);
    rtl.model().trace(&tracer->vcd, 99);
    tracer->vcd.open(path);
    rtl.trace_to(tracer.get());
    RandomStream stream(4, 4, 7);
    for (int c = 0; c < 200; ++c) {
      const StepInputs in = stream.next();
      rtl.step(in.values, in.flags, in.signedness, in.shadow_row, in.shadow, in.shadow_signed);
    }
    tracer.reset();
    WARN("wrote a VCD of 200 cycles of the 4x4 array to " << path);
  }
  compare_with_model<Vsa4x4>(4, 4, 20000, 11);
}
TEST_CASE("8x8 array matches SystolicArray every cycle") { compare_with_model<Vsa8x8>(8, 8, 20000, 12); }
TEST_CASE("16x16 array matches SystolicArray every cycle") { compare_with_model<Vsa16x16>(16, 16, 10000, 13); }
TEST_CASE("4x8 array matches SystolicArray every cycle") { compare_with_model<Vsa4x8>(4, 8, 20000, 14); }
TEST_CASE("4x4 array with the skewed shift matches SystolicArray every cycle") {
  compare_with_model<Vsa4x4>(4, 4, 20000, 21, true);
}
TEST_CASE("8x8 array with the skewed shift matches SystolicArray every cycle") {
  compare_with_model<Vsa8x8>(8, 8, 20000, 22, true);
}
TEST_CASE("16x16 array with the skewed shift matches SystolicArray every cycle") {
  compare_with_model<Vsa16x16>(16, 16, 10000, 23, true);
}
TEST_CASE("4x8 array with the skewed shift matches SystolicArray every cycle") {
  compare_with_model<Vsa4x8>(4, 8, 20000, 24, true);
}

TEST_CASE("systolic data setup delays row k by k cycles") {
  constexpr unsigned kRows = 8, kWidth = 11;
  VerilatedContext context;
  Vsetup8 setup(&context);
  hw::reset(setup);
  std::mt19937 rng(3);
  std::vector<std::vector<uint32_t>> sent;  // sent[t][k]
  uint64_t mismatches = 0;
  for (unsigned t = 0; t < 500; ++t) {
    sent.emplace_back();
    for (unsigned k = 0; k < kRows; ++k) {
      sent[t].push_back(rng() & ((1u << kWidth) - 1));
      hw::set_bits(setup.in, k * kWidth, kWidth, sent[t][k]);
    }
    setup.clk = 0;
    setup.eval();  // row 0 passes through in the same cycle
    for (unsigned k = 0; k < kRows; ++k) {
      const uint32_t want = t >= k ? sent[t - k][k] : 0;  // zeros from the reset before
      if (hw::get_bits(setup.out, k * kWidth, kWidth) != want && ++mismatches <= 5)
        FAIL_CHECK("cycle " << t << " row " << k);
    }
    hw::tick(setup);
  }
  CHECK(mismatches == 0);
}

namespace {

// One matmul as the control unit issues it: tile row r is written into shadow row r at cycle
// shadow_start + r; vector i enters (row 0 of) the array at cycle t0 + i, kSwitch on vector 0.
struct Matmul {
  Matrix16 tile, vectors;  // rows x cols W[k][j]; B x rows x_i[k]
  bool tile_signed, x_signed;
  int64_t shadow_start, t0;
};

// The plainest loops: y_i[j] = sum_k x_i[k] * W[k][j], modulo 2^32.
Matrix32 reference(const Matmul& mm) {
  Matrix32 y(mm.vectors.size(), std::vector<int32_t>(mm.tile[0].size()));
  for (size_t i = 0; i < mm.vectors.size(); ++i)
    for (size_t j = 0; j < mm.tile[0].size(); ++j) {
      int64_t sum = 0;
      for (size_t k = 0; k < mm.tile.size(); ++k) sum += int64_t{mm.vectors[i][k]} * mm.tile[k][j];
      y[i][j] = static_cast<int32_t>(sum);
    }
  return y;
}

Matmul random_matmul(unsigned rows, unsigned cols, unsigned batch, bool tile_signed, bool x_signed,
                     int64_t shadow_start, int64_t t0, std::mt19937& rng) {
  Matmul mm{Matrix16(rows, std::vector<int16_t>(cols)), Matrix16(batch, std::vector<int16_t>(rows)),
            tile_signed, x_signed, shadow_start, t0};
  for (auto& row : mm.tile)
    for (auto& w : row) w = random_operand(tile_signed, rng);
  for (auto& v : mm.vectors)
    for (auto& x : v) x = random_operand(x_signed, rng);
  return mm;
}

}  // namespace

// 8x8: tile A switched in by matmul 1 (int8 x int8); tile B (uint8 weights) shifts into the shadow
// while matmul 1 runs, from cycle t0 + cols on (after A's switch wavefront has left each row:
// row r is read by the switch until t0 + r + cols - 1, written at t0 + cols + r), and matmul 2
// (uint8 inputs) switches to it: t0_2 = 20 > shadow_start_B + r - r = 16 for every row r.
// Unskewed vectors go through the Verilated setup into the array; results are read from the bottom
// row after cycle t0 + i + (rows - 1) + j.
TEST_CASE("two matmuls with a tile switch in the middle, through the setup, match plain loops") {
  constexpr unsigned n = 8, m = 8;
  std::mt19937 rng(5);
  const std::vector<Matmul> mms = {random_matmul(n, m, 12, true, true, 0, 8, rng),
                                   random_matmul(n, m, 10, false, false, 16, 20, rng)};
  VerilatedContext context;
  Vsetup8 setup(&context);
  hw::reset(setup);
  hw::RtlArray<Vsa8x8> array(context, n, m);
  std::vector<Matrix32> got;
  for (const Matmul& mm : mms) got.emplace_back(mm.vectors.size(), std::vector<int32_t>(m, 0));
  const int64_t end = 20 + 10 + n + m;
  std::vector<int16_t> shadow(m), none(n);
  std::vector<uint8_t> no_flags(n), no_sign(n);
  for (int64_t c = 0; c <= end; ++c) {
    // The setup's inputs: {switch, valid, signed, value[7:0]} per row, unskewed.
    setup.in = {};
    int64_t shadow_row = -1;
    bool shadow_signed = false;
    for (const Matmul& mm : mms) {
      if (c >= mm.shadow_start && c < mm.shadow_start + n) {
        shadow_row = c - mm.shadow_start;
        shadow = mm.tile[shadow_row];
        shadow_signed = mm.tile_signed;
      }
      const int64_t i = c - mm.t0;
      if (i < 0 || i >= static_cast<int64_t>(mm.vectors.size())) continue;
      for (unsigned k = 0; k < n; ++k) {
        const uint32_t word = static_cast<uint8_t>(mm.vectors[i][k]) | (uint32_t{mm.x_signed} << 8) | (1u << 9) |
                              (uint32_t{i == 0} << 10);
        hw::set_bits(setup.in, k * 11, 11, word);
      }
    }
    setup.clk = 0;
    setup.eval();
    Vsa8x8& a = array.model();
    array.drive(none, no_flags, no_sign, shadow_row, shadow, shadow_signed);
    for (unsigned k = 0; k < n; ++k) {  // the setup's outputs are the array's left inputs
      const uint32_t word = hw::get_bits(setup.out, k * 11, 11);
      hw::set_bits(a.left_value, 8 * k, 8, word & 0xff);
      hw::set_bits(a.left_signed, k, 1, (word >> 8) & 1);
      hw::set_bits(a.left_valid, k, 1, (word >> 9) & 1);
      hw::set_bits(a.left_switch, k, 1, (word >> 10) & 1);
    }
    hw::tick(setup);
    hw::tick(a);
    for (size_t x = 0; x < mms.size(); ++x)
      for (unsigned j = 0; j < m; ++j) {
        const int64_t i = c - mms[x].t0 - (n - 1) - j;
        if (i < 0 || i >= static_cast<int64_t>(mms[x].vectors.size())) continue;
        CHECK(array.bottom_valid(j) == 1);
        got[x][i][j] = array.bottom(j);
      }
  }
  for (size_t x = 0; x < mms.size(); ++x) CHECK(got[x] == reference(mms[x]));
}
