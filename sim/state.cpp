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
// The arithmetic of act, vec and pool (the element loops) is in activation.cpp.
#include "sim/state.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "isa/disassembler.h"
#include "sim/activation_math.h"

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;
using u128 = unsigned __int128;

SimError::SimError(uint64_t index, const std::string& message, std::optional<uint64_t> cycle)
    : InputError(message), index(index), cycle(cycle) {}

std::string describe(uint64_t index, const isa::Instruction& inst) {
  return "instruction " + std::to_string(index) + " (" + isa::format_instruction(inst) + ")";
}

HostBuffer* MachineState::host_span(uint64_t addr, uint64_t bytes) {
  for (HostBuffer& b : host)
    if (addr >= b.addr && bytes <= b.bytes.size() && addr - b.addr <= b.bytes.size() - bytes) return &b;
  return nullptr;
}

std::vector<std::pair<std::string, uint64_t>> state_bytes(const isa::Program& program, const Arch& arch) {
  const auto mul = [](uint64_t a, uint64_t b) {
    uint64_t p = 0;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
  };
  uint64_t host = 0;
  for (const isa::HostRegion& r : program.host_regions) host = std::min(UINT64_MAX - r.bytes, host) + r.bytes;
  return {{"UB (ub_bytes)", mul(arch.ub_rows(), arch.ub_row_bytes())},
          {"accumulators (acc_entries x array_cols x 4)", mul(mul(arch.acc_entries, arch.array_cols), 4)},
          {"host buffers", host}};
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
  uint64_t host_stride = 0, host_row_bytes = 0, act_lane = 0;
  PackRegs pack{};
  ActPool act_pool{};
  Planes planes{};
};

Bounds bounds_of(const MachineState& s) {
  Bounds b{s.arch, {}, s.weights.size(), s.host_stride, s.host_row_bytes, s.act_lane, s.pack, s.act_pool, s.planes};
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
  // (The message only for a failing check: this runs once per read_weights, a million times in
  // CNN1 on a 64 x 64 array.)
  const auto bytes = [&] { return "reads weight bytes " + span_text(first, count, hex); };
  if (first + count > b.arch.weight_mem_bytes)
    fail(bytes() + ", but weight memory has " + dec(b.arch.weight_mem_bytes) + " bytes");
  if (first + count > b.weight_image)
    fail(bytes() + ", but the weight image holds only " + dec(b.weight_image) + " bytes (never loaded)");
}

void check_read_weights(const Fail& fail, const Bounds& b, const isa::Instruction& inst) {
  const Arch& a = b.arch;
  if (inst[Field::tile_rows] > a.array_rows)
    fail("tile_rows = " + dec(inst[Field::tile_rows]) + ", but the array has " + dec(a.array_rows) + " rows");
  if (inst[Field::tile_cols] > a.array_cols)
    fail("tile_cols = " + dec(inst[Field::tile_cols]) + ", but the array has " + dec(a.array_cols) + " columns");
  check_weights(fail, b, inst[Field::waddr], u128{inst[Field::tiles]} * tile_box(a, inst).bytes());
}

void check_matmul(const Fail& fail, const Arch& a, const PackRegs& pack, const isa::Instruction& inst) {
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat];
  if (const auto why = gather_error(pack, a, inst[Field::lane])) fail(*why);
  if (const auto why = wide_error(pack)) fail(*why);
  if (!pack.gathers() && inst[Field::lane] + a.array_rows > a.ub_row_bytes())
    fail("reads bytes " + span_text(inst[Field::lane], a.array_rows, dec) + " of each UB row (lane " +
         dec(inst[Field::lane]) + "), but a UB row has " + dec(a.ub_row_bytes()) + " bytes");
  // Logical rows from ub (dense reads: dense_rows of them per UB row), then UB rows.
  const u128 logical = u128{repeat - 1} * inst[Field::stride] + rows + pack.reach();
  const u128 span = (logical - 1) / pack.in_q() + 1;
  check_ub(fail, a, "reads", inst[Field::ub], span);
  if (pack.mm_in_hi) check_ub(fail, a, "reads the high byte plane (mm_in_hi) from", u128{inst[Field::ub]} + pack.mm_in_hi, span);
  check_acc(fail, a, "writes", inst[Field::acc], u128{rows} * repeat);
}

uint64_t qtable_rows(const Arch& a) { return (7 * a.array_cols + a.ub_row_bytes() - 1) / a.ub_row_bytes(); }

