// The control unit (units.h): in-order issue, sync, barrier, int, halt.
#include <fmt/format.h>

#include "sim/host_model.h"
#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;
using isa::Unit;

ControlUnit::ControlUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards,
                         WeightPath& weight_path)
    : sc_module(name), ctx_(ctx), hazards_(hazards), weight_path_(weight_path) {
  ctx.add_waitable(resume_);
  SC_HAS_PROCESS(ControlUnit);
  SC_THREAD(run);
}

void ControlUnit::reset() {
  t_ = next_ = 0;
  waiting_ = nullptr;
  failed_ = false;
}

void ControlUnit::run() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    issue_all();
  }
}

// Waits until every unit in `unit_mask` (bit u = isa::Unit u) is idle; false if the run ended.
bool ControlUnit::wait_idle(uint64_t unit_mask, bool weights_landed) {
  // Control issues nothing while it waits, so the units can be waited for one at a time.
  if (unit_mask >> int(Unit::matrix) & 1) ctx_.retire_matrix();
  if (unit_mask >> int(Unit::weight_fetch) & 1) ctx_.retire_weights();
  for (int u = 1; u < kUnitCount; ++u)
    while ((unit_mask >> u & 1) && !ctx_.idle(Unit(u)))
      if (!ctx_.wait_completion(Unit(u))) return false;
  return !weights_landed || ctx_.wait_until(weight_path_.last_landing());
}

// Issues instructions from next_ at t_ for as long as none needs to wait: station instructions
// whose queue has room, nop, tag and setcfg. Stops at a full queue (waiting_ names it), at a
// sync, barrier or halt (next_ is it), or when the run failed.
ControlUnit::Stop ControlUnit::issue_ahead() {
  const uint64_t issue = ctx_.arch.issue_cycles;
  sc_core::sc_port<Station>* ports[] = {nullptr, &host, &weights, &matrix, &activation};
  for (; next_ < ctx_.code_size; ++next_) {
    const uint64_t i = next_;
    ctx_.next_issue = i;
    const isa::Instruction& in = ctx_.inst(i);
    const Unit unit = isa::spec(in.opcode).unit;
    if (unit != Unit::control) {
      StationQueue& q = (*ports[int(unit)])->queue();
      // Only issue fills the queue and stations only empty it, so a queue with room now has room
      // at the issue cycle `t_` (>= now) too, but for a slot a station freed ahead of simulated
      // time (from its pop's cycle: room_at); a full one is waited for.
      if (q.full()) {
        ctx_.block(Unit::control, "issue of instruction {0} waits for a free slot in its station's queue", i);
        waiting_ = &q;
        return Stop::queue_full;
      }
      // A slot freed by a station ahead of simulated time is free from its pop's cycle on.
      t_ = q.room_at(t_);
      ctx_.unblock(Unit::control);
      ctx_.timeline[i].issue = t_;
      ctx_.regs_at[i] = static_cast<uint32_t>(ctx_.reg_values.size() - 1);
      ++ctx_.issued[int(unit)];
      hazards_.issued(i);
      const auto next = ctx_.later(i, t_, issue, "issue (issue_cycles)");
      if (!next) return Stop::failed;
      t_ = *next;
      q.push({i, t_});
      continue;
    }
    if (in.opcode == Opcode::sync || in.opcode == Opcode::barrier || in.opcode == Opcode::halt ||
        in.opcode == Opcode::interrupt)
      return Stop::control;
    InstructionTiming& rec = ctx_.timeline[i];
    rec.issue = rec.start = t_;
    const auto issued = ctx_.later(i, t_, issue, "issue (issue_cycles)");
    if (!issued) return Stop::failed;
    if (in.opcode == Opcode::set_config) {
      Context::IssueRegs next = ctx_.reg_values.back();
      if (!set_pack_register(next.pack, in)) switch (static_cast<isa::ConfigReg>(in[Field::reg])) {
          case isa::ConfigReg::host_stride: next.stride = in[Field::value]; break;
          case isa::ConfigReg::host_row_bytes: next.row_bytes = in[Field::value]; break;
          case isa::ConfigReg::act_lane: next.act_lane = in[Field::value]; break;
          default:
            if (!next.act_pool.set(static_cast<isa::ConfigReg>(in[Field::reg]), in[Field::value]))
              next.planes.set(static_cast<isa::ConfigReg>(in[Field::reg]), in[Field::value]);
            break;
        }
      if (!(next == ctx_.reg_values.back())) ctx_.reg_values.push_back(next);
    }  // (nop, tag: nothing more)
    ctx_.unblock(Unit::control);
    rec.end = t_ = *issued;
  }
  return Stop::failed;  // (unreachable: the program ends with halt)
}

// Issue held by instruction i over [from, to) for a RAW or input reason (a sync's, or an int's
// drain): counted (timing.md, "Counters") and traced; nothing when the span is empty.
void ControlUnit::note_hold(uint64_t i, uint64_t from, uint64_t to, HoldKind kind) {
  if (to <= from) return;
  (kind == HoldKind::raw ? ctx_.sync_act : ctx_.sync_host).push_back({from, to});
  if (ctx_.trace) ctx_.trace->sync_wait(i, from, to, kind);
}

