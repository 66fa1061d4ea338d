// The packing registers (setcfg gather_* and act_groups / act_group_cols, docs/isa.md): how the
// systolic data setup gathers a matmul's input vector from several UB rows (im2col in hardware)
// and how activate scatters an accumulator row's column groups to several UB rows.
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
  bool operator==(const PackRegs&) const = default;
};

// Applies a setcfg to `regs` when it writes one of the packing registers; false otherwise.
bool set_pack_register(PackRegs& regs, const isa::Instruction& setcfg);

// Cycles between consecutive input vectors of a matmul entering the array:
// ceil(segments / gather_rows_per_cycle), 1 without gather.
uint64_t vector_cycles(const PackRegs& regs, const Arch& arch);

// The UB row a matmul reads vector v from without gather (its origin with gather).
inline uint64_t vector_origin(const isa::Instruction& matmul, uint64_t v) {
  const uint64_t rows = matmul[isa::Field::rows];
  return matmul[isa::Field::ub] + (v / rows) * matmul[isa::Field::stride] + v % rows;
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
  for (uint64_t u = 0; u < regs.cols(); ++u)
    for (uint64_t r = 0; r < regs.rows(); ++r, k += b) {
      const uint8_t* row = ub_row(origin + u * regs.gather_col_step + r * regs.gather_row_step) + lane;
      for (uint64_t e = 0; e < b; ++e) out[k + e] = row[e];
    }
  for (; k < arch.array_rows; ++k) out[k] = 0;
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

}  // namespace tpusim::sim
