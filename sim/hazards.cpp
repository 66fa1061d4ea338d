#include "sim/hazards.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;

namespace {

// Matmul input groups (pack.h matmul_group_reads: with their gathers' reach, in UB rows for dense
// reads), merged when contiguous; beyond 64 separate groups, one bounding range (conservative: it
// can only report a conflict that the exact ranges would not).
Accesses::Spans matmul_reads(const isa::Instruction& inst, const PackRegs& pack) {
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat], stride = inst[Field::stride];
  const UbSpan first = matmul_group_reads(pack, inst, 0), last = matmul_group_reads(pack, inst, repeat - 1);
  if (repeat == 1 || stride == rows || repeat > 64 || stride < rows + pack.reach())
    return {{first.first, last.first + last.rows - first.first}};
  Accesses::Spans r;
  for (uint64_t g = 0; g < repeat; ++g) {
    const UbSpan s = matmul_group_reads(pack, inst, g);
    r.push_back({s.first, s.rows});
  }
  return r;
}

bool overlap(const RowRange& a, const RowRange& b) { return a.first < b.end() && b.first < a.end(); }

bool overlap(const Accesses::Spans& a, const Accesses::Spans& b) {
  for (const RowRange& x : a)
    for (const RowRange& y : b)
      if (overlap(x, y)) return true;
  return false;
}

}  // namespace

RowRange acc_rows(const isa::Instruction& inst) {
  if (inst.opcode == Opcode::matmul) return {inst[Field::acc], inst[Field::rows] * inst[Field::repeat]};
  if (inst.opcode == Opcode::activate) return {inst[Field::acc], inst[Field::rows]};
  return {};
}

Accesses accesses(const isa::Instruction& inst, const Arch& arch, const PackRegs& pack,
                  const ActPool& act_pool, const Planes& planes) {
  Accesses a;
  const uint64_t rows = inst[Field::rows];
  switch (inst.opcode) {
    case Opcode::read_host: a.ub_writes = {{inst[Field::ub], rows}}; break;
    case Opcode::write_host: a.ub_reads = {{inst[Field::ub], rows}}; break;
    case Opcode::matmul:
      a.ub_reads = matmul_reads(inst, pack);
      if (pack.mm_in_hi) {  // the high byte plane: the same rows, mm_in_hi further
        const size_t low = a.ub_reads.size();
        for (size_t r = 0; r < low; ++r) a.ub_reads.push_back({a.ub_reads[r].first + pack.mm_in_hi, a.ub_reads[r].rows});
      }
      a.acc = acc_rows(inst);
      break;
    case Opcode::activate:
      {
        const UbSpan w = activate_writes(pack, inst, act_pool.on() ? activate_ub_rows(inst, act_pool) : rows * pack.groups());
        a.ub_writes = {{w.first, w.rows}};
      }
      if (planes.act) a.ub_writes.push_back({inst[Field::ub] + planes.act, rows});
      if (inst[Field::per_channel]) a.ub_reads = {{inst[Field::qtable], perchan_table_rows(arch)}};
      a.acc = acc_rows(inst);
      break;
    case Opcode::vector:
      a.ub_reads = {{inst[Field::src], rows}};
      if (planes.a) a.ub_reads.push_back({inst[Field::src] + planes.a, rows});
      if (inst[Field::op] != uint64_t(isa::VecOp::pass)) {
        a.ub_reads.push_back({inst[Field::src_b], rows});
        if (planes.b) a.ub_reads.push_back({inst[Field::src_b] + planes.b, rows});
      }
      a.ub_writes = {{inst[Field::ub], rows}};
      if (planes.out) a.ub_writes.push_back({inst[Field::ub] + planes.out, rows});
      break;
    case Opcode::pool: {
      a.ub_reads = {{inst[Field::src], pool_input_row_count(inst)}};
      a.ub_writes = {{inst[Field::ub], inst[Field::out_h] * inst[Field::out_w] * inst[Field::batch]}};
      break;
    }
    default: break;
  }
  return a;
}