// `int` i, its own issue cycles ending at `end`: drained as barrier, then issue held for the
// host's launch of the next segment (host_model.h launch_cycles): `end` moves past both.
bool ControlUnit::host_launch(uint64_t i, uint64_t& end) {
  ctx_.block(Unit::control, "instruction {0} (int) waits for every unit", i);
  // The drain is counted like a `sync` on the units it waits for (timing.md, "Counters"): from the
  // end of the int's own issue cycle until the matrix and activation units are idle,
  // the segment's own results, which the next segment reads (an LSTM step's h and c): RAW stall;
  // then a host DMA still under way: input stall; then any tile still landing (not counted).
  // Cycles before the int issues (issue held at a full station queue) are no sync's, as anywhere.
  if (!wait_idle(uint64_t{1} << int(Unit::matrix) | uint64_t{1} << int(Unit::activation), false)) return false;
  const uint64_t drained = std::max(end, ctx_.now());
  note_hold(i, end, drained, HoldKind::raw);
  if (!wait_idle(uint64_t{1} << int(Unit::host_dma), false)) return false;
  note_hold(i, drained, ctx_.now(), HoldKind::input);
  if (!wait_idle(~uint64_t{0}, true)) return false;
  const uint64_t length = segment_length(ctx_.program->code, i + 1);  // through the next int or halt
  const uint64_t from = std::max(end, ctx_.now());
  const auto resumed = ctx_.later(i, from, launch_cycles(ctx_.arch, length), "int (the host's launch)");
  if (!resumed) return false;
  ctx_.host_launch.push_back({from, *resumed});
  if (ctx_.trace) ctx_.trace->sync_wait(i, from, *resumed, HoldKind::host_launch);
  ctx_.block(Unit::control, "instruction {0} (int) holds issue for the host's launch until cycle {1}", i, *resumed);
  if (!ctx_.wait_until(*resumed)) return false;
  end = *resumed;
  return true;
}

void ControlUnit::popped(const StationQueue& queue, uint64_t at) {
  if (waiting_ != &queue || ctx_.aborted) return;
  waiting_ = nullptr;
  t_ = std::max(t_, at);
  const Stop stop = issue_ahead();
  if (stop == Stop::queue_full) return;  // waiting again (waiting_ is set)
  failed_ = stop == Stop::failed;
  resume_.notify();  // a sync, barrier or halt (or the failure) for the control unit's process
}

// Issue resumed at cycle `at` (popped) reaches at most every instruction left, one per
// issue_cycles: it cannot pass the horizon (whose failure must come at its own cycle) when this holds.
bool ControlUnit::may_issue_at(uint64_t at) const {
  const uint64_t issue = ctx_.arch.issue_cycles, left = ctx_.code_size - next_ + 1;
  return left <= UINT64_MAX / issue && ctx_.within_horizon(std::max(t_, at), issue * left).has_value();
}

// (Stopped at a sync, issue_all takes it at t_: it sleeps until then, or waits for its units.)
bool ControlUnit::wakes_before(uint64_t t0) const {
  if (waiting_ || next_ >= ctx_.code_size || t_ >= t0) return false;
  const isa::Instruction& in = ctx_.inst(next_);
  return in.opcode == Opcode::sync && !(in[Field::units] & sync_mask_bit(Unit::matrix));
}

// Issue runs ahead of simulated time: `t_` is the cycle the next instruction issues at, and the
// process only waits where it must observe the machine (a full queue, sync, barrier, halt).
void ControlUnit::issue_all() {
  const uint64_t issue = ctx_.arch.issue_cycles;
  t_ = ctx_.now();
  next_ = 0;
  waiting_ = nullptr;
  failed_ = false;
  // A sync mask (sync_mask_bit) as a set of isa::Unit bits, as wait_idle takes it.
  auto unit_bits = [](uint64_t mask) {
    uint64_t bits = 0;
    for (int u = 1; u < kUnitCount; ++u)
      if (mask & sync_mask_bit(Unit(u))) bits |= uint64_t{1} << u;
    return bits;
  };
  for (;;) {
    const Stop stop = issue_ahead();
    if (stop == Stop::failed) return;
    if (stop == Stop::queue_full) {
      // The station that frees the slot issues on (popped) and wakes this process only when
      // issue reaches a sync, barrier or halt, or fails.
      while (waiting_)
        if (!ctx_.wait_for(resume_)) return;
      if (failed_) return;
    }
    // next_ is a sync, barrier or halt.
    const uint64_t i = next_;
    const isa::Instruction& in = ctx_.inst(i);
    const uint64_t t = t_;
    InstructionTiming& rec = ctx_.timeline[i];
    rec.issue = rec.start = t;
    const auto issued = ctx_.later(i, t, issue, "issue (issue_cycles)");
    if (!issued) return;
    uint64_t end = *issued;
    if (!ctx_.wait_until(t)) return;
    if (in.opcode == Opcode::sync) {
      const uint64_t mask = in[Field::units];
      ctx_.block_on_units(Unit::control, "instruction {0} (sync) waits for units={1}", i, mask);
      if (!wait_idle(unit_bits(mask), false)) return;
      // Issue held beyond the sync's own issue cycles: RAW stall when it waits for the
      // activation unit, input stall when for the host interface only.
      const uint64_t idle = ctx_.now();
      if (mask & sync_mask_bit(Unit::activation)) note_hold(i, end, idle, HoldKind::raw);
      else if (mask & sync_mask_bit(Unit::host_dma)) note_hold(i, end, idle, HoldKind::input);
      end = std::max(end, idle);
    } else if (in.opcode == Opcode::interrupt) {
      if (!host_launch(i, end)) return;
    } else {  // barrier, halt
      ctx_.block(Unit::control, "instruction {0} (barrier or halt) waits for every unit", i);
      if (!wait_idle(~uint64_t{0}, true)) return;
      end = std::max(end, ctx_.now());
    }
    ctx_.unblock(Unit::control);
    rec.end = t_ = end;
    if (in.opcode == Opcode::halt) {
      if (!ctx_.wait_until(end)) return;
      ctx_.next_issue = ctx_.code_size;
      ctx_.halted = true;
      ctx_.result.cycles = end;
      sc_core::sc_pause();
      return;
    }
    ++next_;
  }
}

}  // namespace tpusim::sim
