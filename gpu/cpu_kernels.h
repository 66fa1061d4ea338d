// The CPU runner's element-wise work (gpu/cpu_model.cpp) as loops over spans that the compiler
// vectorizes: the requantization of a matmul's int32 products (every output function: the clamps
// of identity, relu and relux, and the sigmoid and tanh curve tables of the simulator) and the
// vector unit's operations (docs/isa.md `vec`: add, sub, mul, max, min, pass). Each span function is
// compiled for AVX-512 (with 512-bit vectors: GCC's default tuning keeps 256-bit ones, which measured
// 2.6 times slower on the requantization), AVX2 and the baseline, chosen once at run time.
//
// Every function here is bit-identical to the integer form of integer_ops.h (requantize,
// vector_element) on its whole domain; tests/gpu/cpu_kernels_test.cpp checks each ISA variant this
// machine has against it. Why the faster forms are exact:
// - requantize_span: the double form of requantize_clamp.h (exact for shifts up to 52), its rounded
//   magnitude capped at 2048 instead of 256 so that a curve table's whole input range
//   [OutputTable::kLo, kHi] = [-2048, 2047] survives; the table is then indexed by the clamped y.
// - vector_span: an operation on two int8 values is within [-16256, 16384] (a product) and the
//   multiplier is at most 65535, so r x mult stays below 2^30 in magnitude and the rounding shift
//   works in 32-bit lanes: round_half_away(x / 2^s) = sign(x) x ((|x| + 2^(s-1)) >> s) for
//   1 <= s <= 31 (no overflow: |x| + 2^30 < 2^32), and 0 for s >= 32 (|x| < 2^31). A `pass`
//   through a curve (an LSTM's tanh of its cell) depends on its int8 operand alone: a 256-entry
//   table made from vector_element itself.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gpu/integer_ops.h"

namespace tpusim::gpu {

// How a span's rounded integers y become int8: a clamp to [lo, hi] when `table` is null, else
// table[clamp(y, kLo, kHi) - kLo] (OutputTable widened to int32: gathers read 32-bit lanes).
struct OutputMap {
  int lo = -128, hi = 127;
  const int32_t* table = nullptr;  // OutputTable::kSize entries, or null
};

// The map of an output table: a clamp where the table is one (identity, relu, relux: table_clamp),
// else a lookup in `storage`, which it fills (and which must outlive the map).
OutputMap output_map(const OutputTable& table, std::vector<int32_t>& storage);

// o[e] = requantize(c[e], {bias[e], mult_e, shift_e}, table) for e < count, given bias[e] = the
// column's bias, scale[e] = ldexp(mult_e, -shift_e), every shift_e <= kMaxClampShift (52), and the
// table's map (output_map).
void requantize_span(const int32_t* c, const double* bias, const double* scale, const OutputMap& map, int8_t* o,
                     uint64_t count);

// One vector step's arithmetic (a VectorStep's op, mult, shift and table), prepared for vector_span.
struct VectorKernel {
  VectorKernel() = default;
  VectorKernel(VectorKernel&&) = default;  // map.table points into table_storage: moved, never copied
  VectorKernel& operator=(VectorKernel&&) = default;
  VectorKernel(const VectorKernel&) = delete;
  VectorKernel& operator=(const VectorKernel&) = delete;
  uint32_t op = 5;     // isa::VecOp
  uint32_t mult = 1;   // <= 65535
  uint32_t shift = 0;  // <= 63
  OutputMap map;
  std::vector<int32_t> table_storage;
  int8_t pass[256] = {};  // op == pass: the output for operand value v at pass[uint8_t(v)] (used with a curve)
  int8_t zero = 0;        // the output of y = 0 (every result when shift >= 32)
};
// Null when mult exceeds 65535 (the machine's vec multiplier is 16 bits; the plan never makes one:
// the caller keeps the scalar form for it).
std::optional<VectorKernel> vector_kernel(uint32_t op, uint32_t mult, uint32_t shift, const OutputTable& table);

// o[e] = vector_element(k.op, a[e], b[e], k.mult, k.shift, table) for e < count (b unused for pass).
void vector_span(const VectorKernel& k, const int8_t* a, const int8_t* b, int8_t* o, uint64_t count);

// o[e] = pool_average(sum[e], size) for e < count, given |sum[e]| <= 128 x size (a window's sum of
// int8 values) and 1 <= size <= kMaxPoolSpanSize. A power-of-two size divides by a shift; another
// multiplies by the reciprocal in double precision: with a = 2|sum| + size < 2^22 and b = 2 x size
// <= 2^14, a x (1/b) is within 2^-30 of a / b, which is an integer or at least 1/b >= 2^-14 from
// one, so floor(a x (1/b) + 2^-20) = floor(a / b) exactly (the integer division it replaces does not
// vectorize).
inline constexpr int32_t kMaxPoolSpanSize = 8192;
void pool_average_span(const int32_t* sum, int32_t size, int8_t* o, uint64_t count);

// The variant chosen on this machine: "avx512", "avx2" or "baseline"; and, for the tests, every
// variant this machine can run (the chosen one first). Selecting one makes the span functions
// above use it (tests only; not thread-safe against running spans).
const char* cpu_kernels_isa();
std::vector<const char*> cpu_kernels_isas();
bool select_cpu_kernels(const char* isa);

}  // namespace tpusim::gpu
