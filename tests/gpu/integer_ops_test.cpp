// The runner's integer arithmetic (gpu/integer_ops.h) against the simulator's scalar functions
// (sim/state.h), which define the machine: exhaustive where the domain is small, random where not.
#include "gpu/integer_ops.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "gpu/plan.h"
#include "gpu/requantize_clamp.h"
#include "sim/state.h"

using namespace tpusim;
using gpu::OutputTable;

TEST_CASE("round_half_away_shift equals the simulator's for every shift", "[gpu][integer]") {
  std::mt19937_64 rng(3);
  std::vector<int64_t> xs = {0,
                             1,
                             -1,
                             2,
                             -2,
                             3,
                             -3,
                             127,
                             -128,
                             (int64_t{1} << 48) - 1,
                             -(int64_t{1} << 48),
                             (int64_t{1} << 62),
                             -(int64_t{1} << 62),
                             INT64_MAX,
                             INT64_MIN + 1};
  for (int i = 0; i < 2000; ++i) xs.push_back(static_cast<int64_t>(rng() >> (rng() % 63)) * (i % 2 ? 1 : -1));
  for (unsigned shift = 0; shift <= 63; ++shift)
    for (int64_t x : xs) {
      INFO("x " << x << " shift " << shift);
      REQUIRE(gpu::round_half_away_shift(x, shift) == sim::round_half_away_shift(x, shift));
    }
  // Halves round away from zero: 3/2 -> 2, -3/2 -> -2, 5/4 -> 1, -6/4 -> -2.
  STATIC_REQUIRE(gpu::round_half_away_shift(3, 1) == 2);
  STATIC_REQUIRE(gpu::round_half_away_shift(-3, 1) == -2);
  STATIC_REQUIRE(gpu::round_half_away_shift(5, 2) == 1);
  STATIC_REQUIRE(gpu::round_half_away_shift(-6, 2) == -2);
}

TEST_CASE("the output table applies every function exactly as apply_func", "[gpu][integer]") {
  // The table is indexed by y clamped to the curves' input range [-2048, 2047]: exact because
  // sigmoid and tanh are flat beyond it at int8 precision, and the other functions are clamps.
  std::vector<int64_t> ys;
  for (int64_t y = -5000; y <= 5000; ++y) ys.push_back(y);
  for (int64_t y : {int64_t{1} << 40, -(int64_t{1} << 40), int64_t{INT32_MAX}, int64_t{INT32_MIN}})
    ys.push_back(y);
  for (isa::Func f :
       {isa::Func::identity, isa::Func::relu, isa::Func::relux, isa::Func::sigmoid, isa::Func::tanh})
    for (int clip : {0, 1, 6, 100, 127, 128, 200, 255}) {
      const OutputTable t = gpu::output_table(f, static_cast<uint8_t>(clip));
      for (int64_t y : ys) {
        INFO("func " << int(f) << " clip " << clip << " y " << y);
        REQUIRE(gpu::apply_output(t, y) == sim::apply_func(f, y, clip, false));
      }
    }
}

TEST_CASE("requantize is the golden reference's column arithmetic", "[gpu][integer]") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> acc(INT32_MIN, INT32_MAX), bias(-100000, 100000);
  std::uniform_int_distribution<uint32_t> mult(0, 65535), shift(0, 63);
  for (isa::Func f : {isa::Func::identity, isa::Func::relux, isa::Func::tanh}) {
    const OutputTable t = gpu::output_table(f, 6);
    for (int i = 0; i < 20000; ++i) {
      const gpu::ColumnQuant q{bias(rng), mult(rng), shift(rng)};
      const int32_t a = i % 3 ? acc(rng) % 100000 : acc(rng);
      // compiler/golden.cpp, Golden::exec(MatmulOp): x = acc + bias in 64 bits, x mult, shift, func.
      const int64_t x = int64_t{a} + q.bias;
      const auto want = static_cast<int8_t>(sim::apply_func(
          f, sim::round_half_away_shift(x * static_cast<int64_t>(q.mult), q.shift), 6, false));
      INFO("acc " << a << " bias " << q.bias << " mult " << q.mult << " shift " << q.shift);
      REQUIRE(gpu::requantize(a, q, t) == want);
    }
  }
}

