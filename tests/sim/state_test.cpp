// The data semantics of each instruction (sim/state.h) on tiny machines, with every expected
// value worked out by hand in the comments.
#include "sim/state.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "sim_support.h"
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "isa/assembler.h"

namespace tpusim::sim {
namespace {

using Catch::Contains;
using test::host_region;
using test::make;
using test::set_acc;
using test::set_row;
using test::tiny;
using isa::Field;
using isa::Func;
using isa::Opcode;

// Input region x at 0x100 holding 1, 2, ..., 16; output region y at 0x200, 12 bytes.
isa::Program host_program() {
  isa::Program p;
  std::vector<uint8_t> x;
  for (uint8_t i = 1; i <= 16; ++i) x.push_back(i);
  p.host_regions = {host_region("x", 0x100, 16, x), host_region("y", 0x200, 12, {}, true)};
  return p;
}

std::vector<int> row_s8(const MachineState& s, uint64_t row) {  // UB row read as int8
  const uint8_t* p = s.ub_row(row);
  return std::vector<int>(reinterpret_cast<const int8_t*>(p),
                          reinterpret_cast<const int8_t*>(p) + s.arch.ub_row_bytes());
}

std::vector<int> row_u8(const MachineState& s, uint64_t row) {
  return std::vector<int>(s.ub_row(row), s.ub_row(row) + s.arch.ub_row_bytes());
}

TEST_CASE("make_state sizes and zeroes the memories and loads the host inputs", "[state]") {
  const isa::Program p = host_program();
  MachineState s = make_state(p, tiny(2, 4));
  CHECK(s.ub == std::vector<uint8_t>(64 * 4, 0));
  CHECK(s.acc == std::vector<int32_t>(16 * 4, 0));
  REQUIRE(s.host.size() == 2);
  CHECK((s.host[0].name == "x" && !s.host[0].output && s.host[0].addr == 0x100));
  CHECK(s.host[0].bytes == p.host_regions[0].init);
  CHECK((s.host[1].name == "y" && s.host[1].output && s.host[1].bytes == std::vector<uint8_t>(12, 0)));
  CHECK(s.host_span(0x100, 16) == &s.host[0]);
  CHECK(s.host_span(0x20b, 1) == &s.host[1]);
  CHECK(s.host_span(0x10f, 2) == nullptr);  // runs one byte past x
  CHECK(s.host_span(0xff, 1) == nullptr);
  CHECK(s.host_span(0x100, 0x200) == nullptr);  // would span x, the gap and y
  CHECK(s.host_span(UINT64_MAX, 2) == nullptr);
}

TEST_CASE("describe names the index and the instruction's text", "[state]") {
  CHECK(describe(12, make(Opcode::matmul, {{Field::rows, 8}, {Field::switch_weights, 1}})) ==
        "instruction 12 (matmul ub=0, acc=0, rows=8, switch)");
}

TEST_CASE("round_half_away_shift rounds ties away from zero on both sides", "[state]") {
  CHECK(round_half_away_shift(5, 1) == 3);    // 2.5
  CHECK(round_half_away_shift(-5, 1) == -3);  // -2.5
  CHECK(round_half_away_shift(-6, 2) == -2);  // -1.5
  CHECK(round_half_away_shift(6, 2) == 2);    // 1.5
  CHECK(round_half_away_shift(5, 2) == 1);    // 1.25
  CHECK(round_half_away_shift(-7, 2) == -2);  // -1.75
  CHECK(round_half_away_shift(-1, 1) == -1);  // -0.5
  CHECK(round_half_away_shift(1, 2) == 0);    // 0.25
  CHECK(round_half_away_shift(-1, 2) == 0);   // -0.25
  CHECK(round_half_away_shift(-77, 0) == -77);
  CHECK(round_half_away_shift(INT64_MAX, 63) == 1);             // 0.99999...
  CHECK(round_half_away_shift(INT64_MIN, 63) == -1);            // exactly -1
  CHECK(round_half_away_shift(-(int64_t{1} << 62), 63) == -1);  // -0.5
  CHECK(round_half_away_shift(INT64_MIN, 64) == -1);            // -0.5
  CHECK(round_half_away_shift(INT64_MAX, 64) == 0);             // just below 0.5
  CHECK(round_half_away_shift(INT64_MIN, 65) == 0);
}

// round_half_away_shift works in 64 bits (|x| >> shift plus the bit below): held against the
// plain definition, (|x| + 2^(shift-1)) >> shift in 128 bits, on every shift and values around
// each power of two, the extremes and random ones.
TEST_CASE("round_half_away_shift equals the 128-bit definition", "[state]") {
  __extension__ using u128 = unsigned __int128;
  const auto plain = [](int64_t x, unsigned shift) -> int64_t {
    if (shift == 0) return x;
    if (shift > 64) return 0;
    const u128 mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    const auto q = static_cast<int64_t>((mag + (u128{1} << (shift - 1))) >> shift);
    return x < 0 ? -q : q;
  };
  std::vector<int64_t> xs{0, 1, -1, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
  for (unsigned b = 0; b < 63; ++b)
    for (int64_t d = -2; d <= 2; ++d) {
      const int64_t p = (int64_t{1} << b) + d;
      xs.push_back(p), xs.push_back(-p), xs.push_back(p + (p >> 1)), xs.push_back(-(p + (p >> 1)));
    }
  uint64_t state = 88172645463325252ull;  // xorshift64
  for (int i = 0; i < 2000; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    xs.push_back(static_cast<int64_t>(state) >> (state % 64));
  }
  uint64_t differ = 0;
  for (const int64_t x : xs)
    for (unsigned shift = 0; shift <= 66; ++shift) differ += round_half_away_shift(x, shift) != plain(x, shift);
  CHECK(differ == 0);
}

TEST_CASE("apply_func: each function, then saturation to int8 or uint8", "[state]") {
  CHECK(apply_func(Func::identity, 200, 127, false) == 127);
  CHECK(apply_func(Func::identity, -200, 127, false) == -128);
  CHECK(apply_func(Func::identity, 300, 127, true) == 255);
  CHECK(apply_func(Func::identity, -5, 127, true) == 0);
  CHECK(apply_func(Func::relu, -5, 127, false) == 0);
  CHECK(apply_func(Func::relu, 300, 127, false) == 127);
  CHECK(apply_func(Func::relu, 200, 127, true) == 200);
  CHECK(apply_func(Func::relux, 100, 6, false) == 6);
  CHECK(apply_func(Func::relux, -3, 6, false) == 0);
  CHECK(apply_func(Func::relux, 4, 6, false) == 4);
  CHECK(apply_func(Func::relux, 250, 255, true) == 250);
  CHECK(apply_func(Func::relux, 250, 255, false) == 127);  // clip above the int8 range
}

TEST_CASE("sigmoid and tanh: pinned values of 127 * f(y / 256)", "[state]") {
  CHECK(apply_func(Func::sigmoid, 0, 127, false) == 64);     // 63.5 rounds away from zero
  CHECK(apply_func(Func::sigmoid, 256, 127, false) == 93);   // 127 * 0.73106 = 92.84
  CHECK(apply_func(Func::sigmoid, -256, 127, false) == 34);  // 127 * 0.26894 = 34.16
  CHECK(apply_func(Func::sigmoid, 16, 127, false) == 65);    // 127 * sigmoid(1/16) = 127 * 0.51562 = 65.48
  CHECK(apply_func(Func::tanh, 0, 127, false) == 0);
  CHECK(apply_func(Func::tanh, 256, 127, false) == 97);  // 127 * 0.76159 = 96.72
  CHECK(apply_func(Func::tanh, -256, 127, false) == -97);
  CHECK(apply_func(Func::tanh, 128, 127, false) == 59);  // 127 * 0.46212 = 58.69
  CHECK(apply_func(Func::tanh, 1, 127, false) == 0);     // 127 * tanh(1/256) = 0.496
  CHECK(apply_func(Func::tanh, 2, 127, false) == 1);     // 0.992
  CHECK(apply_func(Func::tanh, -256, 127, true) == 0);   // saturates to uint8
  // The ends of the input range and beyond (flat at int8 precision).
  CHECK(apply_func(Func::sigmoid, 2047, 127, false) == 127);
  CHECK(apply_func(Func::sigmoid, -2048, 127, false) == 0);
  CHECK(apply_func(Func::sigmoid, int64_t{1} << 40, 127, false) == 127);
  CHECK(apply_func(Func::sigmoid, -(int64_t{1} << 40), 127, false) == 0);
  CHECK(apply_func(Func::tanh, int64_t{1} << 40, 127, false) == 127);
  CHECK(apply_func(Func::tanh, -(int64_t{1} << 40), 127, false) == -127);
}

// The curves' input range [kCurveInputMin, kCurveInputMax] loses nothing: 127 f(y / 256) rounds to
// the curve's limit already inside it, so clamping y there is exact.
TEST_CASE("sigmoid and tanh reach their int8 limits inside the curves' input range", "[state]") {
  STATIC_REQUIRE(isa::kCurveInputMin == -2048);
  STATIC_REQUIRE(isa::kCurveInputMax == 2047);
  for (const Func f : {Func::sigmoid, Func::tanh}) {
    const double lo = f == Func::sigmoid ? 0 : -127, hi = 127;
    const auto exact = [&](int64_t y) {
      const double x = double(y) / 256;
      return std::lround(f == Func::sigmoid ? 127 / (1 + std::exp(-x)) : 127 * std::tanh(x));
    };
    CHECK(exact(isa::kCurveInputMin) == lo);
    CHECK(exact(isa::kCurveInputMax) == hi);
    for (const bool out_unsigned : {false, true}) {
      const int low = apply_func(f, isa::kCurveInputMin, 127, out_unsigned);
      const int high = apply_func(f, isa::kCurveInputMax, 127, out_unsigned);
      for (int64_t y = -70000; y <= isa::kCurveInputMin; ++y) REQUIRE(apply_func(f, y, 127, out_unsigned) == low);
      for (int64_t y = isa::kCurveInputMax; y <= 70000; ++y) REQUIRE(apply_func(f, y, 127, out_unsigned) == high);
    }
  }
}

TEST_CASE("setcfg writes the host DMA registers", "[state]") {
  MachineState s = make_state(host_program(), tiny());
  exec_set_config(s, make(Opcode::set_config, {{Field::reg, 0}, {Field::value, 5}}), 0);
  exec_set_config(s, make(Opcode::set_config, {{Field::reg, 1}, {Field::value, 3}}), 1);
  CHECK((s.host_stride == 5 && s.host_row_bytes == 3));
}

TEST_CASE("rhm copies host rows into UB rows and zero-fills the rest", "[state]") {
  MachineState s = make_state(host_program(), tiny());
  std::fill(s.ub.begin(), s.ub.end(), 0xee);
  exec_read_host(s, make(Opcode::read_host, {{Field::host, 0x100}, {Field::ub, 2}, {Field::rows, 2}}), 0);
  CHECK(row_u8(s, 2) == std::vector<int>{1, 2, 3, 4});  // reset registers: 4 bytes, 4 apart
  CHECK(row_u8(s, 3) == std::vector<int>{5, 6, 7, 8});
  CHECK(row_u8(s, 4) == std::vector<int>{0xee, 0xee, 0xee, 0xee});
  s.host_stride = 5;
  s.host_row_bytes = 3;  // rows at 0x100, 0x105, 0x10a: bytes 1-3, 6-8, 11-13
  exec_read_host(s, make(Opcode::read_host, {{Field::host, 0x100}, {Field::ub, 10}, {Field::rows, 3}}), 0);
  CHECK(row_u8(s, 10) == std::vector<int>{1, 2, 3, 0});
  CHECK(row_u8(s, 11) == std::vector<int>{6, 7, 8, 0});
  CHECK(row_u8(s, 12) == std::vector<int>{11, 12, 13, 0});
}

TEST_CASE("whm copies UB rows to host rows and leaves the bytes between them", "[state]") {
  MachineState s = make_state(host_program(), tiny());
  std::fill(s.host[1].bytes.begin(), s.host[1].bytes.end(), 0x55);
  set_row(s, 0, {1, 2, 3, 4});
  set_row(s, 1, {5, 6, 7, 8});
  set_row(s, 2, {9, 10, 11, 12});
  s.host_stride = 3;
  s.host_row_bytes = 2;  // rows to 0x200, 0x203, 0x206
  exec_write_host(s, make(Opcode::write_host, {{Field::host, 0x200}, {Field::ub, 0}, {Field::rows, 3}}), 0);
  CHECK(s.host[1].bytes == std::vector<uint8_t>{1, 2, 0x55, 5, 6, 0x55, 9, 10, 0x55, 0x55, 0x55, 0x55});
  s.host_stride = s.host_row_bytes = 0;  // full 4-byte rows, dense
  exec_write_host(s, make(Opcode::write_host, {{Field::host, 0x204}, {Field::ub, 1}, {Field::rows, 2}}), 0);
  CHECK(s.host[1].bytes == std::vector<uint8_t>{1, 2, 0x55, 5, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST_CASE("host DMA errors name the instruction, the range and the memory", "[state]") {
  MachineState s = make_state(host_program(), tiny());
  auto rhm = [](uint64_t host, uint64_t ub, uint64_t rows) {
    return make(Opcode::read_host, {{Field::host, host}, {Field::ub, ub}, {Field::rows, rows}});
  };
  REQUIRE_THROWS_WITH(exec_read_host(s, rhm(0x100, 62, 4), 7),
                      "instruction 7 (rhm host=0x100, ub=62, rows=4): writes UB rows 62..65, but the "
                      "unified buffer has 64 rows");
  REQUIRE_THROWS_WITH(exec_read_host(s, rhm(0x10c, 0, 2), 3),
                      "instruction 3 (rhm host=0x10c, ub=0, rows=2): reads host bytes 0x110..0x113 (row 1 "
                      "of 2), which do not lie inside one host region (host regions: x 0x100..0x10f, y "
                      "0x200..0x20b)");
  REQUIRE_THROWS_WITH(
      exec_write_host(s, make(Opcode::write_host, {{Field::host, 0x20a}, {Field::rows, 1}}), 4),
      Contains("writes host bytes 0x20a..0x20d (row 0 of 1)"));
  s.host_row_bytes = 5;
  REQUIRE_THROWS_WITH(
      exec_read_host(s, rhm(0x100, 0, 1), 0),
      Contains("(rhm host=0x100, ub=0, rows=1): host_row_bytes = 5 is wider than a UB row (4 bytes)"));
  s.host_row_bytes = 0;
  s.host_stride = uint64_t{1} << 63;  // the second row's address does not fit in 64 bits
  REQUIRE_THROWS_WITH(exec_read_host(s, rhm(0x100, 0, 3), 0),
                      Contains("host bytes 0x8000000000000100..0x8000000000000103 (row 1 of 3)"));
  try {
    exec_read_host(s, rhm(0x100, 0, 3), 9);
    FAIL("no SimError");
  } catch (const SimError& e) {
    CHECK(e.index == 9);
  }
}

TEST_CASE("act requantizes with ties away from zero, saturates and writes its columns at act_lane", "[state]") {
  MachineState s = make_state({}, tiny());
  set_acc(s, 0, {2, -2, 6, -6});      // / 4: 0.5, -0.5, 1.5, -1.5
  set_acc(s, 1, {100, -100, 3, -3});  // * 3 / 4: 75, -75, 2.25, -2.25
  set_acc(s, 2, {1000, -1000, 127, -129});
  exec_activate(s, make(Opcode::activate, {{Field::rows, 1}, {Field::ub, 10}, {Field::shift, 2}}), 0);
  CHECK(row_s8(s, 10) == std::vector<int>{1, -1, 2, -2});
  exec_activate(
      s,
      make(Opcode::activate,
           {{Field::acc, 1}, {Field::rows, 1}, {Field::ub, 11}, {Field::mult, 3}, {Field::shift, 2}}),
      0);
  CHECK(row_s8(s, 11) == std::vector<int>{75, -75, 2, -2});
  exec_activate(s, make(Opcode::activate, {{Field::acc, 2}, {Field::rows, 1}, {Field::ub, 12}}), 0);
  CHECK(row_s8(s, 12) == std::vector<int>{127, -128, 127, -128});
  exec_activate(
      s,
      make(Opcode::activate, {{Field::acc, 2}, {Field::rows, 1}, {Field::ub, 12}, {Field::unsigned_data, 1}}),
      0);
  CHECK(row_u8(s, 12) == std::vector<int>{255, 0, 127, 0});
  // x * mult overflows 32 bits: -2^31 * 65535 / 2^40 = -127.998 -> -128.
  set_acc(s, 3, {INT32_MIN, INT32_MAX, 0, 0});
  exec_activate(
      s,
      make(Opcode::activate,
           {{Field::acc, 3}, {Field::rows, 1}, {Field::ub, 13}, {Field::mult, 65535}, {Field::shift, 40}}),
      0);
  CHECK(row_s8(s, 13) == std::vector<int>{-128, 127, 0, 0});
  // A 4 x 2 array: accumulator rows are 2 wide, UB rows 4 bytes; bytes 2 and 3 are kept, and
  // with act_lane = 2 the columns go there, keeping bytes 0 and 1.
  MachineState n = make_state({}, tiny(4, 2));
  std::fill(n.ub.begin(), n.ub.end(), 0x55);
  set_acc(n, 0, {-7, 9});
  exec_activate(n, make(Opcode::activate, {{Field::rows, 1}}), 0);
  CHECK(row_s8(n, 0) == std::vector<int>{-7, 9, 0x55, 0x55});
  set_acc(n, 1, {3, -4});
  n.act_lane = 2;
  exec_activate(n, make(Opcode::activate, {{Field::acc, 1}, {Field::rows, 1}}), 0);
  CHECK(row_s8(n, 0) == std::vector<int>{-7, 9, 3, -4});
  n.act_lane = 3;  // 3 + 2 columns > 4 bytes
  CHECK_THROWS_WITH(exec_activate(n, make(Opcode::activate, {{Field::rows, 1}}), 0),
                    Contains("writes bytes 3..4 of each UB row (act_lane 3), but a UB row has 4 bytes"));
}

TEST_CASE("act applies relu, relux at clip, sigmoid and tanh", "[state]") {
  MachineState s = make_state({}, tiny());
  set_acc(s, 0, {10, -10, 5, 6});
  set_acc(s, 1, {0, 256, -256, 100000});  // read as y / 256: 0, 1, -1, far beyond 8
  set_acc(s, 2, {0, 256, -256, -100000});
  auto act = [](Func f, uint64_t acc, uint64_t clip) {
    return make(Opcode::activate, {{Field::func, static_cast<uint64_t>(f)},
                                   {Field::acc, acc},
                                   {Field::ub, 20},
                                   {Field::rows, 1},
                                   {Field::clip, clip}});
  };
  exec_activate(s, act(Func::relu, 0, 127), 0);
  CHECK(row_s8(s, 20) == std::vector<int>{10, 0, 5, 6});
  exec_activate(s, act(Func::relux, 0, 6), 0);
  CHECK(row_s8(s, 20) == std::vector<int>{6, 0, 5, 6});
  exec_activate(s, act(Func::sigmoid, 1, 127), 0);
  CHECK(row_s8(s, 20) == std::vector<int>{64, 93, 34, 127});
  exec_activate(s, act(Func::tanh, 2, 127), 0);
  CHECK(row_s8(s, 20) == std::vector<int>{0, 97, -97, -127});
}

// The per-column table of a 4-column machine: 28 bytes = UB rows 8..14 (4-byte rows).
void write_table(MachineState& s, std::vector<int32_t> bias, std::vector<uint16_t> mult,
                 std::vector<uint8_t> shift) {
  uint8_t* t = s.ub_row(8);
  for (size_t c = 0; c < 4; ++c) {
    for (int b = 0; b < 4; ++b)
      t[4 * c + b] = static_cast<uint8_t>(static_cast<uint32_t>(bias[c]) >> (8 * b));
    t[16 + 2 * c] = static_cast<uint8_t>(mult[c]);
    t[16 + 2 * c + 1] = static_cast<uint8_t>(mult[c] >> 8);
    t[24 + c] = shift[c];
  }
}

TEST_CASE("act with perchan takes bias, mult and shift per column from the table", "[state]") {
  MachineState s = make_state({}, tiny());
  write_table(s, {1000, -1000, 0, 5}, {1, 2, 3, 65535}, {4, 0, 1, 16});
  set_acc(s, 0, {600, 1000, 5, -3});
  set_acc(s, 1, {-1032, 7, -5, -7});
  // row 0: 1600 / 16 = 100; 0 * 2 = 0; 15 / 2 = 7.5 -> 8; 2 * 65535 / 65536 = 1.99997 -> 2
  // row 1: -32 / 16 = -2; -993 * 2 -> -128; -15 / 2 = -7.5 -> -8; -2 * 65535 / 65536 -> -2
  const auto act = make(Opcode::activate, {{Field::per_channel, 1},
                                           {Field::qtable, 8},
                                           {Field::ub, 30},
                                           {Field::rows, 2},
                                           {Field::mult, 9},
                                           {Field::shift, 9}});
  exec_activate(s, act, 0);
  CHECK(row_s8(s, 30) == std::vector<int>{100, 0, 8, 2});
  CHECK(row_s8(s, 31) == std::vector<int>{-2, -128, -8, -2});
  // A shift byte's bits 6-7 are ignored: 64 + 2 shifts by 2, 0xff by 63 (no data makes act fail,
  // so the timing engine, which sees no data, refuses exactly the programs the others do).
  write_table(s, {0, 0, 0, 0}, {1, 1, 1, 1}, {64 + 2, 0, 0xff, 0xc0});
  exec_activate(s, act, 5);
  const std::vector<int> by_low_bits = row_s8(s, 30);
  write_table(s, {0, 0, 0, 0}, {1, 1, 1, 1}, {2, 0, 63, 0});
  exec_activate(s, act, 5);
  CHECK(row_s8(s, 30) == by_low_bits);
}

TEST_CASE("act refuses rows outside the accumulators, the UB or a table past the UB", "[state]") {
  MachineState s = make_state({}, tiny());
  REQUIRE_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::acc, 14}, {Field::rows, 4}}), 1),
                      Contains("reads accumulator rows 14..17, but the accumulators have 16 rows"));
  REQUIRE_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::ub, 62}, {Field::rows, 4}}), 1),
                      Contains("writes UB rows 62..65, but the unified buffer has 64 rows"));
  REQUIRE_THROWS_WITH(
      exec_activate(
          s, make(Opcode::activate, {{Field::per_channel, 1}, {Field::qtable, 60}, {Field::rows, 1}}), 1),
      Contains("reads the per-column table from UB rows 60..66, but the unified buffer has 64 rows"));
}

