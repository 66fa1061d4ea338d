// What the units of one run share: the program, the clock, the memories, per-instruction
// records, per-unit completion tracking and the abort path. Internal to sim/.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "sim/pack.h"
#include "sim/row_set.h"
#include "sim/state.h"
#include "sim/trace.h"

namespace tpusim::sim {

class StationQueue;

// The matrix unit's completions on the fast and timing engines, applied lazily: a matmul's end is
// known at its start, so it is completed (Hazards::completed, Context::complete) only when a unit
// looks at the matrix unit's completions, at or after that end (retire_due), and a timed event
// fires at an end only while a unit waits for it (wake_at_next_end). Without a waiter no event is
// scheduled per matmul; with one, it is woken in the same cycle (and delta cycle) as when every
// end had its event. (The stepped engine observes its ends and completes them as they happen.)
class MatrixRetire {
 public:
  virtual void retire_due() = 0;        // completes every matmul whose end is <= now
  virtual void wake_at_next_end() = 0;  // the caller waits on completed_events[matrix] next
  virtual void drain() = 0;             // every pending end gets its event (the run stopped early)

 protected:
  ~MatrixRetire() = default;
};

// Told when a station takes an instruction from its queue (the control unit: issue waiting for
// room in that queue goes on at once, in the popping station's process), at cycle `at`: now, or
// a later cycle for a station run ahead of simulated time (WeightPath::resume_fetch), which asks
// first whether issue from `at` on can fail (it must fail at its own cycle, in simulated time).
class PopListener {
 public:
  virtual void popped(const StationQueue& queue, uint64_t at) = 0;
  virtual bool may_issue_at(uint64_t at) const = 0;
  // Issue waits for room in a full queue: it goes on only when that queue's station pops (in
  // the popping process, at the pop's cycle), and waits for no unit's completion meanwhile.
  virtual bool waits_for_pop() const = 0;
  // Issue stopped at a `sync` that does not wait for the matrix unit, issued before cycle `t0`:
  // the control unit's process takes it there, and it may pass and give the other stations work
  // before t0.
  virtual bool wakes_before(uint64_t t0) const = 0;

 protected:
  ~PopListener() = default;
};

// An event units wait on, notified only while a process waits on it. Every wait on one is a loop
// on a condition checked before waiting (a queue empty, a unit busy, the FIFO full), so a
// notification with no process waiting would wake nobody; skipping it saves the kernel a delta
// cycle (or a timed entry) per instruction. A process that begins to wait after the condition
// changed sees the new condition and does not wait.
class Waitable {
 public:
  void notify(const sc_core::sc_time& delay) {
    if (waiters_) event_.notify(delay);
  }
  void notify() { notify(sc_core::SC_ZERO_TIME); }
  bool waited() const { return waiters_ != 0; }  // (a notification's time need not be built otherwise)
  sc_core::sc_event& event() { return event_; }  // the abort path notifies it unconditionally

 private:
  friend class Context;
  sc_core::sc_event event_;
  int waiters_ = 0;
};

// An interval of cycles [begin, end).
struct Span {
  uint64_t begin = 0, end = 0;
};

class Context {
 public:
  // --- set for each run by Machine::run -------------------------------------------------------
  const isa::Program* program = nullptr;
  std::vector<isa::WeightTileUse> tile_uses;  // the program's meta.tile_uses (isa/program.h), or none
  std::vector<isa::MatmulMacs> matmul_macs;   // the program's meta.matmul_macs (isa/program.h), or none
  Arch arch;
  Engine engine = Engine::fast;
  TraceRecorder* trace = nullptr;   // RunOptions::trace: the units' trace hooks report here
  RunProgress* progress = nullptr;  // RunOptions::progress: complete() counts here
  MachineState* state = nullptr;    // null for the timing engine
  uint64_t code_size = 0;           // instructions up to and including halt
  sc_core::sc_time period;
  sc_core::sc_time base;  // sc_time_stamp() at cycle 0 of this run
  // The last cycle this run may compute: SystemC time is 64-bit picoseconds, so at this clock
  // the run can count (2^64 - 1 - base) / period cycles; less kHorizonMargin, so that the small
  // steps added to a checked time (a matmul's vectors, a tile's rows) cannot pass the end either.
  uint64_t horizon = 0;
  static constexpr uint64_t kHorizonMargin = uint64_t{1} << 34;

