// The matrix unit's systolic array, stepped one clock cycle at a time (the `stepped` engine).
//
// array_rows x array_cols weight-stationary cells. Cell (k, j) holds four registers: the active
// weight, the shadow weight, the input register x (a value and its flags) and the partial-sum
// register. Inputs enter each row from the left, already skewed by the systolic data setup
// (row k sees vector i's element k at cycle t0 + i + k), move one column right per cycle;
// partial sums move one row down per cycle and leave the bottom row into the accumulators.
//
// One step() is one cycle with two-phase register semantics (like always_ff; the update order
// of the cells cannot change the result). For every cell, from the current register values:
//   x_in   = (j == 0) ? left[k] : x[k][j-1]           value and flags move right
//   w      = (x_in.flags & kSwitch) ? shadow[k][j] : weight[k][j]
//   weight'[k][j] = w                                   the new tile takes effect with the
//                                                       wavefront of the first vector
//   psum'[k][j]   = ((k == 0) ? 0 : psum[k-1][j]) + w * x_in.value   (int32, wraps)
//   valid'[k][j]  = x_in.flags & kValid
//   x'[k][j]      = x_in
//   shadow'[r][j] = the shadow row r given this cycle, if any (one row per cycle: a tile
//                   shifts in from the top in array_rows cycles; copies into `weight` made in
//                   the same cycle read the old shadow value); with a skewed shift
//                   (set_skewed_shift: the architecture's weight_shift_skewed), the row given j
//                   cycles ago instead: column j's write passes j delay registers on the top
//                   edge, so cell (r, j) of a shift starting at s is written in cycle s + r + j,
//                   behind a switch wave that reached it at t0 + r + j with t0 <= s
// then every register commits. After step(), bottom()[j] is psum[N-1][j] and bottom_valid()[j]
// its valid bit: the result the accumulators write in the next cycle.
// The SystemVerilog cell in hw/ implements the same next-state function.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tpusim::sim {

// The array as the stepped engine's matrix unit drives it: one step() per cycle, the bottom row
// read before each step, idle cycles skipped while empty(). SystolicArray (below) is the default
// implementation; sim::RunOptions::array supplies another for a run (hw/ puts the Verilated RTL
// array behind it: co-simulation). step() is called from the matrix unit's SystemC thread at the
// cycle's time; an implementation may wait there for delta cycles (sc_core::wait(SC_ZERO_TIME))
// but must not advance time. The matrix unit calls reset() before each run, outside the kernel.
class ArrayModel {
 public:
  static constexpr uint8_t kValid = 1;   // x carries an element of a real input vector
  static constexpr uint8_t kSwitch = 2;  // x is the first vector of a matmul with `switch`

  virtual ~ArrayModel() = default;
  virtual uint64_t rows() const = 0;
  virtual uint64_t cols() const = 0;
  // One cycle. left_values/left_flags: rows() entries (what enters column 0 of each row).
  // shadow_row: the row written into the shadow weights this cycle, or -1; shadow_values:
  // cols() weights for it (int8 or uint8, widened).
  virtual void step(std::span<const int16_t> left_values, std::span<const uint8_t> left_flags, int64_t shadow_row,
                    std::span<const int16_t> shadow_values) = 0;
  virtual std::span<const int32_t> bottom() const = 0;        // psum of row rows()-1, cols() values
  virtual std::span<const uint8_t> bottom_valid() const = 0;  // its valid bits
  // True when no register holds a valid input or partial sum (stepping with idle inputs changes
  // nothing but a skewed shift's delayed shadow writes, shift_pending(), so the caller may skip
  // idle cycles and step the skipped ones later, before the array is used or looked at again:
  // MatrixUnit::catch_up).
  virtual bool empty() const = 0;
  // A skewed shift's shadow writes still in the top edge's delay registers.
  virtual bool shift_pending() const = 0;
  virtual void reset() = 0;  // every register 0
  // Whether column j's shadow writes are delayed by j cycles (the header's rule). Set before
  // reset(), not during a run.
  void set_skewed_shift(bool on) { skewed_shift_ = on; }
  bool skewed_shift() const { return skewed_shift_; }
  // Cell (k, j)'s registers as traces show them (sim/trace.h, kCellRegisters: weight, shadow,
  // x, x valid, psum), or false where the model cannot show them.
  virtual bool registers(uint64_t k, uint64_t j, std::array<int32_t, 5>& out) const {
    (void)k, (void)j, (void)out;
    return false;
  }

