// The weight path (units.h): weight fetch station, weight memory, weight FIFO, shadow slot.
#include <fmt/format.h>

#include <algorithm>

#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;

WeightPath::WeightPath(sc_core::sc_module_name name, Context& ctx) : sc_module(name), ctx_(ctx), queue_(ctx) {
  for (Waitable* w : {&slot_event_, &shadow_event_}) ctx.add_waitable(*w);
  SC_HAS_PROCESS(WeightPath);
  SC_THREAD(fetch);
  SC_METHOD(shift_hook);
  sensitive << hook_event_;
  dont_initialize();
  SC_METHOD(retire);
  sensitive << retire_event_;
  dont_initialize();
  SC_METHOD(catch_up);
  sensitive << catch_up_event_;
  dont_initialize();
}

void WeightPath::reset() {
  queue_.reset(ctx_.arch.station_queue_depth);
  fifo_.clear();
  slots_used_ = mem_free_ = last_landing_ = 0;
  shadow_decided_ = release_pending_ = false;
  xfer_bytes_ = xfer_cycles_ = 0;
  next_use_ = 0;
  shadow_shift_start_ = shadow_free_at_ = release_at_ = 0;
  phase_ = Phase::next;
  cur_ = tile_ = v_ = request_ = start_ = end_ = 0;
  parked_ = resume_pending_ = ahead_ = wake_ = drain_ = false;
  ending_.clear();
  ahead_waits_.clear();
  hook_event_.cancel();
  retire_event_.cancel();
  catch_up_event_.cancel();
}

// One tile request per cycle, each holding a FIFO slot. The memory moves one tile at a time at
// weight_mem_gbps (requests queue behind each other); a tile is usable weight_mem_latency_cycles
// after its transfer ends.
void WeightPath::fetch() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    fetch_go(false);
  }
}

