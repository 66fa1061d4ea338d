// Traces of a run (docs/traces.md): what the units report while they run, and the three writers
// built on it: Chrome trace-event JSON (Perfetto, chrome://tracing), VCD waveforms (GTKWave) and
// a plain-text event log.
//
// Recording is opt-in per run: RunOptions::trace points at a TraceRecorder, and every hook in the
// units is one line behind a null check (`if (ctx_.trace) ctx_.trace->...`), so a run without a
// recorder pays one predictable branch per tile or instruction. The recorder keeps only what the
// run's timeline (RunResult::timeline) does not already say: when each weight tile was requested,
// crossed the memory bus, landed, shifted into the shadow slot; when a matmul waited for its tile;
// when issue was held by a sync; and, on the stepped engine, the registers of chosen cells.
// Everything else (instruction slices, UB use, stall slices) is derived after the run, the same way
// on every engine, so the three engines give the same trace (cell registers need `stepped`).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"

namespace tpusim::sim {

class ArrayModel;

inline constexpr uint64_t kNoCycle = std::numeric_limits<uint64_t>::max();

// A block of array cells, rows [row0, row1) x columns [col0, col1).
struct CellRange {
  uint64_t row0 = 0, row1 = 0, col0 = 0, col1 = 0;
  bool operator==(const CellRange&) const = default;
};

// The registers recorded for each traced cell, in this order (SystolicArray's accessors).
inline constexpr std::array<std::string_view, 5> kCellRegisters = {"weight", "shadow", "x", "x_valid",
                                                                   "psum"};

// Why issue was held (TraceRecorder::sync_wait): a sync naming `act` (RAW), one naming `host` only
// (input), or an `int` for the host's launch of the next segment.
enum class HoldKind : uint8_t { raw, input, host_launch };

class TraceRecorder {
 public:
  // ---- hooks: the units call these during the run -------------------------------------------
  // read_weights `rw` requested a tile at `request`; it crossed the weight memory bus during
  // [xfer_begin, xfer_end) and is usable in the FIFO from `landed`.
  void tile_requested(uint64_t rw, uint64_t request, uint64_t xfer_begin, uint64_t xfer_end,
                      uint64_t landed) {
    tiles.push_back({rw, request, xfer_begin, xfer_end, landed, kNoCycle, kNoCycle});
  }
  // The FIFO's head tile (tiles shift in request order) shifts into the shadow slot during [begin, end).
  void tile_shift(uint64_t begin, uint64_t end) {
    if (shifted_ < tiles.size()) {
      tiles[shifted_].shift_begin = begin;
      tiles[shifted_].shift_end = end;
    }
    ++shifted_;
  }
  // Matmul `index` was ready at `from` and started at t0: weight stall in [from, landed), weight
  // shift in [landed, t0) (docs/timing.md, Counters).
  void weight_wait(uint64_t index, uint64_t from, uint64_t landed, uint64_t t0) {
    weight_waits.push_back({index, from, landed, t0});
  }
  // Issue was held by sync `index` during [begin, end), waiting on `act` (raw) or on `host` only,
  // or by int `index` for the host's launch of the next segment.
  void sync_wait(uint64_t index, uint64_t begin, uint64_t end, HoldKind kind) {
    sync_waits.push_back({index, begin, end, kind});
  }
  // The stepped engine stepped the array in `cycle`: the traced cells' registers now hold what
  // they hold during cycle + 1 (read through ArrayModel::registers: the C++ array's, or the
  // co-simulated RTL array's own registers).
  void array_step(uint64_t cycle, const ArrayModel& array);

  // ---- set-up ---------------------------------------------------------------------------------
  // Record the registers of these cells (stepped engine). Ranges outside the array are clipped.
  void record_cells(std::vector<CellRange> ranges) { cell_ranges = std::move(ranges); }
  // At most this many cell changes are kept (0: no limit): a run past it stops recording cells
  // and sets cells_stopped_at, so that memory stays bounded; the caller refuses the VCD then.
  uint64_t max_cell_changes = 0;

