// One cell of the weight-stationary systolic array as a next-state function: the per-cell rule of
// sim/systolic_array.h written once, for one cell, so the SystemVerilog cell
// (hw/rtl/tpusim_mac_cell.sv) can be held against it register by register (tests/hw).
//
// Registers (the same values as SystolicArray's per-cell registers): the active weight, the shadow
// weight (int8 or uint8 widened to int16), the input register x (value and SystolicArray flags),
// the partial sum (int32, wraps) and its valid bit. mac_cell_next() computes every register's next
// value from the current ones and this cycle's inputs; the caller commits (two-phase, like
// always_ff).
#pragma once

#include <cstdint>

#include "sim/systolic_array.h"

namespace tpusim::sim {

struct MacCell {
  int16_t weight = 0;  // the weight this cell multiplies by
  int16_t shadow = 0;  // the next tile's weight, copied into `weight` by a kSwitch input
  int16_t x = 0;       // the input that passed through this cell (goes right next cycle)
  uint8_t x_flags = 0;  // its SystolicArray::kValid / kSwitch flags
  int32_t psum = 0;     // the partial sum (goes down next cycle)
  uint8_t psum_valid = 0;
  bool operator==(const MacCell&) const = default;
};

// x_in/flags_in: what enters from the left; psum_in: the partial sum from above (0 for row 0);
// shadow_write/shadow_in: this cell's shadow weight write, which commits after this cycle's switch
// reads the old shadow.
inline MacCell mac_cell_next(const MacCell& cur, int16_t x_in, uint8_t flags_in, int32_t psum_in,
                             bool shadow_write, int16_t shadow_in) {
  MacCell next;
  const int16_t w = (flags_in & SystolicArray::kSwitch) ? cur.shadow : cur.weight;
  next.weight = w;
  next.shadow = shadow_write ? shadow_in : cur.shadow;
  next.x = x_in;
  next.x_flags = flags_in;
  // int32 wrap without signed overflow: add as uint32, convert back (modulo 2^32 in C++20).
  next.psum = static_cast<int32_t>(static_cast<uint32_t>(psum_in) + static_cast<uint32_t>(int32_t{w} * x_in));
  next.psum_valid = flags_in & SystolicArray::kValid;
  return next;
}

}  // namespace tpusim::sim
