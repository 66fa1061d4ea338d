// The Verilated --sc array behind sim::ArrayModel (cosim_array.h says how a step runs).
// The generated headers come first: they include SystemC their own way (BUILD-NOTES.md).
#include <Vsc16x16.h>
#include <Vsc4x4.h>
#include <Vsc8x8.h>

#include "hw/cosim_array.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include <type_traits>

namespace tpusim::hw {
namespace {

// The value type of a Verilated port (sc_in<T>& / sc_out<T>&, or an unpacked array of them):
// bool for 1 bit, uint32_t up to 32, uint64_t up to 64, sc_bv<W> wider.
template <class Port>
using port_value = typename std::remove_all_extents_t<std::remove_reference_t<Port>>::data_type;
template <class Port>
using Signal = sc_core::sc_signal<port_value<Port>>;

// Bits [lsb, lsb + width) of a packed port value, width <= 32.
template <class T>
void put_field(T& word, unsigned lsb, unsigned width, uint32_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    word = v & 1;
  } else if constexpr (std::is_integral_v<T>) {
    const uint64_t mask = ((uint64_t{1} << width) - 1) << lsb;
    word = static_cast<T>((static_cast<uint64_t>(word) & ~mask) | ((uint64_t{v} << lsb) & mask));
  } else {
    word.range(lsb + width - 1, lsb) = v;
  }
}
template <class T>
uint32_t get_field(const T& word, unsigned lsb, unsigned width) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint32_t>((static_cast<uint64_t>(word) >> lsb) & ((uint64_t{1} << width) - 1));
  } else {
    return word.range(lsb + width - 1, lsb).to_uint();
  }
}

// An int8 or uint8 operand widened to int16 (what the C++ array takes) as the RTL's byte and
// signedness bit: [-128, -1] are int8, [128, 255] uint8, [0, 127] the same either way.
bool is_signed_operand(int16_t v) { return v < 128; }

// A 9-bit two's-complement register value.
int32_t nine_bits(uint32_t v) { return int32_t(v << 23) >> 23; }

// The Verilated ROWS x COLS array V as the stepped engine's array.
template <class V>
class ScArray final : public sim::ArrayModel {
 public:
  ScArray(const std::string& name, unsigned rows, unsigned cols)
      : rtl_(name.c_str()), rows_(rows), cols_(cols), bottom_(cols), bottom_valid_(cols),
        psum_all_(std::make_unique<Signal<decltype(V::psum_all)>[]>(rows * cols)),
        weight_all_(std::make_unique<Signal<decltype(V::weight_all)>[]>(rows * cols)),
        shadow_all_(std::make_unique<Signal<decltype(V::shadow_all)>[]>(rows * cols)),
        x_all_(std::make_unique<Signal<decltype(V::x_all)>[]>(rows * cols)),
        x_valid_all_(std::make_unique<Signal<decltype(V::x_valid_all)>[]>(rows * cols)) {
    rtl_.clk(clk_);
    rtl_.rst(rst_);
    rtl_.left_value(left_value_);
    rtl_.left_signed(left_signed_);
    rtl_.left_valid(left_valid_);
    rtl_.left_switch(left_switch_);
    rtl_.shadow_we(shadow_we_);
    rtl_.shadow_row(shadow_row_);
    rtl_.shadow_values(shadow_values_);
    rtl_.shadow_signed(shadow_signed_);
    rtl_.shift_skewed(shift_skewed_);
    rtl_.bottom_psum(bottom_psum_);
    rtl_.bottom_valid(bottom_valid_sig_);
    rtl_.any_valid(any_valid_);
    rtl_.shift_pending(shift_pending_);
    for (unsigned k = 0; k < rows; ++k)
      for (unsigned j = 0; j < cols; ++j) {  // every cell's registers, for registers()
        rtl_.psum_all[k][j](psum_all_[k * cols + j]);
        rtl_.weight_all[k][j](weight_all_[k * cols + j]);
        rtl_.shadow_all[k][j](shadow_all_[k * cols + j]);
        rtl_.x_all[k][j](x_all_[k * cols + j]);
        rtl_.x_valid_all[k][j](x_valid_all_[k * cols + j]);
      }
  }

  uint64_t rows() const override { return rows_; }
  uint64_t cols() const override { return cols_; }
  std::span<const int32_t> bottom() const override { return bottom_; }
  std::span<const uint8_t> bottom_valid() const override { return bottom_valid_; }
  bool empty() const override { return empty_; }
  bool shift_pending() const override { return shift_pending_now_; }

