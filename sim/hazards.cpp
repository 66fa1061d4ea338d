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
void matmul_reads(const isa::Instruction& inst, const PackRegs& pack, Accesses::Spans& r) {
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat], stride = inst[Field::stride];
  const UbSpan first = matmul_group_reads(pack, inst, 0), last = matmul_group_reads(pack, inst, repeat - 1);
  if (repeat == 1 || stride == rows || repeat > 64 || stride < rows + pack.reach()) {
    r = {{first.first, last.first + last.rows - first.first}};
    return;
  }
  r.clear();
  for (uint64_t g = 0; g < repeat; ++g) {
    const UbSpan s = matmul_group_reads(pack, inst, g);
    r.push_back({s.first, s.rows});
  }
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
  accesses(a, inst, arch, pack, act_pool, planes);
  return a;
}

void accesses(Accesses& a, const isa::Instruction& inst, const Arch& arch, const PackRegs& pack,
              const ActPool& act_pool, const Planes& planes) {
  a.ub_reads.clear();
  a.ub_writes.clear();
  a.acc = {};
  const uint64_t rows = inst[Field::rows];
  switch (inst.opcode) {
    case Opcode::read_host: a.ub_writes = {{inst[Field::ub], rows}}; break;
    case Opcode::write_host: a.ub_reads = {{inst[Field::ub], rows}}; break;
    case Opcode::matmul:
      matmul_reads(inst, pack, a.ub_reads);
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
}

bool Hazards::late_writes(const Record& early, const Record& late) {
  return overlap(late.use.ub_writes, early.use.ub_reads) || overlap(late.use.ub_writes, early.use.ub_writes);
}

// Two instructions of different stations touch the same UB rows (one writing) out of program
// order or overlapping in time.
bool Hazards::conflicts(const Record& a, const Record& b) {
  const Record& early = a.index < b.index ? a : b;
  const Record& late = a.index < b.index ? b : a;
  if (!late_writes(early, late) && !overlap(late.use.ub_reads, early.use.ub_writes)) return false;
  return early.until > late.start;  // else in program order, with no overlap in time
}

void Hazards::report(const Record& a, const Record& b) const {
  // Described from the later instruction in program order, whichever of the two started first
  // in simulation (two stations starting in the same cycle may do so in either order).
  const Record& early = a.index < b.index ? a : b;
  const Record& late = a.index < b.index ? b : a;
  const char* what = late_writes(early, late) ? "writes UB rows that" : "reads UB rows that";
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

Hazards::Record& Hazards::Window::push_back() {
  if (count_ == ring_.size()) {  // full: unroll into a ring twice the size
    std::vector<Record> bigger(2 * ring_.size());
    for (size_t k = 0; k < count_; ++k) bigger[k] = std::move(ring_[(head_ + k) & (ring_.size() - 1)]);
    ring_ = std::move(bigger);
    head_ = 0;
  }
  return ring_[(head_ + count_++) & (ring_.size() - 1)];
}

bool Hazards::started(uint64_t index, isa::Unit unit, uint64_t start, uint64_t until,
                      uint64_t lowest_unstarted) {
  // Records that can no longer conflict: over, and before everything not yet started (this
  // instruction included). A later instruction starts no earlier than `start`, so no such record
  // can conflict with it either: dropping them is only a saving. In each window they are a prefix
  // (windows_), and every record is dropped at the same call as by a scan of the whole window.
  // A matmul the timing engine starts ahead of simulated time (MatrixUnit::may_start_ahead) is
  // not a bound on what starts next: drop only by the cycle the simulation has reached.
  const uint64_t low = std::min(lowest_unstarted, index);
  for (Window& w : windows_) w.drop_before(std::min(start, ctx_.now()), low);
  // This instruction's record, built in place at the end of its unit's window (no record of its
  // own unit is checked against it) and kept there if it uses the UB and conflicts with nothing.
  // (act_pool as activates see it, planes as the activation unit sees them: none for the others.)
  const isa::Instruction& in = ctx_.inst(index);
  const Context::IssueRegs& regs = ctx_.regs(index);
  Window& mine = windows_[int(unit)];
  Record& r = mine.push_back();
  r.index = index;
  r.unit = unit;
  r.start = start;
  r.until = until;
  accesses(r.use, in, ctx_.arch, regs.pack, in.opcode == isa::Opcode::activate ? regs.act_pool : ActPool{},
           unit == isa::Unit::activation ? regs.planes : Planes{});
  for (const RowRange& x : r.use.ub_reads) ctx_.note_ub(x.first, x.rows);
  for (const RowRange& x : r.use.ub_writes) ctx_.note_ub(x.first, x.rows);
  if (r.use.acc.rows) ctx_.note_acc(r.use.acc.first, r.use.acc.rows);
  // The conflicting instruction earliest in program order, so that the message does not depend on
  // the order in which SystemC runs processes within a cycle.
  const Record* worst = nullptr;
  for (int u = 0; u < kUnitCount; ++u) {
    if (u == int(unit)) continue;
    const Window& w = windows_[u];
    for (size_t k = 0; k < w.size(); ++k)
      if (conflicts(r, w[k]) && (!worst || w[k].index < worst->index)) worst = &w[k];
  }
  if (worst) report(r, *worst);
  if (worst || (r.use.ub_reads.empty() && r.use.ub_writes.empty())) mine.pop_back();
  return !worst;
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
  if (it == list.end()) return;
  if (it == list.begin()) list.pop_front();
  else list.erase(it);
}

bool Hazards::acc_busy(uint64_t index) const {
  const auto& inst = ctx_.inst(index);
  const RowRange mine = acc_rows(inst);
  const auto& others = inst.opcode == Opcode::matmul ? acc_readers_ : acc_writers_;
  return std::any_of(others.begin(), others.end(),
                     [&](const auto& o) { return o.first < index && overlap(o.second, mine); });
}

}  // namespace tpusim::sim
