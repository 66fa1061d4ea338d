#include "sim/pack.h"

#include <algorithm>
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
    case ConfigReg::dense_rows: regs.dense_rows = v; return true;
    case ConfigReg::dense_bytes: regs.dense_bytes = v; return true;
    case ConfigReg::act_dense_rows: regs.act_dense_rows = v; return true;
    case ConfigReg::act_dense_bytes: regs.act_dense_bytes = v; return true;
    case ConfigReg::mm_in_hi: regs.mm_in_hi = v; return true;
    case ConfigReg::mm_weight_hi: regs.mm_weight_hi = v; return true;
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
namespace {

// Q logical rows of `bytes` bytes per UB row must fit a row (registers `q_name`, `bytes_name`).
std::optional<std::string> dense_width_error(uint64_t q, uint64_t bytes, const Arch& arch, const char* q_name,
                                             const char* bytes_name) {
  const uint64_t width = arch.ub_row_bytes();
  if (bytes == 0 || q > width || bytes > width || q * bytes > width)
    return std::string(q_name) + " x " + bytes_name + " = " + std::to_string(q) + " x " + std::to_string(bytes) +
           " (setcfg) does not fit a UB row of " + std::to_string(width) + " bytes (each of the " +
           std::to_string(q) + " logical rows needs a field of 1.." + std::to_string(width / q) + " bytes)";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> gather_error(const PackRegs& regs, const Arch& arch, uint64_t lane) {
  if (regs.dense_in()) {
    if (!regs.gathers())
      return "a dense read (setcfg dense_rows = " + std::to_string(regs.dense_rows) +
             ") needs a gather: set gather_bytes (a 1 x 1 gather of the field's bytes for a plain read)";
    if (auto why = dense_width_error(regs.dense_rows, regs.dense_bytes, arch, "dense_rows", "dense_bytes")) return why;
    if (lane + regs.gather_bytes > regs.dense_bytes)
      return "a dense read takes bytes " + std::to_string(lane) + ".." + std::to_string(lane + regs.gather_bytes - 1) +
             " (lane " + std::to_string(lane) + ", gather_bytes " + std::to_string(regs.gather_bytes) +
             ") of each logical row's field, but a field has dense_bytes = " + std::to_string(regs.dense_bytes) +
             " bytes";
  }
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

uint64_t activate_columns(const PackRegs& regs, const Arch& arch, uint64_t act_lane) {
  if (regs.scatters()) return regs.act_group_cols;
  if (!regs.dense_out()) return arch.array_cols;
  return regs.act_dense_bytes > act_lane ? std::min(arch.array_cols, regs.act_dense_bytes - act_lane) : 0;
}

std::optional<std::string> scatter_error(const PackRegs& regs, const Arch& arch, uint64_t act_lane) {
  if (regs.dense_out()) {
    if (auto why = dense_width_error(regs.act_dense_rows, regs.act_dense_bytes, arch, "act_dense_rows",
                                     "act_dense_bytes"))
      return why;
    if (act_lane >= regs.act_dense_bytes || (regs.scatters() && act_lane + regs.act_group_cols > regs.act_dense_bytes))
      return "a dense activate writes from byte act_lane = " + std::to_string(act_lane) +
             (regs.scatters() ? " groups of " + std::to_string(regs.act_group_cols) + " columns" : std::string()) +
             " in each logical row's field, but a field has act_dense_bytes = " +
             std::to_string(regs.act_dense_bytes) + " bytes";
  }
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

std::optional<std::string> wide_error(const PackRegs& regs) {
  if (regs.mm_weight_hi > 1)
    return "mm_weight_hi = " + std::to_string(regs.mm_weight_hi) +
           " (setcfg register), expected 0 (8-bit weights or the low plane of 16-bit ones) or 1 (the high plane)";
  if (regs.mm_in_hi >= (uint64_t{1} << 40))
    return "mm_in_hi = " + std::to_string(regs.mm_in_hi) +
           " (setcfg register): a high plane that many UB rows away is beyond any unified buffer";
  return std::nullopt;
}

}  // namespace tpusim::sim
