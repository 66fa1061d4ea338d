// The stepping debugger's core (debugger.h): a MachineRun advanced cycle by cycle, and views of
// the units between cycles.
#include "sim/debugger.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "sim/debugger_hooks.h"
#include "sim/trace.h"

namespace tpusim::sim {

namespace {

bool is_control(const isa::Program& p, uint64_t i) {
  return isa::spec(p.code[i].opcode).unit == isa::Unit::control;
}

TileView tile_view(const FetchedTile& f, uint64_t number) {
  return {f.tile.waddr, number, f.landed, f.tile.is_unsigned, f.use, f.tile.rows, f.tile.cols};
}

}  // namespace

std::string_view event_name(EventKind kind) {
  switch (kind) {
    case EventKind::issue: return "issue";
    case EventKind::start: return "start";
    default: return "end";
  }
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::not_issued: return "-";
    case Phase::queued: return "queued";
    case Phase::running: return "running";
    default: return "done";
  }
}

DebugSession::DebugSession(const isa::Program& program, const Arch& arch, TraceRecorder* trace)
    : program_(program), arch_(arch), trace_(trace) {
  begin();
}

// Begins the run (again) and reaches cycle 0.
void DebugSession::begin() {
  run_.reset();  // one run per process: the old one unwinds first
  cycle_ = 0;
  over_ = false;
  result_.reset();
  error_.reset();
  error_index_.reset();
  first_events_.clear();
  issue_cursor_ = 0;
  pending_.clear();
  running_.clear();
  if (trace_) {
    std::vector<CellRange> cells = trace_->cell_ranges;
    *trace_ = TraceRecorder{};
    trace_->record_cells(std::move(cells));
  }
  RunOptions options;
  options.engine = Engine::stepped;
  options.trace = trace_;
  run_ = std::make_unique<MachineRun>(program_, arch_, options);
  code_size_ = run_->units().ctx.code_size;
  run_->run_to_cycle(0);
  collect(first_events_);
  if (run_->over()) end_run();
}

void DebugSession::rewind(uint64_t target) {
  if (target > cycle_) throw std::logic_error("DebugSession::rewind: the target is ahead of the session");
  begin();
  if (target == 0 || over_) return;
  run_->run_to_cycle(target);
  cycle_ = run_->cycle();
  std::vector<InstructionEvent> events;
  collect(events);
  if (run_->over()) end_run();
}

void DebugSession::finish_run() { advance(UINT64_MAX); }

DebugSession::~DebugSession() = default;

const std::vector<InstructionTiming>& DebugSession::timeline() const {
  return result_ ? result_->timeline : run_->units().ctx.timeline;
}

// The control unit has reached instruction i: a station instruction is in its queue (or
// further), a control instruction has its issue cycle recorded (perhaps ahead of time: issue
// runs ahead of simulated time until it must wait).
bool DebugSession::issue_known(uint64_t i) const {
  if (result_) return true;
  const Context& ctx = run_->units().ctx;
  return i < ctx.next_issue || (i == ctx.next_issue && is_control(program_, i));
}

// A station instruction leaves its queue when its station starts it.
bool DebugSession::station_started(uint64_t i) const {
  if (result_) return true;
  const Context& ctx = run_->units().ctx;
  if (i >= ctx.next_issue) return false;
  const int q = int(isa::spec(program_.code[i].opcode).unit) - 1;
  for (const auto& e : ctx.queues[q]->entries())
    if (e.index == i) return false;
  return true;
}

std::optional<uint64_t> DebugSession::issued_at(uint64_t i) const {
  if (i >= code_size_ || !issue_known(i) || timeline()[i].issue > cycle_) return std::nullopt;
  return timeline()[i].issue;
}

std::optional<uint64_t> DebugSession::started_at(uint64_t i) const {
  if (!issued_at(i)) return std::nullopt;
  const InstructionTiming& t = timeline()[i];
  // A station starts an instruction at least issue_cycles (>= 1) after its issue; one that failed
  // as it started (a hazard) left its queue with no start recorded (0).
  if (!is_control(program_, i) && (!station_started(i) || t.start <= t.issue)) return std::nullopt;
  return t.start;
}

std::optional<uint64_t> DebugSession::ended_at(uint64_t i) const {
  if (!started_at(i)) return std::nullopt;
  const uint64_t end = timeline()[i].end;  // > 0 once known (every instruction takes a cycle)
  if (end == 0 || end > cycle_) return std::nullopt;
  return end;
}

Phase DebugSession::phase(uint64_t i) const {
  if (ended_at(i)) return Phase::done;
  if (started_at(i)) return Phase::running;
  return issued_at(i) ? Phase::queued : Phase::not_issued;
}

uint64_t DebugSession::current() const { return issue_cursor_ ? issue_cursor_ - 1 : 0; }

