#include "sim/context.h"

#include <algorithm>

namespace tpusim::sim {

bool Context::wait_until(uint64_t cycle) {
  if (aborted) return false;
  const uint64_t t = now();
  if (cycle > t) sc_core::wait(sc_core::sc_time::from_value(period.value() * (cycle - t)));
  return !aborted;
}

bool Context::wait_for(const sc_core::sc_event& e) {
  if (aborted) return false;
  sc_core::wait(e);
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

void Context::wake_all() {
  for (sc_core::sc_event* e : waitables) e->notify(sc_core::SC_ZERO_TIME);
}

void Context::complete(isa::Unit unit, uint64_t index, uint64_t end) {
  timeline[index].end = end;
  ++completed[int(unit)];
  completed_events[int(unit)].notify(sc_core::SC_ZERO_TIME);
  if (progress) progress->complete(end);
}

uint64_t Context::lowest_unstarted() const {
  uint64_t low = next_issue;
  for (const StationQueue* q : queues) low = std::min(low, q->front_index());
  return low;
}

void Context::note_ub(uint64_t first_row, uint64_t rows) {
  if (rows == 0) return;
  ub_touched.add(boost::icl::discrete_interval<uint64_t>::right_open(first_row, first_row + rows));
  result.ub_peak_rows = boost::icl::cardinality(ub_touched);
}

void Context::note_acc(uint64_t first_row, uint64_t rows) {
  result.acc_peak_rows = std::max(result.acc_peak_rows, first_row + rows);
}

void Context::reset_run() {
  ub_touched.clear();
  timeline.assign(code_size, {});
  regs_stride.assign(code_size, 0);
  regs_row_bytes.assign(code_size, 0);
  result = RunResult{};
  sync_act.clear();
  sync_host.clear();
  matrix_spans.clear();
  cfg_stride = cfg_row_bytes = 0;
  next_issue = 0;
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
