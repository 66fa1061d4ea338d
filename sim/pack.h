// The packing registers (setcfg gather_* and act_groups / act_group_cols, docs/isa.md): how the
// systolic data setup gathers a matmul's input vector from several UB rows (im2col in hardware)
// and how activate scatters an accumulator row's column groups to several UB rows; and the
// matrix unit's 16-bit modes (setcfg mm_in_hi, mm_weight_hi): a matmul's byte-plane passes.
//
// Dense rows (setcfg dense_rows / dense_bytes for matmul, act_dense_rows / act_dense_bytes for
// activate): Q logical rows side by side in one UB row, logical row L being the `bytes`-byte field
// at byte (L mod Q) * bytes of UB row ub + floor(L / Q) (dense_address). Every row offset a
// matmul or an activate forms from its `ub` field counts logical rows.
//
// One definition of the addressing, shared by every engine (fast, stepped, timing), the ISA
// reference executor, the static checks, the hazard checks and the compiler's emitter. All
// registers reset to 0, which is the machine without packing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "sim/arch.h"

namespace tpusim::sim {

struct PackRegs {
  uint64_t gather_bytes = 0, gather_cols = 0, gather_rows = 0, gather_col_step = 0, gather_row_step = 0;
  uint64_t act_groups = 0, act_group_cols = 0;
  uint64_t dense_rows = 0, dense_bytes = 0, act_dense_rows = 0, act_dense_bytes = 0;
  uint64_t mm_in_hi = 0, mm_weight_hi = 0;  // 16-bit matmul inputs (high plane's row offset), weights