isa::Instruction vec(isa::VecOp op, Func f, uint64_t mult, uint64_t shift, uint64_t src_b = 1) {
  return make(Opcode::vector, {{Field::op, static_cast<uint64_t>(op)},
                               {Field::func, static_cast<uint64_t>(f)},
                               {Field::src, 0},
                               {Field::src_b, src_b},
                               {Field::ub, 2},
                               {Field::rows, 1},
                               {Field::mult, mult},
                               {Field::shift, shift}});
}

TEST_CASE("vec: every operation, requantization and function", "[state]") {
  using isa::VecOp;
  MachineState s = make_state({}, tiny());
  set_row(s, 0, {100, -100, 7, -128});  // a
  set_row(s, 1, {50, 50, -3, -128});    // b
  auto run = [&](isa::Instruction i) {
    exec_vector(s, i, 0);
    return row_s8(s, 2);
  };
  CHECK(run(vec(VecOp::add, Func::identity, 1, 0)) ==
        std::vector<int>{127, -50, 4, -128});  // 150, -256 saturate
  CHECK(run(vec(VecOp::sub, Func::identity, 1, 0)) == std::vector<int>{50, -128, 10, 0});  // -150 saturates
  // 5000, -5000, -21, 16384 over 2^7: 39.06, -39.06, -0.16, 128 (saturates)
  CHECK(run(vec(VecOp::mul, Func::identity, 1, 7)) == std::vector<int>{39, -39, 0, 127});
  CHECK(run(vec(VecOp::max, Func::identity, 1, 0)) == std::vector<int>{100, 50, 7, -128});
  CHECK(run(vec(VecOp::min, Func::identity, 1, 0)) == std::vector<int>{50, -100, -3, -128});
  // a * 3 / 2: 150, -150, 10.5 -> 11, -192
  CHECK(run(vec(VecOp::pass, Func::identity, 3, 1)) == std::vector<int>{127, -128, 11, -128});
  CHECK(run(vec(VecOp::add, Func::relu, 1, 0)) == std::vector<int>{127, 0, 4, 0});
  CHECK(run(vec(VecOp::add, Func::relux, 1, 0)) == std::vector<int>{127, 0, 4, 0});  // clips at 127
  set_row(s, 0, {0, 16, -16, 127});  // x 16 read as y / 256: 0, 1, -1, 7.9
  CHECK(run(vec(VecOp::pass, Func::sigmoid, 16, 0)) == std::vector<int>{64, 93, 34, 127});
  CHECK(run(vec(VecOp::pass, Func::tanh, 16, 0)) == std::vector<int>{0, 97, -97, 127});
  // Unscaled, the same bytes are y / 256 = 0, 1/16, -1/16, 0.496: 127 sigmoid = 63.5, 65.48,
  // 61.52, 78.7; 127 tanh = 0, 7.93, -7.93, 58.2.
  CHECK(run(vec(VecOp::pass, Func::sigmoid, 1, 0)) == std::vector<int>{64, 65, 62, 79});
  CHECK(run(vec(VecOp::pass, Func::tanh, 1, 0)) == std::vector<int>{0, 8, -8, 58});
  set_row(s, 0, {1, -1, 3, -3});  // / 2: 0.5, -0.5, 1.5, -1.5
  CHECK(run(vec(VecOp::pass, Func::identity, 1, 1)) == std::vector<int>{1, -1, 2, -2});
}

