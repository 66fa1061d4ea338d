// The activation unit's arithmetic (activation_math.h), and round_half_away_shift and apply_func
// (state.h), which state it one element at a time.
//
// act and vec hoist everything that depends only on the instruction out of the element loops,
// which are branch-free so that they vectorise; they are compiled for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2) and baseline x86-64, chosen when the program loads. Integer arithmetic
// throughout, so every version gives the same bytes as the scalar functions.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "sim/activation_math.h"
#include "sim/state.h"
#include "sim/target_clones.h"

namespace tpusim::sim {

// Defining TPUSIM_ACT_PORTABLE compiles the loops for the compiler's target only (to test that
// code).
#if TPUSIM_HAS_CLONES && !defined(TPUSIM_ACT_PORTABLE)
#define TPUSIM_ACT_CLONES TPUSIM_CLONES
#else
#define TPUSIM_ACT_CLONES
#endif
#define TPUSIM_ACT_INLINE [[gnu::always_inline]] inline

namespace {

using u128 = unsigned __int128;

// 127 * f(y / 256) rounded half away from zero (docs/isa.md, func), for y in the curves' input
// range [kCurveInputMin, kCurveInputMax] = [-2048, 2047], i.e. |y / 256| <= 8 (beyond that both
// curves are flat at int8 precision: 127 / (1 + e^8) rounds to 0, 127 tanh(8) to 127; a test
// checks). Tabulated once so every engine and every call gives identical bytes.
constexpr int64_t kCurveLo = isa::kCurveInputMin, kCurveHi = isa::kCurveInputMax;
constexpr size_t kCurveSize = size_t(kCurveHi - kCurveLo + 1);
constexpr double kCurveOne = double(int64_t{1} << isa::kCurveFractionBits);
struct Curves {
  std::array<int16_t, kCurveSize> sigmoid, tanh;
  Curves() {
    for (int64_t y = kCurveLo; y <= kCurveHi; ++y) {
      const double x = double(y) / kCurveOne;
      sigmoid[size_t(y - kCurveLo)] = static_cast<int16_t>(std::lround(127.0 / (1.0 + std::exp(-x))));
      tanh[size_t(y - kCurveLo)] = static_cast<int16_t>(std::lround(127.0 * std::tanh(x)));
    }
  }
};

const Curves& curves() {
  static const Curves c;
  return c;
}

// The 16-bit curves (docs/isa.md, func): round(32767 f(y / 256)) for y in [kCurve16InputMin,
// kCurve16InputMax] = [-4096, 4095], |y / 256| <= 16 (32767 / (1 + e^16) rounds to 0 and
// 32767 tanh(16) to 32767; a test checks).
constexpr int64_t kCurve16Lo = isa::kCurve16InputMin, kCurve16Hi = isa::kCurve16InputMax;
constexpr size_t kCurve16Size = size_t(kCurve16Hi - kCurve16Lo + 1);
struct Curves16 {
  std::array<int16_t, kCurve16Size> sigmoid, tanh;
  Curves16() {
    const double one = double(isa::kCurve16One);
    for (int64_t y = kCurve16Lo; y <= kCurve16Hi; ++y) {
      const double x = double(y) / kCurveOne;
      sigmoid[size_t(y - kCurve16Lo)] = static_cast<int16_t>(std::lround(one / (1.0 + std::exp(-x))));
      tanh[size_t(y - kCurve16Lo)] = static_cast<int16_t>(std::lround(one * std::tanh(x)));
    }
  }
};

const Curves16& curves16() {
  static const Curves16 c;
  return c;
}

int64_t curve(const std::array<int16_t, kCurveSize>& table, int64_t y) {
  return table[static_cast<size_t>(std::clamp(y, kCurveLo, kCurveHi) - kCurveLo)];
}

// The loops clamp y to the curves' input range and translate it through a table of bytes:
// [y - kCurveLo] = apply_func(f, y, 127, unsigned).
using CurveTable = std::array<uint8_t, kCurveSize>;
const CurveTable& curve_bytes(isa::Func f, bool out_unsigned) {
  static const std::array<CurveTable, 4> tables = [] {  // sigmoid, tanh; each int8 then uint8
    std::array<CurveTable, 4> t;
    for (size_t k = 0; k < t.size(); ++k)
      for (int64_t y = kCurveLo; y <= kCurveHi; ++y)
        t[k][size_t(y - kCurveLo)] = static_cast<uint8_t>(
            apply_func(k < 2 ? isa::Func::sigmoid : isa::Func::tanh, y, 127, k % 2 != 0));
    return t;
  }();
  return tables[2 * (f == isa::Func::tanh) + out_unsigned];
}

// What follows requantization: y is clamped to [lo, hi] and then either stored as a byte
// (identity, relu, relux: the clamp is the function and the saturation) or, for sigmoid and
// tanh ([lo, hi] the curves' input range), translated through `table` (curve_bytes).
struct Output {
  int64_t lo, hi;
  const uint8_t* table;  // nullptr for identity, relu, relux
};

// apply_func(f, y, clip, out_unsigned) as an Output.
Output output_of(isa::Func f, int64_t clip, bool out_unsigned) {
  const int64_t top = out_unsigned ? 255 : 127;
  switch (f) {
    case isa::Func::identity: return {out_unsigned ? 0 : -128, top, nullptr};
    case isa::Func::relu: return {0, top, nullptr};
    case isa::Func::relux: return {0, std::min(clip, top), nullptr};  // clip >= 0
    case isa::Func::sigmoid:
    case isa::Func::tanh: break;
  }
  return {kCurveLo, kCurveHi, curve_bytes(f, out_unsigned).data()};
}

// round_half_away(p / 2^shift) for |p| < 2^49 and shift <= 50, given p2 = 2p, half2 = 2^shift
// and shift1 = shift + 1: floor((2p + 2^shift - [p < 0]) / 2^(shift + 1)). For p >= 0 that is
// floor(p / 2^shift + 1/2); for p < 0 it is ceil((2p - 2^shift) / 2^(shift + 1)), i.e.
// -floor(|p| / 2^shift + 1/2). No intermediate reaches 2^51. Every shift above 50 rounds
// |p| < 2^49 to 0, as 50 does: callers cap the shift at kMaxShift.
constexpr unsigned kMaxShift = 50;
TPUSIM_ACT_INLINE int64_t round_doubled(int64_t p2, int64_t half2, uint64_t shift1) {
  return (p2 + half2 + (p2 >> 63)) >> shift1;
}

// Per-tensor act: round_half_away(x * mult / 2^shift) with |x * mult| < 2^47, then `out`.
struct ActKernel {
  int32_t mult2;  // 2 * mult
  int64_t half2;  // 2^shift
  uint64_t shift1;
  Output out;
};

ActKernel act_kernel(uint64_t mult, uint64_t shift, Output out) {
  const uint64_t s = std::min<uint64_t>(shift, kMaxShift);
  return {static_cast<int32_t>(2 * mult), int64_t{1} << s, s + 1, out};
}

// One row of m elements, before any table.
TPUSIM_ACT_INLINE void act_row(const int32_t* __restrict x, uint8_t* __restrict out, uint64_t m,
                               int32_t mult2, int64_t half2, uint64_t shift1, int64_t lo, int64_t hi) {
  for (uint64_t c = 0; c < m; ++c)
    out[c] = static_cast<uint8_t>(std::clamp(round_doubled(int64_t{x[c]} * mult2, half2, shift1), lo, hi));
}

// `rows` accumulator rows of m values from x (consecutive) to UB rows `width` bytes apart from
// ub, before any table, each zero-filled from byte m.
TPUSIM_ACT_CLONES void act_rows_clamped(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m,
                                        uint64_t width, const ActKernel& k) {
  const int32_t mult2 = k.mult2;
  const int64_t half2 = k.half2, lo = k.out.lo, hi = k.out.hi;
  const uint64_t shift1 = k.shift1;
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    act_row(x, ub, m, mult2, half2, shift1, lo, hi);
  }
}

// Per-column act (perchan): round_half_away((x + bias[c]) * mult[c] / 2^shift[c]) with
// |p| < 2^48, in the form round_doubled takes.
struct ColumnKernel {
  std::vector<int64_t> bias, mult2, half2;
  std::vector<uint64_t> shift1;
};

ColumnKernel column_kernel(std::span<const activation::Column> columns) {
  const size_t m = columns.size();
  ColumnKernel q{std::vector<int64_t>(m), std::vector<int64_t>(m), std::vector<int64_t>(m),
                 std::vector<uint64_t>(m)};
  for (size_t c = 0; c < m; ++c) {
    const unsigned shift = std::min<unsigned>(columns[c].shift, kMaxShift);
    q.bias[c] = columns[c].bias;
    q.mult2[c] = 2 * int64_t{columns[c].mult};
    q.half2[c] = int64_t{1} << shift;
    q.shift1[c] = shift + 1;
  }
  return q;
}

// One row of m elements, before any table.
TPUSIM_ACT_INLINE void act_row_columns(const int32_t* __restrict x, uint8_t* __restrict out, uint64_t m,
                                       const int64_t* __restrict bias, const int64_t* __restrict mult2,
                                       const int64_t* __restrict half2, const uint64_t* __restrict shift1,
                                       int64_t lo, int64_t hi) {
  for (uint64_t c = 0; c < m; ++c)
    out[c] = static_cast<uint8_t>(
        std::clamp(round_doubled((x[c] + bias[c]) * mult2[c], half2[c], shift1[c]), lo, hi));
}

// act_rows_clamped with per-column parameters.
TPUSIM_ACT_CLONES void act_rows_columns_clamped(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m,
                                                uint64_t width, const ColumnKernel& q, Output out) {
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    act_row_columns(x, ub, m, q.bias.data(), q.mult2.data(), q.half2.data(), q.shift1.data(), out.lo, out.hi);
  }
}