  bool gathers() const { return gather_bytes != 0; }
  uint64_t cols() const { return gather_cols ? gather_cols : 1; }
  uint64_t rows() const { return gather_rows ? gather_rows : 1; }
  // UB rows one input vector reads: 1 without gather.
  uint64_t segments() const { return gathers() ? cols() * rows() : 1; }
  // UB rows beyond a vector's origin its segments reach (0 without gather).
  uint64_t reach() const {
    return gathers() ? (cols() - 1) * gather_col_step + (rows() - 1) * gather_row_step : 0;
  }
  bool scatters() const { return act_groups != 0; }
  uint64_t groups() const { return scatters() ? act_groups : 1; }
  // Logical rows per UB row a matmul reads / an activate writes (1: not dense).
  bool dense_in() const { return dense_rows > 1; }
  bool dense_out() const { return act_dense_rows > 1; }
  uint64_t in_q() const { return dense_in() ? dense_rows : 1; }
  uint64_t out_q() const { return dense_out() ? act_dense_rows : 1; }
  // Passes of a matmul over its input's byte planes: 2 with 16-bit inputs (low plane, then high).
  uint64_t planes() const { return mm_in_hi ? 2 : 1; }
  // Left shift of pass p's column sums into the accumulators: 8 per high plane (input, weight).
  unsigned pass_shift(uint64_t p) const { return unsigned(8 * (p + (mm_weight_hi ? 1 : 0))); }
  // UB row offset of pass p's input plane; whether pass p reads its input bytes as uint8 (the low
  // plane of a 16-bit input always, else the matmul's `unsigned` flag).
  uint64_t pass_offset(uint64_t p) const { return p ? mm_in_hi : 0; }
  bool pass_unsigned(uint64_t p, bool unsigned_flag) const { return (mm_in_hi && p == 0) || unsigned_flag; }
  bool operator==(const PackRegs&) const = default;
};

// Applies a setcfg to `regs` when it writes one of the packing registers; false otherwise.
bool set_pack_register(PackRegs& regs, const isa::Instruction& setcfg);

// Cycles between consecutive input vectors of a matmul entering the array:
// ceil(segments / gather_rows_per_cycle), 1 without gather.
uint64_t vector_cycles(const PackRegs& regs, const Arch& arch);
// Cycles a matmul of `vectors` vectors streams: vectors x vector_cycles x planes (each byte-plane
// pass streams every vector once, one pass after the other).
inline uint64_t stream_cycles(const PackRegs& regs, const Arch& arch, uint64_t vectors) {
  return vectors * vector_cycles(regs, arch) * regs.planes();
}

// The UB row a matmul reads vector v from without gather (its origin with gather).
inline uint64_t vector_origin(const isa::Instruction& matmul, uint64_t v) {
  const uint64_t rows = matmul[isa::Field::rows];
  return matmul[isa::Field::ub] + (v / rows) * matmul[isa::Field::stride] + v % rows;
}

// Where logical row L of an instruction addressing from UB row `ub` lies, with q logical rows
// of `bytes` bytes per UB row (q <= 1: one per row): UB row ub + L / q, from byte (L % q) * bytes.
struct DenseAddress {
  uint64_t row = 0, byte = 0;
};
inline DenseAddress dense_address(uint64_t ub, uint64_t logical, uint64_t q, uint64_t bytes) {
  if (q <= 1) return {ub + logical, 0};
  return {ub + logical / q, (logical % q) * bytes};
}
// UB rows holding logical rows [l0, l1) (l1 > l0) from `ub`, q per row: first row and count.
struct UbSpan {
  uint64_t first = 0, rows = 0;
};
inline UbSpan dense_span(uint64_t ub, uint64_t l0, uint64_t l1, uint64_t q) {
  if (q <= 1) return {ub + l0, l1 - l0};
  return {ub + l0 / q, (l1 - 1) / q - l0 / q + 1};
}

// Builds input vector v (array_rows bytes) of `matmul` from the UB (ub_row(r) gives row r).
template <class RowOf>
void gather_vector(const PackRegs& regs, const Arch& arch, const isa::Instruction& matmul, uint64_t v,
                   RowOf ub_row, uint8_t* out) {
  const uint64_t origin = vector_origin(matmul, v), lane = matmul[isa::Field::lane];
  if (!regs.gathers()) {
    const uint8_t* row = ub_row(origin) + lane;
    for (uint64_t k = 0; k < arch.array_rows; ++k) out[k] = row[k];
    return;
  }
  const uint64_t b = regs.gather_bytes;
  uint64_t k = 0;
  if (regs.dense_in()) {  // offsets from ub count logical rows (checked: dense reads gather)
    const uint64_t ub = matmul[isa::Field::ub], l0 = origin - ub;
    for (uint64_t u = 0; u < regs.cols(); ++u)
      for (uint64_t r = 0; r < regs.rows(); ++r, k += b) {
        const DenseAddress at = dense_address(
            ub, l0 + u * regs.gather_col_step + r * regs.gather_row_step, regs.dense_rows, regs.dense_bytes);
        const uint8_t* row = ub_row(at.row) + at.byte + lane;
        for (uint64_t e = 0; e < b; ++e) out[k + e] = row[e];
      }
  } else {
    for (uint64_t u = 0; u < regs.cols(); ++u)
      for (uint64_t r = 0; r < regs.rows(); ++r, k += b) {
        const uint8_t* row = ub_row(origin + u * regs.gather_col_step + r * regs.gather_row_step) + lane;
        for (uint64_t e = 0; e < b; ++e) out[k + e] = row[e];
      }
  }
  for (; k < arch.array_rows; ++k) out[k] = 0;
}

// The UB rows group g (0 <= g < repeat) of `matmul` reads: its `rows` vectors and their gathers'
// reach, in physical UB rows (dense reads: q logical rows per UB row).
inline UbSpan matmul_group_reads(const PackRegs& regs, const isa::Instruction& matmul, uint64_t g) {
  const uint64_t l0 = g * matmul[isa::Field::stride];
  return dense_span(matmul[isa::Field::ub], l0, l0 + matmul[isa::Field::rows] + regs.reach(), regs.in_q());
}
// The UB rows an activate writes when it writes `logical` rows (rows x groups, or its pooled rows).
inline UbSpan activate_writes(const PackRegs& regs, const isa::Instruction& act, uint64_t logical) {
  if (logical == 0) return {act[isa::Field::ub], 0};
  return dense_span(act[isa::Field::ub], 0, logical, regs.out_q());
}

// The packing registers each instruction of a program is issued with (program order), each
// distinct setting stored once: for what is derived after a run (traces, energy, views).
class PackTimeline {
 public:
  explicit PackTimeline(const std::vector<isa::Instruction>& code);
  const PackRegs& at(uint64_t index) const { return values_[id_[index]]; }

 private:
  std::vector<uint32_t> id_;
  std::vector<PackRegs> values_;
};

// What is wrong with the registers for a matmul / an activate on `arch`, or nullopt.
std::optional<std::string> gather_error(const PackRegs& regs, const Arch& arch, uint64_t lane);
std::optional<std::string> scatter_error(const PackRegs& regs, const Arch& arch, uint64_t act_lane);
// Columns a dense activate writes per logical row (act_group_cols with scatter, else those of its
// field from act_lane, at most array_cols); array_cols (or act_group_cols) when not dense.
uint64_t activate_columns(const PackRegs& regs, const Arch& arch, uint64_t act_lane);
// What is wrong with the 16-bit mode registers (mm_in_hi, mm_weight_hi) for a matmul, or nullopt.
std::optional<std::string> wide_error(const PackRegs& regs);

}  // namespace tpusim::sim
