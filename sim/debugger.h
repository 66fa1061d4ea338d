// The stepping debugger's core: a run on the `stepped` engine that advances under control and
// can be looked at between cycles. `tpusim debug` (tools/debug*.cpp, docs/debugger.md) is the
// command line on top of it.
//
// What "at cycle T" means: the session stops after everything the simulator does at T. The
// array's registers and the accumulators are as the clock edge ending cycle T-1 left them (the
// stepped engine moves cycle T-1's registers at T); instructions that issue or start at T have
// done so, and DMA and activation instructions move their data when they start
// (docs/timing.md). A session opens at cycle 0 (so reached), advances cycle by cycle (cycles in
// which nothing can happen are skipped, as the machine skips them) and ends at the halt with
// exactly the RunResult simulate() gives on the stepped engine.
//
// Going back: rewind(T) returns to an earlier cycle T by running the program again from cycle 0
// to T (the machine is deterministic: the same program and architecture give the same state at
// every cycle). The replay runs the machine to T in one call, without stopping at the cycles in
// between, so it costs what `tpusim run --engine stepped` costs up to T.
//
// One run per process at a time (the machine is elaborated once): a second DebugSession while
// one is alive, or simulate() during a session, throws std::logic_error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "sim/state.h"
#include "sim/systolic_array.h"

namespace tpusim::sim {

class MachineRun;
class TraceRecorder;

// An instruction's life as the debugger reports it. Control instructions (nop, tag, setcfg,
// sync, barrier, halt) start when they issue and end when issue moves on.
enum class EventKind { issue, start, end };
std::string_view event_name(EventKind kind);
struct InstructionEvent {
  uint64_t cycle = 0, index = 0;
  EventKind kind = EventKind::issue;
  bool operator==(const InstructionEvent&) const = default;
};

// Where an instruction is at the session's cycle: not yet issued, issued and waiting (in its
// station's queue; a control instruction: issued, not yet started), running, or done.
enum class Phase { not_issued, queued, running, done };
std::string_view phase_name(Phase phase);

// One station of the pipeline (or the control unit) at the session's cycle.
struct StationView {
  isa::Unit unit = isa::Unit::control;
  std::vector<uint64_t> running;  // started, not ended (several only in the matrix unit)
  struct Queued {
    uint64_t index, available;  // available: the cycle the station may start it
  };
  std::vector<Queued> queued;  // issued, not started, in order
  std::string blocked;         // why it waits (the machine's own words), or empty
};

// A weight tile in the weight path.
struct TileView {
  uint64_t waddr = 0;   // its weight-memory address
  uint64_t number = 0;  // its number in the weight image (DebugSession::tile_number)
  uint64_t landed = 0;  // the cycle it is (or was) usable in the weight FIFO
  bool is_unsigned = false;
  TileUse use;  // its nonzero box
  uint32_t rows = 0, cols = 0;  // a partial tile's stored box (rw tile_rows x tile_cols); 0: full
};
struct WeightPathView {
  std::vector<TileView> fifo;      // requested tiles in order; the front one shifts next (or now)
  std::optional<TileView> shadow;  // the shadow slot: shifting or shifted in, not yet switched to
  uint64_t shift_start = 0;        // when the shadow tile's shift began (row r: cycle start + r)
  std::optional<TileView> active;  // the tile the last matmul with `switch` made active
};

// A matmul in the array: its vectors enter during [t0, t0 + vectors); `written` accumulator
// values (of vectors x array_cols) have arrived.
struct MatmulView {
  uint64_t index = 0, t0 = 0, vectors = 0, written = 0;
  uint64_t period = 1;  // cycles per vector: vector v enters at t0 + v*period + period-1 (gather, pack.h)
};

class DebugSession {
 public:
  // Checks the program as simulate() does (throws SimError, InputError), begins the run and
  // reaches cycle 0. `program` must outlive the session. `trace`: a recorder the run reports to
  // (trace.h; not owned, may be null), cleared (its cell ranges kept) whenever the run begins
  // again, so that it holds the recording of the run the session is in.
  DebugSession(const isa::Program& program, const Arch& arch, TraceRecorder* trace = nullptr);
  ~DebugSession();  // an unfinished run is abandoned; the machine is ready for another
  DebugSession(const DebugSession&) = delete;
  DebugSession& operator=(const DebugSession&) = delete;

  const isa::Program& program() const { return program_; }
  const Arch& arch() const { return arch_; }
  // The number of the tile at weight address `waddr` in the image: its place in meta.tile_uses
  // (partial tiles are stored compactly, so tiles are not a fixed size apart; isa::tile_index_at),
  // else waddr / the tile's bytes. The image's tile count, and the address of tile `n` (nullopt
  // past the image's tiles).
  uint64_t tile_number(uint64_t waddr) const;
  uint64_t tile_count() const;
  std::optional<uint64_t> tile_address(uint64_t n) const;
  uint64_t code_size() const { return code_size_; }  // instructions up to and including halt
  uint64_t cycle() const { return cycle_; }
  bool over() const { return over_; }
  const std::optional<RunResult>& result() const { return result_; }  // once halted
  const std::optional<std::string>& error() const { return error_; }  // once failed (SimError text)
  std::optional<uint64_t> error_index() const { return error_index_; }
  const std::vector<InstructionEvent>& first_events() const { return first_events_; }  // cycle 0's

  // Advances to cycle `until` (inclusive) or until `stop`, asked after each cycle reached with
  // that cycle's events, returns true, or until the run ends. Returns every event on the way.
  using StopAt = std::function<bool(const std::vector<InstructionEvent>& events)>;
  std::vector<InstructionEvent> advance(uint64_t until, const StopAt& stop = {});
  // Back to cycle `target` (at most cycle()): the run begins again and replays to `target`.
  // Afterwards every view is what a fresh session advanced to `target` shows.
  void rewind(uint64_t target);
  // Runs to the end of the run without stopping (for writing a whole run's traces).
  void finish_run();

  // --- the machine at cycle() ----------------------------------------------------------------
  Phase phase(uint64_t index) const;
  // What is known of an instruction's issue, start and end by now (unknown: nullopt).
  std::optional<uint64_t> issued_at(uint64_t index) const;
  std::optional<uint64_t> started_at(uint64_t index) const;
  std::optional<uint64_t> ended_at(uint64_t index) const;
  // The control unit's position: the last instruction issued (0 before any).
  uint64_t current() const;
  std::vector<StationView> stations() const;  // control, host, weight fetch, matrix, activation
  WeightPathView weight_path() const;
  std::vector<MatmulView> matmuls() const;
  const MachineState& state() const;
  const SystolicArray& array() const;

 private:
  void begin();
  void collect(std::vector<InstructionEvent>& out);
  void end_run();
  const std::vector<InstructionTiming>& timeline() const;
  bool issue_known(uint64_t i) const;
  bool station_started(uint64_t i) const;
  uint64_t next_record() const;

  const isa::Program& program_;
  Arch arch_;
  TraceRecorder* trace_ = nullptr;
  uint64_t code_size_ = 0;
  std::unique_ptr<MachineRun> run_;
  uint64_t cycle_ = 0;
  bool over_ = false;
  std::optional<RunResult> result_;
  std::optional<std::string> error_;
  std::optional<uint64_t> error_index_;
  std::vector<InstructionEvent> first_events_;
  // Event tracking: instructions below issue_cursor_ have issued; pending_ have issued and not
  // started; running_ have started and not ended.
  uint64_t issue_cursor_ = 0;
  std::vector<uint64_t> pending_, running_;
};

}  // namespace tpusim::sim