// The weight fetch station from where it stands (phase_ and the members after it).
//
// In its own thread (`ahead_of_time` false) it waits where it must and returns (false) only when
// the run ended. `v_` is the cycle it has reached: on the fast and timing engines it runs ahead of
// simulated time within an rw while it waits only for known cycles (a slot freed by a decided
// shift, the next request cycle): what it computes at v_ depends on nothing that can change before
// v_ (a tile lands after its request, so the shift it may decide is the same), and the next
// instruction is still taken at the rw's end. It catches up before waiting for an event (a switch
// to decide the head's shift) and before failing, so that deadlocks and errors come at the same
// cycle. The stepped engine (the debugger's view of the FIFO) keeps v_ = now.
//
// Run on by a switch (resume_fetch, `ahead_of_time` true, in the matrix unit's process) while its
// thread waits for that switch, it waits nowhere: it goes on from the cycle the switch freed its
// slot, completes each rw at its end lazily (ending_) and takes the next one from the queue at
// max(end, available) as the thread would have, issue going on from there (PopListener), and
// stops where the thread would wait for an event: a switch again (it stays parked, without
// catching up: drain() and abort_drain() move simulated time where the thread would have), an
// empty queue, a cycle past ahead_limit or the horizon, a failure to come (handed back: the
// thread is woken at the cycle it would have reached and goes on from there itself).
bool WeightPath::fetch_go(bool ahead_of_time) {
  const Arch& a = ctx_.arch;
  const bool ahead = ctx_.engine != Engine::stepped;
  // (ahead of time) the thread goes on from here at cycle `at` (>= now).
  const auto hand_back = [&](uint64_t at) {
    parked_ = false;
    slot_event_.notify(ctx_.at(at) - ctx_.stamp());
    return true;
  };
  for (;;) {
    if (phase_ == Phase::next) {
      uint64_t at = 0;
      if (ahead_of_time) {  // (v_: the last rw's end)
        if (queue_.empty()) return hand_back(v_);
        at = std::max(v_, queue_.head().available);
        if (at > ctx_.ahead_limit || !ctx_.pop_listener->may_issue_at(at)) return hand_back(v_);
        if (at > v_) ahead_waits_.push_back(at);
      } else {
        const StationQueue::Entry* e = queue_.front();
        if (!e || !ctx_.wait_until(e->available)) return false;
        at = ctx_.now();
      }
      cur_ = queue_.head().index;
      queue_.pop_at(at);
      ctx_.timeline[cur_].start = at;
      // A partial tile (tile_rows x tile_cols, docs/isa.md) moves only its stored bytes.
      box_ = tile_box(a, ctx_.inst(cur_));
      if (box_.bytes() != xfer_bytes_) {
        xfer_bytes_ = box_.bytes();
        xfer_cycles_ = transfer_cycles(xfer_bytes_, a.weight_mem_gbps, a.clock_mhz);
      }
      start_ = v_ = request_ = at;  // (v_ <= ctx_.horizon throughout)
      tile_ = 0;
      phase_ = Phase::tiles;
    }
    if (phase_ == Phase::tiles) {
      const uint64_t i = cur_;
      const isa::Instruction& in = ctx_.inst(i);
      const uint64_t xfer = xfer_cycles_;
      // v_ moves to `to` (>= v_), waiting for it unless ahead. Past the horizon it waits as before
      // (wait_until fails there), from cycle v_.
      const auto advance = [&](uint64_t to) {
        if ((!ahead || to > ctx_.horizon) && !(ctx_.wait_until(v_) && ctx_.wait_until(to))) return false;
        v_ = to;
        return true;
      };
      // x + y, checked as Context::later, failing at cycle v_.
      const auto later = [&](uint64_t x, uint64_t y, const char* what) -> std::optional<uint64_t> {
        if (const auto sum = ctx_.within_horizon(x, y)) [[likely]]
          return sum;
        if (!ctx_.wait_until(v_)) return std::nullopt;
        return ctx_.overflow(i, x, y, what);
      };
      bool redo = false;  // the thread waited for a switch: it may have been run on meanwhile
      for (; tile_ < in[Field::tiles] && !redo; ++tile_) {
        const uint64_t t = tile_;
        settle(v_);
        while (slots_used_ == a.weight_fifo_tiles) {
          ctx_.block(isa::Unit::weight_fetch,
                     "instruction {0} (rw) waits for a free weight FIFO slot for its tile {1}", i, t);
          // The head's shift decided: its slot frees at release_at_; else a switch must come first.
          if (release_pending_) {
            const uint64_t to = std::max(v_, release_at_);
            // (The thread, waiting for the switch, would have woken at `to` and failed there: not
            // at v_, which can be before the switch that runs it on, now; every other hand-back
            // comes after a wait ahead of now, from v_ >= now.)
            if (ahead_of_time && to > ctx_.horizon) return hand_back(to);
            if (!advance(to)) return false;
          } else if (ahead_of_time) {  // wait for the switch where the thread waits (parked_)
            parked_ = true;
            if (v_ > ctx_.now() && (ahead_waits_.empty() || ahead_waits_.back() < v_)) ahead_waits_.push_back(v_);
            return true;
          } else if (v_ > ctx_.now()) {  // catch up and look again (a switch before v_ decides a shift)
            if (!ctx_.wait_until(v_)) return false;
          } else {
            parked_ = true;
            if (!ctx_.wait_for(slot_event_)) return false;
            parked_ = false;
            v_ = std::max(v_, ctx_.now());
            redo = true;
            break;
          }
          settle(v_);
        }
        if (redo) break;
        ctx_.unblock(isa::Unit::weight_fetch);
        const uint64_t to = std::max(v_, t ? request_ + 1 : start_);
        if (ahead_of_time) {  // hand a wait or a failure to come back to the thread before any change
          const auto free = ctx_.within_horizon(std::max(to, mem_free_), xfer);
          if (to > ctx_.horizon || !free || !ctx_.within_horizon(*free, a.weight_mem_latency_cycles))
            return hand_back(v_);
        }
        if (!advance(to)) return false;
        request_ = v_;
        ++slots_used_;
        const uint64_t begin = std::max(request_, mem_free_);
        const auto free = later(begin, xfer, "a weight tile's transfer");
        if (!free) return false;
        const auto landed = later(*free, a.weight_mem_latency_cycles, "a weight tile's weight_mem_latency_cycles");
        if (!landed) return false;
        mem_free_ = *free;
        ctx_.result.weight_mem_busy += xfer;
        FetchedTile f;
        f.tile.waddr = in[Field::waddr] + t * box_.bytes();
        f.tile.is_unsigned = in[Field::unsigned_data] != 0;
        f.tile.set_box(box_, a);
        if (!ctx_.program->weights_not_computed) f.tile.data = ctx_.program->weights.data() + f.tile.waddr;
        if (!ctx_.tile_uses.empty()) {  // the compiler's (isa::WeightTileUse), else the nonzero bytes'
          // (Programs mostly fetch tiles in address order: try the one after the last first.)
          const std::vector<isa::WeightTileUse>& uses = ctx_.tile_uses;
          if (next_use_ >= uses.size() || uses[next_use_].waddr != f.tile.waddr)
            next_use_ = isa::tile_index_at(uses, f.tile.waddr);
          const isa::WeightTileUse& u = uses[next_use_++];
          f.use = {std::min<uint32_t>(u.rows, uint32_t(box_.rows)), std::min<uint32_t>(u.cols, uint32_t(box_.cols))};
        } else {
          f.use = tile_use(f.tile.data, box_.rows, box_.cols);
        }
        f.landed = *landed;
        last_landing_ = std::max(last_landing_, f.landed);
        if (ctx_.trace) ctx_.trace->tile_requested(i, request_, begin, mem_free_, f.landed);
        fifo_.push_back(f);
        if (!shadow_decided_) decide_shift(ctx_.now());
      }
      if (redo) continue;
      end_ = request_ + 1;
      ctx_.result.unit_busy[int(isa::Unit::weight_fetch)] += end_ - start_;
      phase_ = Phase::ending;
    }
    // Phase::ending
    if (ahead_of_time) {
      if (end_ > ctx_.horizon) return hand_back(v_);
      ending_.push_back({cur_, end_});
      ahead_waits_.push_back(end_);
      if (ending_.size() == 1 && (wake_ || drain_)) notify_retire();
      v_ = end_;
    } else {
      if ((end_ > ctx_.horizon && !ctx_.wait_until(v_)) || !ctx_.wait_until(end_)) return false;
      retire_due();  // (what ended ahead of it)
      ctx_.complete(isa::Unit::weight_fetch, cur_, end_);
    }
    phase_ = Phase::next;
  }
}