// The fused-pooling registers an activate runs under (docs/isa.md, reg act_pool).
void check_act_pool(const Fail& fail, const ActPool& p, const PackRegs& pack, const isa::Instruction& inst) {
  if (p.kind > 2) fail("act_pool = " + dec(p.kind) + ": expected 0 (none), 1 (max) or 2 (avg)");
  if (!p.on()) return;
  const auto range = [&](const char* name, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi)
      fail(std::string(name) + " = " + dec(v) + " (setcfg register), expected " + dec(lo) + ".." + dec(hi));
  };
  range("act_pool_window", p.window, 1, 15);
  range("act_pool_stride", p.stride, 1, 15);
  range("act_pool_width", p.width, 1, UINT32_MAX);
  range("act_pool_batch", p.batch, 1, UINT32_MAX);
  if (inst[Field::unsigned_data]) fail("fused pooling (act_pool) compares int8 values: not with `unsigned`");
  if (pack.scatters()) fail("fused pooling (act_pool) writes whole pooled rows: not with act_groups");
  const uint64_t line = p.width * p.batch, rows = inst[Field::rows];
  if (rows % line)
    fail(dec(rows) + " rows are not whole lines of act_pool_width x act_pool_batch = " + dec(p.width) + " x " +
         dec(p.batch) + " = " + dec(line) + " rows");
  if (rows / line < p.window || p.width < p.window)
    fail("the map of " + dec(rows / line) + " x " + dec(p.width) + " pixels is smaller than the " + dec(p.window) +
         " x " + dec(p.window) + " pooling window");
}

// A 16-bit operand's high plane (register `name` = h, 0: an 8-bit operand) lies h rows after its
// `rows` low-plane rows from `first`: h >= rows, so that the planes do not overlap.
void check_plane(const Fail& fail, const Arch& a, const char* verb, const char* name, uint64_t h, uint64_t first,
                 uint64_t rows) {
  if (h == 0) return;
  if (h < rows)
    fail(std::string(name) + " = " + dec(h) + " (setcfg register): the high byte plane would overlap the " +
         dec(rows) + " rows of the low plane (expected >= " + dec(rows) + ")");
  check_ub(fail, a, verb, u128{first} + h, rows);
}

void check_activate(const Fail& fail, const Arch& a, uint64_t act_lane, const PackRegs& pack, const ActPool& pool,
                    const Planes& planes, const isa::Instruction& inst) {
  if (planes.act) {
    if (inst[Field::unsigned_data]) fail("16-bit results (act_high) are signed: not with `unsigned`");
    if (pack.scatters()) fail("16-bit results (act_high): not with act_groups");
    if (pool.on()) fail("16-bit results (act_high): not with act_pool");
    if (pack.dense_out()) fail("16-bit results (act_high): not with act_dense_rows");
  }
  check_act_pool(fail, pool, pack, inst);
  if (const auto why = scatter_error(pack, a, act_lane)) fail(*why);
  if (!pack.scatters() && !pack.dense_out() && act_lane + a.array_cols > a.ub_row_bytes())
    fail("writes bytes " + span_text(act_lane, a.array_cols, dec) + " of each UB row (act_lane " + dec(act_lane) +
         "), but a UB row has " + dec(a.ub_row_bytes()) + " bytes");
  check_acc(fail, a, "reads", inst[Field::acc], inst[Field::rows]);
  if (inst[Field::per_channel])
    check_ub(fail, a, "reads the per-column table from", inst[Field::qtable], qtable_rows(a));
  // Logical rows written (dense writes: act_dense_rows of them per UB row), then UB rows.
  const u128 logical = pool.on() ? u128{activate_ub_rows(inst, pool)} : u128{inst[Field::rows]} * pack.groups();
  check_ub(fail, a, "writes", inst[Field::ub], logical ? (logical - 1) / pack.out_q() + 1 : 0);
  check_plane(fail, a, "writes", "act_high", planes.act, inst[Field::ub], inst[Field::rows]);
}