TEST_CASE("vec: pass does not read src_b - overlapping rows are read before written", "[state]") {
  MachineState s = make_state({}, tiny());
  REQUIRE_NOTHROW(exec_vector(s, vec(isa::VecOp::pass, Func::identity, 1, 0, 1000), 0));
  REQUIRE_THROWS_WITH(exec_vector(s, vec(isa::VecOp::add, Func::identity, 1, 0, 1000), 6),
                      Contains("instruction 6 (vec op=add, src=0, src_b=1000, ub=2, rows=1): reads UB rows "
                               "1000..1000, but the unified buffer has 64 rows"));
  set_row(s, 0, {1, 2, 3, 4});
  set_row(s, 1, {5, 6, 7, 8});
  exec_vector(s, make(Opcode::vector, {{Field::op, 5}, {Field::src, 0}, {Field::ub, 1}, {Field::rows, 2}}),
              0);
  CHECK(row_s8(s, 1) == std::vector<int>{1, 2, 3, 4});
  CHECK(row_s8(s, 2) == std::vector<int>{5, 6, 7, 8});  // not row 0 again
}

// ---- 16-bit elements (setcfg act_high, vec_high_a, vec_high_b, vec_high_out) ----------------

// A UB row pair read as int16: low bytes (unsigned) at `row`, high bytes (signed) at row + h.
std::vector<int> row_s16(const MachineState& s, uint64_t row, uint64_t h) {
  std::vector<int> v;
  for (uint64_t i = 0; i < s.arch.ub_row_bytes(); ++i)
    v.push_back(int{s.ub_row(row)[i]} + 256 * int{static_cast<int8_t>(s.ub_row(row + h)[i])});
  return v;
}

