// The activation unit (units.h): activate, vector, pool.
#include <fmt/format.h>

#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;

namespace {
uint64_t div_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }  // b > 0
// a + b * c, saturating at 2^64 - 1 (Context::later then reports the overflow).
uint64_t add_mul(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t p = 0, s = 0;
  return __builtin_mul_overflow(b, c, &p) || __builtin_add_overflow(a, p, &s) ? UINT64_MAX : s;
}
}  // namespace

ActivationUnit::ActivationUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards)
    : sc_module(name), ctx_(ctx), hazards_(hazards), queue_(ctx) {
  SC_HAS_PROCESS(ActivationUnit);
  SC_THREAD(run);
}

// activation_latency_cycles, then activation_lanes values per cycle: an activate row is
// array_cols values (plus the per-column table's rows once), a vector row is one UB row per
// operand, a pooled output row reads window^2 UB rows.
//
// An activate with fused pooling (act_pool) streams its rows from the accumulators through the
// pipeline as a plain activate does; the Normalize/Pool stage after it keeps each open window's
// running max or sum per column and writes a pooled row to the UB when the last pixel of its
// window has passed, on the write port, which the read stream does not use. Both streams move
// array_cols values per row at activation_lanes per cycle, and a map never pools into more rows
// than it reads (window and stride >= 1), so the accumulator reads bound the time: the same
// cycles as the plain activate of the same rows, and no UB pass of a separate pool.
uint64_t ActivationUnit::duration(uint64_t index) const {
  const Arch& a = ctx_.arch;
  const isa::Instruction& in = ctx_.inst(index);
  const uint64_t ub_row = div_up(a.ub_row_bytes(), a.activation_lanes);
  switch (in.opcode) {
    case Opcode::activate: {
      // With act_groups G >= 1 (pack.h) each accumulator row becomes G UB rows of act_group_cols
      // values, written one row per cycle: max(one cycle, the group's values) per UB row.
      // Fused pooling (never with act_groups): max(rows read, pooled rows written) = rows read.
      const PackRegs& pack = ctx_.pack(index);
      const ActPool& pool = ctx_.regs(index).act_pool;
      const uint64_t per_row = pack.scatters() ? pack.groups() * div_up(pack.act_group_cols, a.activation_lanes)
                                               : div_up(a.array_cols, a.activation_lanes);
      // 16-bit results (act_high, never with scatter or pooling): each row's values are written
      // as two UB rows, one per byte plane, through the write port at activation_lanes bytes per
      // cycle: twice the cycles per row.
      const uint64_t rows = pool.on() ? std::max(in[Field::rows], activate_ub_rows(in, pool)) : in[Field::rows];
      return add_mul(a.activation_latency_cycles + (in[Field::per_channel] ? perchan_table_rows(a) : 0), rows,
                     per_row * (ctx_.regs(index).planes.act ? 2 : 1));
    }
    case Opcode::vector: {
      // The UB rows read per element row (one per 8-bit operand, two per 16-bit one) and written
      // (one, two for a 16-bit result) pass the read and write ports at activation_lanes bytes per
      // cycle each, overlapped: the larger count bounds the time. All 8-bit: 1 (pass) or 2.
      const Planes& p = ctx_.regs(index).planes;
      const bool pass = in[Field::op] == uint64_t(isa::VecOp::pass);
      const uint64_t reads = (p.a ? 2 : 1) + (pass ? 0 : (p.b ? 2 : 1)), writes = p.out ? 2 : 1;
      return add_mul(a.activation_latency_cycles, in[Field::rows], ub_row * std::max(reads, writes));
    }
    default: {  // (the pool fields are 16 bits or less: the products fit)
      const uint64_t out_rows = in[Field::out_h] * in[Field::out_w] * in[Field::batch];
      return add_mul(a.activation_latency_cycles, out_rows * in[Field::window] * in[Field::window], ub_row);
    }
  }
}

void ActivationUnit::run() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    serve();
  }
}

void ActivationUnit::serve() {
  for (;;) {
    const StationQueue::Entry* e = queue_.front();
    if (!e || !ctx_.wait_until(e->available)) return;
    const uint64_t i = e->index;
    const isa::Instruction& in = ctx_.inst(i);
    if (hazards_.acc_busy(i)) {
      ctx_.retire_matrix();
      while (hazards_.acc_busy(i)) {
        ctx_.block(isa::Unit::activation, "instruction {0} waits for matmuls writing its accumulator rows", i);
        if (!ctx_.wait_completion(isa::Unit::matrix)) return;
      }
    }
    ctx_.unblock(isa::Unit::activation);
    const uint64_t start = ctx_.now();
    const auto checked_end = ctx_.later(i, start, duration(i), "the activation unit's work");
    if (!checked_end) return;
    const uint64_t end = *checked_end;
    ctx_.activation_end = end;
    queue_.pop();
    ctx_.timeline[i].start = start;
    if (!hazards_.started(i, isa::Unit::activation, start, end, ctx_.lowest_unstarted())) return;
    if (ctx_.data()) {
      if (in.opcode == Opcode::activate) {
        ctx_.state->act_lane = ctx_.regs(i).act_lane;
        ctx_.state->pack = ctx_.pack(i);
        ctx_.state->act_pool = ctx_.regs(i).act_pool;
        ctx_.state->planes = ctx_.regs(i).planes;
        exec_activate(*ctx_.state, in, i);
      }
      else if (in.opcode == Opcode::vector) {
        ctx_.state->planes = ctx_.regs(i).planes;
        exec_vector(*ctx_.state, in, i);
      }
      else exec_pool(*ctx_.state, in, i);
    }
    ctx_.result.unit_busy[int(isa::Unit::activation)] += end - start;
    if (!ctx_.wait_until(end)) return;
    hazards_.completed(i);
    ctx_.complete(isa::Unit::activation, i, end);
  }
}

}  // namespace tpusim::sim