// vec in int32: |op(a, b)| <= 2^14 and mult < 2^16, so |p| = |op(a, b) * mult| < 2^30, and
// round_half_away(p / 2^shift) = (p + half + (p < 0 ? neg : 0)) >> shift, with half = 2^(shift-1)
// and neg = -1 (both 0 for shift 0): for p < 0 that is floor((p + half - 1) / 2^shift) =
// -floor((|p| + half) / 2^shift). Every shift from 31 rounds p to 0, as mult 0 does: then mult 0.
struct VecKernel {
  int32_t mult, half, neg;
  uint32_t shift;
  int32_t lo, hi;
};

VecKernel vec_kernel(uint64_t mult, uint64_t shift, Output out) {
  const auto lo = static_cast<int32_t>(out.lo), hi = static_cast<int32_t>(out.hi);
  if (shift > 30) return {0, 0, 0, 0, lo, hi};
  const auto s = static_cast<uint32_t>(shift);
  return {static_cast<int32_t>(mult), s ? 1 << (s - 1) : 0, s ? -1 : 0, s, lo, hi};
}

template <isa::VecOp kOp>
TPUSIM_ACT_INLINE int32_t vec_op(int32_t a, int32_t b) {
  return vec_combine(kOp, a, b);  // kOp is a constant: the switch folds away
}

