// The machine's memories and the data semantics of every instruction (docs/isa.md).
//
// Every address range an instruction touches is checked by one function, check_instruction,
// which both check_static (the whole program before it runs) and each exec_* (the instruction
// about to run) call, so the two can never disagree about what is in bounds or how it is said.
// Address arithmetic is done in 128 bits: field values up to 2^40 times counts up to 2^24 (or a
// 64-bit setcfg stride) cannot wrap around and sneak back into range.
//
// Each instruction reads all its operands before it writes: where vec's or pool's output rows
// overlap its input rows at a different position, the input rows are copied aside first.
#include "sim/state.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "isa/disassembler.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;
using u128 = unsigned __int128;

SimError::SimError(uint64_t index, const std::string& message) : InputError(message), index(index) {}

std::string describe(uint64_t index, const isa::Instruction& inst) {
  return "instruction " + std::to_string(index) + " (" + isa::format_instruction(inst) + ")";
}

HostBuffer* MachineState::host_span(uint64_t addr, uint64_t bytes) {
  for (HostBuffer& b : host)
    if (addr >= b.addr && bytes <= b.bytes.size() && addr - b.addr <= b.bytes.size() - bytes) return &b;
  return nullptr;
}

MachineState make_state(const isa::Program& program, const Arch& arch) {
  MachineState s;
  s.arch = arch;
  s.ub.assign(arch.ub_rows() * arch.ub_row_bytes(), 0);
  s.acc.assign(arch.acc_entries * arch.array_cols, 0);
  for (const isa::HostRegion& r : program.host_regions) {
    HostBuffer b{r.name, r.output, r.host_addr, r.init};
    if (b.bytes.empty()) b.bytes.assign(r.bytes, 0);
    s.host.push_back(std::move(b));
  }
  s.weights = program.weights;
  return s;
}