// A switch decided the head's shift while the thread waits for it: the station goes on from here,
// in this (the matrix unit's) process, until it must wait again (fetch_go).
void WeightPath::resume_fetch() {
  if (!resume_pending_) return;
  resume_pending_ = false;
  retire_due();  // (what ended by now, keeping ending_ and ahead_waits_ short)
  // The thread would have woken here (slot_event_, or its catch-up to v_ before the switch).
  const uint64_t at = std::max(v_, release_at_);
  if (at > ctx_.now() && (ahead_waits_.empty() || ahead_waits_.back() < at)) ahead_waits_.push_back(at);
  ahead_ = true;
  fetch_go(true);
  ahead_ = false;
}

void WeightPath::retire_due() {
  const uint64_t now = ctx_.now();
  while (!ending_.empty() && ending_.front().second <= now) {
    const auto [i, end] = ending_.front();
    ending_.pop_front();
    ctx_.complete(isa::Unit::weight_fetch, i, end);
  }
  while (!ahead_waits_.empty() && ahead_waits_.front() <= now) ahead_waits_.pop_front();
}

// (Every end <= now has been completed when this is called: the front's end is later.)
void WeightPath::notify_retire() {
  retire_event_.notify(ctx_.at(std::max(ending_.front().second, ctx_.now())) - ctx_.stamp());
}

void WeightPath::wake_at_next_end() {
  wake_ = true;
  if (!ending_.empty()) notify_retire();  // (else the next rw completed ahead notifies)
}

void WeightPath::retire() {
  if (ctx_.aborted) {
    ending_.clear();
    return;
  }
  retire_due();
  wake_ = false;  // the waiter, woken by the completion, asks again if it still waits
  if (drain_ && !ending_.empty()) notify_retire();
}

void WeightPath::catch_up() {
  if (!ctx_.aborted) retire_due();
}

bool WeightPath::drain_pending() const {
  return !ending_.empty() || (!ahead_waits_.empty() && ahead_waits_.back() > ctx_.now());
}

// The run stopped early: every rw completed ahead gets its end, and simulated time reaches the
// last cycle the thread would have waited for, as when it waited there.
void WeightPath::drain() {
  drain_ = true;
  retire_due();
  if (!ending_.empty()) notify_retire();
  if (!ahead_waits_.empty()) catch_up_event_.notify(ctx_.at(ahead_waits_.back()) - ctx_.stamp());
}

// The run aborted: the thread would have woken at its next wait and stopped there.
void WeightPath::abort_drain() {
  ending_.clear();  // (nothing completes in an aborted run)
  const uint64_t now = ctx_.now();
  while (!ahead_waits_.empty() && ahead_waits_.front() <= now) ahead_waits_.pop_front();
  if (!ahead_waits_.empty()) catch_up_event_.notify(ctx_.at(ahead_waits_.front()) - ctx_.stamp());
  ahead_waits_.clear();
}

