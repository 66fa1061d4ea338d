// The stepped systolic array (systolic_array.h has the cell's next-state function).
//
// One step() computes the same next state as the header's per-cell rule, organised for speed:
//  - x moves right without copying: each row's x registers are a window into a mirrored ring, and
//    the window's new first entry is this cycle's left input, so the window *is* x_in of every cell;
//  - psum moves down in place: rows are updated bottom-up, so row k reads row k-1 before row k-1 is
//    overwritten (the result equals computing every next value first, then committing);
//  - a row selects between weight and shadow only while a kSwitch flag is inside it (a per-row
//    count); other rows run the plain multiply-add loop;
//  - the valid bit of psum[k][j] always equals the valid flag of x[k][j] (both are x_in's), so it
//    is not stored; a count of valid x registers makes empty() O(1).
#include "sim/systolic_array.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/target_clones.h"

namespace tpusim::sim {
namespace {

// Delay registers on a cols-wide top edge: column j has j (0 + 1 + ... + cols - 1).
uint64_t delay_registers(uint64_t cols) { return cols * (cols - 1) / 2; }

// Raw view of the registers the hot loop touches. psum is accessed as uint32 so the int32 sum
// wraps without undefined behaviour (int32_t and uint32_t may alias).
struct Cells {
  uint32_t* psum;
  const uint32_t* zero_row;
  int16_t* weight;
  const int16_t* shadow;
  const int16_t* x;  // x_in of row 0's cells; row k's start x_stride further on
  const uint8_t* xf;
  const uint32_t* switches_in_row;
  size_t rows, cols, x_stride;
};

// psum'[j] = above[j] + weight[j] * x[j]
inline void multiply_add_row(uint32_t* __restrict out, const uint32_t* __restrict above,
                             const int16_t* __restrict weight, const int16_t* __restrict x, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] = above[j] + static_cast<uint32_t>(int32_t{weight[j]} * x[j]);
}

// The same with w = (flags & kSwitch) ? shadow : weight and weight' = w, as a branch-free select.
inline void switch_multiply_add_row(uint32_t* __restrict out, const uint32_t* __restrict above,
                                    int16_t* __restrict weight, const int16_t* __restrict shadow,
                                    const int16_t* __restrict x, const uint8_t* __restrict flags, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    const int16_t take_shadow = static_cast<int16_t>(-((flags[j] / SystolicArray::kSwitch) & 1));
    const int16_t w = static_cast<int16_t>((shadow[j] & take_shadow) | (weight[j] & ~take_shadow));
    weight[j] = w;
    out[j] = above[j] + static_cast<uint32_t>(int32_t{w} * x[j]);
  }
}

// Every row's psum' and weight', bottom row first (in place).
// The x86 kernels are compiled for AVX-512BW, AVX2 and the baseline, chosen at load time.
TPUSIM_CLONES void update_cells(const Cells& c) {
  for (size_t k = c.rows; k-- > 0;) {
    uint32_t* out = c.psum + k * c.cols;
    const uint32_t* above = k == 0 ? c.zero_row : out - c.cols;
    const int16_t* x = c.x + k * c.x_stride;
    int16_t* weight = c.weight + k * c.cols;
    if (c.switches_in_row[k] == 0) {
      multiply_add_row(out, above, weight, x, c.cols);
    } else {
      switch_multiply_add_row(out, above, weight, c.shadow + k * c.cols, x, c.xf + k * c.x_stride, c.cols);
    }
  }
}

void check_size(const char* what, size_t got, uint64_t want) {
  if (got != want) {
    throw std::invalid_argument("SystolicArray::step: " + std::string(what) + " has " + std::to_string(got) +
                                " entries, the array needs " + std::to_string(want));
  }
}

}  // namespace

