// The Verilated cell (hw/rtl/tpusim_mac_cell.sv) against mac_cell_next() (sim/mac_cell.h):
// every operand pair in every signedness mode, then a long random stream with every register
// compared every cycle.
#include <Vmac_cell.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fmt/format.h>
#include <random>
#include <string>

#include "sim/mac_cell.h"
#include "tests/hw/rtl_harness.h"

namespace {

using tpusim::sim::MacCell;
using tpusim::sim::mac_cell_next;
using tpusim::sim::SystolicArray;
namespace hw = tpusim::hw;

// An 8-bit operand widened as int8 (is_signed) or uint8, as the cell widens it.
int16_t widen(uint8_t bits, bool is_signed) {
  return is_signed ? static_cast<int16_t>(static_cast<int8_t>(bits)) : static_cast<int16_t>(bits);
}

// The RTL cell's registers in the C++ model's terms.
MacCell registers(const Vmac_cell& m) {
  MacCell c;
  c.weight = static_cast<int16_t>(hw::sign_extend(m.weight_out, 9));
  c.shadow = static_cast<int16_t>(hw::sign_extend(m.shadow_out, 9));
  c.x = widen(m.x_out, m.x_signed_out);
  c.x_flags = static_cast<uint8_t>((m.x_valid_out ? SystolicArray::kValid : 0) |
                                   (m.x_switch_out ? SystolicArray::kSwitch : 0));
  c.psum = static_cast<int32_t>(m.psum_out);
  c.psum_valid = m.psum_valid_out;
  return c;
}

std::string describe(const MacCell& c) {
  return fmt::format("weight {} shadow {} x {} flags {} psum {} valid {}", c.weight, c.shadow, c.x, c.x_flags, c.psum,
                     c.psum_valid);
}

struct CellInputs {
  uint8_t x = 0, flags = 0, shadow = 0;
  bool x_signed = false, w_signed = false, shadow_write = false;
  int32_t psum_in = 0;
};

void drive(Vmac_cell& m, const CellInputs& in) {
  m.x_in = in.x;
  m.x_signed = in.x_signed;
  m.x_valid_in = (in.flags & SystolicArray::kValid) != 0;
  m.x_switch_in = (in.flags & SystolicArray::kSwitch) != 0;
  m.psum_in = static_cast<uint32_t>(in.psum_in);
  m.shadow_we = in.shadow_write;
  m.shadow_in = in.shadow;
  m.w_signed = in.w_signed;
}

MacCell model_next(const MacCell& cur, const CellInputs& in) {
  return mac_cell_next(cur, widen(in.x, in.x_signed), in.flags, in.psum_in, in.shadow_write,
                       widen(in.shadow, in.w_signed));
}

}  // namespace

TEST_CASE("cell psum matches mac_cell_next for every operand pair in all four signedness modes") {
  VerilatedContext context;
  Vmac_cell cell(&context);
  hw::reset(cell);
  std::mt19937 rng(1);
  for (int mode = 0; mode < 4; ++mode) {
    const bool x_signed = mode & 1, w_signed = mode & 2;
    MacCell model;  // the RTL cell's state, read back each cycle
    // Cycle n multiplies pair n: its weight was written to the shadow in cycle n - 1 and is
    // switched in now, while pair n + 1's weight is written (the copy reads the old shadow).
    CellInputs in{.shadow = 0, .w_signed = w_signed, .shadow_write = true};
    drive(cell, in);
    hw::tick(cell);
    model = registers(cell);
    uint64_t mismatches = 0;
    for (uint32_t pair = 0; pair < 65536; ++pair) {
      const uint8_t w = static_cast<uint8_t>(pair >> 8), x = static_cast<uint8_t>(pair);
      REQUIRE(model.shadow == widen(w, w_signed));
      in = CellInputs{.x = x,
                      .flags = SystolicArray::kValid | SystolicArray::kSwitch,
                      .shadow = static_cast<uint8_t>((pair + 1) >> 8),
                      .x_signed = x_signed,
                      .w_signed = w_signed,
                      .shadow_write = true,
                      .psum_in = static_cast<int32_t>(rng())};
      const MacCell want = model_next(model, in);
      drive(cell, in);
      hw::tick(cell);
      model = registers(cell);
      // The plainest statement of the product: psum_in + w * x, modulo 2^32.
      const int64_t plain = int64_t{in.psum_in} + int64_t{widen(w, w_signed)} * widen(x, x_signed);
      if (model.psum != want.psum || model.psum != static_cast<int32_t>(plain)) {
        if (++mismatches <= 5)
          FAIL_CHECK("mode x_signed " << x_signed << " w_signed " << w_signed << " w " << int(w) << " x "
                                      << int(x) << ": rtl " << model.psum << " model " << want.psum);
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("cell registers match mac_cell_next over a million random cycles with resets") {
  VerilatedContext context;
  Vmac_cell cell(&context);
  hw::reset(cell);
  MacCell model;
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> percent(0, 99);
  uint64_t mismatches = 0;
  for (uint64_t cycle = 0; cycle < 1'000'000; ++cycle) {
    if (percent(rng) == 0) {  // 1% of cycles: synchronous reset of both
      hw::reset(cell);
      model = MacCell{};
    } else {
      const uint32_t r = rng();
      CellInputs in{.x = static_cast<uint8_t>(r),
                    .flags = static_cast<uint8_t>((r >> 8) & 3),
                    .shadow = static_cast<uint8_t>(r >> 16),
                    .x_signed = ((r >> 24) & 1) != 0,
                    .w_signed = ((r >> 25) & 1) != 0,
                    .shadow_write = ((r >> 26) & 1) != 0,
                    .psum_in = static_cast<int32_t>(rng())};
      drive(cell, in);
      hw::tick(cell);
      model = model_next(model, in);
    }
    const MacCell got = registers(cell);
    if (!(got == model) && ++mismatches <= 5)
      FAIL_CHECK("cycle " << cycle << ": rtl " << describe(got) << " | model " << describe(model));
  }
  CHECK(mismatches == 0);
}
