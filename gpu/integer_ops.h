// The machine's integer arithmetic as the GPU runner applies it, in constexpr functions on plain
// values so that one definition serves the CUDA kernels (gpu/device.cu, compiled with
// --expt-relaxed-constexpr) and the host model of the runner (gpu/host_exec.cpp) that the CPU
// tests hold against the golden reference executor (compiler/golden.cpp).
//
// Semantics (docs/isa.md act, vec, pool; sim/state.h):
//   requantize: y = round_half_away((acc + bias) x mult / 2^shift), computed in 64 bits;
//   then func with saturation to int8, which here is one table lookup of y clamped to the
//   curves' input range [isa::kCurveInputMin, isa::kCurveInputMax] = [-2048, 2047] (OutputTable,
//   built on the host from sim::apply_func: exact for every func, as sigmoid and tanh are flat
//   beyond that range and the other functions saturate inside it; see gpu/plan.cpp and
//   tests/gpu/integer_ops_test.cpp);
//   pool avg: the window's sum divided by window^2, rounded half away from zero.
#pragma once

#include "isa/table.h"

#include <cstdint>

namespace tpusim::gpu {

// round_half_away(x / 2^shift) for shift <= 63, without the 128-bit intermediate of
// sim::round_half_away_shift: floor(|x| / 2^s + 1/2) = (|x| >> s) + bit s-1 of |x|.
constexpr int64_t round_half_away_shift(int64_t x, unsigned shift) {
  if (shift == 0) return x;
  const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const uint64_t q = (mag >> shift) + ((mag >> (shift - 1)) & 1u);
  return x < 0 ? -static_cast<int64_t>(q) : static_cast<int64_t>(q);
}

// apply_func(func, y, clip, false) for every y, given value[b - kLo] = apply_func(func, b, clip,
// false) for b in [kLo, kHi].
struct OutputTable {
  static constexpr int64_t kLo = isa::kCurveInputMin, kHi = isa::kCurveInputMax;
  static constexpr unsigned kSize = unsigned(kHi - kLo + 1);
  int8_t value[kSize];
};
constexpr int8_t apply_output(const OutputTable& table, int64_t y) {
  const int64_t c = y < OutputTable::kLo ? OutputTable::kLo : (y > OutputTable::kHi ? OutputTable::kHi : y);
  return table.value[c - OutputTable::kLo];
}

// One output column's requantization (a MatmulOp's bias, mult and shift for column j).
struct ColumnQuant {
  int32_t bias = 0;
  uint32_t mult = 1;  // <= 65535
  uint32_t shift = 0; // <= 63
};

// acc is the int32 accumulator (wrapped), as the GEMM leaves it.
constexpr int8_t requantize(int32_t acc, const ColumnQuant& q, const OutputTable& table) {
  const int64_t x = (static_cast<int64_t>(acc) + q.bias) * static_cast<int64_t>(q.mult);
  return apply_output(table, round_half_away_shift(x, q.shift));
}

// vec (isa::VecOp values: add 0, sub 1, mul 2, max 3, min 4, pass 5) on int8 operands in int32.
static_assert(uint32_t(isa::VecOp::add) == 0 && uint32_t(isa::VecOp::sub) == 1 && uint32_t(isa::VecOp::mul) == 2 &&
                  uint32_t(isa::VecOp::max) == 3 && uint32_t(isa::VecOp::min) == 4 && uint32_t(isa::VecOp::pass) == 5,
              "vector_op's cases are the ISA table's VecOp values");
constexpr int32_t vector_op(uint32_t op, int32_t a, int32_t b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a > b ? a : b;
    case 4: return a < b ? a : b;
    default: return a;
  }
}
constexpr int8_t vector_element(uint32_t op, int8_t a, int8_t b, uint32_t mult, uint32_t shift,
                                const OutputTable& table) {
  const int64_t r = vector_op(op, a, b);
  return apply_output(table, round_half_away_shift(r * static_cast<int64_t>(mult), shift));
}

// pool avg: round_half_away(sum / size) for size > 0.
constexpr int8_t pool_average(int64_t sum, int64_t size) {
  const int64_t q = (2 * (sum < 0 ? -sum : sum) + size) / (2 * size);
  return static_cast<int8_t>(sum < 0 ? -q : q);
}

// x rounded up to a multiple of 4 (cuBLASLt's int8 GEMM on Hopper needs m, k and every leading
// dimension to be multiples of 4: BUILD-NOTES.md).
constexpr uint64_t round_up4(uint64_t x) { return (x + 3) / 4 * 4; }

}  // namespace tpusim::gpu
