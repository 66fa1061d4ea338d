// The weight path (units.h): weight fetch station, weight memory, weight FIFO, shadow slot.
#include <fmt/format.h>

#include <algorithm>

#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;

WeightPath::WeightPath(sc_core::sc_module_name name, Context& ctx) : sc_module(name), ctx_(ctx), queue_(ctx) {
  ctx.waitables.insert(ctx.waitables.end(), {&fifo_event_, &slot_event_, &shadow_event_});
  SC_HAS_PROCESS(WeightPath);
  SC_THREAD(fetch);
  SC_THREAD(shift);
}

void WeightPath::reset() {
  queue_.reset(ctx_.arch.station_queue_depth);
  fifo_.clear();
  slots_used_ = mem_free_ = last_landing_ = 0;
  shadow_loaded_ = false;
  shadow_shift_start_ = shadow_free_at_ = 0;
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
    const uint64_t xfer = transfer_cycles(box.bytes(), a.weight_mem_gbps, a.clock_mhz);
    uint64_t request = start;
    for (uint64_t t = 0; t < in[Field::tiles]; ++t) {
      while (slots_used_ == a.weight_fifo_tiles) {
        ctx_.block(isa::Unit::weight_fetch,
                   "instruction {0} (rw) waits for a free weight FIFO slot for its tile {1}", i, t);
        if (!ctx_.wait_for(slot_event_)) return;
      }
      ctx_.unblock(isa::Unit::weight_fetch);
      request = std::max(ctx_.now(), t ? request + 1 : start);
      if (!ctx_.wait_until(request)) return;
      ++slots_used_;
      const uint64_t begin = std::max(request, mem_free_);
      const auto free = ctx_.later(i, begin, xfer, "a weight tile's transfer");
      if (!free) return;
      const auto landed =
          ctx_.later(i, *free, a.weight_mem_latency_cycles, "a weight tile's weight_mem_latency_cycles");
      if (!landed) return;
      mem_free_ = *free;
      ctx_.result.weight_mem_busy += xfer;
      FetchedTile f;
      f.tile.waddr = in[Field::waddr] + t * box.bytes();
      f.tile.is_unsigned = in[Field::unsigned_data] != 0;
      f.tile.set_box(box, a);
      if (!ctx_.program->weights_not_computed) f.tile.data = ctx_.program->weights.data() + f.tile.waddr;
      if (!ctx_.tile_uses.empty()) {  // the compiler's (isa::WeightTileUse), else the nonzero bytes'
        const isa::WeightTileUse& u = isa::tile_use_at(ctx_.tile_uses, f.tile.waddr);
        f.use = {std::min<uint32_t>(u.rows, uint32_t(box.rows)), std::min<uint32_t>(u.cols, uint32_t(box.cols))};
      } else {
        f.use = tile_use(f.tile.data, box.rows, box.cols);
      }
      f.landed = *landed;
      last_landing_ = std::max(last_landing_, f.landed);
      if (ctx_.trace) ctx_.trace->tile_requested(i, request, begin, mem_free_, f.landed);
      fifo_.push_back(f);
      fifo_event_.notify(sc_core::SC_ZERO_TIME);
    }
    const uint64_t end = request + 1;
    ctx_.result.unit_busy[int(isa::Unit::weight_fetch)] += end - start;
    if (!ctx_.wait_until(end)) return;
    ctx_.complete(isa::Unit::weight_fetch, i, end);
  }
}

// A landed tile at the FIFO head starts shifting into the shadow slot as soon as the slot is
// free: empty, and every cell of the array has copied the previous shadow tile (a switch at t0
// reaches cell (k, j) at t0 + k + j; shadow row r is rewritten at the end of cycle s + r, so
// s >= t0 + cols - 1), and the previous shift is over (one row per cycle, rows cycles).
void WeightPath::shift() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    shift_run();
  }
}

void WeightPath::shift_run() {
  const uint64_t rows = ctx_.arch.array_rows;
  for (;;) {
    while (fifo_.empty())
      if (!ctx_.wait_for(fifo_event_)) return;
    while (shadow_loaded_)
      if (!ctx_.wait_for(shadow_event_)) return;
    const FetchedTile f = fifo_.front();
    // (The previous shift is over by then: its tile became active at t0 >= s_prev + rows.)
    const uint64_t s = std::max({ctx_.now(), f.landed, shadow_free_at_});
    if (!ctx_.wait_until(s)) return;
    shadow_ = f;
    shadow_loaded_ = true;
    shadow_shift_start_ = s;
    shadow_event_.notify(sc_core::SC_ZERO_TIME);
    if (on_shift) on_shift(f, s);
    if (ctx_.trace) ctx_.trace->tile_shift(s, s + rows);
    if (!ctx_.wait_until(s + rows)) return;
    fifo_.pop_front();
    --slots_used_;
    slot_event_.notify(sc_core::SC_ZERO_TIME);
  }
}

const FetchedTile* WeightPath::wait_shadow(uint64_t& shift_start) {
  while (!shadow_loaded_)
    if (!ctx_.wait_for(shadow_event_)) return nullptr;
  shift_start = shadow_shift_start_;
  return &shadow_;
}

void WeightPath::switched(uint64_t t0) {
  shadow_loaded_ = false;
  shadow_free_at_ = t0 + ctx_.arch.array_cols - 1;
  shadow_event_.notify(sc_core::SC_ZERO_TIME);
}

}  // namespace tpusim::sim