// out[i] = clamp(requantize(op(a[i], b[i]))) for i < n, before any table. out may be a or b but
// not otherwise overlap them, so no iteration depends on another. b is not read for pass.
template <isa::VecOp kOp>
TPUSIM_ACT_INLINE void vec_loop(const int8_t* a, const int8_t* b, uint8_t* out, uint64_t n, VecKernel k) {
#pragma GCC ivdep
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t p = vec_op<kOp>(a[i], kOp == isa::VecOp::pass ? 0 : b[i]) * k.mult;
    out[i] = static_cast<uint8_t>(std::clamp((p + k.half + ((p >> 31) & k.neg)) >> k.shift, k.lo, k.hi));
  }
}

TPUSIM_ACT_CLONES void vec_elements_clamped(isa::VecOp op, const uint8_t* a, const uint8_t* b, uint8_t* out,
                                            uint64_t n, const VecKernel& k) {
  const auto* sa = reinterpret_cast<const int8_t*>(a);
  const auto* sb = reinterpret_cast<const int8_t*>(b);
  switch (op) {
    case isa::VecOp::add: return vec_loop<isa::VecOp::add>(sa, sb, out, n, k);
    case isa::VecOp::sub: return vec_loop<isa::VecOp::sub>(sa, sb, out, n, k);
    case isa::VecOp::mul: return vec_loop<isa::VecOp::mul>(sa, sb, out, n, k);
    case isa::VecOp::max: return vec_loop<isa::VecOp::max>(sa, sb, out, n, k);
    case isa::VecOp::min: return vec_loop<isa::VecOp::min>(sa, sb, out, n, k);
    case isa::VecOp::pass: return vec_loop<isa::VecOp::pass>(sa, sb, out, n, k);
  }
}