void check_vector(const Fail& fail, const Arch& a, const Planes& planes, const isa::Instruction& inst) {
  const uint64_t rows = inst[Field::rows];
  check_ub(fail, a, "reads", inst[Field::src], rows);
  check_plane(fail, a, "reads", "vec_high_a", planes.a, inst[Field::src], rows);
  if (static_cast<isa::VecOp>(inst[Field::op]) != isa::VecOp::pass) {
    check_ub(fail, a, "reads", inst[Field::src_b], rows);
    check_plane(fail, a, "reads", "vec_high_b", planes.b, inst[Field::src_b], rows);
  }
  check_ub(fail, a, "writes", inst[Field::ub], rows);
  check_plane(fail, a, "writes", "vec_high_out", planes.out, inst[Field::ub], rows);
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
      return check_read_weights(fail, b, inst);
    case Opcode::matmul: return check_matmul(fail, b.arch, b.pack, inst);
    case Opcode::activate: return check_activate(fail, b.arch, b.act_lane, b.pack, b.act_pool, b.planes, inst);
    case Opcode::vector: return check_vector(fail, b.arch, b.planes, inst);
    case Opcode::pool: return check_pool(fail, b.arch, inst);
    default: return;
  }
}

void set_register(uint64_t& host_stride, uint64_t& host_row_bytes, uint64_t& act_lane, PackRegs& pack,
                  ActPool& act_pool, Planes& planes, const isa::Instruction& inst, uint64_t index) {
  if (set_pack_register(pack, inst)) return;
  const auto reg = static_cast<isa::ConfigReg>(inst[Field::reg]);
  switch (reg) {
    case isa::ConfigReg::host_stride: host_stride = inst[Field::value]; return;
    case isa::ConfigReg::host_row_bytes: host_row_bytes = inst[Field::value]; return;
    case isa::ConfigReg::act_lane: act_lane = inst[Field::value]; return;
    default:  // (the packing registers: set_pack_register above)
      if (act_pool.set(reg, inst[Field::value]) || planes.set(reg, inst[Field::value])) return;
  }
  Fail{index, inst}("unknown configuration register " + dec(inst[Field::reg]));
}

}  // namespace

void check_static(const isa::Program& program, const Arch& arch) {
  Bounds b{arch, {}, program.weight_bytes(), 0, 0, 0, {}, {}, {}};
  for (const isa::HostRegion& r : program.host_regions) b.host.push_back({r.name, r.host_addr, r.bytes});
  for (uint64_t i = 0; i < program.code.size(); ++i) {
    const isa::Instruction& inst = program.code[i];
    if (inst.opcode == Opcode::set_config)
      set_register(b.host_stride, b.host_row_bytes, b.act_lane, b.pack, b.act_pool, b.planes, inst, i);
    check_instruction(b, inst, i);
  }
}

void exec_set_config(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  set_register(s.host_stride, s.host_row_bytes, s.act_lane, s.pack, s.act_pool, s.planes, inst, index);
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
  check_matmul(Fail{kNoIndex, inst}, s.arch, s.pack, inst);
  const uint64_t n = s.arch.array_rows, m = s.arch.array_cols, rows = inst[Field::rows];
  const bool add = inst[Field::accumulate];
  std::vector<uint32_t> sum(m);  // int32 arithmetic wraps: computed modulo 2^32
  std::vector<uint8_t> x(n);
  // One pass per input byte plane (pack.h): pass p's column sums, shifted, added to the row.
  for (uint64_t p = 0; p < s.pack.planes(); ++p) {
    const uint64_t off = s.pack.pass_offset(p);
    const bool x_unsigned = s.pack.pass_unsigned(p, inst[Field::unsigned_data] != 0);
    const unsigned shift = s.pack.pass_shift(p);
    const auto row_of = [&](uint64_t row) { return s.ub_row(row + off); };
    for (uint64_t g = 0; g < inst[Field::repeat]; ++g)
      for (uint64_t r = 0; r < rows; ++r) {
        gather_vector(s.pack, s.arch, inst, g * rows + r, row_of, x.data());
        std::fill(sum.begin(), sum.end(), 0u);
        for (uint64_t k = 0; k < n; ++k) {
          const int32_t xk = x_unsigned ? int32_t{x[k]} : int32_t{static_cast<int8_t>(x[k])};
          for (uint64_t j = 0; j < m; ++j) sum[j] += static_cast<uint32_t>(xk * active.weight(k, j, m));
        }
        int32_t* out = s.acc_row(inst[Field::acc] + g * rows + r);
        for (uint64_t j = 0; j < m; ++j)
          out[j] = static_cast<int32_t>((sum[j] << shift) + (add || p ? static_cast<uint32_t>(out[j]) : 0u));
      }
  }
}

TileBox tile_box(const Arch& a, const isa::Instruction& rw) {
  return {rw[Field::tile_rows] ? rw[Field::tile_rows] : a.array_rows,
          rw[Field::tile_cols] ? rw[Field::tile_cols] : a.array_cols};
}

