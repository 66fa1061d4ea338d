// The host interface (units.h): read_host / write_host DMA.
#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;

HostInterface::HostInterface(sc_core::sc_module_name name, Context& ctx, Hazards& hazards)
    : sc_module(name), ctx_(ctx), hazards_(hazards), queue_(ctx) {
  SC_HAS_PROCESS(HostInterface);
  SC_THREAD(run);
}

void HostInterface::run() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    serve();
  }
}

void HostInterface::serve() {
  for (;;) {
    const StationQueue::Entry* e = queue_.front();
    if (!e || !ctx_.wait_until(e->available)) return;
    const uint64_t i = e->index, start = ctx_.now();
    queue_.pop();
    const isa::Instruction& in = ctx_.inst(i);
    const uint64_t row_bytes = ctx_.regs(i).row_bytes ? ctx_.regs(i).row_bytes : ctx_.arch.ub_row_bytes();
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(in[Field::rows], row_bytes, &bytes)) bytes = UINT64_MAX;
    const auto started = ctx_.later(i, start, ctx_.arch.host_latency_cycles, "the DMA's host_latency_cycles");
    if (!started) return;
    const auto done = ctx_.later(
        i, *started, transfer_cycles(bytes, ctx_.arch.host_gbps, ctx_.arch.clock_mhz), "the DMA transfer");
    if (!done) return;
    const uint64_t end = *done;
    ctx_.timeline[i].start = start;
    if (!hazards_.started(i, isa::Unit::host_dma, start, end, ctx_.lowest_unstarted())) return;
    if (ctx_.data()) {
      ctx_.state->host_stride = ctx_.regs(i).stride;
      ctx_.state->host_row_bytes = ctx_.regs(i).row_bytes;
      // Addresses were checked before the run (check_static, with these register values).
      if (in.opcode == Opcode::read_host) exec_read_host(*ctx_.state, in, i);
      else exec_write_host(*ctx_.state, in, i);
    }
    ctx_.result.unit_busy[int(isa::Unit::host_dma)] += end - start;
    if (!ctx_.wait_until(end)) return;
    ctx_.complete(isa::Unit::host_dma, i, end);
  }
}

}  // namespace tpusim::sim