// Writes int16 values as a low plane at `row` and a high plane at row + h.
void set_row16(MachineState& s, uint64_t row, uint64_t h, std::vector<int> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    const auto v = static_cast<uint16_t>(values[i]);
    s.ub_row(row)[i] = static_cast<uint8_t>(v);
    s.ub_row(row + h)[i] = static_cast<uint8_t>(v >> 8);
  }
}

TEST_CASE("apply_func16: the 16-bit curves and saturation to int16", "[state][wide]") {
  CHECK(apply_func16(Func::identity, 40000, 127) == 32767);
  CHECK(apply_func16(Func::identity, -40000, 127) == -32768);
  CHECK(apply_func16(Func::identity, -300, 127) == -300);
  CHECK(apply_func16(Func::relu, -300, 127) == 0);
  CHECK(apply_func16(Func::relux, 300, 127) == 127);
  // round(32767 f(y / 256)): sigmoid 16383.5 -> 16384, 23954.6, 8812.4, 16894.9 (y = 16),
  // 16415.0 (y = 1: a step of 1/256 moves the 16-bit output by 32, the 8-bit one by 0 or 1).
  CHECK(apply_func16(Func::sigmoid, 0, 127) == 16384);
  CHECK(apply_func16(Func::sigmoid, 256, 127) == 23955);
  CHECK(apply_func16(Func::sigmoid, -256, 127) == 8812);
  CHECK(apply_func16(Func::sigmoid, 16, 127) == 16895);
  CHECK(apply_func16(Func::sigmoid, 1, 127) == 16415);
  CHECK(apply_func16(Func::tanh, 256, 127) == 24955);  // 32767 x 0.761594 = 24955.1
  CHECK(apply_func16(Func::tanh, -256, 127) == -24955);
  CHECK(apply_func16(Func::tanh, 1, 127) == 128);  // 32767 x tanh(1/256) = 127.996
  // Beyond |y / 256| = 8, where the 8-bit curves are flat, the 16-bit ones are not yet:
  // 32767 sigmoid(-8) = 10.99 and 32767 sigmoid(8) = 32756.0.
  CHECK(apply_func16(Func::sigmoid, -2048, 127) == 11);
  CHECK(apply_func16(Func::sigmoid, 2048, 127) == 32756);
  CHECK(apply_func(Func::sigmoid, -2048, 127, false) == 0);
}

// The 16-bit curves' input range [kCurve16InputMin, kCurve16InputMax] loses nothing: 32767 f(y /
// 256) rounds to the curve's limit inside it, so clamping y there is exact.
TEST_CASE("sigmoid and tanh reach their int16 limits inside the 16-bit curves' input range", "[state][wide]") {
  STATIC_REQUIRE(isa::kCurve16InputMin == -4096);
  STATIC_REQUIRE(isa::kCurve16InputMax == 4095);
  for (const Func f : {Func::sigmoid, Func::tanh}) {
    const auto exact = [&](int64_t y) {
      const double x = double(y) / 256;
      return std::lround(f == Func::sigmoid ? 32767 / (1 + std::exp(-x)) : 32767 * std::tanh(x));
    };
    CHECK(exact(isa::kCurve16InputMin) == (f == Func::sigmoid ? 0 : -32767));
    CHECK(exact(isa::kCurve16InputMax) == 32767);
    const int low = apply_func16(f, isa::kCurve16InputMin, 127), high = apply_func16(f, isa::kCurve16InputMax, 127);
    for (int64_t y = -70000; y <= isa::kCurve16InputMin; ++y) REQUIRE(apply_func16(f, y, 127) == low);
    for (int64_t y = isa::kCurve16InputMax; y <= 70000; ++y) REQUIRE(apply_func16(f, y, 127) == high);
    for (int64_t y = isa::kCurve16InputMin; y <= isa::kCurve16InputMax; ++y) REQUIRE(apply_func16(f, y, 127) == exact(y));
  }
}

TEST_CASE("act with act_high writes int16 results as two byte planes", "[state][wide]") {
  MachineState s = make_state({}, tiny());
  std::fill(s.ub.begin(), s.ub.end(), 0x55);
  set_acc(s, 0, {1000, -1000, 40000, -40000});
  set_acc(s, 1, {0, 256, -256, 1});
  exec_set_config(s, make(Opcode::set_config, {{Field::reg, 15}, {Field::value, 5}}), 0);
  exec_activate(s, make(Opcode::activate, {{Field::rows, 2}, {Field::ub, 10}}), 0);
  // 1000 = 0x03e8: low 0xe8, high 3; -1000 = 0xfc18: low 0x18, high 0xfc; 40000 and -40000
  // saturate to 32767 (0x7fff) and -32768 (0x8000).
  CHECK(row_u8(s, 10) == std::vector<int>{0xe8, 0x18, 0xff, 0x00});
  CHECK(row_s8(s, 15) == std::vector<int>{3, -4, 127, -128});
  CHECK(row_s16(s, 10, 5) == std::vector<int>{1000, -1000, 32767, -32768});
  CHECK(row_s16(s, 11, 5) == std::vector<int>{0, 256, -256, 1});
  CHECK(row_u8(s, 12) == std::vector<int>(4, 0x55));  // rows 12..14 between the planes are kept
  CHECK(row_u8(s, 14) == std::vector<int>(4, 0x55));
  // sigmoid and tanh on y = x x 1 / 2^0 read as Q7.8: the 16-bit curves.
  set_acc(s, 2, {0, 256, -256, 16});
  exec_activate(s, make(Opcode::activate, {{Field::acc, 2}, {Field::rows, 1}, {Field::ub, 20},
                                           {Field::func, uint64_t(Func::sigmoid)}}), 0);
  CHECK(row_s16(s, 20, 5) == std::vector<int>{16384, 23955, 8812, 16895});
  exec_activate(s, make(Opcode::activate, {{Field::acc, 2}, {Field::rows, 1}, {Field::ub, 20},
                                           {Field::func, uint64_t(Func::tanh)}, {Field::mult, 3}, {Field::shift, 1}}), 0);
  // y = round(x x 3 / 2) = 0, 384, -384, 24: 32767 tanh(1.5) = 29659.2, 32767 tanh(0.09375) = 3062.7.
  CHECK(row_s16(s, 20, 5) == std::vector<int>{0, 29659, -29659, 3063});
  // perchan: (x + bias) x mult / 2^shift per column, as the 8-bit act, saturated to int16.
  MachineState t = make_state({}, tiny());
  uint8_t* table = t.ub_row(40);  // 7 x 4 = 28 bytes: rows 40..46
  const int32_t bias[4] = {5, -5, 0, 70000};
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < 4; ++k) table[4 * c + k] = static_cast<uint8_t>(uint32_t(bias[c]) >> (8 * k));
    table[16 + 2 * c] = 2;  // mult 2
    table[24 + c] = 0;      // shift 0
  }
  set_acc(t, 0, {10, 10, -20000, 0});
  t.planes.act = 1;
  exec_activate(t, make(Opcode::activate, {{Field::rows, 1}, {Field::per_channel, 1}, {Field::qtable, 40}}), 0);
  CHECK(row_s16(t, 0, 1) == std::vector<int>{30, 10, -32768, 32767});  // -40000, 140000 saturate
}