namespace {

// The index matmul_reference and weight_tile report: their declarations carry no index.
constexpr uint64_t kNoIndex = std::numeric_limits<uint64_t>::max();

// Throws SimError("instruction 12 (matmul ...): <what>").
struct Fail {
  uint64_t index;
  const isa::Instruction& inst;
  [[noreturn]] void operator()(const std::string& what) const {
    const std::string where = index == kNoIndex ? isa::format_instruction(inst) : describe(index, inst);
    throw SimError(index, where + ": " + what);
  }
};

std::string dec(u128 v) {
  std::string s;
  do s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  while ((v /= 10) != 0);
  return s;
}

std::string hex(u128 v) {
  std::string s;
  do s.insert(s.begin(), "0123456789abcdef"[static_cast<int>(v % 16)]);
  while ((v /= 16) != 0);
  return "0x" + s;
}

// "first..last" of the non-empty range [first, first + count).
std::string span_text(u128 first, u128 count, std::string (*num)(u128)) {
  return num(first) + ".." + num(first + count - 1);
}

struct Region {
  std::string_view name;
  uint64_t addr, size;
};

// What a program may address: the configured memories, its host regions and its weight image,
// and the setcfg registers in force.
struct Bounds {
  const Arch& arch;
  std::vector<Region> host;
  uint64_t weight_image = 0;
  uint64_t host_stride = 0, host_row_bytes = 0;
};

Bounds bounds_of(const MachineState& s) {
  Bounds b{s.arch, {}, s.weights.size(), s.host_stride, s.host_row_bytes};
  for (const HostBuffer& h : s.host) b.host.push_back({h.name, h.addr, h.bytes.size()});
  return b;
}

void check_ub(const Fail& fail, const Arch& a, const char* verb, u128 first, u128 count) {
  if (first + count <= a.ub_rows()) return;
  fail(std::string(verb) + " UB rows " + span_text(first, count, dec) + ", but the unified buffer has " +
       dec(a.ub_rows()) + " rows");
}

void check_acc(const Fail& fail, const Arch& a, const char* verb, u128 first, u128 count) {
  if (first + count <= a.acc_entries) return;
  fail(std::string(verb) + " accumulator rows " + span_text(first, count, dec) +
       ", but the accumulators have " + dec(a.acc_entries) + " rows");
}

// Bytes moved per row and the distance between rows of a host DMA.
struct DmaShape {
  uint64_t row_bytes, stride;
};
DmaShape dma_shape(uint64_t row_bytes_reg, uint64_t stride_reg, uint64_t width) {
  return {row_bytes_reg ? row_bytes_reg : width, stride_reg ? stride_reg : width};
}

std::string region_list(const std::vector<Region>& regions) {
  if (regions.empty()) return "the program declares no host regions";
  std::string out = "host regions:";
  for (size_t i = 0; i < regions.size() && i < 8; ++i)
    out += std::string(i ? ", " : " ") + std::string(regions[i].name) + " " +
           span_text(regions[i].addr, regions[i].size, hex);
  return regions.size() > 8 ? out + ", ..." : out;
}

// Row r < rows of a DMA moves host bytes [host + r * stride, + row_bytes): each row must lie
// inside one host region.
void check_host(const Fail& fail, const Bounds& b, const char* verb, uint64_t host, uint64_t rows,
                DmaShape d) {
  auto inside = [&](u128 addr, u128 n) {
    return std::any_of(b.host.begin(), b.host.end(),
                       [&](const Region& r) { return addr >= r.addr && addr + n <= u128{r.addr} + r.size; });
  };
  if (inside(host, u128{rows - 1} * d.stride + d.row_bytes)) return;  // all rows in one region
  for (uint64_t r = 0; r < rows; ++r) {
    const u128 addr = host + u128{r} * d.stride;
    if (inside(addr, d.row_bytes)) continue;
    fail(std::string(verb) + " host bytes " + span_text(addr, d.row_bytes, hex) + " (row " + dec(r) + " of " +
         dec(rows) + "), which do not lie inside one host region (" + region_list(b.host) + ")");
  }
}

void check_dma(const Fail& fail, const Bounds& b, const isa::Instruction& inst) {
  const uint64_t width = b.arch.ub_row_bytes(), rows = inst[Field::rows];
  const bool read = inst.opcode == Opcode::read_host;
  const DmaShape d = dma_shape(b.host_row_bytes, b.host_stride, width);
  if (d.row_bytes > width)
    fail("host_row_bytes = " + dec(d.row_bytes) + " is wider than a UB row (" + dec(width) + " bytes)");
  check_ub(fail, b.arch, read ? "writes" : "reads", inst[Field::ub], rows);
  check_host(fail, b, read ? "reads" : "writes", inst[Field::host], rows, d);
}

void check_weights(const Fail& fail, const Bounds& b, u128 first, u128 count) {
  const std::string bytes = "reads weight bytes " + span_text(first, count, hex);
  if (first + count > b.arch.weight_mem_bytes)
    fail(bytes + ", but weight memory has " + dec(b.arch.weight_mem_bytes) + " bytes");
  if (first + count > b.weight_image)
    fail(bytes + ", but the weight image holds only " + dec(b.weight_image) + " bytes (never loaded)");
}

void check_matmul(const Fail& fail, const Arch& a, const isa::Instruction& inst) {
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat];
  check_ub(fail, a, "reads", inst[Field::ub], u128{repeat - 1} * inst[Field::stride] + rows);
  check_acc(fail, a, "writes", inst[Field::acc], u128{rows} * repeat);
}

uint64_t qtable_rows(const Arch& a) { return (7 * a.array_cols + a.ub_row_bytes() - 1) / a.ub_row_bytes(); }

void check_activate(const Fail& fail, const Arch& a, const isa::Instruction& inst) {
  check_acc(fail, a, "reads", inst[Field::acc], inst[Field::rows]);
  if (inst[Field::per_channel])
    check_ub(fail, a, "reads the per-column table from", inst[Field::qtable], qtable_rows(a));
  check_ub(fail, a, "writes", inst[Field::ub], inst[Field::rows]);
}

void check_vector(const Fail& fail, const Arch& a, const isa::Instruction& inst) {
  check_ub(fail, a, "reads", inst[Field::src], inst[Field::rows]);
  if (static_cast<isa::VecOp>(inst[Field::op]) != isa::VecOp::pass)
    check_ub(fail, a, "reads", inst[Field::src_b], inst[Field::rows]);
  check_ub(fail, a, "writes", inst[Field::ub], inst[Field::rows]);
}