  // The RTL's own registers, as the last step() left them (weights and x are 9-bit signed).
  bool registers(uint64_t k, uint64_t j, std::array<int32_t, 5>& out) const override {
    const size_t c = k * cols_ + j;
    out = {nine_bits(get_field(weight_all_[c].read(), 0, 9)), nine_bits(get_field(shadow_all_[c].read(), 0, 9)),
           nine_bits(get_field(x_all_[c].read(), 0, 9)), int32_t(get_field(x_valid_all_[c].read(), 0, 1)),
           static_cast<int32_t>(get_field(psum_all_[c].read(), 0, 32))};
    return true;
  }

  void reset() override {
    std::fill(bottom_.begin(), bottom_.end(), 0);
    std::fill(bottom_valid_.begin(), bottom_valid_.end(), 0);
    empty_ = true;
    shift_pending_now_ = false;
    reset_pending_ = true;
  }

  void step(std::span<const int16_t> left_values, std::span<const uint8_t> left_flags, int64_t shadow_row,
            std::span<const int16_t> shadow_values) override {
    check_call(left_values.size(), left_flags.size(), shadow_row, shadow_values.size());
    if (reset_pending_) {  // the run's reset: one cycle with rst high, every input idle
      rst_.write(true);
      drive({}, {}, -1, {});
      clock();
      rst_.write(false);
      reset_pending_ = false;
    }
    drive(left_values, left_flags, shadow_row, shadow_values);
    clock();
  }

 private:
  void check_call(size_t values, size_t flags, int64_t shadow_row, size_t shadow_values) const {
    if (values != rows_ || flags != rows_ || (shadow_row >= 0 && (uint64_t(shadow_row) >= rows_ || shadow_values != cols_)))
      throw std::invalid_argument(
          fmt::format("co-simulated array: step() arguments do not fit the {} x {} array", rows_, cols_));
    if (sc_core::sc_get_current_process_handle().proc_kind() != sc_core::SC_THREAD_PROC_)
      throw std::logic_error("co-simulated array: step() must be called from a SystemC thread (the stepped "
                             "engine's matrix unit), where it can wait for delta cycles");
  }

  // The inputs of one cycle (empty spans: every row idle, no shadow write).
  void drive(std::span<const int16_t> left_values, std::span<const uint8_t> left_flags, int64_t shadow_row,
             std::span<const int16_t> shadow_values) {
    port_value<decltype(V::left_value)> value{};
    port_value<decltype(V::left_signed)> is_signed{};
    port_value<decltype(V::left_valid)> valid{};
    port_value<decltype(V::left_switch)> sw{};
    for (unsigned k = 0; k < left_values.size(); ++k) {
      put_field(value, 8 * k, 8, uint8_t(left_values[k]));
      put_field(is_signed, k, 1, is_signed_operand(left_values[k]));
      put_field(valid, k, 1, (left_flags[k] & kValid) != 0);
      put_field(sw, k, 1, (left_flags[k] & kSwitch) != 0);
    }
    left_value_.write(value);
    left_signed_.write(is_signed);
    left_valid_.write(valid);
    left_switch_.write(sw);
    shadow_we_.write(shadow_row >= 0);
    port_value<decltype(V::shadow_row)> row{};
    port_value<decltype(V::shadow_values)> weights{};
    bool has_int8 = false, has_uint8 = false;
    if (shadow_row >= 0) {
      put_field(row, 0, 32, uint32_t(shadow_row));
      for (unsigned j = 0; j < cols_; ++j) {
        put_field(weights, 8 * j, 8, uint8_t(shadow_values[j]));
        has_int8 |= shadow_values[j] < 0;
        has_uint8 |= shadow_values[j] > 127;
      }
    }
    if (has_int8 && has_uint8)
      throw std::invalid_argument("co-simulated array: a shadow weight row mixes int8 and uint8 values");
    shadow_row_.write(row);
    shadow_values_.write(weights);
    shadow_signed_.write(!has_uint8);
    shift_skewed_.write(skewed_shift_);
  }