// This cycle's events: issues in program order, then starts and ends of what is in flight.
void DebugSession::collect(std::vector<InstructionEvent>& out) {
  const size_t first = out.size();
  while (issue_cursor_ < code_size_ && issued_at(issue_cursor_)) {
    const uint64_t i = issue_cursor_++;
    out.push_back({timeline()[i].issue, i, EventKind::issue});
    pending_.push_back(i);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (auto s = started_at(*it)) {
      out.push_back({*s, *it, EventKind::start});
      running_.push_back(*it);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = running_.begin(); it != running_.end();) {
    if (auto e = ended_at(*it)) {
      out.push_back({*e, *it, EventKind::end});
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(out.begin() + first, out.end(), [](const InstructionEvent& a, const InstructionEvent& b) {
    return std::tie(a.cycle, a.index, a.kind) < std::tie(b.cycle, b.index, b.kind);
  });
}

// The next cycle at which a record made ahead of time comes due (an issue, a control
// instruction's end), which no SystemC event may mark.
uint64_t DebugSession::next_record() const {
  uint64_t next = UINT64_MAX;
  const auto& tl = timeline();
  if (issue_cursor_ < code_size_ && issue_known(issue_cursor_) && tl[issue_cursor_].issue > cycle_)
    next = tl[issue_cursor_].issue;
  for (uint64_t i : running_)
    if (tl[i].end > cycle_) next = std::min(next, tl[i].end);
  return next;
}

std::vector<InstructionEvent> DebugSession::advance(uint64_t until, const StopAt& stop) {
  std::vector<InstructionEvent> events;
  while (!over_ && cycle_ < until) {
    const uint64_t next = std::min({run_->next_activity(), next_record(), until});
    run_->run_to_cycle(std::max(next, cycle_ + 1));
    cycle_ = run_->cycle();
    const size_t before = events.size();
    collect(events);
    if (run_->over()) end_run();
    const std::vector<InstructionEvent> now(events.begin() + before, events.end());
    if (stop && stop(now)) break;
  }
  return events;
}

void DebugSession::end_run() {
  over_ = true;
  try {
    result_ = run_->finish();
  } catch (const SimError& e) {
    error_ = e.what();
    error_index_ = e.index;
  }
}

std::vector<StationView> DebugSession::stations() const {
  std::vector<StationView> v(kUnitCount);
  const Context& ctx = run_->units().ctx;
  for (int u = 0; u < kUnitCount; ++u) {
    v[u].unit = isa::Unit(u);
    if (const Context::Blocked* b = ctx.blocked_now(u))
      v[u].blocked = b->text();
  }
  for (uint64_t i : running_) v[int(isa::spec(program_.code[i].opcode).unit)].running.push_back(i);
  for (int u = 1; u < kUnitCount; ++u)
    for (const auto& e : ctx.queues[u - 1]->entries())
      if (issued_at(e.index)) v[u].queued.push_back({e.index, e.available});
  return v;
}

WeightPathView DebugSession::weight_path() const {
  const MachineUnits u = run_->units();
  WeightPathView v;
  // (At cycle_: after a failed run, simulated time ran on while the processes unwound.)
  for (const FetchedTile& f : u.weights.fifo(cycle_)) v.fifo.push_back(tile_view(f, tile_number(f.tile.waddr)));
  if (const FetchedTile* s = u.weights.shadow(cycle_)) {
    v.shadow = tile_view(*s, tile_number(s->tile.waddr));
    v.shift_start = u.weights.shadow_shift_start();
    // While it shifts, the tile is also the FIFO's front (its slot frees when the shift ends).
    if (!v.fifo.empty() && cycle_ < v.shift_start + arch_.array_rows) v.fifo.erase(v.fifo.begin());
  }
  if (const FetchedTile& a = u.matrix.active_tile(); a.tile.data) v.active = tile_view(a, tile_number(a.tile.waddr));
  return v;
}

uint64_t DebugSession::tile_number(uint64_t waddr) const {
  const std::vector<isa::WeightTileUse>& uses = run_->units().ctx.tile_uses;
  return uses.empty() ? waddr / arch_.tile_bytes() : isa::tile_index_at(uses, waddr);
}

uint64_t DebugSession::tile_count() const {
  const std::vector<isa::WeightTileUse>& uses = run_->units().ctx.tile_uses;
  return uses.empty() ? program_.weights.size() / arch_.tile_bytes() : uses.size();
}

std::optional<uint64_t> DebugSession::tile_address(uint64_t n) const {
  const std::vector<isa::WeightTileUse>& uses = run_->units().ctx.tile_uses;
  if (!uses.empty()) return n < uses.size() ? std::optional<uint64_t>(uses[n].waddr) : std::nullopt;
  if (n >= tile_count()) return std::nullopt;
  return n * arch_.tile_bytes();
}

std::vector<MatmulView> DebugSession::matmuls() const {
  std::vector<MatmulView> v;
  for (const auto& m : run_->units().matrix.in_flight()) v.push_back({m.index, m.t0, m.vectors, m.written, m.period});
  return v;
}

const MachineState& DebugSession::state() const { return result_ ? *result_->state : *run_->state(); }

const SystolicArray& DebugSession::array() const { return *run_->units().matrix.stepped_array(); }

}  // namespace tpusim::sim
