// The CPU runner's vectorized element-wise spans (cpu_kernels.h).
#include "gpu/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "gpu/requantize_clamp.h"

namespace tpusim::gpu {
namespace {

constexpr int kTableLo = int(OutputTable::kLo), kTableHi = int(OutputTable::kHi);

// ---- The loops, inlined into one function per instruction set below ------------------------------

[[gnu::always_inline]] inline void requantize_loop(const int32_t* __restrict c, const double* __restrict bias,
                                                   const double* __restrict scale, const OutputMap& map,
                                                   int8_t* __restrict o, uint64_t count) {
  if (!map.table) {
    const int lo = map.lo, hi = map.hi;
    for (uint64_t e = 0; e < count; ++e) o[e] = requantize_clamp(c[e], bias[e], scale[e], lo, hi);
    return;
  }
  const int32_t* __restrict table = map.table;
  for (uint64_t e = 0; e < count; ++e) {
    const double v = (double(c[e]) + bias[e]) * scale[e];
    const int m = static_cast<int>(std::min(std::fabs(v) + 0.5, 2048.0));  // round_half_away(|v|), capped
    const int y = std::clamp(v < 0 ? -m : m, kTableLo, kTableHi);
    o[e] = static_cast<int8_t>(table[y - kTableLo]);
  }
}

[[gnu::always_inline]] inline void pool_average_loop(const int32_t* __restrict sum, int32_t size,
                                                     int8_t* __restrict o, uint64_t count) {
  if (std::has_single_bit(uint32_t(size))) {  // round_half_away(v / size) = (2|v| + size) >> (log2 size + 1)
    const int p = std::countr_zero(uint32_t(size)) + 1;
    for (uint64_t e = 0; e < count; ++e) {
      const int32_t v = sum[e], q = ((v < 0 ? -v : v) * 2 + size) >> p;
      o[e] = static_cast<int8_t>(v < 0 ? -q : q);
    }
    return;
  }
  const double inv = 1.0 / double(2 * size), eps = std::ldexp(1.0, -20);
  for (uint64_t e = 0; e < count; ++e) {
    const int32_t v = sum[e];
    const int32_t q = static_cast<int32_t>(double((v < 0 ? -v : v) * 2 + size) * inv + eps);
    o[e] = static_cast<int8_t>(v < 0 ? -q : q);
  }
}

template <uint32_t Op>
[[gnu::always_inline]] inline int32_t vec_op(int32_t a, int32_t b) {
  if constexpr (Op == 0) return a + b;
  else if constexpr (Op == 1) return a - b;
  else if constexpr (Op == 2) return a * b;
  else if constexpr (Op == 3) return a > b ? a : b;
  else if constexpr (Op == 4) return a < b ? a : b;
  else return a;
}

// round_half_away(op(a, b) x mult / 2^s) in 32-bit lanes (cpu_kernels.h says why it is exact), for
// s <= 31 given half = s ? 2^(s-1) : 0; then the output map.
template <uint32_t Op>
[[gnu::always_inline]] inline void vector_loop(const int8_t* __restrict a, const int8_t* __restrict b, int32_t mult,
                                               uint32_t half, uint32_t s, const OutputMap& map,
                                               int8_t* __restrict o, uint64_t count) {
  auto rounded = [=](int8_t x, int8_t y) {
    const int32_t r = vec_op<Op>(x, y) * mult;
    const uint32_t mag = r < 0 ? 0u - static_cast<uint32_t>(r) : static_cast<uint32_t>(r);
    const int32_t q = static_cast<int32_t>((mag + half) >> s);
    return r < 0 ? -q : q;
  };
  if (!map.table) {
    const int32_t lo = map.lo, hi = map.hi;
    for (uint64_t e = 0; e < count; ++e) o[e] = static_cast<int8_t>(std::clamp(rounded(a[e], b[e]), lo, hi));
    return;
  }
  const int32_t* __restrict table = map.table;
  for (uint64_t e = 0; e < count; ++e)
    o[e] = static_cast<int8_t>(table[std::clamp(rounded(a[e], b[e]), kTableLo, kTableHi) - kTableLo]);
}

[[gnu::always_inline]] inline void vector_dispatch(const VectorKernel& k, const int8_t* a, const int8_t* b,
                                                   int8_t* o, uint64_t count) {
  if (k.op == 5 && k.map.table) {  // pass through a curve: a lookup of the operand
    const int8_t* __restrict pass = k.pass;
    for (uint64_t e = 0; e < count; ++e) o[e] = pass[static_cast<uint8_t>(a[e])];
    return;
  }
  if (k.shift >= 32) {  // |op x mult| < 2^31: every result rounds to 0
    std::memset(o, static_cast<uint8_t>(k.zero), count);
    return;
  }
  const int32_t mult = static_cast<int32_t>(k.mult);
  const uint32_t s = k.shift, half = s ? uint32_t{1} << (s - 1) : 0;
  switch (k.op) {
    case 0: vector_loop<0>(a, b, mult, half, s, k.map, o, count); break;
    case 1: vector_loop<1>(a, b, mult, half, s, k.map, o, count); break;
    case 2: vector_loop<2>(a, b, mult, half, s, k.map, o, count); break;
    case 3: vector_loop<3>(a, b, mult, half, s, k.map, o, count); break;
    case 4: vector_loop<4>(a, b, mult, half, s, k.map, o, count); break;
    default: vector_loop<5>(a, a, mult, half, s, k.map, o, count); break;
  }
}

// ---- One copy per instruction set ------------------------------------------------------------------

using RequantizeFn = void (*)(const int32_t*, const double*, const double*, const OutputMap&, int8_t*, uint64_t);
using VectorFn = void (*)(const VectorKernel&, const int8_t*, const int8_t*, int8_t*, uint64_t);
using PoolFn = void (*)(const int32_t*, int32_t, int8_t*, uint64_t);
struct Kernels {
  const char* isa;
  RequantizeFn requantize;
  VectorFn vector;
  PoolFn pool;
  bool (*supported)();
};

#if defined(__x86_64__) || defined(__i386__)
#define TPUSIM_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512"
[[gnu::target(TPUSIM_AVX512)]] void requantize_avx512(const int32_t* c, const double* bias, const double* scale,
                                                       const OutputMap& map, int8_t* o, uint64_t count) {
  requantize_loop(c, bias, scale, map, o, count);
}
[[gnu::target(TPUSIM_AVX512)]] void vector_avx512(const VectorKernel& k, const int8_t* a, const int8_t* b, int8_t* o,
                                                   uint64_t count) {
  vector_dispatch(k, a, b, o, count);
}
[[gnu::target(TPUSIM_AVX512)]] void pool_avx512(const int32_t* sum, int32_t size, int8_t* o, uint64_t count) {
  pool_average_loop(sum, size, o, count);
}
[[gnu::target("avx2")]] void pool_avx2(const int32_t* sum, int32_t size, int8_t* o, uint64_t count) {
  pool_average_loop(sum, size, o, count);
}
[[gnu::target("avx2")]] void requantize_avx2(const int32_t* c, const double* bias, const double* scale,
                                             const OutputMap& map, int8_t* o, uint64_t count) {
  requantize_loop(c, bias, scale, map, o, count);
}
[[gnu::target("avx2")]] void vector_avx2(const VectorKernel& k, const int8_t* a, const int8_t* b, int8_t* o,
                                         uint64_t count) {
  vector_dispatch(k, a, b, o, count);
}
bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#endif
void requantize_baseline(const int32_t* c, const double* bias, const double* scale, const OutputMap& map, int8_t* o,
                         uint64_t count) {
  requantize_loop(c, bias, scale, map, o, count);
}
void vector_baseline(const VectorKernel& k, const int8_t* a, const int8_t* b, int8_t* o, uint64_t count) {
  vector_dispatch(k, a, b, o, count);
}
void pool_baseline(const int32_t* sum, int32_t size, int8_t* o, uint64_t count) {
  pool_average_loop(sum, size, o, count);
}
bool always() { return true; }

// Best first.
const Kernels kKernels[] = {
#if defined(__x86_64__) || defined(__i386__)
    {"avx512", requantize_avx512, vector_avx512, pool_avx512, has_avx512},
    {"avx2", requantize_avx2, vector_avx2, pool_avx2, has_avx2},
#endif
    {"baseline", requantize_baseline, vector_baseline, pool_baseline, always},
};

const Kernels* best_kernels() {
  for (const Kernels& k : kKernels)
    if (k.supported()) return &k;
  return &kKernels[std::size(kKernels) - 1];
}
const Kernels* active = best_kernels();

}  // namespace

OutputMap output_map(const OutputTable& table, std::vector<int32_t>& storage) {
  OutputMap map;
  if (const auto clamp = table_clamp(table)) {
    map.lo = clamp->first;
    map.hi = clamp->second;
    return map;
  }
  storage.assign(table.value, table.value + OutputTable::kSize);
  map.table = storage.data();
  return map;
}

void requantize_span(const int32_t* c, const double* bias, const double* scale, const OutputMap& map, int8_t* o,
                     uint64_t count) {
  active->requantize(c, bias, scale, map, o, count);
}

std::optional<VectorKernel> vector_kernel(uint32_t op, uint32_t mult, uint32_t shift, const OutputTable& table) {
  if (mult > 65535 || shift > 63) return std::nullopt;
  VectorKernel k;
  k.op = op > 5 ? 5 : op;  // vector_op treats every value above min as pass
  k.mult = mult;
  k.shift = shift;
  k.map = output_map(table, k.table_storage);
  if (k.op == 5) {
    for (int v = -128; v <= 127; ++v)
      k.pass[static_cast<uint8_t>(v)] = vector_element(5, int8_t(v), int8_t(v), mult, shift, table);
  }
  k.zero = apply_output(table, 0);
  return k;
}

void vector_span(const VectorKernel& k, const int8_t* a, const int8_t* b, int8_t* o, uint64_t count) {
  active->vector(k, a, b, o, count);
}

void pool_average_span(const int32_t* sum, int32_t size, int8_t* o, uint64_t count) {
  if (size < 1 || size > kMaxPoolSpanSize) {
    for (uint64_t e = 0; e < count; ++e) o[e] = pool_average(sum[e], size);
    return;
  }
  active->pool(sum, size, o, count);
}

const char* cpu_kernels_isa() { return active->isa; }

std::vector<const char*> cpu_kernels_isas() {
  std::vector<const char*> out{best_kernels()->isa};
  for (const Kernels& k : kKernels)
    if (k.supported() && std::strcmp(k.isa, out[0]) != 0) out.push_back(k.isa);
  return out;
}

bool select_cpu_kernels(const char* isa) {
  for (const Kernels& k : kKernels)
    if (std::strcmp(k.isa, isa) == 0 && k.supported()) {
      active = &k;
      return true;
    }
  return false;
}

}  // namespace tpusim::gpu