TEST_CASE("act with act_high refuses unsigned, scatter, pooling, overlapping planes, planes past the UB",
          "[state][wide]") {
  MachineState s = make_state({}, tiny());
  s.planes.act = 2;
  CHECK_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::rows, 1}, {Field::unsigned_data, 1}}), 3),
                    Contains("16-bit results (act_high) are signed: not with `unsigned`"));
  CHECK_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::rows, 3}}), 3),
                    Contains("instruction 3 (act acc=0, ub=0, rows=3): act_high = 2 (setcfg register): the high "
                             "byte plane would overlap the 3 rows of the low plane (expected >= 3)"));
  CHECK_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::rows, 2}, {Field::ub, 61}}), 3),
                    Contains("writes UB rows 63..64, but the unified buffer has 64 rows"));
  s.act_pool.kind = 1;
  CHECK_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::rows, 1}}), 3),
                    Contains("16-bit results (act_high): not with act_pool"));
  s.act_pool.kind = 0;
  s.pack.act_groups = 2;
  s.pack.act_group_cols = 2;
  CHECK_THROWS_WITH(exec_activate(s, make(Opcode::activate, {{Field::rows, 1}}), 3),
                    Contains("16-bit results (act_high): not with act_groups"));
}

TEST_CASE("vec with 16-bit operands and result: every operation, saturation and the curves", "[state][wide]") {
  using isa::VecOp;
  MachineState s = make_state({}, tiny());
  set_row16(s, 0, 10, {30000, -30000, 300, -2});  // a: rows 0 and 10
  set_row(s, 1, {100, -100, -7, 127});            // b: int8 at row 1
  s.planes = {0, 10, 0, 20};                      // a 16-bit, b 8-bit, result 16-bit: rows 2 and 22
  auto run = [&](isa::Instruction i) {
    exec_vector(s, i, 0);
    return row_s16(s, 2, 20);
  };
  CHECK(run(vec(VecOp::add, Func::identity, 1, 0)) == std::vector<int>{30100, -30100, 293, 125});
  CHECK(run(vec(VecOp::sub, Func::identity, 1, 0)) == std::vector<int>{29900, -29900, 307, -129});
  CHECK(run(vec(VecOp::add, Func::identity, 2, 0)) == std::vector<int>{32767, -32768, 586, 250});  // saturates
  // 3,000,000, 3,000,000, -2100, -254 over 2^7: 23437.5 -> 23438, 23438, -16.4 -> -16, -1.98 -> -2
  CHECK(run(vec(VecOp::mul, Func::identity, 1, 7)) == std::vector<int>{23438, 23438, -16, -2});
  CHECK(run(vec(VecOp::max, Func::identity, 1, 0)) == std::vector<int>{30000, -100, 300, 127});
  CHECK(run(vec(VecOp::min, Func::identity, 1, 0)) == std::vector<int>{100, -30000, -7, -2});
  CHECK(run(vec(VecOp::pass, Func::relu, 1, 0)) == std::vector<int>{30000, 0, 300, 0});
  // Products of two int16 operands need 31 bits, times mult 32 bits more: 64-bit arithmetic.
  s.planes = {0, 10, 10, 20};
  set_row16(s, 1, 10, {-32768, -32768, 32767, 2});  // b: rows 1 and 11
  // a x b = -983,040,000, 983,040,000, 9,830,100, -4; x 65535 / 2^40: -58.6, 58.6, 0.59, -0.0
  CHECK(run(vec(VecOp::mul, Func::identity, 65535, 40)) == std::vector<int>{-59, 59, 1, 0});
  CHECK(run(vec(VecOp::mul, Func::identity, 1, 15)) == std::vector<int>{-30000, 30000, 300, 0});
  // A 16-bit result of the curves: y = a / 2^7 read as Q7.8: 234.4 -> 234, -234, 2.3 -> 2, -0.02
  // -> 0; 32767 tanh(234 / 256) = 23692.7, 32767 tanh(2 / 256) = 255.99.
  CHECK(run(vec(VecOp::pass, Func::tanh, 1, 7)) == std::vector<int>{23693, -23693, 256, 0});
  // An 8-bit result from 16-bit operands: int8 saturation and the 8-bit curves; the row where the
  // high plane would go is not written.
  s.planes.out = 0;
  std::fill_n(s.ub_row(22), 4, 0x55);
  exec_vector(s, vec(VecOp::pass, Func::identity, 1, 7), 0);
  CHECK(row_s8(s, 2) == std::vector<int>{127, -128, 2, 0});  // 234, -234 saturate
  exec_vector(s, vec(VecOp::pass, Func::tanh, 1, 7), 0);
  CHECK(row_s8(s, 2) == std::vector<int>{92, -92, 1, 0});  // 127 tanh(234 / 256) = 91.8
  CHECK(row_u8(s, 22) == std::vector<int>(4, 0x55));
}

TEST_CASE("vec with 16-bit planes reads every operand before writing, and checks the planes", "[state][wide]") {
  using isa::VecOp;
  MachineState s = make_state({}, tiny());
  // In place, the result's high plane over operand a's low plane of the next row: a at rows 0..1
  // (high 2..3), result at rows 1..2 (high 3..4) with vec_high_out = 2 -- overlapping planes of
  // the two at other positions, read whole before anything is written.
  set_row16(s, 0, 2, {1, -1, 1000, -1000});
  set_row16(s, 1, 2, {2, -2, 2000, -2000});
  s.planes = {0, 2, 0, 2};
  exec_vector(s, make(Opcode::vector, {{Field::op, uint64_t(VecOp::pass)}, {Field::src, 0}, {Field::ub, 1},
                                       {Field::rows, 2}, {Field::mult, 3}}), 0);
  CHECK(row_s16(s, 1, 2) == std::vector<int>{3, -3, 3000, -3000});
  CHECK(row_s16(s, 2, 2) == std::vector<int>{6, -6, 6000, -6000});
  s.planes = {0, 1, 0, 0};
  CHECK_THROWS_WITH(exec_vector(s, make(Opcode::vector, {{Field::op, uint64_t(VecOp::pass)}, {Field::rows, 2}}), 4),
                    Contains("vec_high_a = 1 (setcfg register): the high byte plane would overlap the 2 rows of "
                             "the low plane (expected >= 2)"));
  s.planes = {0, 0, 60, 0};
  CHECK_NOTHROW(exec_vector(s, make(Opcode::vector, {{Field::op, uint64_t(VecOp::pass)}, {Field::rows, 2}}), 4));
  CHECK_THROWS_WITH(exec_vector(s, make(Opcode::vector, {{Field::op, uint64_t(VecOp::add)}, {Field::src_b, 3},
                                                         {Field::rows, 2}}), 4),
                    Contains("reads UB rows 63..64, but the unified buffer has 64 rows"));
  s.planes = {0, 0, 0, 63};
  CHECK_THROWS_WITH(exec_vector(s, make(Opcode::vector, {{Field::op, uint64_t(VecOp::pass)}, {Field::ub, 1}, {Field::rows, 1}}), 4),
                    Contains("writes UB rows 64..64, but the unified buffer has 64 rows"));
}

// ---- act and vec against the plainest reading of docs/isa.md, on random instructions ---------

// round_half_away(p / 2^s) for |p| < 2^62 and s <= 63: the quotient, plus one when the remainder
// is at least half the divisor.
int64_t plain_round(int64_t p, unsigned s) {
  const uint64_t mag = p < 0 ? static_cast<uint64_t>(-p) : static_cast<uint64_t>(p);
  const uint64_t d = uint64_t{1} << s;
  uint64_t q = mag / d;
  if (2 * (mag % d) >= d) ++q;
  return p < 0 ? -static_cast<int64_t>(q) : static_cast<int64_t>(q);
}

// The function of docs/isa.md's table, then saturation to int8 (uint8 when out_unsigned).
int plain_func(Func f, int64_t y, int64_t clip, bool out_unsigned) {
  switch (f) {
    case Func::identity: break;
    case Func::relu: y = y < 0 ? 0 : y; break;
    case Func::relux: y = y < 0 ? 0 : y > clip ? clip : y; break;
    case Func::sigmoid: y = std::lround(127.0 / (1.0 + std::exp(-static_cast<double>(y) / 256.0))); break;
    case Func::tanh: y = std::lround(127.0 * std::tanh(static_cast<double>(y) / 256.0)); break;
  }
  const int64_t lo = out_unsigned ? 0 : -128, hi = out_unsigned ? 255 : 127;
  return static_cast<int>(y < lo ? lo : y > hi ? hi : y);
}