  // ---- what was recorded ----------------------------------------------------------------------
  struct Tile {
    uint64_t rw, request, xfer_begin, xfer_end, landed, shift_begin, shift_end;  // kNoCycle: never
  };
  struct WeightWait {
    uint64_t index, from, landed, t0;
  };
  struct SyncWait {
    uint64_t index, begin, end;
    HoldKind kind;
  };
  // A traced cell's register took `value` from cycle `cycle` on. `signal` = cell number (in
  // cell_ranges order, row-major within a range) x kCellRegisters.size() + register.
  struct CellChange {
    uint64_t cycle;
    uint32_t signal;
    int32_t value;
  };
  std::vector<Tile> tiles;  // in request order (= FIFO order)
  std::vector<WeightWait> weight_waits;
  std::vector<SyncWait> sync_waits;
  std::vector<CellRange> cell_ranges;
  std::vector<CellChange> cell_changes;
  bool cells_seen = false;  // array_step was called with an inspectable array
  uint64_t cells_stopped_at = kNoCycle;  // the cycle max_cell_changes was reached

 private:
  size_t shifted_ = 0;
  std::vector<int32_t> cell_values_;  // the traced registers' current values
};

// How far a run has got, for a progress display on another thread (RunOptions::progress):
// station instructions completed and the latest completion cycle.
struct RunProgress {
  std::atomic<uint64_t> completed{0}, cycle{0};
  void complete(uint64_t end) {
    completed.fetch_add(1, std::memory_order_relaxed);
    cycle.store(end, std::memory_order_relaxed);
  }
};

// What the writers read: the program, its machine, the run's result and its recording.
struct TraceInput {
  const isa::Program* program = nullptr;
  const Arch* arch = nullptr;
  Engine engine = Engine::fast;
  const RunResult* result = nullptr;
  const TraceRecorder* recorder = nullptr;
  std::string workload;  // shown as the trace's process name
};

// Which part of a run a trace shows (--trace-window, --trace-filter). Instruction slices and the
// events that belong to an instruction (its tiles, its stalls) are kept when they overlap
// [begin, end) and the instruction passes the filter; counters and waveforms are windowed only.
struct TraceSelection {
  uint64_t begin = 0, end = kNoCycle;
  std::vector<isa::Opcode> opcodes;  // empty: every opcode
  std::vector<std::string> layers;   // empty: every layer
};
// The layers of a program: each `tag` instruction (its index) and the name of the layer it
// begins, meta.layers[tag] when the program has that list (compiled models do), else "tag N".
struct LayerTag {
  uint64_t index;
  std::string name;
};
std::vector<LayerTag> layer_tags(const isa::Program& program);

// "START:END" in cycles, either side may be empty ("1000:", ":5000"). Throws InputError naming
// `flag` (the option the user typed: tpusim view calls it --window).
void parse_trace_window(const std::string& text, TraceSelection& selection,
                        std::string_view flag = "--trace-window");
// Comma-separated mnemonics (`matmul,act`) and `layer=NAME` terms. Mnemonics must exist; layer
// names must be layers of the program (layer_tags). Throws InputError.
void parse_trace_filter(const std::string& text, const isa::Program& program, TraceSelection& selection);

// VCD scope (--vcd-scope): `units`, `array` (every cell), `cells=R0-R1xC0-C1` (inclusive, or one
// cell `cells=RxC`), comma-separated. Empty text: units, plus every cell for a stepped run of an
// array of at most kDefaultVcdCells cells. Throws InputError (cells on another engine, too many).
struct VcdScope {
  bool units = true;
  std::vector<CellRange> cells;
};
inline constexpr uint64_t kDefaultVcdCells = 256;
inline constexpr uint64_t kMaxVcdCells = 4096;
VcdScope parse_vcd_scope(const std::string& text, const Arch& arch, Engine engine);

void write_chrome_trace(std::ostream& out, const TraceInput& in, const TraceSelection& selection);
// `scope.cells`: empty, or the ranges the recorder recorded (TraceRecorder::record_cells).
void write_vcd(std::ostream& out, const TraceInput& in, const TraceSelection& selection,
               const VcdScope& scope);
void write_event_log(std::ostream& out, const TraceInput& in, const TraceSelection& selection);

}  // namespace tpusim::sim