// sigmoid and tanh: as the loops above, y clamped to the curves' input range and looked up in a
// table of 4096 bytes (a gather, which these plain loops leave to the compiler).
TPUSIM_ACT_CLONES void act_rows_curve(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m, uint64_t width,
                                      const ActKernel& k) {
  const Output& o = k.out;
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    for (uint64_t c = 0; c < m; ++c)
      ub[c] = o.table[std::clamp(round_doubled(int64_t{x[c]} * k.mult2, k.half2, k.shift1), o.lo, o.hi) - o.lo];
  }
}

TPUSIM_ACT_CLONES void act_rows_columns_curve(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m,
                                              uint64_t width, const ColumnKernel& q, Output o) {
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    for (uint64_t c = 0; c < m; ++c)
      ub[c] = o.table[std::clamp(round_doubled((x[c] + q.bias[c]) * q.mult2[c], q.half2[c], q.shift1[c]), o.lo,
                                 o.hi) -
                      o.lo];
  }
}

void vec_elements_curve(isa::VecOp op, const uint8_t* a, const uint8_t* b, uint8_t* out, uint64_t n,
                        const VecKernel& k, const uint8_t* table) {
  const auto* sa = reinterpret_cast<const int8_t*>(a);
  const auto* sb = reinterpret_cast<const int8_t*>(b);
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t p = vec_combine(op, sa[i], op == isa::VecOp::pass ? 0 : sb[i]) * k.mult;
    out[i] = table[std::clamp((p + k.half + ((p >> 31) & k.neg)) >> k.shift, k.lo, k.hi) - k.lo];
  }
}

// round_half_away(sum / d) for d > 0.
int64_t divide_half_away(int64_t sum, int64_t d) {
  const int64_t q = (2 * (sum < 0 ? -sum : sum) + d) / (2 * d);
  return sum < 0 ? -q : q;
}

}  // namespace

int32_t apply_func(isa::Func func, int64_t y, int64_t clip, bool out_unsigned) {
  switch (func) {
    case isa::Func::identity: break;
    case isa::Func::relu: y = std::max<int64_t>(y, 0); break;
    case isa::Func::relux: y = std::min(std::max<int64_t>(y, 0), clip); break;
    case isa::Func::sigmoid: y = curve(curves().sigmoid, y); break;
    case isa::Func::tanh: y = curve(curves().tanh, y); break;
  }
  return static_cast<int32_t>(out_unsigned ? std::clamp<int64_t>(y, 0, 255)
                                           : std::clamp<int64_t>(y, -128, 127));
}

int32_t apply_func16(isa::Func func, int64_t y, int64_t clip) {
  const auto curve16 = [&](const std::array<int16_t, kCurve16Size>& t) {
    return int64_t{t[static_cast<size_t>(std::clamp(y, kCurve16Lo, kCurve16Hi) - kCurve16Lo)]};
  };
  switch (func) {
    case isa::Func::identity: break;
    case isa::Func::relu: y = std::max<int64_t>(y, 0); break;
    case isa::Func::relux: y = std::min(std::max<int64_t>(y, 0), clip); break;
    case isa::Func::sigmoid: y = curve16(curves16().sigmoid); break;
    case isa::Func::tanh: y = curve16(curves16().tanh); break;
  }
  return static_cast<int32_t>(std::clamp<int64_t>(y, -32768, 32767));
}