// The UB after `act` on state `s`: each output row's bytes act_lane .. act_lane + array_cols - 1
// computed one element at a time, the rest of the row kept; the per-column table read from `s`
// (before any write).
std::vector<uint8_t> plain_activate(const MachineState& s, const isa::Instruction& inst) {
  const uint64_t m = s.arch.array_cols, w = s.arch.ub_row_bytes();
  std::vector<uint8_t> ub = s.ub;
  const uint8_t* t = s.ub_row(inst[Field::qtable]);
  for (uint64_t r = 0; r < inst[Field::rows]; ++r)
    for (uint64_t c = 0; c < m; ++c) {  // column c to byte act_lane + c; the other bytes kept
      int64_t bias = 0, mult = static_cast<int64_t>(inst[Field::mult]);
      unsigned shift = static_cast<unsigned>(inst[Field::shift]);
      if (inst[Field::per_channel] && c < m) {
        bias = static_cast<int32_t>(t[4 * c] | t[4 * c + 1] << 8 | t[4 * c + 2] << 16 |
                                    static_cast<uint32_t>(t[4 * c + 3]) << 24);
        mult = t[4 * m + 2 * c] | t[4 * m + 2 * c + 1] << 8;
        shift = t[6 * m + c];
      }
      int v = 0;
      if (c < m) {
        const int64_t x = s.acc_row(inst[Field::acc] + r)[c];
        v = plain_func(static_cast<Func>(inst[Field::func]), plain_round((x + bias) * mult, shift),
                       static_cast<int64_t>(inst[Field::clip]), inst[Field::unsigned_data] != 0);
      }
      ub[(inst[Field::ub] + r) * w + s.act_lane + c] = static_cast<uint8_t>(v);
    }
  return ub;
}

// The UB after `vec` on state `s`: every operand read from `s`, so overlaps need no care.
std::vector<uint8_t> plain_vector(const MachineState& s, const isa::Instruction& inst) {
  const uint64_t w = s.arch.ub_row_bytes();
  std::vector<uint8_t> ub = s.ub;
  for (uint64_t i = 0; i < inst[Field::rows] * w; ++i) {
    const int64_t a = static_cast<int8_t>(s.ub[inst[Field::src] * w + i]);
    const int64_t b = static_cast<int8_t>(s.ub[inst[Field::src_b] * w + i]);
    int64_t v = a;
    switch (static_cast<isa::VecOp>(inst[Field::op])) {
      case isa::VecOp::add: v = a + b; break;
      case isa::VecOp::sub: v = a - b; break;
      case isa::VecOp::mul: v = a * b; break;
      case isa::VecOp::max: v = a > b ? a : b; break;
      case isa::VecOp::min: v = a < b ? a : b; break;
      case isa::VecOp::pass: v = a; break;
    }
    const int64_t y =
        plain_round(v * static_cast<int64_t>(inst[Field::mult]), static_cast<unsigned>(inst[Field::shift]));
    ub[inst[Field::ub] * w + i] =
        static_cast<uint8_t>(plain_func(static_cast<Func>(inst[Field::func]), y, 127, false));
  }
  return ub;
}

// Random operands weighted towards the extremes and the rounding ties.
struct Picker {
  std::mt19937_64 rng{20240611};
  uint64_t below(uint64_t n) { return rng() % n; }
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1)));
  }
  template <typename T>
  T one_of(std::initializer_list<T> values) {
    return values.begin()[below(values.size())];
  }
  uint64_t mult() {
    return below(3) ? one_of<uint64_t>({0, 1, 2, 3, 255, 256, 32767, 32768, 65534, 65535}) : below(65536);
  }
  uint64_t shift() {
    return below(3) ? one_of<uint64_t>({0, 1, 2, 4, 7, 8, 12, 15, 16, 24, 31, 32, 40, 46, 47, 48, 49, 62, 63})
                    : below(64);
  }
  int32_t int32() {
    switch (below(9)) {
      case 0: return INT32_MIN;
      case 1: return INT32_MAX;
      case 2: return static_cast<int32_t>(between(-300, 300));
      case 3: return static_cast<int32_t>(between(-5000, 5000));
      case 4: return static_cast<int32_t>(between(-1, 1));
      case 5: {  // an odd multiple of 2^(k-1): a tie when divided by 2^k
        const unsigned k = static_cast<unsigned>(between(1, 20));
        return static_cast<int32_t>((2 * between(-1000, 1000) + 1) * (int64_t{1} << (k - 1)));
      }
      case 6: return static_cast<int32_t>(static_cast<int64_t>(rng()) >> between(32, 63));
      case 7:
        return one_of<int32_t>({INT32_MIN + 1, INT32_MAX - 1, 1 << 30, -(1 << 30), 2047, 2048, -2048, -2049});
      default: return static_cast<int32_t>(rng());
    }
  }
  uint8_t byte() {
    return below(3) ? one_of<uint8_t>({0, 1, 127, 128, 129, 255, 16, 240}) : static_cast<uint8_t>(rng());
  }
};

std::vector<Arch> random_test_arches() {  // tpu-v1's shape, and narrow ones with odd sizes and tails
  std::vector<Arch> arches = {tiny(256, 256), tiny(8, 5), tiny(16, 37), tiny(37, 16), tiny(3, 67)};
  for (Arch& a : arches) a.acc_entries = 64;
  return arches;
}

// A random act on `s`, with its accumulators, UB and (with perchan) table filled at random.
isa::Instruction random_activate(Picker& pick, MachineState& s) {
  const uint64_t m = s.arch.array_cols, rows = pick.between(1, 12);
  const uint64_t table_rows = (7 * m + s.arch.ub_row_bytes() - 1) / s.arch.ub_row_bytes();
  const isa::Instruction inst =
      make(Opcode::activate,
           {{Field::func, pick.below(5)},
            {Field::per_channel, pick.below(3) == 0},
            {Field::unsigned_data, pick.below(2)},
            {Field::acc, pick.below(64 - rows + 1)},
            {Field::ub, pick.below(64 - rows + 1)},
            {Field::rows, rows},
            {Field::mult, pick.mult()},
            {Field::shift, pick.shift()},
            {Field::clip, pick.below(2) ? pick.below(256) : pick.one_of<uint64_t>({0, 1, 6, 127, 128, 255})},
            {Field::qtable, pick.below(64 - table_rows + 1)}});
  for (int32_t& x : s.acc) x = pick.int32();
  for (uint8_t& b : s.ub) b = pick.byte();
  if (inst[Field::per_channel]) {
    uint8_t* t = s.ub_row(inst[Field::qtable]);
    for (uint64_t c = 0; c < m; ++c) {
      const auto bias = static_cast<uint32_t>(pick.int32());
      const auto mult = pick.mult(), shift = pick.shift();
      for (int b = 0; b < 4; ++b) t[4 * c + b] = static_cast<uint8_t>(bias >> (8 * b));
      t[4 * m + 2 * c] = static_cast<uint8_t>(mult);
      t[4 * m + 2 * c + 1] = static_cast<uint8_t>(mult >> 8);
      t[6 * m + c] = static_cast<uint8_t>(shift);
    }
  }
  return inst;
}

TEST_CASE("act equals the plain definition on random instructions and extreme values", "[state]") {
  Picker pick;
  for (const Arch& arch : random_test_arches()) {
    MachineState s = make_state({}, arch);
    for (int n = 0; n < 1500; ++n) {
      const isa::Instruction inst = random_activate(pick, s);
      s.act_lane = pick.below(s.arch.ub_row_bytes() - s.arch.array_cols + 1);
      const std::vector<uint8_t> want = plain_activate(s, inst);
      exec_activate(s, inst, 0);
      INFO("arch " << arch.array_rows << "x" << arch.array_cols << ", " << describe(0, inst));
      REQUIRE(s.ub == want);
    }
  }
}

TEST_CASE("vec equals the plain definition on random instructions, overlapping rows included", "[state]") {
  Picker pick;
  for (const Arch& arch : random_test_arches()) {
    MachineState s = make_state({}, arch);
    for (int n = 0; n < 1500; ++n) {
      const uint64_t rows = pick.between(1, 10);
      const isa::Instruction inst = make(Opcode::vector, {{Field::op, pick.below(6)},
                                                          {Field::func, pick.below(5)},
                                                          {Field::src, pick.below(20)},
                                                          {Field::src_b, pick.below(20)},
                                                          {Field::ub, pick.below(20)},
                                                          {Field::rows, rows},
                                                          {Field::mult, pick.mult()},
                                                          {Field::shift, pick.shift()}});
      for (uint8_t& b : s.ub) b = pick.byte();
      const std::vector<uint8_t> want = plain_vector(s, inst);
      exec_vector(s, inst, 0);
      INFO("arch " << arch.array_rows << "x" << arch.array_cols << ", " << describe(0, inst));
      REQUIRE(s.ub == want);
    }
  }
}

