// The requantization of integer_ops.h in double precision, for the CPU runner's inner loop
// (gpu/cpu_model.cpp), where the compiler can vectorize it: exact, hence bit-identical to
// requantize(), whenever the column's shift is at most 52 and the output table is a clamp
// (identity, relu, relux: table_clamp() says).
//
// Why exact: acc + bias is an integer below 2^33 in magnitude, exact in a double; scale =
// mult x 2^-shift has at most 16 significant bits, so v = (acc + bias) x scale has at most 49 and is
// exact. |v| + 1/2 = (|X| + 2^(shift-1)) x 2^-shift with |X| < 2^49 needs fewer than 53 bits for
// shift <= 52, so it is exact too, and its integer part (taken after capping at 256, which no
// clamp to int8 can tell apart) is round_half_away(|v|). The sign is put back and the result
// clamped to the table's [lo, hi].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "gpu/integer_ops.h"

namespace tpusim::gpu {

inline constexpr uint32_t kMaxClampShift = 52;

// [lo, hi] when apply_output(table, b) == clamp(b, lo, hi) for every b in the table's range
// [OutputTable::kLo, OutputTable::kHi] (hence for every b).
inline std::optional<std::pair<int, int>> table_clamp(const OutputTable& table) {
  const int lo = table.value[0], hi = table.value[OutputTable::kSize - 1];
  for (int64_t b = OutputTable::kLo; b <= OutputTable::kHi; ++b)
    if (table.value[b - OutputTable::kLo] != std::clamp<int64_t>(b, lo, hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

// requantize(acc, {bias, mult, shift}, table) for a clamp table [lo, hi] and shift <= 52, with
// bias_d = bias and scale = ldexp(mult, -shift).
inline int8_t requantize_clamp(int32_t acc, double bias_d, double scale, int lo, int hi) {
  const double v = (double(acc) + bias_d) * scale;
  const int t = static_cast<int>(std::min(std::fabs(v) + 0.5, 256.0));
  return static_cast<int8_t>(std::clamp(v < 0 ? -t : t, lo, hi));
}

}  // namespace tpusim::gpu
