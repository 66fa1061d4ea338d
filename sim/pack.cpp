#include "sim/pack.h"

#include <string>

namespace tpusim::sim {

using isa::ConfigReg;
using isa::Field;

bool set_pack_register(PackRegs& regs, const isa::Instruction& setcfg) {
  const uint64_t v = setcfg[Field::value];
  switch (static_cast<ConfigReg>(setcfg[Field::reg])) {
    case ConfigReg::gather_bytes: regs.gather_bytes = v; return true;
    case ConfigReg::gather_cols: regs.gather_cols = v; return true;
    case ConfigReg::gather_rows: regs.gather_rows = v; return true;
    case ConfigReg::gather_col_step: regs.gather_col_step = v; return true;
    case ConfigReg::gather_row_step: regs.gather_row_step = v; return true;
    case ConfigReg::act_groups: regs.act_groups = v; return true;
    case ConfigReg::act_group_cols: regs.act_group_cols = v; return true;
    default: return false;
  }
}

PackTimeline::PackTimeline(const std::vector<isa::Instruction>& code) : id_(code.size(), 0), values_(1) {
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i].opcode == isa::Opcode::set_config) {
      PackRegs next = values_.back();
      if (set_pack_register(next, code[i]) && !(next == values_.back())) values_.push_back(next);
    }
    id_[i] = static_cast<uint32_t>(values_.size() - 1);
  }
}

uint64_t vector_cycles(const PackRegs& regs, const Arch& arch) {
  const uint64_t d = regs.segments(), per = arch.gather_rows_per_cycle;
  return d / per + (d % per != 0);
}

// Register values are 64-bit: every product below is bounded first (counts <= array_rows,
// steps < 2^40 after the check), so nothing wraps.
std::optional<std::string> gather_error(const PackRegs& regs, const Arch& arch, uint64_t lane) {
  if (!regs.gathers()) return std::nullopt;
  const std::string shape = "gather of " + std::to_string(regs.cols()) + " x " + std::to_string(regs.rows()) +
                            " segments of " + std::to_string(regs.gather_bytes) + " bytes";
  if (regs.gather_bytes > arch.array_rows || regs.cols() > arch.array_rows || regs.rows() > arch.array_rows ||
      regs.segments() * regs.gather_bytes > arch.array_rows)
    return shape + " (setcfg gather_*) is longer than an input vector (array_rows = " +
           std::to_string(arch.array_rows) + ")";
  if (lane + regs.gather_bytes > arch.ub_row_bytes())
    return shape + " reads bytes " + std::to_string(lane) + ".." +
           std::to_string(lane + regs.gather_bytes - 1) + " of each UB row (lane " + std::to_string(lane) +
           "), but a UB row has " + std::to_string(arch.ub_row_bytes()) + " bytes";
  if (regs.gather_col_step >= (uint64_t{1} << 40) || regs.gather_row_step >= (uint64_t{1} << 40))
    return shape + ": a step of " + std::to_string(std::max(regs.gather_col_step, regs.gather_row_step)) +
           " UB rows is beyond any unified buffer";
  return std::nullopt;
}

std::optional<std::string> scatter_error(const PackRegs& regs, const Arch& arch, uint64_t act_lane) {
  if (!regs.scatters()) return std::nullopt;
  const std::string shape = "scatter of " + std::to_string(regs.act_groups) + " groups of " +
                            std::to_string(regs.act_group_cols) +
                            " columns (setcfg act_groups, act_group_cols)";
  if (regs.act_group_cols == 0 || regs.act_groups > arch.array_cols ||
      regs.act_groups * regs.act_group_cols > arch.array_cols)
    return shape + " does not fit an accumulator row of " + std::to_string(arch.array_cols) + " columns";
  if (act_lane + regs.act_group_cols > arch.ub_row_bytes())
    return shape + " writes bytes " + std::to_string(act_lane) + ".." +
           std::to_string(act_lane + regs.act_group_cols - 1) + " of each UB row (act_lane " +
           std::to_string(act_lane) + "), but a UB row has " + std::to_string(arch.ub_row_bytes()) + " bytes";
  return std::nullopt;
}

}  // namespace tpusim::sim
