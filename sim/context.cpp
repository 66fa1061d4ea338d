#include "sim/context.h"

#include <fmt/format.h>

#include <algorithm>

#include "isa/disassembler.h"

namespace tpusim::sim {

std::string Context::Blocked::text() const {
  return units ? fmt::format(fmt::runtime(what), index, isa::field_value_text(isa::Field::units, extra))
               : fmt::format(fmt::runtime(what), index, extra);
}

bool Context::wait_until(uint64_t cycle) {
  if (aborted) return false;
  if (cycle > horizon) {  // every producer checks (later()); this is the backstop
    const uint64_t index = std::min(lowest_unstarted(), code_size - 1);
    if (!later(index, cycle, 0, "a wait")) return false;
  }
  const uint64_t t = now();
  if (cycle > t) sc_core::wait(sc_core::sc_time::from_value(period.value() * (cycle - t)));
  return !aborted;
}

bool Context::wait_for(Waitable& w) {
  if (aborted) return false;
  ++w.waiters_;
  sc_core::wait(w.event_);
  --w.waiters_;
  return !aborted;
}

void Context::fail(uint64_t index, const std::string& message) {
  const uint64_t t = now();
  std::string text = describe(index, inst(index)) + ": " + message;
  const bool first = !error;
  if (first || t < error_cycle ||
      (t == error_cycle && (index < *error_index || (index == *error_index && text < *error)))) {
    error = std::move(text);
    error_index = index;
    error_cycle = t;
  }
  if (first) abort_request.notify(period);
}

std::optional<uint64_t> Context::overflow(uint64_t index, uint64_t a, uint64_t b, const char* what) {
  fail(index,
       fmt::format(
           "simulated time overflow: {} ends at cycle {} + {}, past cycle {}, the last a run can reach "
           "at clock_mhz = {} (SystemC counts 64-bit picoseconds, about 213 days); lower the latencies "
           "or raise the bandwidths (docs/arch.md gives every parameter's range)",
           what, a, b, horizon, arch.clock_mhz));
  return std::nullopt;
}

void Context::wake_all() {
  for (sc_core::sc_event* e : waitables) e->notify(sc_core::SC_ZERO_TIME);
}

void Context::complete(isa::Unit unit, uint64_t index, uint64_t end) {
  timeline[index].end = end;
  ++completed[int(unit)];
  completed_events[int(unit)].notify();
  if (progress) progress->complete(end);
}

uint64_t Context::lowest_unstarted() const {
  uint64_t low = next_issue;
  for (const StationQueue* q : queues) low = std::min(low, q->front_index());
  return low;
}

void Context::note_ub(uint64_t first_row, uint64_t rows) {
  if (rows == 0) return;
  // The rows not touched before count: the cardinality kept up to date without a walk over the
  // whole set per instruction (quadratic in a program of a million instructions).
  result.ub_peak_rows += rows - ub_touched.add(first_row, rows);
}

void Context::note_acc(uint64_t first_row, uint64_t rows) {
  result.acc_peak_rows = std::max(result.acc_peak_rows, first_row + rows);
}

void Context::reset_run() {
  ub_touched.clear();
  timeline.assign(code_size, {});
  regs_at.assign(code_size, 0);
  reg_values.assign(1, IssueRegs{});
  result = RunResult{};
  sync_act.clear();
  sync_host.clear();
  host_launch.clear();
  matrix_spans.clear();
  next_issue = activation_end = 0;
  halted = aborted = false;
  error.reset();
  error_index.reset();
  error_cycle = 0;
  abort_request.cancel();
  issued.fill(0);
  completed.fill(0);
  for (auto& b : blocked) b.what = nullptr;
}

}  // namespace tpusim::sim