// Rows from `src` up to the last one a pool reads (the input's height is implied by out_h).
u128 pool_input_rows(const isa::Instruction& inst) {
  const uint64_t win = inst[Field::window], ps = inst[Field::pool_stride];
  const u128 last_y = u128{inst[Field::out_h] - 1} * ps + win - 1;
  const u128 last_x = u128{inst[Field::out_w] - 1} * ps + win - 1;
  return (last_y * inst[Field::in_w] + last_x + 1) * inst[Field::batch];
}

void check_pool(const Fail& fail, const Arch& a, const isa::Instruction& inst) {
  const u128 reach = u128{inst[Field::out_w] - 1} * inst[Field::pool_stride] + inst[Field::window];
  if (reach > inst[Field::in_w])
    fail("the windows of output column " + dec(inst[Field::out_w] - 1) + " cover input columns " +
         span_text(reach - inst[Field::window], inst[Field::window], dec) +
         ", but in_w = " + dec(inst[Field::in_w]));
  check_ub(fail, a, "reads", inst[Field::src], pool_input_rows(inst));
  check_ub(fail, a, "writes", inst[Field::ub],
           u128{inst[Field::out_h]} * inst[Field::out_w] * inst[Field::batch]);
}

// Every address range `inst` touches, against `b`. Throws SimError naming the first bad one.
void check_instruction(const Bounds& b, const isa::Instruction& inst, uint64_t index) {
  const Fail fail{index, inst};
  switch (inst.opcode) {
    case Opcode::read_host:
    case Opcode::write_host: return check_dma(fail, b, inst);
    case Opcode::read_weights:
      return check_weights(fail, b, inst[Field::waddr], u128{inst[Field::tiles]} * b.arch.tile_bytes());
    case Opcode::matmul: return check_matmul(fail, b.arch, inst);
    case Opcode::activate: return check_activate(fail, b.arch, inst);
    case Opcode::vector: return check_vector(fail, b.arch, inst);
    case Opcode::pool: return check_pool(fail, b.arch, inst);
    default: return;
  }
}

void set_register(uint64_t& host_stride, uint64_t& host_row_bytes, const isa::Instruction& inst,
                  uint64_t index) {
  switch (static_cast<isa::ConfigReg>(inst[Field::reg])) {
    case isa::ConfigReg::host_stride: host_stride = inst[Field::value]; return;
    case isa::ConfigReg::host_row_bytes: host_row_bytes = inst[Field::value]; return;
  }
  Fail{index, inst}("unknown configuration register " + dec(inst[Field::reg]));
}

}  // namespace

void check_static(const isa::Program& program, const Arch& arch) {
  Bounds b{arch, {}, program.weights.size(), 0, 0};
  for (const isa::HostRegion& r : program.host_regions) b.host.push_back({r.name, r.host_addr, r.bytes});
  for (uint64_t i = 0; i < program.code.size(); ++i) {
    const isa::Instruction& inst = program.code[i];
    if (inst.opcode == Opcode::set_config) set_register(b.host_stride, b.host_row_bytes, inst, i);
    check_instruction(b, inst, i);
  }
}

void exec_set_config(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  set_register(s.host_stride, s.host_row_bytes, inst, index);
}

void exec_read_host(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t width = s.arch.ub_row_bytes();
  const DmaShape d = dma_shape(s.host_row_bytes, s.host_stride, width);
  for (uint64_t r = 0; r < inst[Field::rows]; ++r) {
    const uint64_t addr = inst[Field::host] + r * d.stride;
    const HostBuffer* b = s.host_span(addr, d.row_bytes);
    uint8_t* row = s.ub_row(inst[Field::ub] + r);
    std::memcpy(row, b->bytes.data() + (addr - b->addr), d.row_bytes);
    std::memset(row + d.row_bytes, 0, width - d.row_bytes);
  }
}

void exec_write_host(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const DmaShape d = dma_shape(s.host_row_bytes, s.host_stride, s.arch.ub_row_bytes());
  for (uint64_t r = 0; r < inst[Field::rows]; ++r) {
    const uint64_t addr = inst[Field::host] + r * d.stride;
    HostBuffer* b = s.host_span(addr, d.row_bytes);
    std::memcpy(b->bytes.data() + (addr - b->addr), s.ub_row(inst[Field::ub] + r), d.row_bytes);
  }
}