 protected:
  bool skewed_shift_ = false;
};

// `final`: calls on a SystolicArray itself (benchmarks, tests) are direct, not virtual.
class SystolicArray final : public ArrayModel {
 public:
  SystolicArray(uint64_t rows, uint64_t cols, bool skewed_shift = false);
  uint64_t rows() const override { return rows_; }
  uint64_t cols() const override { return cols_; }

  void step(std::span<const int16_t> left_values, std::span<const uint8_t> left_flags, int64_t shadow_row,
            std::span<const int16_t> shadow_values) override;

  std::span<const int32_t> bottom() const override;
  std::span<const uint8_t> bottom_valid() const override;

  // Register inspection (debugger, traces, RTL comparison).
  int16_t weight(uint64_t k, uint64_t j) const;
  int16_t shadow(uint64_t k, uint64_t j) const;
  int16_t x_value(uint64_t k, uint64_t j) const;
  uint8_t x_flags(uint64_t k, uint64_t j) const;
  int32_t psum(uint64_t k, uint64_t j) const;
  uint8_t psum_valid(uint64_t k, uint64_t j) const;

  bool empty() const override;
  bool shift_pending() const override {
    return skewed_shift_ && last_shift_ >= 0 && uint64_t(last_shift_) + cols_ > cycles_;
  }
  void reset() override;
  bool registers(uint64_t k, uint64_t j, std::array<int32_t, 5>& out) const override {
    out = {weight(k, j), shadow(k, j), x_value(k, j), x_flags(k, j) & kValid, psum(k, j)};
    return true;
  }
  uint64_t cycles() const { return cycles_; }  // step() calls since construction/reset
  // The bytes a rows x cols array's registers take (what run --max-memory counts for the stepped
  // engine): the cells' registers and, with a skewed shift, the delay registers on its top edge.
  static uint64_t register_bytes(uint64_t rows, uint64_t cols, bool skewed_shift);

 private:
  void shift_columns(int64_t shadow_row, std::span<const int16_t> shadow_values);  // skewed shift, one step
  uint64_t rows_, cols_;
  uint64_t cycles_ = 0;
  std::vector<int16_t> weight_, shadow_;  // row-major rows() x cols()
  // The x registers of row k are a ring of cols() entries stored twice (a line of 2 * cols()), so
  // x[k][0..cols()) is always the contiguous window starting at x_pos_: moving every x one column
  // right is writing the new column-0 value in front of the window.
  std::vector<int16_t> x_line_;
  std::vector<uint8_t> xf_line_;
  uint64_t x_pos_ = 0;
  std::vector<int32_t> psum_;              // row-major, updated in place from the bottom row up
  std::vector<int32_t> zero_row_;          // what row 0 adds to (cols() zeros)
  std::vector<uint8_t> bottom_valid_;      // valid bits of the bottom psum row
  std::vector<uint32_t> switches_in_row_;  // x registers with kSwitch per row (0: no select needed)
  uint64_t valid_count_ = 0;               // valid x registers; psum_valid(k, j) is x_flags(k, j) & kValid
  // The skewed shift's delay registers, the triangle the RTL has: the shadow row given in step i
  // (-1: none) at delayed_rows_[i % cols()], and column j's own line of j values (column 0 has
  // none: it writes in the step its row is given), at delayed_values_[j * (j - 1) / 2 ...] + i % j,
  // where step i reads the value step i - j left and leaves its own. last_shift_ is the last step
  // that gave a row (pending writes while last_shift_ + cols() - 1 >= cycles_).
  std::vector<int64_t> delayed_rows_;
  std::vector<int16_t> delayed_values_;  // cols() * (cols() - 1) / 2 values
  int64_t last_shift_ = -1;
};

}  // namespace tpusim::sim
