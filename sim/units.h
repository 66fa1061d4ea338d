// The machine's units as SystemC modules (Jouppi et al., ISCA 2017, Figure 1 and section 2).
// Each has the same small life: built once, bound to its neighbours through ports, reset with
// the run's configuration, advanced by its thread processes, asked for its statistics.
// Internal to sim/; docs/timing.md states every rule they implement.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <systemc>

#include "sim/context.h"
#include "sim/gemm.h"
#include "sim/hazards.h"
#include "sim/systolic_array.h"

namespace tpusim::sim {

// A station of the 4-stage pipeline, as the control unit sees it.
class Station : public virtual sc_core::sc_interface {
 public:
  virtual StationQueue& queue() = 0;
};

// Host interface: read_host / write_host DMA between host memory and the unified buffer.
// Each takes host_latency_cycles + transfer_cycles(rows x row bytes, host_gbps).
class HostInterface : public sc_core::sc_module, public Station {
 public:
  HostInterface(sc_core::sc_module_name name, Context& ctx, Hazards& hazards);
  StationQueue& queue() override { return queue_; }
  void reset() { queue_.reset(ctx_.arch.station_queue_depth); }

 private:
  void run();    // the thread: one serve() per run
  void serve();  // returns when the run ends
  Context& ctx_;
  Hazards& hazards_;
  StationQueue queue_;
};

// A tile fetched into the weight FIFO, with the cycle it is usable there.
struct FetchedTile {
  WeightTile tile;
  TileUse use;
  uint64_t landed = 0;
};

// What the matrix unit asks of the weight path.
class WeightSource : public virtual sc_core::sc_interface {
 public:
  // The next shadow tile, once its shift is decided (it may begin later, at `shift_start`),
  // without taking it. `wait`: waits for the decision (null when the run ended); else null when
  // not decided yet.
  virtual const FetchedTile* wait_shadow(uint64_t& shift_start, bool wait) = 0;
  // The matrix unit made the shadow tile active with a matmul starting at t0 (its wavefront),
  // at cycle `at` (now, or later for a matmul started ahead of simulated time).
  virtual void switched(uint64_t t0, uint64_t at) = 0;
  // Whether the fetch station can do nothing before a later switch (MatrixUnit::may_start_ahead).
  virtual bool quiet() const = 0;
  // The matrix unit is done with that matmul's start: the fetch station may go on from there.
  virtual void resume_fetch() = 0;
};

// The weight path: the weight fetch station (read_weights, decoupled: done once its tile
// requests are sent), the off-chip weight memory (a bandwidth-latency pipe), the weight FIFO
// (weight_fifo_tiles slots, each held from request until its tile has shifted out) and the
// shadow slot of the array (a tile shifts in one row per cycle, top row first).
//
// The shift needs no process of its own: the FIFO's head tile starts shifting at
// s = max(its landing, the cycle the slot is free), both known as soon as the tile was requested
// and the previous shadow tile switched into the array, so the path decides s at that moment
// (decide_shift) and the state follows it in time: the slot reads as loaded from s
// (shadow()), the head's FIFO slot frees at s + array_rows (settle()). Processes waiting on
// either are woken at that cycle, as a shift process waiting for it would have woken them.
class WeightPath : public sc_core::sc_module, public Station, public WeightSource, public MatrixRetire {
 public:
  WeightPath(sc_core::sc_module_name name, Context& ctx);
  StationQueue& queue() override { return queue_; }
  const FetchedTile* wait_shadow(uint64_t& shift_start, bool wait) override;
  void switched(uint64_t t0, uint64_t at) override;
  bool quiet() const override;
  void resume_fetch() override;
  // rw's the station completed ahead of simulated time, completed at their ends when a unit looks
  // (Context::retire_weights) or waits (MatrixRetire, as the matrix unit's matmuls).
  void retire_due() override;
  void wake_at_next_end() override;
  void drain() override;
  bool drain_pending() const;  // the station ran ahead of where simulated time stopped (drain)
  void abort_drain();          // the run aborted: simulated time runs on to the station's next wait
  void reset();
  uint64_t last_landing() const { return last_landing_; }
  // The stepped engine's hook, set for its runs only (the other engines have no use for a
  // shift's event): a tile begins shifting into the shadow at cycle s (called at s).
  std::function<void(const FetchedTile&, uint64_t s)> on_shift;
  // The debugger's view at cycle `at`: requested tiles in order (the front one shifts first; it
  // stays here until its shift ends), the shadow slot (null when empty) and when its shift began.
  // `at` is the session's cycle, not now(): a failed run's processes unwind with simulated time
  // running on past it, and a shift decided ahead of time may begin after it.
  std::vector<FetchedTile> fifo(uint64_t at) const;
  const FetchedTile* shadow(uint64_t at) const {
    return shadow_decided_ && at >= shadow_shift_start_ ? &shadow_ : nullptr;
  }
  uint64_t shadow_shift_start() const { return shadow_shift_start_; }