  std::vector<InstructionTiming> timeline;
  // The setcfg registers as an instruction saw them at issue: instruction i saw
  // reg_values[regs_at[i]] (each distinct setting stored once, 4 bytes per instruction; the last
  // entry is what issue sees now). act_pool applies to activates, planes to the activation unit.
  struct IssueRegs {
    uint64_t stride = 0, row_bytes = 0;  // host_stride, host_row_bytes (DMA)
    uint64_t act_lane = 0;               // act_lane (activate)
    PackRegs pack;                       // the packing registers (pack.h)
    ActPool act_pool;                    // act_pool.. (activate)
    Planes planes;                       // act_high, vec_high_* (act, vec)
    bool operator==(const IssueRegs&) const = default;
  };
  std::vector<uint32_t> regs_at;
  std::vector<IssueRegs> reg_values;
  const IssueRegs& regs(uint64_t index) const { return reg_values[regs_at[index]]; }
  const PackRegs& pack(uint64_t index) const { return regs(index).pack; }
  RunResult result;                                   // counters filled by the units
  std::vector<Span> sync_act, sync_host;              // issue blocked on act / host only (syncs, int's drain)
  std::vector<Span> host_launch;                      // issue held by int for the host's launch
  std::vector<Span> matrix_spans;                     // the matrix unit streaming or stalled on weights
  uint64_t next_issue = 0;                            // index the control unit issues next
  uint64_t activation_end = 0;                        // the end of the activation unit's last start
  std::array<const StationQueue*, 4> queues{};        // host, weights, matrix, activation
  PopListener* pop_listener = nullptr;                // the control unit
  MatrixRetire* matrix_retire = nullptr;              // the matrix unit
  MatrixRetire* weight_retire = nullptr;              // the weight path (its rw's, when run ahead)
  // The last cycle a unit may act at ahead of simulated time across an instruction's end
  // (WeightPath::resume_fetch): a run stopped at --max-cycles must not show what came later.
  uint64_t ahead_limit = UINT64_MAX;
  sc_core::sc_event start_event;                      // a run begins
  bool halted = false;
  std::optional<std::string> error;
  std::optional<uint64_t> error_index;
  uint64_t error_cycle = 0;
  bool aborted = false;
  // fail() asks for the abort one cycle later, so that every process acting in the failing cycle
  // has had its say and the error reported does not depend on their order (Machine aborts).
  sc_core::sc_event abort_request;
  // Every event a process waits on; an abort notifies them all so that each process wakes,
  // sees `aborted` and unwinds (waits stay single-event: no or-lists to allocate).
  std::vector<sc_core::sc_event*> waitables;
  void add_waitable(Waitable& w) { waitables.push_back(&w.event()); }

  // Per-unit completion: instructions issued to and completed by each station.
  std::array<uint64_t, kUnitCount> issued{}, completed{};
  std::array<Waitable, kUnitCount> completed_events;  // the unit completed one

  // What each unit is blocked on right now, for deadlock messages: a format string taking the
  // instruction index and one more number; null when not blocked (formatted only on deadlock).
  // A unit that knows when its wait begins and ends (a matmul that will wait for a shift already
  // decided) says so at once and waits for its start: blocked only during [from, until).
  // A sync's mask (`units`) is formatted as the assembly writes it ("host|act").
  struct Blocked {
    const char* what = nullptr;
    uint64_t index = 0, extra = 0;
    uint64_t from = 0, until = UINT64_MAX;
    bool units = false;  // extra is a sync's units mask
    std::string text() const;
  };
  std::array<Blocked, kUnitCount> blocked;
  void block(isa::Unit unit, const char* what, uint64_t index, uint64_t extra = 0) {
    blocked[int(unit)] = {what, index, extra};
  }
  void block_on_units(isa::Unit unit, const char* what, uint64_t index, uint64_t mask) {
    blocked[int(unit)] = {what, index, mask, 0, UINT64_MAX, true};
  }
  void block_during(isa::Unit unit, const char* what, uint64_t index, uint64_t from, uint64_t until) {
    blocked[int(unit)] = {what, index, 0, from, until};
  }
  void unblock(isa::Unit unit) { blocked[int(unit)].what = nullptr; }
  // What `unit` waits for now (null: nothing).
  const Blocked* blocked_now(int unit) const {
    const Blocked& b = blocked[unit];
    if (!b.what) return nullptr;
    const uint64_t t = now();
    return t >= b.from && t < b.until ? &b : nullptr;
  }

  const isa::Instruction& inst(uint64_t i) const { return program->code[i]; }
  bool data() const { return state != nullptr; }
  // sc_time_stamp(), read in place: the kernel's clock, which no process moves (this process's one
  // simulation context keeps it in one place for its whole life).
  const sc_core::sc_time& stamp() const { return *clock_; }
  uint64_t now() const { return (stamp().value() - base.value()) / period.value(); }
  sc_core::sc_time at(uint64_t cycle) const {
    return sc_core::sc_time::from_value(base.value() + period.value() * cycle);
  }

