// Driving Verilated models of hw/rtl from C++: packed-port bit access, the clock, and
// RtlArray<V>, the Verilated tpusim_systolic_array behind SystolicArray's step() interface.
// Shared by tests/hw and bench/rtl_bench.
#pragma once

#include <verilated.h>

#include <cstdint>
#include <span>
#include <type_traits>

namespace tpusim::hw {

// Bits [lsb, lsb + width) of a port (width <= 32): ports up to 64 bits are integers, wider ones
// VlWide (32-bit words, least significant first).
template <class Port>
uint32_t get_bits(const Port& port, unsigned lsb, unsigned width) {
  const uint64_t mask = (uint64_t{1} << width) - 1;
  if constexpr (std::is_integral_v<Port>) {
    return static_cast<uint32_t>((static_cast<uint64_t>(port) >> lsb) & mask);
  } else {
    const unsigned word = lsb / 32, off = lsb % 32;
    uint64_t v = port.data()[word] >> off;
    if (off + width > 32) v |= static_cast<uint64_t>(port.data()[word + 1]) << (32 - off);
    return static_cast<uint32_t>(v & mask);
  }
}

template <class Port>
void set_bits(Port& port, unsigned lsb, unsigned width, uint32_t value) {
  const uint64_t mask = (uint64_t{1} << width) - 1;
  if constexpr (std::is_integral_v<Port>) {
    const uint64_t p = (static_cast<uint64_t>(port) & ~(mask << lsb)) | ((value & mask) << lsb);
    port = static_cast<Port>(p);
  } else {
    for (unsigned b = 0; b < width; ++b) {
      const unsigned bit = lsb + b;
      auto& w = port.data()[bit / 32];
      w = (w & ~(1u << (bit % 32))) | (((value >> b) & 1u) << (bit % 32));
    }
  }
}

// Where tick() reports time steps for a waveform (tests/hw writes a VCD through it).
struct Tracer {
  virtual void dump(uint64_t time) = 0;
  virtual ~Tracer() = default;
};

// A width-bit two's-complement field as int32.
inline int32_t sign_extend(uint32_t v, unsigned width) {
  const uint32_t sign = uint32_t{1} << (width - 1);
  return static_cast<int32_t>((v ^ sign) - sign);  // wraps in uint32, exact in int32
}

// One clock cycle: the inputs set before the call are sampled at the rising edge.
template <class Model>
void tick(Model& m, Tracer* vcd = nullptr, uint64_t* time = nullptr) {
  m.clk = 0;
  m.eval();
  if (vcd) vcd->dump((*time)++);
  m.clk = 1;
  m.eval();
  if (vcd) vcd->dump((*time)++);
}

// Synchronous reset: one cycle with rst high.
template <class Model>
void reset(Model& m, Tracer* vcd = nullptr, uint64_t* time = nullptr) {
  m.rst = 1;
  tick(m, vcd, time);
  m.rst = 0;
}

// The Verilated tpusim_systolic_array (Vsa<R>x<C>) stepped like sim::SystolicArray.
template <class V>
class RtlArray {
 public:
  static constexpr uint8_t kValid = 1, kSwitch = 2;  // SystolicArray's flags

  RtlArray(VerilatedContext& context, unsigned rows, unsigned cols) : model_(&context), rows_(rows), cols_(cols) {
    reset_all();
  }
  void reset_all() { hw::reset(model_, vcd_, &time_); }
  // The shift_skewed pin (sim::ArrayModel::set_skewed_shift), held for a run.
  void set_skewed_shift(bool on) { model_.shift_skewed = on; }
  void trace_to(Tracer* vcd) { vcd_ = vcd; }
  unsigned rows() const { return rows_; }
  unsigned cols() const { return cols_; }
  V& model() { return model_; }

  // Drives one step's inputs without clocking (values: rows() widened operands; signedness[k]
  // says whether row k's value is int8 or uint8).
  void drive(std::span<const int16_t> values, std::span<const uint8_t> flags, std::span<const uint8_t> signedness,
             int64_t shadow_row, std::span<const int16_t> shadow, bool shadow_signed) {
    for (unsigned k = 0; k < rows_; ++k) {
      set_bits(model_.left_value, 8 * k, 8, static_cast<uint8_t>(values[k]));
      set_bits(model_.left_signed, k, 1, signedness[k]);
      set_bits(model_.left_valid, k, 1, (flags[k] & kValid) ? 1 : 0);
      set_bits(model_.left_switch, k, 1, (flags[k] & kSwitch) ? 1 : 0);
    }
    model_.shadow_we = shadow_row >= 0;
    model_.shadow_row = static_cast<std::remove_reference_t<decltype(model_.shadow_row)>>(shadow_row >= 0 ? shadow_row : 0);
    model_.shadow_signed = shadow_signed;
    if (shadow_row >= 0)
      for (unsigned j = 0; j < cols_; ++j) set_bits(model_.shadow_values, 8 * j, 8, static_cast<uint8_t>(shadow[j]));
  }
  void step(std::span<const int16_t> values, std::span<const uint8_t> flags, std::span<const uint8_t> signedness,
            int64_t shadow_row, std::span<const int16_t> shadow, bool shadow_signed) {
    drive(values, flags, signedness, shadow_row, shadow, shadow_signed);
    tick(model_, vcd_, &time_);
  }

  int32_t bottom(unsigned j) const { return static_cast<int32_t>(get_bits(model_.bottom_psum, 32 * j, 32)); }
  uint8_t bottom_valid(unsigned j) const { return static_cast<uint8_t>(get_bits(model_.bottom_valid, j, 1)); }
  bool any_valid() const { return model_.any_valid != 0; }  // some cell holds valid data
  bool shift_pending() const { return model_.shift_pending != 0; }  // a delayed shadow write
  int32_t psum(unsigned k, unsigned j) const {
    return static_cast<int32_t>(model_.psum_all[k][j]);
  }
  int16_t weight(unsigned k, unsigned j) const {
    return static_cast<int16_t>(sign_extend(model_.weight_all[k][j], 9));
  }
  int16_t shadow(unsigned k, unsigned j) const {
    return static_cast<int16_t>(sign_extend(model_.shadow_all[k][j], 9));
  }

 private:
  V model_;
  unsigned rows_, cols_;
  Tracer* vcd_ = nullptr;
  uint64_t time_ = 0;
};

}  // namespace tpusim::hw
