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
}

void WeightPath::reset() {
  queue_.reset(ctx_.arch.station_queue_depth);
  fifo_.clear();
  slots_used_ = mem_free_ = last_landing_ = 0;
  shadow_decided_ = release_pending_ = false;
  xfer_bytes_ = xfer_cycles_ = 0;
  next_use_ = 0;
  shadow_shift_start_ = shadow_free_at_ = release_at_ = 0;
  hook_event_.cancel();
}

// One tile request per cycle, each holding a FIFO slot. The memory moves one tile at a time at
// weight_mem_gbps (requests queue behind each other); a tile is usable weight_mem_latency_cycles
// after its transfer ends.
void WeightPath::fetch() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    fetch_run();
  }
}

void WeightPath::fetch_run() {
  for (;;) {
    const StationQueue::Entry* e = queue_.front();
    if (!e || !ctx_.wait_until(e->available)) return;
    const uint64_t i = e->index, start = ctx_.now();
    queue_.pop();
    ctx_.timeline[i].start = start;
    const isa::Instruction& in = ctx_.inst(i);
    const Arch& a = ctx_.arch;
    // A partial tile (tile_rows x tile_cols, docs/isa.md) moves only its stored bytes.
    const TileBox box = tile_box(a, in);
    if (box.bytes() != xfer_bytes_) {
      xfer_bytes_ = box.bytes();
      xfer_cycles_ = transfer_cycles(xfer_bytes_, a.weight_mem_gbps, a.clock_mhz);
    }
    const uint64_t xfer = xfer_cycles_;
    // `v`: the cycle the station has reached. On the fast and timing engines it runs ahead of
    // simulated time while it waits only for known cycles (a slot freed by a decided shift, the
    // next request cycle): what it computes at v depends on nothing that can change before v
    // (a tile lands after its request, so the shift it may decide is the same), and the next
    // instruction is still taken at the rw's end. It catches up before waiting for an event (a
    // switch to decide the head's shift) and before failing, so that deadlocks and errors come
    // at the same cycle. The stepped engine (the debugger's view of the FIFO) keeps v = now.
    const bool ahead = ctx_.engine != Engine::stepped;
    uint64_t v = start, request = start;  // (v <= ctx_.horizon throughout)
    // v moves to `to` (>= v), waiting for it unless ahead. Past the horizon it waits as before
    // (wait_until fails there), from cycle v.
    const auto advance = [&](uint64_t to) {
      if ((!ahead || to > ctx_.horizon) && !(ctx_.wait_until(v) && ctx_.wait_until(to))) return false;
      v = to;
      return true;
    };
    // x + y, checked as Context::later, failing at cycle v.
    const auto later = [&](uint64_t x, uint64_t y, const char* what) -> std::optional<uint64_t> {
      if (const auto sum = ctx_.within_horizon(x, y)) [[likely]]
        return sum;
      if (!ctx_.wait_until(v)) return std::nullopt;
      return ctx_.overflow(i, x, y, what);
    };
    for (uint64_t t = 0; t < in[Field::tiles]; ++t) {
      settle(v);
      while (slots_used_ == a.weight_fifo_tiles) {
        ctx_.block(isa::Unit::weight_fetch,
                   "instruction {0} (rw) waits for a free weight FIFO slot for its tile {1}", i, t);
        // The head's shift decided: its slot frees at release_at_; else a switch must come first.
        if (release_pending_) {
          if (!advance(std::max(v, release_at_))) return;
        } else if (v > ctx_.now()) {  // catch up and look again (a switch before v decides a shift)
          if (!ctx_.wait_until(v)) return;
        } else {
          if (!ctx_.wait_for(slot_event_)) return;
          v = ctx_.now();
        }
        settle(v);
      }
      ctx_.unblock(isa::Unit::weight_fetch);
      if (!advance(std::max(v, t ? request + 1 : start))) return;
      request = v;
      ++slots_used_;
      const uint64_t begin = std::max(request, mem_free_);
      const auto free = later(begin, xfer, "a weight tile's transfer");
      if (!free) return;
      const auto landed = later(*free, a.weight_mem_latency_cycles, "a weight tile's weight_mem_latency_cycles");
      if (!landed) return;
      mem_free_ = *free;
      ctx_.result.weight_mem_busy += xfer;
      FetchedTile f;
      f.tile.waddr = in[Field::waddr] + t * box.bytes();
      f.tile.is_unsigned = in[Field::unsigned_data] != 0;
      f.tile.set_box(box, a);
      if (!ctx_.program->weights_not_computed) f.tile.data = ctx_.program->weights.data() + f.tile.waddr;
      if (!ctx_.tile_uses.empty()) {  // the compiler's (isa::WeightTileUse), else the nonzero bytes'
        // (Programs mostly fetch tiles in address order: try the one after the last first.)
        const std::vector<isa::WeightTileUse>& uses = ctx_.tile_uses;
        if (next_use_ >= uses.size() || uses[next_use_].waddr != f.tile.waddr)
          next_use_ = isa::tile_index_at(uses, f.tile.waddr);
        const isa::WeightTileUse& u = uses[next_use_++];
        f.use = {std::min<uint32_t>(u.rows, uint32_t(box.rows)), std::min<uint32_t>(u.cols, uint32_t(box.cols))};
      } else {
        f.use = tile_use(f.tile.data, box.rows, box.cols);
      }
      f.landed = *landed;
      last_landing_ = std::max(last_landing_, f.landed);
      if (ctx_.trace) ctx_.trace->tile_requested(i, request, begin, mem_free_, f.landed);
      fifo_.push_back(f);
      if (!shadow_decided_) decide_shift();
    }
    const uint64_t end = request + 1;
    ctx_.result.unit_busy[int(isa::Unit::weight_fetch)] += end - start;
    if ((end > ctx_.horizon && !ctx_.wait_until(v)) || !ctx_.wait_until(end)) return;
    ctx_.complete(isa::Unit::weight_fetch, i, end);
  }
}

// A landed tile at the FIFO head starts shifting into the shadow slot as soon as the slot is
// free: empty, and every cell of the array has copied the previous shadow tile (a switch at t0
// reaches cell (k, j) at t0 + k + j; shadow row r is rewritten at the end of cycle s + r, so
// s >= t0 + cols - 1), and the previous shift is over (one row per cycle, rows cycles; its tile
// became active at t0 >= s_prev + rows). Called when the slot empties (switched) and when a tile
// joins the FIFO while it is empty: that cycle is when both became true, and s is then known.
void WeightPath::decide_shift() {
  settle(ctx_.now());  // (the previous head's shift ended by the switch that emptied the slot)
  if (fifo_.empty()) return;
  const uint64_t now = ctx_.now(), rows = ctx_.arch.array_rows;
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
  if (slot_event_.waited()) slot_event_.notify(ctx_.at(release_at_) - stamp);
  if (on_shift || ctx_.trace) {
    if (s == now) shift_hook();
    else hook_event_.notify(ctx_.at(s) - stamp);
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

std::vector<FetchedTile> WeightPath::fifo() const {
  return {fifo_.begin() + (head_shifted() ? 1 : 0), fifo_.end()};
}

const FetchedTile* WeightPath::wait_shadow(uint64_t& shift_start, bool wait) {
  while (!shadow_decided_)
    if (!wait || !ctx_.wait_for(shadow_event_)) return nullptr;
  shift_start = shadow_shift_start_;
  return &shadow_;
}

void WeightPath::switched(uint64_t t0) {
  shadow_decided_ = false;
  shadow_free_at_ = t0 + ctx_.arch.array_cols - 1;
  decide_shift();
}

}  // namespace tpusim::sim
