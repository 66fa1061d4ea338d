// The activation unit's arithmetic (docs/isa.md) on plain arrays: the element loops of act, vec
// and pool, in activation.cpp. exec_activate, exec_vector and exec_pool (state.cpp) check the
// instruction, locate its rows and read the per-column table, then call these. Internal to sim.
#pragma once

#include <cstdint>
#include <span>

#include "isa/table.h"

namespace tpusim::sim::activation {

// What act applies after requantization: `func` (relux clipped at `clip`), then saturation to
// int8, or to uint8 when out_unsigned. vec applies {func, 127, false}.
struct Function {
  isa::Func func;
  int64_t clip;
  bool out_unsigned;
};

// One column's requantization under perchan, from the table at qtable. shift <= 63.
struct Column {
  int32_t bias;
  uint16_t mult;
  uint8_t shift;
};

// act: `rows` accumulator rows of m values from x (consecutive), each x requantized to
// y = round_half_away(x * mult / 2^shift), then f, into bytes 0 .. m-1 of UB rows `width` bytes
// apart from ub (the rows' other bytes are kept: ub points at the act_lane byte of the first row).
void act_rows(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m, uint64_t width, uint64_t mult,
              uint64_t shift, Function f);

// act with perchan: as act_rows with m = columns.size(), column c requantized to
// y = round_half_away((x + bias) * mult / 2^shift) with columns[c].
void act_rows_per_column(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t width,
                         std::span<const Column> columns, Function f);

// vec: out[i] = f(round_half_away(op(a[i], b[i]) * mult / 2^shift)) for i < n, int8 throughout,
// f = {func, 127, false}. out may be a or b but must not otherwise overlap them; b is not read
// for pass (may be null).
void vec_elements(isa::VecOp op, const uint8_t* a, const uint8_t* b, uint8_t* out, uint64_t n, uint64_t mult,
                  uint64_t shift, isa::Func func);

// The 16-bit element mode (docs/isa.md, act_high .. vec_high_out): an operand in two byte planes,
// the low bytes (unsigned) at `lo` and the high bytes (signed) at `hi`, or an 8-bit operand
// (hi null: int8 bytes at lo).
struct Operand16 {
  const uint8_t* lo;
  const uint8_t* hi;  // nullptr: 8-bit
};
struct Result16 {
  uint8_t* lo;
  uint8_t* hi;  // nullptr: 8-bit result (int8, the 8-bit curves)
};

// act with 16-bit results: as act_rows / act_rows_per_column (columns empty: per tensor), then
// f with the 16-bit curves and saturation to int16 (f.out_unsigned must be false), the low bytes
// into rows `width` bytes apart from lo, the high bytes likewise from hi.
void act_rows16(const int32_t* x, uint8_t* lo, uint8_t* hi, uint64_t rows, uint64_t m, uint64_t width, uint64_t mult,
                uint64_t shift, std::span<const Column> columns, Function f);

// vec on operands of 8 or 16 bits: out[i] = f(round_half_away(op(a[i], b[i]) * mult / 2^shift))
// for i < n, in 64 bits, saturated to int8 or (out.hi set) int16. The operands are read whole
// before anything is written (the caller passes copies where the planes overlap the result's).
void vec_elements16(isa::VecOp op, Operand16 a, Operand16 b, Result16 out, uint64_t n, uint64_t mult, uint64_t shift,
                    isa::Func func);

// pool: out[i] = the maximum of window[k][i] over k, or with avg their sum divided by the window's
// size rounded half away from zero, for i < width, int8 throughout. window is not empty.
void pool_window(std::span<const uint8_t* const> window, bool avg, uint8_t* out, uint64_t width);

}  // namespace tpusim::sim::activation