void matmul_reference(MachineState& s, const isa::Instruction& inst, const WeightTile& active) {
  check_matmul(Fail{kNoIndex, inst}, s.arch, inst);
  const uint64_t n = s.arch.array_rows, m = s.arch.array_cols, rows = inst[Field::rows];
  const bool x_unsigned = inst[Field::unsigned_data], add = inst[Field::accumulate];
  std::vector<uint32_t> sum(m);  // int32 arithmetic wraps: computed modulo 2^32
  for (uint64_t g = 0; g < inst[Field::repeat]; ++g)
    for (uint64_t r = 0; r < rows; ++r) {
      const uint8_t* x = s.ub_row(inst[Field::ub] + g * inst[Field::stride] + r);
      std::fill(sum.begin(), sum.end(), 0u);
      for (uint64_t k = 0; k < n; ++k) {
        const int32_t xk = x_unsigned ? int32_t{x[k]} : int32_t{static_cast<int8_t>(x[k])};
        for (uint64_t j = 0; j < m; ++j) sum[j] += static_cast<uint32_t>(xk * active.weight(k, j, m));
      }
      int32_t* out = s.acc_row(inst[Field::acc] + g * rows + r);
      for (uint64_t j = 0; j < m; ++j)
        out[j] = static_cast<int32_t>(sum[j] + (add ? static_cast<uint32_t>(out[j]) : 0u));
    }
}

WeightTile weight_tile(const MachineState& s, const isa::Instruction& rw, uint64_t t) {
  const uint64_t tile = s.arch.tile_bytes();
  const u128 first = rw[Field::waddr] + u128{t} * tile;
  if (first + tile > s.weights.size())
    Fail{kNoIndex, rw}("reads weight bytes " + span_text(first, tile, hex) +
                       ", but the weight image holds only " + dec(s.weights.size()) +
                       " bytes (never loaded)");
  const uint64_t addr = static_cast<uint64_t>(first);
  return WeightTile{s.weights.data() + addr, addr, rw[Field::unsigned_data] != 0};
}

// ---- the activation unit --------------------------------------------------------------------
//
// exec_activate and exec_vector hoist everything that depends only on the instruction out of
// the element loops, which are branch-free so that they vectorise; they are compiled for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and baseline x86-64, chosen when the program loads.
// Integer arithmetic throughout, so every version gives the same bytes as round_half_away_shift
// and apply_func, which state the arithmetic one element at a time.

// Defining TPUSIM_ACT_PORTABLE compiles them for the compiler's target only (to test that code).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TPUSIM_ACT_PORTABLE)
#define TPUSIM_ACT_X86 1
#define TPUSIM_ACT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TPUSIM_ACT_CLONES
#endif
#define TPUSIM_ACT_INLINE [[gnu::always_inline]] inline