 private:
  void fetch();  // the weight fetch station (a thread: one fetch_go(false) per run)
  bool fetch_go(bool ahead_of_time);
  void decide_shift(uint64_t now);  // the shadow slot is free and the FIFO holds a tile: when it shifts
  void settle(uint64_t at);  // frees the head's slot if its shift has ended by cycle `at`
  void shift_hook();    // a method at a shift's start: on_shift and the trace (when either wants it)
  void retire();        // a method: completes rw's at their ends while a unit waits (wake_at_next_end)
  void catch_up();      // a method: simulated time reaches where the station ran ahead (drain)
  void notify_retire();
  Context& ctx_;
  StationQueue queue_;
  std::deque<FetchedTile> fifo_;  // requested tiles, in order; front is the next to shift
  uint64_t slots_used_ = 0, mem_free_ = 0, last_landing_ = 0;
  bool shadow_decided_ = false;  // shadow_ shifts (or has shifted) in from shadow_shift_start_
  FetchedTile shadow_;
  uint64_t shadow_shift_start_ = 0, shadow_free_at_ = 0;
  bool release_pending_ = false;  // the FIFO's front is shadow_, its slot frees at release_at_
  uint64_t release_at_ = 0;
  uint64_t xfer_bytes_ = 0, xfer_cycles_ = 0;  // the last transfer_cycles asked (tiles repeat sizes)
  size_t next_use_ = 0;                        // where the next tile's use likely is in ctx_.tile_uses
  // The station's place (fetch_go): taking the next rw, requesting rw cur_'s tile tile_ (at cycle
  // v_, the last request at request_, the rw taken at start_), or ending cur_ at end_.
  enum class Phase : uint8_t { next, tiles, ending };
  Phase phase_ = Phase::next;
  uint64_t cur_ = 0, tile_ = 0, v_ = 0, request_ = 0, start_ = 0, end_ = 0;
  TileBox box_;
  // The station's thread waits on slot_event_ for a switch to decide the FIFO head's shift
  // (parked_); a switch then runs it on from the matrix unit's process (resume_fetch) instead of
  // waking it (resume_pending_ until then; ahead_ while it runs there).
  bool parked_ = false, resume_pending_ = false, ahead_ = false;
  std::deque<std::pair<uint64_t, uint64_t>> ending_;  // (rw, end) completed ahead, ends in order
  std::deque<uint64_t> ahead_waits_;  // the cycles the thread would have woken at meanwhile, in order
  bool wake_ = false, drain_ = false;
  Waitable slot_event_, shadow_event_;
  sc_core::sc_event hook_event_, retire_event_, catch_up_event_;
};

// The matrix unit: the systolic data setup, the array (active and shadow tiles) and the
// accumulators it writes. A matmul of B vectors starting at t0 streams its inputs during
// [t0, t0 + B*D) and writes its last accumulator row at t0 + B*D + rows + cols - 2, where D is
// the cycles per vector (1; with a gather of several UB rows, pack.h vector_cycles): vector v
// is read from the UB during [t0 + v*D, t0 + v*D + D) and enters the array in the last of them.
// With 16-bit inputs (setcfg mm_in_hi) B counts both byte-plane passes' vectors (2 x rows x
// repeat); the accumulators add each pass's sums shifted by its plane's weight (pack.h).
class MatrixUnit : public sc_core::sc_module, public Station, public MatrixRetire {
 public:
  sc_core::sc_port<WeightSource> weights;
  MatrixUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards);
  StationQueue& queue() override { return queue_; }
  void retire_due() override;
  void wake_at_next_end() override;
  void drain() override;
  bool retire_pending() const { return !retiring_.empty(); }
  // `array`: the stepped engine's array for this run (RunOptions::array), or null for the
  // built-in SystolicArray.
  void reset(ArrayModel* array);
  void shift_started(const FetchedTile& tile, uint64_t s);  // stepped engine
  // The debugger's view: the active tile (data null before the first switch), the built-in
  // array when the stepped engine steps it (else null), the matmuls in the array (stepped).
  struct InFlight {
    uint64_t index, t0, vectors, written;  // written: accumulator values (vectors x cols in all)
    uint64_t period = 1;                    // cycles per vector (D above)
  };
  // Stepped engine: steps the cycles before `until` that the array skipped while it was empty, as
  // far as a skewed shift's delayed shadow writes are pending (ArrayModel::shift_pending), so that
  // its registers are as every cycle up to until - 1 left them. The engine does this lazily (before
  // the array is next used, and in its thread at the run's end); the debugger calls it before it
  // shows the built-in array (stepped_array()), whose step() needs no SystemC thread.
  void catch_up(uint64_t until);
  const FetchedTile& active_tile() const { return active_; }
  const SystolicArray* stepped_array() const {
    return ctx_.engine == Engine::stepped && array_ == own_array_.get() ? own_array_.get() : nullptr;
  }
  std::vector<InFlight> in_flight() const;