void WeightTile::set_box(const TileBox& box, const Arch& a) {
  if (box.partial(a)) rows = uint32_t(box.rows), cols = uint32_t(box.cols);
}

void WeightTile::expand(uint64_t array_rows, uint64_t array_cols, std::vector<uint8_t>& out) const {
  out.assign(array_rows * array_cols, 0);
  const uint64_t r = rows ? rows : array_rows, c = cols ? cols : array_cols;
  for (uint64_t k = 0; k < r; ++k) std::memcpy(out.data() + k * array_cols, data + k * c, c);
}

WeightTile weight_tile(const MachineState& s, const isa::Instruction& rw, uint64_t t) {
  const TileBox box = tile_box(s.arch, rw);
  const uint64_t tile = box.bytes();
  const u128 first = rw[Field::waddr] + u128{t} * tile;
  if (first + tile > s.weights.size())
    Fail{kNoIndex, rw}("reads weight bytes " + span_text(first, tile, hex) +
                       ", but the weight image holds only " + dec(s.weights.size()) +
                       " bytes (never loaded)");
  const uint64_t addr = static_cast<uint64_t>(first);
  WeightTile w{s.weights.data() + addr, addr, rw[Field::unsigned_data] != 0};
  w.set_box(box, s.arch);
  return w;
}

// ---- the activation unit: checks and addressing; the arithmetic is in activation.cpp --------

namespace {

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

// The table at UB row qtable (docs/isa.md), read whole before the act writes anything.
std::vector<activation::Column> columns(const MachineState& s, const isa::Instruction& inst) {
  const uint64_t m = s.arch.array_cols;
  const uint8_t* t = s.ub_row(inst[Field::qtable]);
  std::vector<activation::Column> q(m);
  for (uint64_t c = 0; c < m; ++c) {
    const uint8_t* b = t + 4 * c;
    const uint32_t bias = b[0] | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
    // A shift byte's low 6 bits are the shift (0..63), as in the instruction's 6-bit field.
    q[c] = {static_cast<int32_t>(bias), static_cast<uint16_t>(t[4 * m + 2 * c] | t[4 * m + 2 * c + 1] << 8),
            static_cast<uint8_t>(t[6 * m + c] & 63)};
  }
  return q;
}

// act with fused pooling: the rows' values as a plain activate computes them (into a scratch
// map of array_cols bytes per row, the unit's pipeline), then the windows of that map pooled
// into the array_cols bytes from act_lane of the pooled map's rows.
template <class Out>
void act_pooled(const MachineState& s, const isa::Instruction& inst, const activation::Function& f, Out out) {
  const uint64_t m = s.arch.array_cols, rows = inst[Field::rows];
  const ActPool& p = s.act_pool;
  std::vector<uint8_t> values(rows * m);
  const int32_t* x = s.acc_row(inst[Field::acc]);
  if (inst[Field::per_channel]) activation::act_rows_per_column(x, values.data(), rows, m, columns(s, inst), f);
  else activation::act_rows(x, values.data(), rows, m, m, inst[Field::mult], inst[Field::shift], f);
  const PooledMap map = pooled_map(rows, p);
  std::vector<const uint8_t*> window(p.window * p.window);
  for (uint64_t o = 0; o < map.out_rows(p); ++o) {  // o = (oy * out_w + ox) * batch + n
    const uint64_t n = o % p.batch, ox = o / p.batch % map.out_w, oy = o / p.batch / map.out_w;
    for (uint64_t dy = 0; dy < p.window; ++dy)
      for (uint64_t dx = 0; dx < p.window; ++dx)
        window[dy * p.window + dx] =
            values.data() + (((oy * p.stride + dy) * p.width + ox * p.stride + dx) * p.batch + n) * m;
    activation::pool_window(window, p.avg(), out(o), m);
  }
}

// act with dense writes (setcfg act_dense_rows >= 2, pack.h): each written row's values are
// computed as without dense rows (into the unit's array_cols-byte row), then its columns
// (activate_columns) go to its logical row's field from act_lane, the rest of the UB row kept.
void act_dense(MachineState& s, const isa::Instruction& inst, const activation::Function& f) {
  const uint64_t m = s.arch.array_cols, rows = inst[Field::rows], ub = inst[Field::ub];
  const PackRegs& pk = s.pack;
  const uint64_t cols = activate_columns(pk, s.arch, s.act_lane);
  std::vector<uint8_t> values(m);
  const auto field = [&](uint64_t j) {
    const DenseAddress at = dense_address(ub, j, pk.act_dense_rows, pk.act_dense_bytes);
    return s.ub_row(at.row) + at.byte + s.act_lane;
  };
  if (s.act_pool.on()) {  // pooled rows into the unit's row, then into their fields
    const PooledMap map = pooled_map(rows, s.act_pool);
    std::vector<uint8_t> pooled(map.out_rows(s.act_pool) * m);
    act_pooled(s, inst, f, [&](uint64_t o) { return pooled.data() + o * m; });
    for (uint64_t o = 0; o < map.out_rows(s.act_pool); ++o) std::memcpy(field(o), pooled.data() + o * m, cols);
    return;
  }
  const std::vector<activation::Column> q = inst[Field::per_channel] ? columns(s, inst) : std::vector<activation::Column>{};
  const int32_t* x = s.acc_row(inst[Field::acc]);
  const uint64_t g = pk.scatters() ? pk.act_group_cols : m;
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t p = 0; p < pk.groups(); ++p) {
      const int32_t* xi = x + i * m + p * g;
      if (inst[Field::per_channel]) activation::act_rows_per_column(xi, values.data(), 1, m, std::span(q).subspan(p * g, g), f);
      else activation::act_rows(xi, values.data(), 1, g, m, inst[Field::mult], inst[Field::shift], f);
      std::memcpy(field(p * rows + i), values.data(), cols);
    }
}

}  // namespace