namespace {

// 127 * f(y / 16) rounded half away from zero, for y in [-2048, 2047] (beyond that both curves
// are flat at int8 precision: 127 * tanh(128) and 127 / (1 + e^-128) round to 127). Tabulated
// once so every engine and every call gives identical bytes.
struct Curves {
  std::array<int16_t, 4096> sigmoid, tanh;
  Curves() {
    for (int y = -2048; y < 2048; ++y) {
      sigmoid[y + 2048] = static_cast<int16_t>(std::lround(127.0 / (1.0 + std::exp(-y / 16.0))));
      tanh[y + 2048] = static_cast<int16_t>(std::lround(127.0 * std::tanh(y / 16.0)));
    }
  }
};

const Curves& curves() {
  static const Curves c;
  return c;
}

int64_t curve(const std::array<int16_t, 4096>& table, int64_t y) {
  return table[static_cast<size_t>(std::clamp<int64_t>(y, -2048, 2047) + 2048)];
}

// Both curves are flat (at 0 or -127, and at 127) from well inside [-128, 127] (sigmoid from
// |y| = 89, tanh from |y| = 50; a test checks), so the loops clamp y to int8 and then
// translate each byte through a 256-entry table: [b] = apply_func(f, int8_t(b), 127, unsigned).
using ByteTable = std::array<uint8_t, 256>;
const ByteTable& curve_bytes(isa::Func f, bool out_unsigned) {
  static const std::array<ByteTable, 4> tables = [] {  // sigmoid, tanh; each int8 then uint8
    std::array<ByteTable, 4> t;
    for (size_t k = 0; k < t.size(); ++k)
      for (int b = 0; b < 256; ++b)
        t[k][static_cast<size_t>(b)] = static_cast<uint8_t>(apply_func(
            k < 2 ? isa::Func::sigmoid : isa::Func::tanh, static_cast<int8_t>(b), 127, k % 2 != 0));
    return t;
  }();
  return tables[2 * (f == isa::Func::tanh) + out_unsigned];
}

// p[i] = table[p[i]] for i < n.
void translate_portable(uint8_t* p, uint64_t n, const uint8_t* table) {
  for (uint64_t i = 0; i < n; ++i) p[i] = table[p[i]];
}

#ifdef TPUSIM_ACT_X86
// translate_portable, 64 bytes at a time: two 128-entry permutes, chosen by each byte's bit 7.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void translate_vbmi(uint8_t* p, uint64_t n,
                                                                           const uint8_t* table) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (uint64_t i = 0; i < n; i += 64) {
    const __mmask64 live = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i b = _mm512_maskz_loadu_epi8(live, p + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, b, t1), high = _mm512_permutex2var_epi8(t2, b, t3);
    _mm512_mask_storeu_epi8(p + i, live, _mm512_mask_blend_epi8(_mm512_movepi8_mask(b), low, high));
  }
}
#endif

void translate(uint8_t* p, uint64_t n, const uint8_t* table) {
#ifdef TPUSIM_ACT_X86
  static const bool vbmi = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
  }();
  if (vbmi) return translate_vbmi(p, n, table);
#endif
  translate_portable(p, n, table);
}

// What follows requantization: y is clamped to [lo, hi] and stored as a byte, which `table`
// then translates (sigmoid, tanh: [lo, hi] is int8's range) or not (identity, relu, relux:
// the clamp is the function and the saturation).
struct Output {
  int64_t lo, hi;
  const uint8_t* table;  // nullptr for identity, relu, relux
};

// apply_func(f, y, clip, out_unsigned) as an Output.
Output output_of(isa::Func f, int64_t clip, bool out_unsigned) {
  const int64_t top = out_unsigned ? 255 : 127;
  switch (f) {
    case isa::Func::identity: return {out_unsigned ? 0 : -128, top, nullptr};
    case isa::Func::relu: return {0, top, nullptr};
    case isa::Func::relux: return {0, std::min(clip, top), nullptr};  // clip >= 0
    case isa::Func::sigmoid:
    case isa::Func::tanh: break;
  }
  return {-128, 127, curve_bytes(f, out_unsigned).data()};
}

// round_half_away(p / 2^shift) for |p| < 2^49 and shift <= 50, given p2 = 2p, half2 = 2^shift
// and shift1 = shift + 1: floor((2p + 2^shift - [p < 0]) / 2^(shift + 1)). For p >= 0 that is
// floor(p / 2^shift + 1/2); for p < 0 it is ceil((2p - 2^shift) / 2^(shift + 1)), i.e.
// -floor(|p| / 2^shift + 1/2). No intermediate reaches 2^51. Every shift above 50 rounds
// |p| < 2^49 to 0, as 50 does: callers cap the shift at kMaxShift.
constexpr unsigned kMaxShift = 50;
TPUSIM_ACT_INLINE int64_t round_doubled(int64_t p2, int64_t half2, uint64_t shift1) {
  return (p2 + half2 + (p2 >> 63)) >> shift1;
}

// Per-tensor act: round_half_away(x * mult / 2^shift) with |x * mult| < 2^47, then `out`.
struct ActKernel {
  int32_t mult2;  // 2 * mult
  int64_t half2;  // 2^shift
  uint64_t shift1;
  Output out;
};

ActKernel act_kernel(uint64_t mult, uint64_t shift, Output out) {
  const uint64_t s = std::min<uint64_t>(shift, kMaxShift);
  return {static_cast<int32_t>(2 * mult), int64_t{1} << s, s + 1, out};
}