  // Waits (inside a thread process) until `cycle`, or for `e`. False once the run is aborted:
  // the caller returns to its idle loop. (No exceptions cross a SystemC coroutine: AddressSanitizer
  // cannot follow an unwind across its stack switches.)
  [[nodiscard]] bool wait_until(uint64_t cycle);
  [[nodiscard]] bool wait_for(Waitable& w);
  // Ends the run with "instruction INDEX (its text): MESSAGE" (of the errors raised in the first
  // failing cycle, the one of the lowest instruction index); the caller then returns.
  void fail(uint64_t index, const std::string& message);
  // a + b cycles, checked: when the sum overflows or passes `horizon`, fails instruction `index`
  // ("simulated time overflow", naming `what` and the figures) and returns nullopt. Every time
  // built from a latency, a bandwidth or an instruction count goes through here.
  [[nodiscard]] std::optional<uint64_t> later(uint64_t index, uint64_t a, uint64_t b, const char* what) {
    if (const auto sum = within_horizon(a, b)) [[likely]]
      return sum;
    return overflow(index, a, b, what);
  }
  // a + b, or nullopt when the sum overflows or passes `horizon` (later()'s check, without the
  // failure: for a caller that must first catch up to the cycle it fails at).
  std::optional<uint64_t> within_horizon(uint64_t a, uint64_t b) const {
    uint64_t sum = 0;
    if (!__builtin_add_overflow(a, b, &sum) && sum <= horizon) [[likely]]
      return sum;
    return std::nullopt;
  }
  // later()'s failure: fails instruction `index` with the overflow message; returns nullopt.
  std::optional<uint64_t> overflow(uint64_t index, uint64_t a, uint64_t b, const char* what);
  void wake_all();  // notify every waitable event (abort)
  void complete(isa::Unit unit, uint64_t index, uint64_t end);
  bool idle(isa::Unit unit) const { return completed[int(unit)] == issued[int(unit)]; }
  // Completes the matmuls that have ended by now, as a unit must before it looks at the matrix
  // unit's completions (the fast and timing engines complete a matmul lazily: MatrixRetire).
  void retire_matrix() {
    if (!idle(isa::Unit::matrix)) matrix_retire->retire_due();
  }
  // The same for the weight fetch station's rw's (completed lazily when it ran ahead of simulated
  // time: WeightPath::resume_fetch).
  void retire_weights() {
    if (!idle(isa::Unit::weight_fetch)) weight_retire->retire_due();
  }
  // Waits for the next completion of `unit` (the matrix unit's and the weight fetch station's
  // first arrange for its event).
  [[nodiscard]] bool wait_completion(isa::Unit unit) {
    if (unit == isa::Unit::matrix) matrix_retire->wake_at_next_end();
    if (unit == isa::Unit::weight_fetch) weight_retire->wake_at_next_end();
    return wait_for(completed_events[int(unit)]);
  }
  uint64_t lowest_unstarted() const;
  void note_ub(uint64_t first_row, uint64_t rows);
  void note_acc(uint64_t first_row, uint64_t rows);
  RowSet ub_touched;  // every UB row an instruction used this run
  void reset_run();
 private:
  const sc_core::sc_time* clock_ = &sc_core::sc_time_stamp();
};

// A station's instruction queue: indices the control unit issued, in order, with the cycle each
// becomes available (issue + issue_cycles). Holds at most `capacity` instructions, counting the
// one at its head until the station starts it.
class StationQueue {
 public:
  struct Entry {
    uint64_t index;
    uint64_t available;
  };
  explicit StationQueue(Context& ctx) : ctx_(ctx) {
    ctx.add_waitable(pushed_);
    ctx.add_waitable(popped_);
  }
  void reset(uint64_t capacity) {
    entries_.clear();
    ahead_.clear();
    capacity_ = capacity;
  }
  bool full() const { return entries_.size() >= capacity_; }
  // The first cycle >= t at which the queue has room for issue, given that it has room now: a
  // station that took its head ahead of simulated time (pop_at a later cycle) frees that slot only
  // at the pop's cycle. (t: issue's cycle, which only grows.)
  uint64_t room_at(uint64_t t) {
    while (!ahead_.empty() && ahead_.front() <= t) ahead_.pop_front();
    return entries_.size() + ahead_.size() >= capacity_ ? ahead_.front() : t;
  }
  // The station is woken when the entry becomes available (e.available >= now).
  void push(Entry e) {
    entries_.push_back(e);
    if (pushed_.waited()) pushed_.notify(ctx_.at(e.available) - ctx_.stamp());
  }
  // Waits for an instruction at the head (does not remove it); null when the run is aborted.
  const Entry* front() {
    while (entries_.empty())
      if (!ctx_.wait_for(pushed_)) return nullptr;
    return &entries_.front();
  }
  void pop() { pop_at(ctx_.now()); }
  // Pops the head at cycle `at` (>= now: a station run ahead of simulated time).
  void pop_at(uint64_t at) {
    entries_.pop_front();
    if (at > ctx_.now()) ahead_.push_back(at);
    popped_.notify();
    if (ctx_.pop_listener) ctx_.pop_listener->popped(*this, at);
  }
  bool empty() const { return entries_.empty(); }
  const Entry& head() const { return entries_.front(); }  // (not empty)
  Waitable& popped() { return popped_; }
  uint64_t front_index() const { return entries_.empty() ? UINT64_MAX : entries_.front().index; }
  const std::deque<Entry>& entries() const { return entries_; }  // the debugger's view

 private:
  Context& ctx_;
  std::deque<Entry> entries_;
  std::deque<uint64_t> ahead_;  // the cycles of pops ahead of simulated time, still to come for issue
  uint64_t capacity_ = 1;
  Waitable pushed_, popped_;
};

}  // namespace tpusim::sim