bool ActPool::set(isa::ConfigReg reg, uint64_t value) {
  switch (reg) {
    case isa::ConfigReg::act_pool: kind = value; return true;
    case isa::ConfigReg::act_pool_window: window = value; return true;
    case isa::ConfigReg::act_pool_stride: stride = value; return true;
    case isa::ConfigReg::act_pool_width: width = value; return true;
    case isa::ConfigReg::act_pool_batch: batch = value; return true;
    default: return false;
  }
}

bool Planes::set(isa::ConfigReg reg, uint64_t value) {
  switch (reg) {
    case isa::ConfigReg::act_high: act = value; return true;
    case isa::ConfigReg::vec_high_a: a = value; return true;
    case isa::ConfigReg::vec_high_b: b = value; return true;
    case isa::ConfigReg::vec_high_out: out = value; return true;
    default: return false;
  }
}

void track_planes(Planes& planes, const isa::Instruction& inst) {
  if (inst.opcode == Opcode::set_config) planes.set(static_cast<isa::ConfigReg>(inst[Field::reg]), inst[Field::value]);
}

PooledMap pooled_map(uint64_t rows, const ActPool& p) {
  const u128 line = u128{p.width} * p.batch;
  if (!p.on() || line == 0 || rows % line || p.window == 0 || p.stride == 0) return {};
  const uint64_t in_h = static_cast<uint64_t>(rows / line);
  if (in_h < p.window || p.width < p.window) return {};
  return {in_h, (in_h - p.window) / p.stride + 1, (p.width - p.window) / p.stride + 1};
}

uint64_t activate_ub_rows(const isa::Instruction& act, const ActPool& pool) {
  return pool.on() ? pooled_map(act[Field::rows], pool).out_rows(pool) : act[Field::rows];
}

void track_act_pool(ActPool& pool, const isa::Instruction& inst) {
  if (inst.opcode == Opcode::set_config) pool.set(static_cast<isa::ConfigReg>(inst[Field::reg]), inst[Field::value]);
}

uint64_t perchan_table_rows(const Arch& arch) { return qtable_rows(arch); }

uint64_t pool_input_row_count(const isa::Instruction& pool) {
  return static_cast<uint64_t>(pool_input_rows(pool));
}