// One row of m elements, before any table.
TPUSIM_ACT_INLINE void act_row(const int32_t* __restrict x, uint8_t* __restrict out, uint64_t m,
                               int32_t mult2, int64_t half2, uint64_t shift1, int64_t lo, int64_t hi) {
  for (uint64_t c = 0; c < m; ++c)
    out[c] = static_cast<uint8_t>(std::clamp(round_doubled(int64_t{x[c]} * mult2, half2, shift1), lo, hi));
}

// `rows` accumulator rows of m values from x (consecutive) to UB rows `width` bytes apart from
// ub, before any table, each zero-filled from byte m.
TPUSIM_ACT_CLONES void act_rows(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m, uint64_t width,
                                const ActKernel& k) {
  const int32_t mult2 = k.mult2;
  const int64_t half2 = k.half2, lo = k.out.lo, hi = k.out.hi;
  const uint64_t shift1 = k.shift1;
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    act_row(x, ub, m, mult2, half2, shift1, lo, hi);
    std::memset(ub + m, 0, width - m);
  }
}

// Per-column act (perchan): round_half_away((x + bias[c]) * mult[c] / 2^shift[c]) with
// |p| < 2^48, in the form round_doubled takes.
struct ColumnKernel {
  std::vector<int64_t> bias, mult2, half2;
  std::vector<uint64_t> shift1;
};

// The table at UB row qtable (docs/isa.md), read whole before the act writes anything.
ColumnKernel column_kernel(const MachineState& s, const isa::Instruction& inst, uint64_t index) {
  const uint64_t m = s.arch.array_cols;
  const uint8_t* t = s.ub_row(inst[Field::qtable]);
  ColumnKernel q{std::vector<int64_t>(m), std::vector<int64_t>(m), std::vector<int64_t>(m),
                 std::vector<uint64_t>(m)};
  for (uint64_t c = 0; c < m; ++c) {
    const uint8_t* b = t + 4 * c;
    const uint32_t bias = b[0] | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
    const unsigned shift = t[6 * m + c];
    if (shift > 63)
      Fail{index, inst}("the per-column table at UB row " + dec(inst[Field::qtable]) + " gives column " +
                        dec(c) + " the shift " + dec(shift) + " (at most 63)");
    const unsigned capped = std::min(shift, kMaxShift);
    q.bias[c] = static_cast<int32_t>(bias);
    q.mult2[c] = 2 * (t[4 * m + 2 * c] | t[4 * m + 2 * c + 1] << 8);
    q.half2[c] = int64_t{1} << capped;
    q.shift1[c] = capped + 1;
  }
  return q;
}

// One row of m elements, before any table.
TPUSIM_ACT_INLINE void act_row_columns(const int32_t* __restrict x, uint8_t* __restrict out, uint64_t m,
                                       const int64_t* __restrict bias, const int64_t* __restrict mult2,
                                       const int64_t* __restrict half2, const uint64_t* __restrict shift1,
                                       int64_t lo, int64_t hi) {
  for (uint64_t c = 0; c < m; ++c)
    out[c] = static_cast<uint8_t>(
        std::clamp(round_doubled((x[c] + bias[c]) * mult2[c], half2[c], shift1[c]), lo, hi));
}

// act_rows with per-column parameters.
TPUSIM_ACT_CLONES void act_rows_columns(const int32_t* x, uint8_t* ub, uint64_t rows, uint64_t m,
                                        uint64_t width, const ColumnKernel& q, Output out) {
  for (uint64_t r = 0; r < rows; ++r, x += m, ub += width) {
    act_row_columns(x, ub, m, q.bias.data(), q.mult2.data(), q.half2.data(), q.shift1.data(), out.lo, out.hi);
    std::memset(ub + m, 0, width - m);
  }
}

// vec in int32: |op(a, b)| <= 2^14 and mult < 2^16, so |p| = |op(a, b) * mult| < 2^30, and
// round_half_away(p / 2^shift) = (p + half + (p < 0 ? neg : 0)) >> shift, with half = 2^(shift-1)
// and neg = -1 (both 0 for shift 0): for p < 0 that is floor((p + half - 1) / 2^shift) =
// -floor((|p| + half) / 2^shift). Every shift from 31 rounds p to 0, as mult 0 does: then mult 0.
struct VecKernel {
  int32_t mult, half, neg;
  uint32_t shift;
  int32_t lo, hi;
};

