// The machine's memories and the data semantics of every instruction, independent of time.
//
// MachineState holds what a program can observe: host memory (its regions), the unified
// buffer, the accumulators, the configuration registers and the weight memory (read-only).
// The exec_* functions apply one instruction's effect on the data exactly as docs/isa.md
// defines it. The golden reference executor (reference.h) applies them in program order; the
// timed machine applies them at the simulated cycle each instruction runs, and computes
// matmul with its engine (stepped systolic array or fast GEMM) instead of matmul_reference.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "isa/error.h"
#include "isa/instruction.h"
#include "isa/program.h"
#include "sim/arch.h"
#include "sim/pack.h"

namespace tpusim::sim {

// A program error found while simulating: names the instruction. The CLI exits with code 2.
class SimError : public InputError {
 public:
  SimError(uint64_t index, const std::string& message, std::optional<uint64_t> cycle = std::nullopt);
  uint64_t index;
  // The cycle the run failed at (the first failing cycle, Context::fail); unset for an error found
  // before the run or by the reference executor, which has no time.
  std::optional<uint64_t> cycle;
};

// "instruction 12 (matmul ub=0, acc=0, rows=8): " prefix for messages.
std::string describe(uint64_t index, const isa::Instruction& inst);

// A weight tile as the matrix unit sees it: array_rows x array_cols weights, from weight memory
// at `waddr` (the FIFO and shadow hold copies; memory is read-only, so a pointer into the image
// is equivalent). A partial tile (rw tile_rows / tile_cols, docs/isa.md) is stored compactly as
// its rows x cols box, row major; the cells outside the box read as zero (the FIFO's zero fill).
struct TileBox;
struct WeightTile {
  const uint8_t* data = nullptr;  // W[k][j] = data[k * stored_cols + j] inside the box
  uint64_t waddr = 0;
  bool is_unsigned = false;
  uint32_t rows = 0, cols = 0;  // the stored box; 0: the array's rows (cols)
  // W[k][j] of a tile on an array of `array_cols` columns.
  int32_t weight(uint64_t k, uint64_t j, uint64_t array_cols) const {
    const uint64_t c = cols ? cols : array_cols;
    if ((rows && k >= rows) || j >= c) return 0;
    const uint8_t b = data[k * c + j];
    return is_unsigned ? int32_t{b} : int32_t{static_cast<int8_t>(b)};
  }
  bool partial() const { return rows || cols; }
  // Records `box` (tile_box) as the stored box when it is smaller than the array's.
  void set_box(const TileBox& box, const Arch& a);
  // The full array_rows x array_cols tile, zero-filled outside the box, into `out`.
  void expand(uint64_t array_rows, uint64_t array_cols, std::vector<uint8_t>& out) const;
};

// The box each tile of a read_weights is stored as: tile_rows x tile_cols (0: the array's).
struct TileBox {
  uint64_t rows = 0, cols = 0;
  uint64_t bytes() const { return rows * cols; }
  bool partial(const Arch& a) const { return rows != a.array_rows || cols != a.array_cols; }
};
TileBox tile_box(const Arch& a, const isa::Instruction& rw);

// A host region's bytes (host memory is sparse: the regions the program declares).
struct HostBuffer {
  std::string name;
  bool output = false;
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
};

// The activate's fused pooling (the Normalize/Pool stage after the activation pipeline): the
// setcfg registers act_pool .. act_pool_batch (docs/isa.md, reg). kind 0 (reset): none.
struct ActPool {
  uint64_t kind = 0;  // 0 none, 1 max, 2 avg
  uint64_t window = 0, stride = 0, width = 0, batch = 0;
  bool on() const { return kind != 0; }
  bool avg() const { return kind == 2; }
  bool operator==(const ActPool&) const = default;
  // Writes the register `reg` when it is one of the five; false when it is another register.
  bool set(isa::ConfigReg reg, uint64_t value);
};

// The map an activate of `rows` accumulator rows reads and the one it writes under `pool` (on):
// in_h lines of pool.width pixels, out_h x out_w pooled pixels, pool.batch images each. Zero
// sizes when the rows are not a whole number of lines or smaller than a window.
struct PooledMap {
  uint64_t in_h = 0, out_h = 0, out_w = 0;
  uint64_t out_rows(const ActPool& p) const { return out_h * out_w * p.batch; }
};
PooledMap pooled_map(uint64_t rows, const ActPool& pool);
// The UB rows an activate writes: `rows`, or with fused pooling the pooled map's rows.
uint64_t activate_ub_rows(const isa::Instruction& act, const ActPool& pool);
// Applies `inst` to `pool` when it is a setcfg of one of its registers (for tools that walk a
// program in issue order, which is program order).
void track_act_pool(ActPool& pool, const isa::Instruction& inst);

// The 16-bit element mode (docs/isa.md, reg act_high .. vec_high_out): each register holds the
// row offset of an operand's high byte plane; 0 (reset) means an 8-bit operand.
struct Planes {
  uint64_t act = 0;                   // act_high: activate's results
  uint64_t a = 0, b = 0, out = 0;     // vec_high_a, vec_high_b, vec_high_out
  bool set(isa::ConfigReg reg, uint64_t value);  // false when `reg` is not one of the four
  bool any() const { return act || a || b || out; }
  bool operator==(const Planes&) const = default;
};
// Applies `inst` to `planes` when it is a setcfg of one of their registers.
void track_planes(Planes& planes, const isa::Instruction& inst);

struct MachineState {
  Arch arch;
  std::vector<uint8_t> ub;   // ub_rows() x ub_row_bytes(), int8/uint8 as bytes
  std::vector<int32_t> acc;  // acc_entries x array_cols
  std::vector<HostBuffer> host;
  std::span<const uint8_t> weights;  // the program's weight image, weight memory from 0
  uint64_t host_stride = 0;          // setcfg registers (0 = UB row width)
  uint64_t host_row_bytes = 0;
  uint64_t act_lane = 0;             // setcfg: UB row byte of activate's first column
  PackRegs pack;                     // setcfg gather_* (matmul), act_groups/act_group_cols (act)
  ActPool act_pool;                  // setcfg: activate's fused pooling
  Planes planes;                     // setcfg: 16-bit element planes (act, vec)