// Two instructions of different stations touch the same UB rows (one writing) out of program
// order or overlapping in time.
bool Hazards::conflicts(const Record& a, const Record& b) {
  const Record& early = a.index < b.index ? a : b;
  const Record& late = a.index < b.index ? b : a;
  const bool writes =
      overlap(late.use.ub_writes, early.use.ub_reads) || overlap(late.use.ub_writes, early.use.ub_writes);
  if (!writes && !overlap(late.use.ub_reads, early.use.ub_writes)) return false;
  return early.until > late.start;  // else in program order, with no overlap in time
}

void Hazards::report(const Record& a, const Record& b) const {
  // Described from the later instruction in program order, whichever of the two started first
  // in simulation (two stations starting in the same cycle may do so in either order).
  const Record& early = a.index < b.index ? a : b;
  const Record& late = a.index < b.index ? b : a;
  const bool writes =
      overlap(late.use.ub_writes, early.use.ub_reads) || overlap(late.use.ub_writes, early.use.ub_writes);
  const char* what = writes ? "writes UB rows that" : "reads UB rows that";
  const std::string other = describe(early.index, ctx_.inst(early.index));
  const std::string fix =
      fmt::format("add `sync units={}` before instruction {}", sync_unit_name(early.unit), late.index);
  if (late.start < early.start)
    ctx_.fail(late.index,
              fmt::format("{} {} uses earlier in program order, but ran first (from cycle {}, before "
                          "cycle {}): {}",
                          what, other, late.start, early.start, fix));
  else
    ctx_.fail(late.index, fmt::format("{} {} (cycles {}..{}) still uses from cycle {}: {}", what, other,
                                      early.start, early.until - 1, late.start, fix));
}

bool Hazards::started(uint64_t index, isa::Unit unit, uint64_t start, uint64_t until,
                      uint64_t lowest_unstarted) {
  // (act_pool as activates see it, planes as the activation unit sees them: none for the others.)
  const isa::Instruction& in = ctx_.inst(index);
  const Context::IssueRegs& regs = ctx_.regs(index);
  Record r{index, unit, start, until,
           accesses(in, ctx_.arch, regs.pack, in.opcode == isa::Opcode::activate ? regs.act_pool : ActPool{},
                    unit == isa::Unit::activation ? regs.planes : Planes{})};
  for (const RowRange& x : r.use.ub_reads) ctx_.note_ub(x.first, x.rows);
  for (const RowRange& x : r.use.ub_writes) ctx_.note_ub(x.first, x.rows);
  if (r.use.acc.rows) ctx_.note_acc(r.use.acc.first, r.use.acc.rows);
  // Records that can no longer conflict: over, and before everything not yet started (this
  // instruction included).
  const uint64_t low = std::min(lowest_unstarted, index);
  std::erase_if(window_, [&](const Record& w) { return w.until <= start && w.index < low; });
  // The conflicting instruction earliest in program order, so that the message does not depend on
  // the order in which SystemC runs processes within a cycle.
  const Record* worst = nullptr;
  for (const Record& w : window_)
    if (w.unit != unit && conflicts(r, w) && (!worst || w.index < worst->index)) worst = &w;
  if (worst) {
    report(r, *worst);
    return false;
  }
  if (!r.use.ub_reads.empty() || !r.use.ub_writes.empty()) window_.push_back(std::move(r));
  return true;
}

void Hazards::issued(uint64_t index) {
  const auto& inst = ctx_.inst(index);
  if (inst.opcode == Opcode::matmul) acc_writers_.push_back({index, acc_rows(inst)});
  if (inst.opcode == Opcode::activate) acc_readers_.push_back({index, acc_rows(inst)});
}

void Hazards::completed(uint64_t index) {
  // Each matmul or activate is in its list once; they complete mostly in issue order, so the one
  // sought is usually at the front.
  auto& list = ctx_.inst(index).opcode == Opcode::matmul ? acc_writers_ : acc_readers_;
  const auto it = std::find_if(list.begin(), list.end(), [&](const auto& w) { return w.first == index; });
  if (it != list.end()) list.erase(it);
}

bool Hazards::acc_busy(uint64_t index) const {
  const auto& inst = ctx_.inst(index);
  const RowRange mine = acc_rows(inst);
  const auto& others = inst.opcode == Opcode::matmul ? acc_readers_ : acc_writers_;
  return std::any_of(others.begin(), others.end(),
                     [&](const auto& o) { return o.first < index && overlap(o.second, mine); });
}

}  // namespace tpusim::sim