VecKernel vec_kernel(uint64_t mult, uint64_t shift, Output out) {
  const auto lo = static_cast<int32_t>(out.lo), hi = static_cast<int32_t>(out.hi);
  if (shift > 30) return {0, 0, 0, 0, lo, hi};
  const auto s = static_cast<uint32_t>(shift);
  return {static_cast<int32_t>(mult), s ? 1 << (s - 1) : 0, s ? -1 : 0, s, lo, hi};
}

template <isa::VecOp kOp>
TPUSIM_ACT_INLINE int32_t vec_op(int32_t a, int32_t b) {
  switch (kOp) {
    case isa::VecOp::add: return a + b;
    case isa::VecOp::sub: return a - b;
    case isa::VecOp::mul: return a * b;
    case isa::VecOp::max: return std::max(a, b);
    case isa::VecOp::min: return std::min(a, b);
    case isa::VecOp::pass: break;
  }
  return a;
}

// out[i] = clamp(requantize(op(a[i], b[i]))) for i < n, before any table. out may be a or b but
// not otherwise overlap them, so no iteration depends on another. b is not read for pass.
template <isa::VecOp kOp>
TPUSIM_ACT_INLINE void vec_loop(const int8_t* a, const int8_t* b, uint8_t* out, uint64_t n, VecKernel k) {
#pragma GCC ivdep
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t p = vec_op<kOp>(a[i], kOp == isa::VecOp::pass ? 0 : b[i]) * k.mult;
    out[i] = static_cast<uint8_t>(std::clamp((p + k.half + ((p >> 31) & k.neg)) >> k.shift, k.lo, k.hi));
  }
}

TPUSIM_ACT_CLONES void vec_elements(isa::VecOp op, const uint8_t* a, const uint8_t* b, uint8_t* out,
                                    uint64_t n, const VecKernel& k) {
  const auto* sa = reinterpret_cast<const int8_t*>(a);
  const auto* sb = reinterpret_cast<const int8_t*>(b);
  switch (op) {
    case isa::VecOp::add: return vec_loop<isa::VecOp::add>(sa, sb, out, n, k);
    case isa::VecOp::sub: return vec_loop<isa::VecOp::sub>(sa, sb, out, n, k);
    case isa::VecOp::mul: return vec_loop<isa::VecOp::mul>(sa, sb, out, n, k);
    case isa::VecOp::max: return vec_loop<isa::VecOp::max>(sa, sb, out, n, k);
    case isa::VecOp::min: return vec_loop<isa::VecOp::min>(sa, sb, out, n, k);
    case isa::VecOp::pass: return vec_loop<isa::VecOp::pass>(sa, sb, out, n, k);
  }
}

// UB rows [first, first + count): in place, or a copy when the output rows [out, out + out_count)
// overlap them at another position (an instruction reads all its operands before writing).
// Starting at the same row is safe without a copy: vec's output row r depends only on input
// row r, and every input row a pool output o reads is at index >= o (in_w >= out_w).
const uint8_t* input_rows(const MachineState& s, uint64_t first, uint64_t count, uint64_t out,
                          uint64_t out_count, std::vector<uint8_t>& copy) {
  const uint8_t* p = s.ub_row(first);
  if (first == out || first + count <= out || out + out_count <= first) return p;
  copy.assign(p, p + count * s.arch.ub_row_bytes());
  return copy.data();
}

// round_half_away(sum / d) for d > 0.
int64_t divide_half_away(int64_t sum, int64_t d) {
  const int64_t q = (2 * (sum < 0 ? -sum : sum) + d) / (2 * d);
  return sum < 0 ? -q : q;
}

}  // namespace

int64_t round_half_away_shift(int64_t x, unsigned shift) {
  if (shift == 0) return x;
  if (shift > 64) return 0;  // |x| <= 2^63 is below one half of 2^shift
  const u128 mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const auto q = static_cast<int64_t>((mag + (u128{1} << (shift - 1))) >> shift);
  return x < 0 ? -q : q;
}