SystolicArray::SystolicArray(uint64_t rows, uint64_t cols, bool skewed_shift) : rows_(rows), cols_(cols) {
  if (rows == 0 || cols == 0) {
    throw std::invalid_argument("SystolicArray: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " array: rows and cols must be at least 1");
  }
  skewed_shift_ = skewed_shift;
  reset();
}

void SystolicArray::reset() {
  const uint64_t cells = rows_ * cols_;
  weight_.assign(cells, 0);
  shadow_.assign(cells, 0);
  x_line_.assign(2 * cells, 0);
  xf_line_.assign(2 * cells, 0);
  psum_.assign(cells, 0);
  zero_row_.assign(cols_, 0);
  bottom_valid_.assign(cols_, 0);
  switches_in_row_.assign(rows_, 0);
  delayed_rows_.assign(skewed_shift_ ? cols_ : 0, -1);
  delayed_values_.assign(skewed_shift_ ? delay_registers(cols_) : 0, 0);
  last_shift_ = -1;
  x_pos_ = 0;
  valid_count_ = 0;
  cycles_ = 0;
}

uint64_t SystolicArray::register_bytes(uint64_t rows, uint64_t cols, bool skewed_shift) {
  // weight, shadow, x (twice: the ring), x flags (twice), psum per cell; per column a valid bit and a
  // zero; per row a switch count; the delay lines (sizeof is what the vectors hold).
  uint64_t bytes = rows * cols * (2 * sizeof(int16_t) + 2 * sizeof(int16_t) + 2 * sizeof(uint8_t) + sizeof(int32_t));
  bytes += cols * (sizeof(int32_t) + sizeof(uint8_t)) + rows * sizeof(uint32_t);
  if (skewed_shift) bytes += cols * sizeof(int64_t) + delay_registers(cols) * sizeof(int16_t);
  return bytes;
}

// Column j's write of this step: the value its line took j steps ago (for the row given then),
// then this step's value into the same place; column 0 writes this step's row directly.
void SystolicArray::shift_columns(int64_t shadow_row, std::span<const int16_t> shadow_values) {
  if (shadow_row >= 0) shadow_[uint64_t(shadow_row) * cols_] = shadow_values[0];
  int16_t* line = delayed_values_.data();
  for (uint64_t j = 1; j < cols_; line += j, ++j) {
    int16_t& reg = line[cycles_ % j];
    if (j <= cycles_) {
      const int64_t row = delayed_rows_[(cycles_ - j) % cols_];
      if (row >= 0) shadow_[uint64_t(row) * cols_ + j] = reg;
    }
    if (shadow_row >= 0) reg = shadow_values[j];
  }
}

void SystolicArray::step(std::span<const int16_t> left_values, std::span<const uint8_t> left_flags,
                         int64_t shadow_row, std::span<const int16_t> shadow_values) {
  check_size("left_values", left_values.size(), rows_);
  check_size("left_flags", left_flags.size(), rows_);
  if (shadow_row >= 0) {
    if (static_cast<uint64_t>(shadow_row) >= rows_) {
      throw std::out_of_range("SystolicArray::step: shadow row " + std::to_string(shadow_row) +
                              " is outside the array's " + std::to_string(rows_) + " rows");
    }
    check_size("shadow_values", shadow_values.size(), cols_);
  }

  // x' = x_in: every window gains the left input in front and loses its last column.
  const uint64_t line = 2 * cols_;
  x_pos_ = (x_pos_ == 0 ? cols_ : x_pos_) - 1;
  for (uint64_t k = 0; k < rows_; ++k) {
    const uint64_t at = k * line + x_pos_;
    const uint8_t leaving = xf_line_[at];  // the old x[k][cols-1]
    const uint8_t entering = left_flags[k];
    valid_count_ += entering & kValid;
    valid_count_ -= leaving & kValid;
    switches_in_row_[k] += (entering & kSwitch) != 0;
    switches_in_row_[k] -= (leaving & kSwitch) != 0;
    x_line_[at] = x_line_[at + cols_] = left_values[k];
    xf_line_[at] = xf_line_[at + cols_] = entering;
  }

  // psum' and weight' from x_in and the old shadow; then the shadow row write commits.
  update_cells(Cells{reinterpret_cast<uint32_t*>(psum_.data()),
                     reinterpret_cast<const uint32_t*>(zero_row_.data()), weight_.data(), shadow_.data(),
                     x_line_.data() + x_pos_, xf_line_.data() + x_pos_, switches_in_row_.data(), rows_, cols_,
                     line});
  if (!skewed_shift_) {
    if (shadow_row >= 0)
      std::copy(shadow_values.begin(), shadow_values.end(), shadow_.begin() + shadow_row * cols_);
  } else {
    if (delayed_rows_.size() != cols_) {  // (set after reset)
      delayed_rows_.assign(cols_, -1);
      delayed_values_.assign(delay_registers(cols_), 0);
    }
    // This step's row enters slot cycles_ % cols (the entry of step cycles_ - cols, which no
    // column needs any more); column j writes the row of step cycles_ - j.
    delayed_rows_[cycles_ % cols_] = shadow_row;
    if (shadow_row >= 0) last_shift_ = int64_t(cycles_);
    if (shift_pending()) shift_columns(shadow_row, shadow_values);
  }

  const uint8_t* bottom_flags = xf_line_.data() + (rows_ - 1) * line + x_pos_;
  for (uint64_t j = 0; j < cols_; ++j) bottom_valid_[j] = bottom_flags[j] & kValid;
  ++cycles_;
}

std::span<const int32_t> SystolicArray::bottom() const {
  return {psum_.data() + (rows_ - 1) * cols_, static_cast<size_t>(cols_)};
}
std::span<const uint8_t> SystolicArray::bottom_valid() const { return bottom_valid_; }

bool SystolicArray::empty() const { return valid_count_ == 0; }

namespace {
uint64_t checked_cell(uint64_t k, uint64_t j, uint64_t rows, uint64_t cols) {
  if (k >= rows || j >= cols) {
    throw std::out_of_range("SystolicArray: cell (" + std::to_string(k) + ", " + std::to_string(j) +
                            ") is outside the " + std::to_string(rows) + " x " + std::to_string(cols) +
                            " array");
  }
  return k * cols + j;
}
}  // namespace

int16_t SystolicArray::weight(uint64_t k, uint64_t j) const {
  return weight_[checked_cell(k, j, rows_, cols_)];
}
int16_t SystolicArray::shadow(uint64_t k, uint64_t j) const {
  return shadow_[checked_cell(k, j, rows_, cols_)];
}
int32_t SystolicArray::psum(uint64_t k, uint64_t j) const { return psum_[checked_cell(k, j, rows_, cols_)]; }
int16_t SystolicArray::x_value(uint64_t k, uint64_t j) const {
  checked_cell(k, j, rows_, cols_);
  return x_line_[k * 2 * cols_ + x_pos_ + j];
}
uint8_t SystolicArray::x_flags(uint64_t k, uint64_t j) const {
  checked_cell(k, j, rows_, cols_);
  return xf_line_[k * 2 * cols_ + x_pos_ + j];
}
uint8_t SystolicArray::psum_valid(uint64_t k, uint64_t j) const { return x_flags(k, j) & kValid; }

}  // namespace tpusim::sim