  // A rising edge with the driven inputs: delta 1 runs the Verilated process, delta 2 sees its
  // outputs; the falling edge is committed by delta 3 (no simulated time passes).
  void clock() {
    clk_.write(true);
    sc_core::wait(sc_core::SC_ZERO_TIME);
    sc_core::wait(sc_core::SC_ZERO_TIME);
    const auto psum = bottom_psum_.read();
    const auto valid = bottom_valid_sig_.read();
    for (unsigned j = 0; j < cols_; ++j) {
      bottom_[j] = static_cast<int32_t>(get_field(psum, 32 * j, 32));
      bottom_valid_[j] = static_cast<uint8_t>(get_field(valid, j, 1));
    }
    empty_ = !any_valid_.read();
    shift_pending_now_ = shift_pending_.read();
    clk_.write(false);
    sc_core::wait(sc_core::SC_ZERO_TIME);
  }

  V rtl_;
  unsigned rows_, cols_;
  std::vector<int32_t> bottom_;
  std::vector<uint8_t> bottom_valid_;
  bool empty_ = true, shift_pending_now_ = false, reset_pending_ = true;
  sc_core::sc_signal<bool> clk_{"clk"}, rst_{"rst"};
  Signal<decltype(V::left_value)> left_value_{"left_value"};
  Signal<decltype(V::left_signed)> left_signed_{"left_signed"};
  Signal<decltype(V::left_valid)> left_valid_{"left_valid"};
  Signal<decltype(V::left_switch)> left_switch_{"left_switch"};
  Signal<decltype(V::shadow_we)> shadow_we_{"shadow_we"};
  Signal<decltype(V::shadow_row)> shadow_row_{"shadow_row"};
  Signal<decltype(V::shadow_values)> shadow_values_{"shadow_values"};
  Signal<decltype(V::shadow_signed)> shadow_signed_{"shadow_signed"};
  Signal<decltype(V::shift_skewed)> shift_skewed_{"shift_skewed"};
  Signal<decltype(V::bottom_psum)> bottom_psum_{"bottom_psum"};
  Signal<decltype(V::bottom_valid)> bottom_valid_sig_{"bottom_valid"};
  Signal<decltype(V::any_valid)> any_valid_{"any_valid"};
  Signal<decltype(V::shift_pending)> shift_pending_{"shift_pending"};
  std::unique_ptr<Signal<decltype(V::psum_all)>[]> psum_all_;
  std::unique_ptr<Signal<decltype(V::weight_all)>[]> weight_all_;
  std::unique_ptr<Signal<decltype(V::shadow_all)>[]> shadow_all_;
  std::unique_ptr<Signal<decltype(V::x_all)>[]> x_all_;
  std::unique_ptr<Signal<decltype(V::x_valid_all)>[]> x_valid_all_;
};

template <class V>
std::unique_ptr<sim::ArrayModel> make(uint64_t rows, uint64_t cols) {
  return std::make_unique<ScArray<V>>(fmt::format("cosim_array_{}x{}", rows, cols), unsigned(rows), unsigned(cols));
}

struct Size {
  uint64_t rows, cols;
  std::unique_ptr<sim::ArrayModel> (*make)(uint64_t, uint64_t);
};
const Size kSizes[] = {{4, 4, make<Vsc4x4>}, {8, 8, make<Vsc8x8>}, {16, 16, make<Vsc16x16>}};

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> cosim_array_sizes() {
  std::vector<std::pair<uint64_t, uint64_t>> sizes;
  for (const Size& s : kSizes) sizes.emplace_back(s.rows, s.cols);
  return sizes;
}

sim::ArrayModel& cosim_array(uint64_t rows, uint64_t cols) {
  // Created once per size and never destroyed (modules stay in the design until the process ends).
  static auto* arrays = new std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<sim::ArrayModel>>;
  auto it = arrays->find({rows, cols});
  if (it != arrays->end()) return *it->second;
  for (const Size& s : kSizes) {
    if (s.rows != rows || s.cols != cols) continue;
    const sc_core::sc_status status = sc_core::sc_get_status();
    if (status != sc_core::SC_ELABORATION && status != sc_core::SC_UNITIALIZED)
      throw std::logic_error(fmt::format("co-simulated array {} x {}: create it before the first sim::simulate() of "
                                         "the process (a SystemC module can only join the design during elaboration)",
                                         rows, cols));
    return *arrays->emplace(std::pair{rows, cols}, s.make(rows, cols)).first->second;
  }
  std::string built;
  for (const Size& s : kSizes) built += fmt::format(" {}x{}", s.rows, s.cols);
  throw std::invalid_argument(
      fmt::format("no co-simulated array of {} x {} is built (hw/CMakeLists.txt builds:{})", rows, cols, built));
}

}  // namespace tpusim::hw
