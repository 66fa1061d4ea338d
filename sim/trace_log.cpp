// The plain-text event log (docs/traces.md): one line per event, in cycle order:
//   CYCLE  UNIT  EVENT  INDEX  WHAT
// e.g. "      7  matrix        start               3  matmul ub=0, acc=0, rows=8, switch".
// Within a cycle, endings come before beginnings, then program order.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <ostream>

#include "sim/trace_model.h"

namespace tpusim::sim {

namespace {

struct Line {
  uint64_t cycle;
  int rank;  // order within a cycle: ends (0) before issues (1) before starts and begins (2)
  uint64_t index;
  std::string_view unit, event;
  std::string what;
};

class LogWriter {
 public:
  explicit LogWriter(const TraceModel& m) : m_(m) {}

  std::vector<Line> lines() {
    instructions();
    tiles();
    stalls();
    std::stable_sort(lines_.begin(), lines_.end(), [](const Line& a, const Line& b) {
      return a.cycle != b.cycle ? a.cycle < b.cycle : a.rank < b.rank;
    });
    return std::move(lines_);
  }

 private:
  void add(uint64_t cycle, int rank, uint64_t index, std::string_view unit, std::string_view event,
           std::string what) {
    if (m_.in_window(cycle, cycle)) lines_.push_back({cycle, rank, index, unit, event, std::move(what)});
  }

  void instructions() {
    for (uint64_t i = 0; i < m_.timeline.size(); ++i) {
      if (!m_.passes(i)) continue;
      const InstructionTiming& t = m_.timeline[i];
      const std::string text = m_.text(i);
      const isa::Unit u = m_.unit(i);
      const std::string_view unit = isa::kUnitNames[size_t(u)];
      add(t.issue, 1, i, "control", "issue", text);
      if (u != isa::Unit::control) add(t.start, 2, i, unit, "start", text);
      if (m_.inst(i).opcode == isa::Opcode::matmul && m_.inst(i)[isa::Field::switch_weights])
        add(t.start, 2, i, unit, "tile switched", text);
      add(t.end, 0, i, unit, "end", text);
    }
  }

  void tiles() {
    const auto& tiles = m_.in.recorder->tiles;
    for (size_t g = 0; g < tiles.size(); ++g) {
      const TraceRecorder::Tile& t = tiles[g];
      if (!m_.passes(t.rw)) continue;
      const std::string what = fmt::format("tile {} (tile {} of rw {})", g, m_.tile_in_rw(g), t.rw);
      add(t.request, 2, t.rw, "weight_fetch", "tile requested", what);
      add(t.xfer_begin, 2, t.rw, "weight_memory", "transfer begin", what);
      add(t.xfer_end, 0, t.rw, "weight_memory", "transfer end", what);
      add(t.landed, 2, t.rw, "weight_fifo", "tile landed", what);
      if (t.shift_begin != kNoCycle) add(t.shift_begin, 2, t.rw, "weight_fifo", "shift begin", what);
      if (t.shift_end != kNoCycle) add(t.shift_end, 0, t.rw, "weight_fifo", "tile shifted", what);
    }
  }

  void stalls() {
    for (const MatrixSpan& s : m_.matrix_spans) {
      if (s.kind == MatrixKind::active || !m_.passes(s.index)) continue;
      const std::string_view unit = s.kind == MatrixKind::raw_stall || s.kind == MatrixKind::input_stall ||
                                            s.kind == MatrixKind::host_launch
                                        ? std::string_view("control")
                                        : std::string_view("matrix");
      const std::string_view name = kMatrixKindNames[size_t(s.kind)];
      const std::string text = m_.text(s.index);
      add(s.begin, 2, s.index, unit, names_.emplace_back(std::string(name) + " begin"), text);
      add(s.end, 0, s.index, unit, names_.emplace_back(std::string(name) + " end"), text);
    }
  }

  const TraceModel& m_;
  std::vector<Line> lines_;
  std::deque<std::string> names_;  // event names built here (Line holds views)
};

}  // namespace

void write_event_log(std::ostream& out, const TraceInput& in, const TraceSelection& selection) {
  const TraceModel model(in, selection);
  LogWriter writer(model);
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "# {} on {} ({} engine), {} cycles at {} MHz\n", in.workload,
                 in.arch->name, engine_name(in.engine), in.result->cycles, in.arch->clock_mhz);
  fmt::format_to(std::back_inserter(buf), "# {:>8}  {:<13} {:<20}{:>6}  {}\n", "cycle", "unit", "event",
                 "index", "instruction or tile");
  for (const Line& l : writer.lines()) {
    fmt::format_to(std::back_inserter(buf), "{:>10}  {:<13} {:<20}{:>6}  {}\n", l.cycle, l.unit, l.event,
                   l.index, l.what);
    if (buf.size() > (1 << 20)) {
      out.write(buf.data(), std::streamsize(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), std::streamsize(buf.size()));
}

}  // namespace tpusim::sim
