// What the trace writers show, derived once from a run's timeline and its recording (trace.h):
// per-instruction layers and units, the matrix cycles by kind (the Table 3 counters as spans),
// tiles, and the counter series. Internal to sim/; the writers are trace_chrome.cpp,
// trace_vcd.cpp and trace_log.cpp.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "sim/pack.h"
#include "sim/trace.h"

namespace tpusim::sim {

// A cycle of the matrix unit's accounting (docs/timing.md, Counters): every cycle of a run is
// one of active, weight stall, weight shift or non-matrix; RAW and input stalls and host launches
// are parts of non-matrix.
enum class MatrixKind : uint8_t { active, weight_stall, weight_shift, raw_stall, input_stall, host_launch };
inline constexpr std::array<std::string_view, 6> kMatrixKindNames = {
    "array active", "weight stall", "weight shift", "RAW stall", "input stall", "host launch"};

struct MatrixSpan {
  MatrixKind kind;
  uint64_t begin, end;
  uint64_t index;  // the matmul (active, weight stall/shift) or the sync (RAW, input) it belongs to
};

// A counter's value from `cycle` on.
struct Sample {
  uint64_t cycle;
  int64_t value;
};

// The counter series a trace shows, in this order.
enum class Series : uint8_t { fifo_slots, fifo_landed, ub_in_use, ub_footprint };
inline constexpr std::array<std::string_view, 4> kSeriesNames = {
    "weight FIFO slots in use", "weight FIFO tiles landed", "UB rows in use", "UB rows touched"};

class TraceModel {
 public:
  TraceModel(const TraceInput& in, const TraceSelection& selection);

  const TraceInput& in;
  const TraceSelection& sel;
  const isa::Program& program;
  const Arch& arch;
  const std::vector<InstructionTiming>& timeline;
  uint64_t cycles;  // the run's length

  const isa::Instruction& inst(uint64_t i) const { return program.code[i]; }
  isa::Unit unit(uint64_t i) const;
  std::string text(uint64_t i) const;          // the disassembled instruction
  const std::string* layer(uint64_t i) const;  // its layer name, or null
  uint64_t vectors(uint64_t i) const;          // a matmul's B = rows x repeat
  uint64_t stream_cycles(uint64_t i) const;    // cycles a matmul streams: B x cycles per vector (pack.h)
  const PackTimeline pack;                     // the packing registers each instruction saw
  // A tile's number within its read_weights.
  uint64_t tile_in_rw(uint64_t tile) const { return tile_in_rw_[tile]; }

  // The selection: [begin, end) overlaps the window (a zero-length span: lies in it) and
  // instruction `i` passes the filter (kNoCycle: belongs to no instruction, window only).
  bool in_window(uint64_t begin, uint64_t end) const;
  bool keep(uint64_t i, uint64_t begin, uint64_t end) const { return in_window(begin, end) && passes(i); }
  bool passes(uint64_t i) const;

  std::vector<MatrixSpan> matrix_spans;       // sorted by begin, disjoint
  std::array<std::vector<Sample>, 4> series;  // by Series; each starts with a sample at cycle 0

 private:
  void build_layers();
  void build_matrix_spans();
  void build_series();
  std::vector<uint32_t> layer_of_;  // per instruction: index into layer_names_, or UINT32_MAX
  std::vector<std::string> layer_names_;
  std::vector<uint64_t> tile_in_rw_;
  std::vector<bool> opcode_kept_, layer_kept_;
};

// Sorted (cycle, delta) pairs -> a step series: one sample per cycle whose sum changes it,
// starting with (0, 0).
std::vector<Sample> step_series(std::vector<std::pair<uint64_t, int64_t>> deltas);

// Simulated time at `cycle` in whole nanoseconds, and as the Chrome trace writes it, in
// microseconds from those nanoseconds. Perfetto reads a slice's `ts` and `dur` as nanoseconds,
// rounding each on its own (llround(x * 1000)); from unrounded microseconds a slice's end could
// land a nanosecond past the start of the next slice on its track, and Perfetto drops a slice
// that overlaps another without nesting in it. From whole nanoseconds, ts + dur is exactly the
// next slice's ts. (A monotonic map of cycles: slices that nest or touch in cycles still do.)
inline int64_t cycle_ns(uint64_t cycle, double clock_mhz) {
  return std::llround(double(cycle) * 1000.0 / clock_mhz);
}
inline double cycle_us(uint64_t cycle, double clock_mhz) {
  return double(cycle_ns(cycle, clock_mhz)) / 1000.0;
}

}  // namespace tpusim::sim