 private:
  struct Stream;  // a matmul in the array (stepped engine)
  void run();     // takes matmuls from the queue, decides t0 (serve() per run)
  void serve();
  void retire();  // fast/timing (a method): completes matmuls at their closed-form end, when asked
  void notify_retire();  // retire_event_ at the front matmul's end
  void step();    // stepped: moves every register every cycle while the array has work
  void step_run();
  bool step_cycle(uint64_t c);  // false: the run failed
  bool start_matmul(uint64_t index, uint64_t t0);
  bool may_start_ahead(uint64_t index, uint64_t t0) const;
  bool activation_waits(uint64_t index, uint64_t t0) const;
  void fast_pass(uint64_t index, uint64_t pass, bool add);  // fast engine: one byte-plane pass
  void account_wait(uint64_t from, uint64_t landed, uint64_t t0);
  Context& ctx_;
  Hazards& hazards_;
  StationQueue queue_;
  FetchedTile active_;
  // isa::tile_use_of(active_'s bytes).spans where the program gives no meta.tile_uses, computed
  // once a gathering matmul needs it: a scan of every row would cost the timing engine more than
  // simulating a dense tile's matmul.
  std::optional<uint64_t> active_spans_;
  PackedWeights packed_;  // fast engine: the active tile, packed for the GEMM
  std::vector<uint8_t> expanded_;  // fast engine: a partial tile zero-filled to the array's size
  std::vector<uint8_t> gathered_;  // fast engine: a gathering matmul's input vectors
  std::vector<int32_t> scratch_;   // fast engine: a shifted byte-plane pass's column sums
  uint64_t port_free_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> retiring_;  // (index, end), ends in order
  sc_core::sc_event retire_event_;
  bool wake_ = false;   // a unit waits for the next end: retire_event_ fires there
  bool drain_ = false;  // every end fires retire_event_ (MatrixRetire::drain)
  Waitable work_event_;
  // stepped engine
  std::unique_ptr<SystolicArray> own_array_;
  ArrayModel* array_ = nullptr;  // own_array_ or the run's RunOptions::array
  std::deque<std::shared_ptr<Stream>> streams_;
  std::deque<std::pair<FetchedTile, uint64_t>> shifts_;
  std::vector<int16_t> left_, shadow_row_;
  std::vector<uint8_t> left_flags_;
  uint64_t next_step_ = 0;  // the cycle after the last one the array was stepped in
  uint64_t busy_until_ = 0;
};

// The activation unit: activate (accumulators -> function -> UB), vector and pool.
class ActivationUnit : public sc_core::sc_module, public Station {
 public:
  ActivationUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards);
  StationQueue& queue() override { return queue_; }
  void reset() { queue_.reset(ctx_.arch.station_queue_depth); }

 private:
  void run();
  void serve();
  uint64_t duration(uint64_t index) const;
  Context& ctx_;
  Hazards& hazards_;
  StationQueue queue_;
};

// The control unit: issues the program in order, one instruction per issue_cycles, into the
// stations' queues (stalling while a queue is full); runs nop/tag/setcfg itself; holds issue
// at sync/barrier/halt until the named units are idle.
//
// Issue stalled on a full queue resumes in the cycle that queue's station takes an
// instruction from it (popped(), called by the station): the issue that follows runs there,
// in the station's process, up to the next full queue, sync, barrier or halt; only then does
// the control unit's own process take over (a sync waits for units, which a station cannot do).
class ControlUnit : public sc_core::sc_module, public PopListener {
 public:
  sc_core::sc_port<Station> host, weights, matrix, activation;
  ControlUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards, WeightPath& weight_path);
  void popped(const StationQueue& queue, uint64_t at) override;
  bool may_issue_at(uint64_t at) const override;
  bool waits_for_pop() const override { return waiting_ != nullptr; }
  bool wakes_before(uint64_t t0) const override;
  void reset();

 private:
  enum class Stop { queue_full, control, failed };
  void run();
  void issue_all();
  Stop issue_ahead();  // issues from next_ until a full queue, a sync/barrier/halt or a failure
  bool wait_idle(uint64_t unit_mask, bool weights_landed);
  bool host_launch(uint64_t index, uint64_t& end);  // int: false: the run ended
  void note_hold(uint64_t index, uint64_t from, uint64_t to, HoldKind kind);
  Context& ctx_;
  Hazards& hazards_;
  WeightPath& weight_path_;
  uint64_t t_ = 0;     // the cycle the next instruction issues at (see issue_all)
  uint64_t next_ = 0;  // the next instruction to issue
  const StationQueue* waiting_ = nullptr;  // issue waits for room in this queue
  bool failed_ = false;                    // issue failed (in a station's process)
  Waitable resume_;                        // issue_ahead stopped in a station's process
};

}  // namespace tpusim::sim