int32_t apply_func(isa::Func func, int64_t y, int64_t clip, bool out_unsigned) {
  switch (func) {
    case isa::Func::identity: break;
    case isa::Func::relu: y = std::max<int64_t>(y, 0); break;
    case isa::Func::relux: y = std::min(std::max<int64_t>(y, 0), clip); break;
    case isa::Func::sigmoid: y = curve(curves().sigmoid, y); break;
    case isa::Func::tanh: y = curve(curves().tanh, y); break;
  }
  return static_cast<int32_t>(out_unsigned ? std::clamp<int64_t>(y, 0, 255)
                                           : std::clamp<int64_t>(y, -128, 127));
}

void exec_activate(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t m = s.arch.array_cols, width = s.arch.ub_row_bytes(), rows = inst[Field::rows];
  const Output out = output_of(static_cast<isa::Func>(inst[Field::func]),
                               static_cast<int64_t>(inst[Field::clip]), inst[Field::unsigned_data] != 0);
  const int32_t* x = s.acc_row(inst[Field::acc]);
  uint8_t* ub = s.ub_row(inst[Field::ub]);
  if (inst[Field::per_channel]) act_rows_columns(x, ub, rows, m, width, column_kernel(s, inst, index), out);
  else act_rows(x, ub, rows, m, width, act_kernel(inst[Field::mult], inst[Field::shift], out));
  if (out.table)
    for (uint64_t r = 0; r < rows; ++r) translate(ub + r * width, m, out.table);
}

void exec_vector(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t rows = inst[Field::rows], ub = inst[Field::ub], n = rows * s.arch.ub_row_bytes();
  const auto op = static_cast<isa::VecOp>(inst[Field::op]);
  std::vector<uint8_t> copy_a, copy_b;
  const uint8_t* a = input_rows(s, inst[Field::src], rows, ub, rows, copy_a);
  const uint8_t* b =
      op == isa::VecOp::pass ? nullptr : input_rows(s, inst[Field::src_b], rows, ub, rows, copy_b);
  const Output out = output_of(static_cast<isa::Func>(inst[Field::func]), 127, false);
  vec_elements(op, a, b, s.ub_row(ub), n, vec_kernel(inst[Field::mult], inst[Field::shift], out));
  if (out.table) translate(s.ub_row(ub), n, out.table);
}

void exec_pool(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t width = s.arch.ub_row_bytes(), in_w = inst[Field::in_w], out_w = inst[Field::out_w];
  const uint64_t batch = inst[Field::batch], win = inst[Field::window], ps = inst[Field::pool_stride];
  const bool avg = static_cast<isa::PoolKind>(inst[Field::kind]) == isa::PoolKind::avg;
  const uint64_t outputs = inst[Field::out_h] * out_w * batch;
  std::vector<uint8_t> copy;
  const uint8_t* in = input_rows(s, inst[Field::src], static_cast<uint64_t>(pool_input_rows(inst)),
                                 inst[Field::ub], outputs, copy);
  std::vector<int64_t> v(width);
  for (uint64_t o = 0; o < outputs; ++o) {  // o = (oy * out_w + ox) * batch + n
    const uint64_t n = o % batch, ox = o / batch % out_w, oy = o / batch / out_w;
    std::fill(v.begin(), v.end(), avg ? 0 : -128);
    for (uint64_t dy = 0; dy < win; ++dy)
      for (uint64_t dx = 0; dx < win; ++dx) {
        const uint8_t* row = in + (((oy * ps + dy) * in_w + ox * ps + dx) * batch + n) * width;
        for (uint64_t i = 0; i < width; ++i)
          v[i] =
              avg ? v[i] + static_cast<int8_t>(row[i]) : std::max<int64_t>(v[i], static_cast<int8_t>(row[i]));
      }
    uint8_t* out = s.ub_row(inst[Field::ub] + o);
    for (uint64_t i = 0; i < width; ++i)
      out[i] = static_cast<uint8_t>(avg ? divide_half_away(v[i], static_cast<int64_t>(win * win)) : v[i]);
  }
}

}  // namespace tpusim::sim