namespace activation {

void act_rows16(const int32_t* x, uint8_t* lo, uint8_t* hi, uint64_t rows, uint64_t m, uint64_t width, uint64_t mult,
                uint64_t shift, std::span<const Column> columns, Function f) {
  for (uint64_t r = 0; r < rows; ++r, x += m, lo += width, hi += width)
    for (uint64_t c = 0; c < m; ++c) {
      const int64_t y = columns.empty()
                            ? round_half_away_shift(int64_t{x[c]} * int64_t(mult), unsigned(shift))
                            : round_half_away_shift((int64_t{x[c]} + columns[c].bias) * columns[c].mult,
                                                    columns[c].shift);
      const auto v = static_cast<uint16_t>(apply_func16(f.func, y, f.clip));
      lo[c] = static_cast<uint8_t>(v);
      hi[c] = static_cast<uint8_t>(v >> 8);
    }
}

void vec_elements16(isa::VecOp op, Operand16 a, Operand16 b, Result16 out, uint64_t n, uint64_t mult, uint64_t shift,
                    isa::Func func) {
  const auto value = [](const Operand16& o, uint64_t i) {
    return o.hi ? int32_t{o.lo[i]} + 256 * int32_t{static_cast<int8_t>(o.hi[i])} : int32_t{static_cast<int8_t>(o.lo[i])};
  };
  const bool pass = op == isa::VecOp::pass;
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t r = vec_combine(op, value(a, i), pass ? 0 : value(b, i));
    const int64_t y = round_half_away_shift(int64_t{r} * int64_t(mult), unsigned(std::min<uint64_t>(shift, 64)));
    if (out.hi) {
      const auto v = static_cast<uint16_t>(apply_func16(func, y, 127));
      out.lo[i] = static_cast<uint8_t>(v);
      out.hi[i] = static_cast<uint8_t>(v >> 8);
    } else {
      out.lo[i] = static_cast<uint8_t>(apply_func(func, y, 127, false));
    }
  }
}

void act_rows(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m, uint64_t width, uint64_t mult,
              uint64_t shift, Function f) {
  const Output out = output_of(f.func, f.clip, f.out_unsigned);
  if (out.table) return act_rows_curve(x, ub, rows, m, width, act_kernel(mult, shift, out));
  act_rows_clamped(x, ub, rows, m, width, act_kernel(mult, shift, out));
}

void act_rows_per_column(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t width,
                         std::span<const Column> columns, Function f) {
  const uint64_t m = columns.size();
  const Output out = output_of(f.func, f.clip, f.out_unsigned);
  if (out.table) return act_rows_columns_curve(x, ub, rows, m, width, column_kernel(columns), out);
  act_rows_columns_clamped(x, ub, rows, m, width, column_kernel(columns), out);
}

void vec_elements(isa::VecOp op, const uint8_t* a, const uint8_t* b, uint8_t* out, uint64_t n, uint64_t mult,
                  uint64_t shift, isa::Func func) {
  const Output o = output_of(func, 127, false);
  if (o.table) return vec_elements_curve(op, a, b, out, n, vec_kernel(mult, shift, o), o.table);
  vec_elements_clamped(op, a, b, out, n, vec_kernel(mult, shift, o));
}

void pool_window(std::span<const uint8_t* const> window, bool avg, uint8_t* out, uint64_t width) {
  // Max in int8, sums in int32 (at most 15 x 15 x 128 in magnitude): the loops vectorise.
  constexpr uint64_t kBlock = 256;
  std::array<int32_t, kBlock> v;
  for (uint64_t first = 0; first < width; first += kBlock) {
    const uint64_t n = std::min(kBlock, width - first);
    std::fill_n(v.begin(), n, avg ? 0 : -128);
    if (avg) {
      for (const uint8_t* row : window)
        for (uint64_t i = 0; i < n; ++i) v[i] += static_cast<int8_t>(row[first + i]);
      for (uint64_t i = 0; i < n; ++i)
        out[first + i] = static_cast<uint8_t>(divide_half_away(v[i], static_cast<int64_t>(window.size())));
    } else {
      for (const uint8_t* row : window)
        for (uint64_t i = 0; i < n; ++i) v[i] = std::max<int32_t>(v[i], static_cast<int8_t>(row[first + i]));
      for (uint64_t i = 0; i < n; ++i) out[first + i] = static_cast<uint8_t>(v[i]);
    }
  }
}

}  // namespace activation
}  // namespace tpusim::sim