  uint8_t* ub_row(uint64_t row) { return ub.data() + row * arch.ub_row_bytes(); }
  const uint8_t* ub_row(uint64_t row) const { return ub.data() + row * arch.ub_row_bytes(); }
  int32_t* acc_row(uint64_t row) { return acc.data() + row * arch.array_cols; }
  const int32_t* acc_row(uint64_t row) const { return acc.data() + row * arch.array_cols; }
  // The host buffer holding [addr, addr + bytes) entirely, or nullptr.
  HostBuffer* host_span(uint64_t addr, uint64_t bytes);
};

// Memories sized by `arch`, zeroed; host regions allocated and inputs initialised from the
// program. `program` must outlive the state (weights point into it).
MachineState make_state(const isa::Program& program, const Arch& arch);
// The bytes make_state allocates, by part ("UB", "accumulators", "host buffers"), computed
// without allocating (saturating at 2^64 - 1): callers check it against a memory limit first.
std::vector<std::pair<std::string, uint64_t>> state_bytes(const isa::Program& program, const Arch& arch);

// Checks, before anything runs, every address range the instruction touches against the
// configured memories (UB rows, accumulator rows, host regions with the reset host_stride and
// host_row_bytes or the values a preceding setcfg sets, weight image), and operand limits that
// depend on the machine (pool windows inside the map, qtable shift values are checked at run
// time). Throws SimError naming the first bad instruction.
void check_static(const isa::Program& program, const Arch& arch);

// UB rows of act's per-column table (ceil(7 x array_cols / UB row width)), and the UB rows a
// pool reads from its `src` (up to its last window's last pixel): the spans check_static checks.
uint64_t perchan_table_rows(const Arch& arch);
uint64_t pool_input_row_count(const isa::Instruction& pool);

// Messages shared by the machine and the reference executor (weight FIFO order).
inline constexpr char kNoTileFetched[] =
    "switches to the next weight tile, but no read_weights has fetched one";
inline constexpr char kNoActiveTile[] =
    "multiplies before any weight tile was made active (the first matmul needs `switch`)";

// Data semantics (docs/isa.md). Each throws SimError(index, ...) on a run-time error.
void exec_set_config(MachineState& s, const isa::Instruction& inst, uint64_t index);
void exec_read_host(MachineState& s, const isa::Instruction& inst, uint64_t index);
void exec_write_host(MachineState& s, const isa::Instruction& inst, uint64_t index);
void exec_activate(MachineState& s, const isa::Instruction& inst, uint64_t index);
void exec_vector(MachineState& s, const isa::Instruction& inst, uint64_t index);
void exec_pool(MachineState& s, const isa::Instruction& inst, uint64_t index);
// The plainest loops: acc[acc + i][j] (+)= sum_k x_i[k] * W[k][j], int32 wrapping, x_i gathered
// as s.pack says (pack.h); with the 16-bit modes, one such pass per input byte plane, each pass's
// sums shifted left by pack.pass_shift(p) before they are added.
void matmul_reference(MachineState& s, const isa::Instruction& inst, const WeightTile& active);

// The tile rw would fetch as its `t`-th tile (waddr + t x its box's bytes, tile_box).
WeightTile weight_tile(const MachineState& s, const isa::Instruction& rw, uint64_t t);

// Scalar arithmetic of the activation unit (exact, shared by every engine):
// round_half_away(x / 2^shift); inline: the golden reference calls it for every output element.
inline int64_t round_half_away_shift(int64_t x, unsigned shift) {
  if (shift == 0) return x;
  if (shift > 64) return 0;  // |x| <= 2^63 is below one half of 2^shift
  // (|x| + 2^(shift-1)) >> shift without the carry out of 64 bits: |x| >> shift, plus one when
  // the remainder is half of 2^shift or more (bit shift - 1 set).
  const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const auto q = static_cast<int64_t>(shift == 64 ? mag >> 63 : (mag >> shift) + ((mag >> (shift - 1)) & 1));
  return x < 0 ? -q : q;
}
int32_t apply_func(isa::Func func, int64_t y, int64_t clip, bool out_unsigned);  // incl. saturation
// The same for a 16-bit result (docs/isa.md, act_high): the 16-bit curves, saturation to int16.
int32_t apply_func16(isa::Func func, int64_t y, int64_t clip);
// vec's element operation (docs/isa.md, vec) on int8 values widened to int32 (int16 values: the
// product needs 31 bits, the sum 17); b is unused for pass.
constexpr int32_t vec_combine(isa::VecOp op, int32_t a, int32_t b) {
  switch (op) {
    case isa::VecOp::add: return a + b;
    case isa::VecOp::sub: return a - b;
    case isa::VecOp::mul: return a * b;
    case isa::VecOp::max: return a > b ? a : b;
    case isa::VecOp::min: return a < b ? a : b;
    case isa::VecOp::pass: break;
  }
  return a;
}

}  // namespace tpusim::sim