void exec_activate(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t width = s.arch.ub_row_bytes(), rows = inst[Field::rows];
  const activation::Function f{static_cast<isa::Func>(inst[Field::func]),
                               static_cast<int64_t>(inst[Field::clip]), inst[Field::unsigned_data] != 0};
  const int32_t* x = s.acc_row(inst[Field::acc]);
  uint8_t* ub = s.ub_row(inst[Field::ub]) + s.act_lane;
  if (s.planes.act) {  // 16-bit results: the high bytes act_high rows further (never dense, pooled or scattered)
    const std::vector<activation::Column> q = inst[Field::per_channel] ? columns(s, inst) : std::vector<activation::Column>{};
    return activation::act_rows16(x, ub, ub + s.planes.act * width, rows, s.arch.array_cols, width, inst[Field::mult],
                                  inst[Field::shift], q, f);
  }
  if (s.pack.dense_out()) return act_dense(s, inst, f);
  if (s.act_pool.on()) return act_pooled(s, inst, f, [&](uint64_t o) { return ub + o * width; });
  if (s.pack.scatters()) {  // group p of accumulator row i to UB row ub + p * rows + i
    const uint64_t g = s.pack.act_group_cols, m = s.arch.array_cols;
    const std::vector<activation::Column> q = inst[Field::per_channel] ? columns(s, inst) : std::vector<activation::Column>{};
    for (uint64_t i = 0; i < rows; ++i)
      for (uint64_t p = 0; p < s.pack.groups(); ++p) {
        const int32_t* xi = x + i * m + p * g;
        uint8_t* out = ub + (p * rows + i) * width;
        if (inst[Field::per_channel]) activation::act_rows_per_column(xi, out, 1, width, std::span(q).subspan(p * g, g), f);
        else activation::act_rows(xi, out, 1, g, width, inst[Field::mult], inst[Field::shift], f);
      }
    return;
  }
  if (inst[Field::per_channel]) activation::act_rows_per_column(x, ub, rows, width, columns(s, inst), f);
  else activation::act_rows(x, ub, rows, s.arch.array_cols, width, inst[Field::mult], inst[Field::shift], f);
}

void exec_vector(MachineState& s, const isa::Instruction& inst, uint64_t index) {
  check_instruction(bounds_of(s), inst, index);
  const uint64_t rows = inst[Field::rows], ub = inst[Field::ub];
  const auto op = static_cast<isa::VecOp>(inst[Field::op]);
  if (s.planes.a || s.planes.b || s.planes.out) {  // 16-bit elements: every operand plane copied aside first
    const uint64_t bytes = rows * s.arch.ub_row_bytes();
    const auto copy = [&](uint64_t row) { return std::vector<uint8_t>(s.ub_row(row), s.ub_row(row) + bytes); };
    const bool pass = op == isa::VecOp::pass;
    const std::vector<uint8_t> a_lo = copy(inst[Field::src]), a_hi = s.planes.a ? copy(inst[Field::src] + s.planes.a) : std::vector<uint8_t>{};
    const std::vector<uint8_t> b_lo = pass ? std::vector<uint8_t>{} : copy(inst[Field::src_b]);
    const std::vector<uint8_t> b_hi = !pass && s.planes.b ? copy(inst[Field::src_b] + s.planes.b) : std::vector<uint8_t>{};
    const auto operand = [](const std::vector<uint8_t>& lo, const std::vector<uint8_t>& hi) {
      return activation::Operand16{lo.empty() ? nullptr : lo.data(), hi.empty() ? nullptr : hi.data()};
    };
    const activation::Result16 out{s.ub_row(ub), s.planes.out ? s.ub_row(ub + s.planes.out) : nullptr};
    return activation::vec_elements16(op, operand(a_lo, a_hi), operand(b_lo, b_hi), out, bytes, inst[Field::mult],
                                      inst[Field::shift], static_cast<isa::Func>(inst[Field::func]));
  }
  std::vector<uint8_t> copy_a, copy_b;
  const uint8_t* a = input_rows(s, inst[Field::src], rows, ub, rows, copy_a);
  const uint8_t* b =
      op == isa::VecOp::pass ? nullptr : input_rows(s, inst[Field::src_b], rows, ub, rows, copy_b);
  activation::vec_elements(op, a, b, s.ub_row(ub), rows * s.arch.ub_row_bytes(), inst[Field::mult],
                           inst[Field::shift], static_cast<isa::Func>(inst[Field::func]));
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
  std::vector<const uint8_t*> window(win * win);
  for (uint64_t o = 0; o < outputs; ++o) {  // o = (oy * out_w + ox) * batch + n
    const uint64_t n = o % batch, ox = o / batch % out_w, oy = o / batch / out_w;
    for (uint64_t dy = 0; dy < win; ++dy)
      for (uint64_t dx = 0; dx < win; ++dx)
        window[dy * win + dx] = in + (((oy * ps + dy) * in_w + ox * ps + dx) * batch + n) * width;
    activation::pool_window(window, avg, s.ub_row(inst[Field::ub] + o), width);
  }
}

}  // namespace tpusim::sim