TEST_CASE("vector elements and pool averages follow docs/isa.md", "[gpu][integer]") {
  const OutputTable id = gpu::output_table(isa::Func::identity, 127);
  for (int a = -128; a < 128; a += 3)
    for (int b = -128; b < 128; b += 5)
      for (uint32_t op = 0; op <= 5; ++op) {
        const int32_t r = op == 0   ? a + b
                          : op == 1 ? a - b
                          : op == 2 ? a * b
                          : op == 3 ? std::max(a, b)
                          : op == 4 ? std::min(a, b)
                                    : a;
        const auto want = static_cast<int8_t>(
            sim::apply_func(isa::Func::identity, sim::round_half_away_shift(int64_t{r} * 3, 2), 127, false));
        REQUIRE(gpu::vector_element(op, static_cast<int8_t>(a), static_cast<int8_t>(b), 3, 2, id) == want);
      }
  // sum / size rounded half away from zero: 6/4 -> 2, -6/4 -> -2, 5/4 -> 1, -5/4 -> -1, 2/4 -> 1.
  STATIC_REQUIRE(gpu::pool_average(6, 4) == 2);
  STATIC_REQUIRE(gpu::pool_average(-6, 4) == -2);
  STATIC_REQUIRE(gpu::pool_average(5, 4) == 1);
  STATIC_REQUIRE(gpu::pool_average(-5, 4) == -1);
  STATIC_REQUIRE(gpu::pool_average(2, 4) == 1);
  STATIC_REQUIRE(gpu::pool_average(-128 * 9, 9) == -128);
}

TEST_CASE("GEMM dimensions round up to multiples of 4", "[gpu][integer]") {
  STATIC_REQUIRE(gpu::round_up4(0) == 0);
  STATIC_REQUIRE(gpu::round_up4(1) == 4);
  STATIC_REQUIRE(gpu::round_up4(4) == 4);
  STATIC_REQUIRE(gpu::round_up4(5) == 8);
  STATIC_REQUIRE(gpu::round_up4(1000) == 1000);
  STATIC_REQUIRE(gpu::round_up4(1001) == 1004);
}

// The CPU runner's double-precision requantization (gpu/requantize_clamp.h) against the integer
// one for every clamp function, shifts 0 to 52, extreme and random accumulators, biases and
// multipliers: bit for bit.
TEST_CASE("requantize_clamp equals requantize for clamp tables and shifts up to 52", "[integer_ops]") {
  std::mt19937_64 rng(15);
  std::uniform_int_distribution<int32_t> any32(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<uint32_t> mult16(1, 65535);
  const std::vector<std::pair<tpusim::isa::Func, uint8_t>> funcs = {{tpusim::isa::Func::identity, 127},
                                                                    {tpusim::isa::Func::relu, 127},
                                                                    {tpusim::isa::Func::relux, 6},
                                                                    {tpusim::isa::Func::relux, 100}};
  uint64_t checked = 0;
  for (const auto& [func, clip] : funcs) {
    const gpu::OutputTable table = gpu::output_table(func, clip);
    const auto clamp = gpu::table_clamp(table);
    REQUIRE(clamp);
    for (uint32_t shift = 0; shift <= gpu::kMaxClampShift; ++shift)
      for (int i = 0; i < 400; ++i) {
        const gpu::ColumnQuant q{i % 7 == 0 ? INT32_MIN : any32(rng), i % 5 == 0 ? 65535u : mult16(rng),
                                 shift};
        // Around the rounding points of this shift too: acc + bias = (2k + 1) x 2^(shift-1) / mult.
        int32_t acc = i % 3 == 0 ? any32(rng) : (i % 3 == 1 ? INT32_MAX : int32_t(any32(rng) >> 8));
        const double scale = std::ldexp(double(q.mult), -int(shift));
        REQUIRE(int(gpu::requantize_clamp(acc, double(q.bias), scale, clamp->first, clamp->second)) ==
                int(gpu::requantize(acc, q, table)));
        ++checked;
      }
  }
  // Exact halves: (acc + bias) x mult = (2k + 1) x 2^(shift - 1) rounds away from zero.
  const gpu::OutputTable identity = gpu::output_table(tpusim::isa::Func::identity, 127);
  for (uint32_t shift = 1; shift <= 20; ++shift)
    for (int k = -130; k <= 130; ++k) {
      const int64_t x = (2 * int64_t(k) + 1) << (shift - 1);
      if (x < INT32_MIN || x > INT32_MAX) continue;
      const gpu::ColumnQuant q{0, 1, shift};
      REQUIRE(int(gpu::requantize_clamp(int32_t(x), 0, std::ldexp(1.0, -int(shift)), -128, 127)) ==
              int(gpu::requantize(int32_t(x), q, identity)));
    }
  CHECK(checked == 4 * 53 * 400);
  CHECK_FALSE(gpu::table_clamp(gpu::output_table(tpusim::isa::Func::sigmoid, 127)));
  CHECK_FALSE(gpu::table_clamp(gpu::output_table(tpusim::isa::Func::tanh, 127)));
}