// A landed tile at the FIFO head starts shifting into the shadow slot as soon as the slot is
// free: empty, and every cell of the array has copied the previous shadow tile before the shift
// rewrites it (a switch at t0 reaches cell (k, j) at t0 + k + j; the shift rewrites shadow cell
// (k, j) at the end of cycle s + k, or s + k + j when skewed by column (weight_shift_skewed), so
// s >= t0 + cols - 1, or s >= t0: Arch::shift_after_switch), and the previous shift is over (one
// row per cycle, rows cycles; its tile became active at t0 >= s_prev + rows). Called when the slot empties (switched) and when a tile
// joins the FIFO while it is empty: that cycle is when both became true, and s is then known.
void WeightPath::decide_shift(uint64_t now) {
  settle(now);  // (the previous head's shift ended by the switch that emptied the slot)
  if (fifo_.empty()) return;
  const uint64_t rows = ctx_.arch.array_rows;
  shadow_ = fifo_.front();
  const uint64_t s = std::max({now, shadow_.landed, shadow_free_at_});
  shadow_decided_ = true;
  shadow_shift_start_ = s;
  release_pending_ = true;
  release_at_ = s + rows;
  // A matmul waiting for the shadow learns s at once; the fetch station waiting for a slot
  // resumes when this one frees.
  const sc_core::sc_time stamp = ctx_.stamp();
  shadow_event_.notify();
  // (Not while the station runs on ahead of time itself: its thread waits for nothing then.)
  if (slot_event_.waited() && !ahead_) {
    // Waiting for this switch (parked_), the station goes on in this process once the matmul
    // started (resume_fetch), unless that passes ahead_limit; else it wakes where it goes on.
    const uint64_t at = std::max(v_, release_at_);
    if (parked_ && ctx_.engine != Engine::stepped && at <= ctx_.ahead_limit) resume_pending_ = true;
    else slot_event_.notify(ctx_.at(at) - stamp);
  }
  // The stepped array takes the shift at its cycle; the trace only records it (in shift order,
  // now: a switch ahead of simulated time decides the next shift before this one began).
  if (on_shift) {
    if (s == ctx_.now()) shift_hook();
    else hook_event_.notify(ctx_.at(s) - stamp);
  } else if (ctx_.trace) {
    ctx_.trace->tile_shift(s, s + rows);
  }
}

void WeightPath::settle(uint64_t at) {
  if (!release_pending_ || at < release_at_) return;
  fifo_.pop_front();
  --slots_used_;
  release_pending_ = false;
}

void WeightPath::shift_hook() {
  if (ctx_.aborted || !shadow_decided_) return;
  const uint64_t s = shadow_shift_start_;
  if (on_shift) on_shift(shadow_, s);
  if (ctx_.trace) ctx_.trace->tile_shift(s, s + ctx_.arch.array_rows);
}

std::vector<FetchedTile> WeightPath::fifo(uint64_t at) const {
  return {fifo_.begin() + (release_pending_ && at >= release_at_ ? 1 : 0), fifo_.end()};
}

const FetchedTile* WeightPath::wait_shadow(uint64_t& shift_start, bool wait) {
  while (!shadow_decided_)
    if (!wait || !ctx_.wait_for(shadow_event_)) return nullptr;
  shift_start = shadow_shift_start_;
  return &shadow_;
}

void WeightPath::switched(uint64_t t0, uint64_t at) {
  shadow_decided_ = false;
  shadow_free_at_ = t0 + ctx_.arch.shift_after_switch();
  decide_shift(at);
}

// Nothing the station does can happen before a matmul that starts later than now: its thread
// waits for a switch (parked_), or for an rw that issue has yet to give it, and no rw it
// completed lazily is still to end (ending_) while issue could be waiting at a sync: that end
// would wake a sync on the weights, and what issue gives the other units after it could start
// before the matmul (review30 #1: an act after `sync units=weights` ran ahead of a matmul started
// ahead and its UB hazard went unseen). Issue waiting for a slot in a full queue waits at no sync
// and goes on only at a pop, which no station makes before the matmul's start (then the ends are
// only completions, applied when a unit looks: retire_due).
bool WeightPath::quiet() const {
  return (ending_.empty() || ctx_.pop_listener->waits_for_pop()) &&
         ((parked_ && !resume_pending_) || (phase_ == Phase::next && queue_.empty()));
}

}  // namespace tpusim::sim