// Not run by default: `sim_tests "[.bench]"` prints the median ns per element of act and vec
// over 2048 x 256 elements on tpu-v1.
TEST_CASE("act and vec throughput", "[.bench]") {
  const isa::Program p = isa::assemble(
      ".model \"bench\"\n.weights w, 0, 65536, init=random(1)\nact acc=0, ub=0, rows=2048, func=relu, "
      "shift=12\nhalt\n",
      "bench.s");
  MachineState s = make_state(p, arch_preset("tpu-v1"));
  std::mt19937_64 rng(1);
  for (int32_t& x : s.acc) x = static_cast<int32_t>(rng());
  for (uint8_t& b : s.ub) b = static_cast<uint8_t>(rng());
  auto median_ns = [&](const isa::Instruction& inst, double elements) {
    std::vector<double> ns;
    for (int i = 0; i < 20; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (inst.opcode == Opcode::activate ? exec_activate : exec_vector)(s, inst, 0);
      ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(ns.begin(), ns.begin() + 10, ns.end());
    return ns[10] / elements;
  };
  const double act_elements = 2048.0 * 256;
  isa::Instruction act = p.code.at(0);
  for (const auto& [name, func] : {std::pair{"identity", Func::identity},
                                   {"relu", Func::relu},
                                   {"relux", Func::relux},
                                   {"sigmoid", Func::sigmoid},
                                   {"tanh", Func::tanh}}) {
    act[Field::func] = static_cast<uint64_t>(func);
    std::printf("act %-8s           %6.3f ns/element\n", name, median_ns(act, act_elements));
  }
  act[Field::func] = static_cast<uint64_t>(Func::relu);
  act[Field::unsigned_data] = 1;
  std::printf("act relu unsigned      %6.3f ns/element\n", median_ns(act, act_elements));
  act[Field::unsigned_data] = 0;
  act[Field::per_channel] = 1;
  act[Field::qtable] = 4096;  // bias, mult, shift from the random bytes, shift reduced below 64
  for (uint64_t c = 0; c < 256; ++c) s.ub_row(4096)[6 * 256 + c] %= 64;
  act[Field::ub] = 8192;
  std::printf("act relu perchan       %6.3f ns/element\n", median_ns(act, act_elements));
  const isa::Instruction add = make(Opcode::vector, {{Field::op, 0},
                                                     {Field::func, 1},
                                                     {Field::src, 0},
                                                     {Field::src_b, 2048},
                                                     {Field::ub, 8192},
                                                     {Field::rows, 2048},
                                                     {Field::mult, 3},
                                                     {Field::shift, 2}});
  std::printf("vec add relu           %6.3f ns/element\n", median_ns(add, act_elements));
  isa::Instruction mul = add;
  mul[Field::op] = static_cast<uint64_t>(isa::VecOp::mul);
  mul[Field::func] = static_cast<uint64_t>(Func::tanh);
  std::printf("vec mul tanh           %6.3f ns/element\n", median_ns(mul, act_elements));
  isa::Instruction pass = add;
  pass[Field::op] = static_cast<uint64_t>(isa::VecOp::pass);
  pass[Field::src] = 8192;
  std::printf("vec pass relu in place %6.3f ns/element\n", median_ns(pass, act_elements));
}

isa::Instruction pool(isa::PoolKind kind, uint64_t src, uint64_t ub, uint64_t in_w, uint64_t out_h,
                      uint64_t out_w, uint64_t batch, uint64_t window, uint64_t stride) {
  return make(Opcode::pool, {{Field::kind, static_cast<uint64_t>(kind)},
                             {Field::src, src},
                             {Field::ub, ub},
                             {Field::in_w, in_w},
                             {Field::out_h, out_h},
                             {Field::out_w, out_w},
                             {Field::batch, batch},
                             {Field::window, window},
                             {Field::pool_stride, stride}});
}

TEST_CASE("pool: 2 x 2 windows, stride 2, max and average with ties", "[state]") {
  MachineState s = make_state({}, tiny());
  for (int p = 0; p < 16; ++p) set_row(s, 10 + p, {p, -p, 0, -128});  // pixel (y, x) = UB row 10 + 4y + x
  exec_pool(s, pool(isa::PoolKind::max, 10, 40, 4, 2, 2, 1, 2, 2), 0);
  // windows: {0 1 4 5}, {2 3 6 7}, {8 9 12 13}, {10 11 14 15}
  CHECK(row_s8(s, 40) == std::vector<int>{5, 0, 0, -128});
  CHECK(row_s8(s, 41) == std::vector<int>{7, -2, 0, -128});
  CHECK(row_s8(s, 42) == std::vector<int>{13, -8, 0, -128});
  CHECK(row_s8(s, 43) == std::vector<int>{15, -10, 0, -128});
  exec_pool(s, pool(isa::PoolKind::avg, 10, 40, 4, 2, 2, 1, 2, 2), 0);
  // sums 10, 18, 42, 50 over 4: 2.5, 4.5, 10.5, 12.5 round away from zero
  CHECK(row_s8(s, 40) == std::vector<int>{3, -3, 0, -128});
  CHECK(row_s8(s, 41) == std::vector<int>{5, -5, 0, -128});
  CHECK(row_s8(s, 42) == std::vector<int>{11, -11, 0, -128});
  CHECK(row_s8(s, 43) == std::vector<int>{13, -13, 0, -128});
}

TEST_CASE("pool: 3 x 3 window over two interleaved images", "[state]") {
  MachineState s = make_state({}, tiny());
  for (int p = 0; p < 9; ++p) {  // pixel p, image n: UB row 2p + n
    set_row(s, 2 * p, {p + 1, 0, 0, 0});
    set_row(s, 2 * p + 1, {p == 4 ? 5 : 0, p == 7 ? -4 : 0, p == 0 ? -5 : 0, 0});
  }
  exec_pool(s, pool(isa::PoolKind::avg, 0, 30, 3, 1, 1, 2, 3, 1), 0);
  CHECK(row_s8(s, 30) == std::vector<int>{5, 0, 0, 0});   // 45 / 9
  CHECK(row_s8(s, 31) == std::vector<int>{1, 0, -1, 0});  // 5/9 = 0.56, -4/9 = -0.44, -5/9
  exec_pool(s, pool(isa::PoolKind::max, 0, 30, 3, 1, 1, 2, 3, 1), 0);
  CHECK(row_s8(s, 30) == std::vector<int>{9, 0, 0, 0});
  CHECK(row_s8(s, 31) == std::vector<int>{5, 0, 0, 0});
}

// The UB after `pool` on state `s`, every input read from `s`.
std::vector<uint8_t> plain_pool(const MachineState& s, const isa::Instruction& inst) {
  const uint64_t w = s.arch.ub_row_bytes(), win = inst[Field::window], ps = inst[Field::pool_stride];
  const uint64_t in_w = inst[Field::in_w], batch = inst[Field::batch];
  std::vector<uint8_t> ub = s.ub;
  for (uint64_t oy = 0; oy < inst[Field::out_h]; ++oy)
    for (uint64_t ox = 0; ox < inst[Field::out_w]; ++ox)
      for (uint64_t n = 0; n < batch; ++n)
        for (uint64_t i = 0; i < w; ++i) {
          int64_t sum = 0, max = -128;
          for (uint64_t dy = 0; dy < win; ++dy)
            for (uint64_t dx = 0; dx < win; ++dx) {
              const uint64_t row = inst[Field::src] + ((oy * ps + dy) * in_w + ox * ps + dx) * batch + n;
              const int64_t x = static_cast<int8_t>(s.ub[row * w + i]);
              sum += x;
              max = x > max ? x : max;
            }
          const auto d = static_cast<int64_t>(win * win);
          const int64_t avg = sum < 0 ? -((-2 * sum + d) / (2 * d)) : (2 * sum + d) / (2 * d);
          const uint64_t out = inst[Field::ub] + (oy * inst[Field::out_w] + ox) * batch + n;
          ub[out * w + i] = static_cast<uint8_t>(inst[Field::kind] ? avg : max);
        }
  return ub;
}

TEST_CASE("pool equals the plain definition on random shapes, overlapping rows included", "[state]") {
  Picker pick;
  for (Arch arch : random_test_arches()) {
    arch.ub_bytes = 128 * arch.ub_row_bytes();  // inputs of up to 78 rows, from rows 0..39
    MachineState s = make_state({}, arch);
    for (int k = 0; k < 300; ++k) {
      const uint64_t win = pick.between(1, 3), ps = pick.between(1, 2), out_w = pick.between(1, 3);
      const uint64_t out_h = pick.between(1, 2), batch = pick.between(1, 2);
      const uint64_t in_w = (out_w - 1) * ps + win + pick.below(2);
      const isa::Instruction inst = pool(static_cast<isa::PoolKind>(pick.below(2)), pick.below(40),
                                         pick.below(40), in_w, out_h, out_w, batch, win, ps);
      for (uint8_t& b : s.ub) b = pick.byte();
      const std::vector<uint8_t> want = plain_pool(s, inst);
      exec_pool(s, inst, 0);
      INFO("arch " << arch.array_rows << "x" << arch.array_cols << ", " << describe(0, inst));
      REQUIRE(s.ub == want);
    }
  }
}

TEST_CASE("pool refuses windows past the map width and rows outside the UB", "[state]") {
  MachineState s = make_state({}, tiny());
  REQUIRE_THROWS_WITH(
      exec_pool(s, pool(isa::PoolKind::max, 0, 40, 4, 1, 2, 1, 3, 2), 2),
      Contains("instruction 2 (pool kind=max, src=0, ub=40, in_w=4, out_h=1, out_w=2, window=3, pstride=2): "
               "the windows of output column 1 cover input columns 2..4, but in_w = 4"));
  REQUIRE_THROWS_WITH(exec_pool(s, pool(isa::PoolKind::max, 50, 0, 4, 2, 2, 1, 2, 2), 2),
                      Contains("reads UB rows 50..65, but the unified buffer has 64 rows"));
  REQUIRE_THROWS_WITH(exec_pool(s, pool(isa::PoolKind::avg, 0, 62, 4, 2, 2, 1, 2, 2), 2),
                      Contains("writes UB rows 62..65, but the unified buffer has 64 rows"));
}


// ---- act with fused pooling (setcfg act_pool .. act_pool_batch) ------------------------------

ActPool act_pool(uint64_t kind, uint64_t window, uint64_t stride, uint64_t width, uint64_t batch) {
  ActPool p;
  p.kind = kind;
  p.window = window;
  p.stride = stride;
  p.width = width;
  p.batch = batch;
  return p;
}

TEST_CASE("act with fused pooling: a 4 x 4 map, relu then 2 x 2 max, identity then 2 x 2 average", "[state]") {
  MachineState s = make_state({}, tiny());
  std::fill(s.ub.begin(), s.ub.end(), 0x55);
  // Pixel p = 4y + x in accumulator row p: columns p - 5, -p, 20p, p.
  for (int p = 0; p < 16; ++p) set_acc(s, p, {p - 5, -p, 20 * p, p});
  s.act_pool = act_pool(1, 2, 2, 4, 1);
  const auto act = [](Func f) {
    return make(Opcode::activate, {{Field::func, uint64_t(f)}, {Field::rows, 16}, {Field::ub, 40}});
  };
  exec_activate(s, act(Func::relu), 0);
  // windows {0 1 4 5}, {2 3 6 7}, {8 9 12 13}, {10 11 14 15}: the largest p is 5, 7, 13, 15.
  // relu(p - 5): 0, 2, 8, 10; relu(-p): 0; 20p saturated: 100, 127, 127, 127; p: 5, 7, 13, 15.
  CHECK(row_s8(s, 40) == std::vector<int>{0, 0, 100, 5});
  CHECK(row_s8(s, 41) == std::vector<int>{2, 0, 127, 7});
  CHECK(row_s8(s, 42) == std::vector<int>{8, 0, 127, 13});
  CHECK(row_s8(s, 43) == std::vector<int>{10, 0, 127, 15});
  CHECK(row_s8(s, 44) == std::vector<int>{0x55, 0x55, 0x55, 0x55});  // only the pooled map is written
  s.act_pool.kind = 2;
  exec_activate(s, act(Func::identity), 0);
  // sums over the windows: p - 5: -10, -2, 22, 30 / 4 = -2.5, -0.5, 5.5, 7.5 -> -3, -1, 6, 8;
  // -p: -3, -5, -11, -13 (as p, negated); 20p saturated: 0+20+80+100 = 200 -> 50,
  // 40+60+120+127 = 347 -> 86.75 -> 87, then 127; p: 10, 18, 42, 50 / 4 -> 3, 5, 11, 13.
  CHECK(row_s8(s, 40) == std::vector<int>{-3, -3, 50, 3});
  CHECK(row_s8(s, 41) == std::vector<int>{-1, -5, 87, 5});
  CHECK(row_s8(s, 42) == std::vector<int>{6, -11, 127, 11});
  CHECK(row_s8(s, 43) == std::vector<int>{8, -13, 127, 13});
}

TEST_CASE("act with fused pooling: overlapping windows over two interleaved images, at act_lane", "[state]") {
  // A 4 x 2 array: accumulator rows of 2 values, UB rows of 4 bytes.
  MachineState s = make_state({}, tiny(4, 2));
  std::fill(s.ub.begin(), s.ub.end(), 0x55);
  // A 3 x 2 map of 2 images: pixel q = 2y + x of image n in accumulator row 2q + n: 10q + n, -(10q + n).
  for (int q = 0; q < 6; ++q)
    for (int n = 0; n < 2; ++n) set_acc(s, 2 * q + n, {10 * q + n, -(10 * q + n)});
  s.act_pool = act_pool(1, 2, 1, 2, 2);
  s.act_lane = 2;
  exec_activate(s, make(Opcode::activate, {{Field::rows, 12}, {Field::ub, 20}}), 0);
  // out_h = (3 - 2) / 1 + 1 = 2, out_w = 1; output (oy, n) in UB row 20 + 2 oy + n, bytes 2, 3:
  // window rows oy, oy + 1: max 10 (2 oy + 3) + n and -(10 (2 oy) + n).
  CHECK(row_s8(s, 20) == std::vector<int>{0x55, 0x55, 30, 0});
  CHECK(row_s8(s, 21) == std::vector<int>{0x55, 0x55, 31, -1});
  CHECK(row_s8(s, 22) == std::vector<int>{0x55, 0x55, 50, -20});
  CHECK(row_s8(s, 23) == std::vector<int>{0x55, 0x55, 51, -21});
  CHECK(row_s8(s, 24) == std::vector<int>{0x55, 0x55, 0x55, 0x55});
  CHECK(activate_ub_rows(make(Opcode::activate, {{Field::rows, 12}}), s.act_pool) == 4);
  CHECK(activate_ub_rows(make(Opcode::activate, {{Field::rows, 12}}), ActPool{}) == 12);
}

TEST_CASE("act with fused pooling refuses maps that are not whole lines, too small, unsigned or bad registers",
          "[state]") {
  MachineState s = make_state({}, tiny());
  const auto act = [](uint64_t rows, uint64_t ub = 0, bool u = false) {
    return make(Opcode::activate, {{Field::rows, rows}, {Field::ub, ub}, {Field::unsigned_data, u}});
  };
  s.act_pool = act_pool(1, 2, 2, 4, 1);
  CHECK_THROWS_WITH(exec_activate(s, act(10), 0),
                    Contains("10 rows are not whole lines of act_pool_width x act_pool_batch = 4 x 1 = 4 rows"));
  CHECK_THROWS_WITH(exec_activate(s, act(4), 0),
                    Contains("the map of 1 x 4 pixels is smaller than the 2 x 2 pooling window"));
  CHECK_THROWS_WITH(exec_activate(s, act(8, 0, true), 0), Contains("not with `unsigned`"));
  CHECK_THROWS_WITH(exec_activate(s, act(8, 63), 0),
                    Contains("writes UB rows 63..64, but the unified buffer has 64 rows"));
  exec_activate(s, act(8, 62), 0);  // 2 pooled rows: 62, 63
  s.act_pool.window = 16;
  CHECK_THROWS_WITH(exec_activate(s, act(8), 0), Contains("act_pool_window = 16 (setcfg register), expected 1..15"));
  s.act_pool = act_pool(3, 2, 2, 4, 1);
  CHECK_THROWS_WITH(exec_activate(s, act(8), 0), Contains("act_pool = 3: expected 0 (none), 1 (max) or 2 (avg)"));
  // check_static follows the registers through the program.
  isa::Program p;
  p.code = {make(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_pool)}, {Field::value, 1}}),
            make(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_pool_window)}, {Field::value, 2}}),
            make(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_pool_stride)}, {Field::value, 2}}),
            make(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_pool_width)}, {Field::value, 4}}),
            make(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_pool_batch)}, {Field::value, 1}}),
            act(12, 60), make(Opcode::halt)};
  CHECK_NOTHROW(check_static(p, tiny()));  // 3 x 4 map -> 1 x 2 pooled rows: 60, 61
  p.code[5] = act(10, 60);
  CHECK_THROWS_WITH(check_static(p, tiny()), Contains("instruction 5 (act"));
  p.code[0][Field::value] = 0;  // pooling off: a plain activate of 10 rows, 60..69 past the UB
  CHECK_THROWS_WITH(check_static(p, tiny()), Contains("writes UB rows 60..69"));
}

}  // namespace
}  // namespace tpusim::sim
