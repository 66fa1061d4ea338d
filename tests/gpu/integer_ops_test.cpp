// The runner's integer arithmetic (gpu/integer_ops.h) against the simulator's scalar functions
// (sim/state.h), which define the machine: exhaustive where the domain is small, random where not.
#include <catch2/catch.hpp>
#include <random>

#include "gpu/integer_ops.h"
#include "gpu/plan.h"
#include "sim/state.h"

using namespace tpusim;
using gpu::OutputTable;

TEST_CASE("round_half_away_shift equals the simulator's for every shift", "[gpu][integer]") {
  std::mt19937_64 rng(3);
  std::vector<int64_t> xs = {0, 1, -1, 2, -2, 3, -3, 127, -128, (int64_t{1} << 48) - 1, -(int64_t{1} << 48),
                             (int64_t{1} << 62), -(int64_t{1} << 62), INT64_MAX, INT64_MIN + 1};
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

TEST_CASE("a 256-entry output table applies every function exactly as apply_func", "[gpu][integer]") {
  // The table is indexed by y clamped to int8: exact because sigmoid and tanh are flat beyond
  // int8's range at int8 precision, and the other functions are clamps.
  std::vector<int64_t> ys;
  for (int64_t y = -5000; y <= 5000; ++y) ys.push_back(y);
  for (int64_t y : {int64_t{1} << 40, -(int64_t{1} << 40), int64_t{INT32_MAX}, int64_t{INT32_MIN}}) ys.push_back(y);
  for (isa::Func f : {isa::Func::identity, isa::Func::relu, isa::Func::relux, isa::Func::sigmoid, isa::Func::tanh})
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
      const auto want = static_cast<int8_t>(
          sim::apply_func(f, sim::round_half_away_shift(x * static_cast<int64_t>(q.mult), q.shift), 6, false));
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
        const int32_t r = op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : op == 3 ? std::max(a, b)
                        : op == 4 ? std::min(a, b) : a;
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
