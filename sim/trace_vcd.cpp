// VCD waveforms (IEEE 1364 value change dump; docs/traces.md): GTKWave opens them. Written from
// the trace model, not sampled: each signal changes exactly at the cycles the run's timeline and
// recording say. Time is simulated time in picoseconds (cycle x the clock period); module `tpu`
// holds one scope per unit, and `tpu.array` one scope per traced cell (stepped engine).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <systemc>
#include <unordered_map>

#include "sim/trace_model.h"

namespace tpusim::sim {

namespace {

constexpr int64_t kX = INT64_MIN;  // unknown / no instruction

struct Signal {
  std::string scope, name;
  int width;
};

struct Change {
  uint64_t cycle;
  uint32_t signal;
  int64_t value;
};

// VCD identifier codes: printable ASCII '!' to '~', base 94.
std::string vcd_id(uint32_t n) {
  std::string id;
  do {
    id += char('!' + n % 94);
    n /= 94;
  } while (n);
  return id;
}

void put_value(fmt::memory_buffer& buf, const Signal& s, int64_t v, const std::string& id) {
  auto out = std::back_inserter(buf);
  if (s.width == 1) {
    fmt::format_to(out, "{}{}\n", v == kX ? 'x' : (v ? '1' : '0'), id);
    return;
  }
  if (v == kX) {
    fmt::format_to(out, "bx {}\n", id);
    return;
  }
  const uint64_t bits = s.width >= 64 ? uint64_t(v) : uint64_t(v) & ((uint64_t{1} << s.width) - 1);
  fmt::format_to(out, "b{:b} {}\n", bits, id);  // leading zeros dropped: VCD extends with 0
}

class VcdBuilder {
 public:
  VcdBuilder(const TraceModel& m, const VcdScope& scope) : m_(m), scope_(scope) {}

  void build() {
    if (scope_.units) {
      control();
      stations();
      weight_path();
      matrix();
      ub();
    }
    if (!scope_.cells.empty()) cells();
  }

  std::vector<Signal> signals;
  std::vector<int64_t> initial;
  std::vector<Change> changes;  // per signal in time order; signals interleaved

 private:
  uint32_t add(const std::string& scope, const std::string& name, int width, int64_t init) {
    signals.push_back({scope, name, width});
    initial.push_back(init);
    return uint32_t(signals.size() - 1);
  }
  void set(uint64_t cycle, uint32_t s, int64_t v) { changes.push_back({cycle, s, v}); }
  // A signal that is `on` during each span (sorted, disjoint), `off` elsewhere.
  template <typename Spans, typename Value>
  void spans(uint32_t s, const Spans& list, Value value, int64_t off) {
    for (const auto& x : list) {
      set(x.begin, s, value(x));
      set(x.end, s, off);
    }
  }
  struct Busy {
    uint64_t begin, end, index;
  };

  void control() {
    const uint32_t issued = add("control", "issued", 32, kX);
    const uint32_t held = add("control", "sync_wait", 1, 0);
    for (uint64_t i = 0; i < m_.timeline.size(); ++i) set(m_.timeline[i].issue, issued, int64_t(i));
    std::vector<Busy> waits;
    for (uint64_t i = 0; i < m_.timeline.size(); ++i) {
      const isa::Opcode op = m_.inst(i).opcode;
      const uint64_t from = m_.timeline[i].issue + m_.arch.issue_cycles;
      if ((op == isa::Opcode::sync || op == isa::Opcode::barrier || op == isa::Opcode::halt ||
           op == isa::Opcode::interrupt) &&
          m_.timeline[i].end > from)
        waits.push_back({from, m_.timeline[i].end, i});
    }
    spans(
        held, waits, [](const Busy&) { return 1; }, 0);
  }

  void stations() {
    for (isa::Unit u : {isa::Unit::host_dma, isa::Unit::weight_fetch, isa::Unit::activation}) {
      const std::string scope(isa::kUnitNames[size_t(u)]);
      const uint32_t busy = add(scope, "busy", 1, 0), index = add(scope, "index", 32, kX);
      std::vector<Busy> work;
      for (uint64_t i = 0; i < m_.timeline.size(); ++i)
        if (m_.unit(i) == u) work.push_back({m_.timeline[i].start, m_.timeline[i].end, i});
      spans(
          busy, work, [](const Busy&) { return 1; }, 0);
      spans(
          index, work, [](const Busy& b) { return int64_t(b.index); }, kX);
    }
  }

  void weight_path() {
    const auto& tiles = m_.in.recorder->tiles;
    const uint32_t busy = add("weight_memory", "busy", 1, 0), tile = add("weight_memory", "tile", 32, kX);
    std::vector<Busy> xfers, shifts;
    for (size_t g = 0; g < tiles.size(); ++g) {
      xfers.push_back({tiles[g].xfer_begin, tiles[g].xfer_end, g});
      if (tiles[g].shift_begin != kNoCycle) shifts.push_back({tiles[g].shift_begin, tiles[g].shift_end, g});
    }
    spans(
        busy, xfers, [](const Busy&) { return 1; }, 0);
    spans(
        tile, xfers, [](const Busy& b) { return int64_t(b.index); }, kX);
    const uint32_t slots = add("weight_fifo", "slots_in_use", 16, 0);
    const uint32_t landed = add("weight_fifo", "tiles_landed", 16, 0);
    const uint32_t shifting = add("weight_fifo", "shifting", 1, 0);
    const uint32_t shift_tile = add("weight_fifo", "shift_tile", 32, kX);
    series(slots, Series::fifo_slots);
    series(landed, Series::fifo_landed);
    spans(
        shifting, shifts, [](const Busy&) { return 1; }, 0);
    spans(
        shift_tile, shifts, [](const Busy& b) { return int64_t(b.index); }, kX);
  }

  void series(uint32_t s, Series which) {
    for (const Sample& x : m_.series[size_t(which)]) set(x.cycle, s, x.value);
  }

  void matrix() {
    // In flight: matmuls from start to end (they overlap: one drains while the next streams).
    std::vector<std::pair<uint64_t, int64_t>> flight;
    for (uint64_t i = 0; i < m_.timeline.size(); ++i)
      if (m_.inst(i).opcode == isa::Opcode::matmul) {
        flight.push_back({m_.timeline[i].start, 1});
        flight.push_back({m_.timeline[i].end, -1});
      }
    const uint32_t busy = add("matrix", "busy", 1, 0), in_flight = add("matrix", "in_flight", 16, 0);
    for (const Sample& x : step_series(std::move(flight))) {
      set(x.cycle, busy, x.value > 0);
      set(x.cycle, in_flight, x.value);
    }
    const uint32_t index = add("matrix", "streaming_index", 32, kX);
    const uint32_t kind = add("matrix", "cycle_kind", 3, 0);
    std::array<uint32_t, kMatrixKindNames.size()> wire{};
    for (size_t k = 0; k < wire.size(); ++k) {
      std::string name(kMatrixKindNames[k]);
      std::replace(name.begin(), name.end(), ' ', '_');
      std::transform(name.begin(), name.end(), name.begin(), [](char c) { return char(std::tolower(c)); });
      wire[k] = add(k < 3 ? "matrix" : "control", name, 1, 0);
    }
    for (const MatrixSpan& s : m_.matrix_spans) {
      if (s.kind == MatrixKind::active) {
        set(s.begin, index, int64_t(s.index));
        set(s.end, index, kX);
      }
      set(s.begin, kind, int64_t(s.kind) + 1);
      set(s.end, kind, 0);
      set(s.begin, wire[size_t(s.kind)], 1);
      set(s.end, wire[size_t(s.kind)], 0);
    }
  }

  void ub() {
    series(add("ub", "rows_in_use", 32, 0), Series::ub_in_use);
    series(add("ub", "rows_touched", 32, 0), Series::ub_footprint);
  }

  // Cell registers, in the recorder's order (trace.h: cell number x registers + register).
  void cells() {
    const TraceRecorder& r = *m_.in.recorder;
    const uint32_t first = uint32_t(signals.size());
    for (const CellRange& c : r.cell_ranges)
      for (uint64_t k = c.row0; k < std::min(c.row1, m_.arch.array_rows); ++k)
        for (uint64_t j = c.col0; j < std::min(c.col1, m_.arch.array_cols); ++j)
          for (size_t reg = 0; reg < kCellRegisters.size(); ++reg) {
            const int width = reg == 3 ? 1 : reg == 4 ? 32 : 16;
            add(fmt::format("array.cell_{}_{}", k, j), std::string(kCellRegisters[reg]), width, 0);
          }
    for (const TraceRecorder::CellChange& c : r.cell_changes) set(c.cycle, first + c.signal, c.value);
  }

  const TraceModel& m_;
  const VcdScope& scope_;
};

// Simulated picoseconds per cycle, as the machine's SystemC clock has it.
uint64_t period_ps(double clock_mhz) {
  const sc_core::sc_time p(1e6 / clock_mhz, sc_core::SC_PS);
  return std::max<uint64_t>(1, uint64_t(std::llround(p.to_seconds() * 1e12)));
}

}  // namespace

void write_vcd(std::ostream& out, const TraceInput& in, const TraceSelection& selection,
               const VcdScope& scope) {
  const TraceModel model(in, selection);
  VcdBuilder b(model, scope);
  b.build();
  const uint64_t period = period_ps(in.arch->clock_mhz);
  fmt::memory_buffer buf;
  auto o = std::back_inserter(buf);
  fmt::format_to(
      o, "$date\n  (simulated)\n$end\n$version\n  tpusim: {} on {} ({} engine), {} cycles at {} MHz\n$end\n",
      in.workload, in.arch->name, engine_name(in.engine), in.result->cycles, in.arch->clock_mhz);
  fmt::format_to(o, "$comment\n  one cycle = {} ps; cycle N is time N x {} ps\n$end\n$timescale 1ps $end\n",
                 period, period);
  // Scopes: signals are grouped by scope path ("a.b" nests b in a), in first-seen order.
  fmt::format_to(o, "$scope module tpu $end\n");
  std::vector<std::string> open;
  std::vector<std::string> ids(b.signals.size());
  std::vector<size_t> order(b.signals.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  // Signals grouped by scope, scopes in the order they first appear.
  std::unordered_map<std::string, size_t> scope_rank;
  std::vector<size_t> rank(b.signals.size());
  for (size_t s = 0; s < b.signals.size(); ++s)
    rank[s] = scope_rank.try_emplace(b.signals[s].scope, scope_rank.size()).first->second;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return rank[x] < rank[y]; });
  for (size_t s : order) {
    ids[s] = vcd_id(uint32_t(s));
    std::vector<std::string> path;
    for (size_t at = 0;;) {
      const size_t dot = b.signals[s].scope.find('.', at);
      path.push_back(b.signals[s].scope.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
      if (dot == std::string::npos) break;
      at = dot + 1;
    }
    size_t common = 0;
    while (common < open.size() && common < path.size() && open[common] == path[common]) ++common;
    for (size_t k = open.size(); k > common; --k) fmt::format_to(o, "$upscope $end\n");
    open.resize(common);
    for (size_t k = common; k < path.size(); ++k) {
      fmt::format_to(o, "$scope module {} $end\n", path[k]);
      open.push_back(path[k]);
    }
    const Signal& sig = b.signals[s];
    if (sig.width == 1) fmt::format_to(o, "$var wire 1 {} {} $end\n", ids[s], sig.name);
    else fmt::format_to(o, "$var wire {} {} {} [{}:0] $end\n", sig.width, ids[s], sig.name, sig.width - 1);
  }
  for (size_t k = open.size(); k > 0; --k) fmt::format_to(o, "$upscope $end\n");
  fmt::format_to(o, "$upscope $end\n$enddefinitions $end\n");

  // Changes in time order (stable: a signal's later change at the same cycle wins).
  std::vector<Change>& ch = b.changes;
  std::stable_sort(ch.begin(), ch.end(), [](const Change& x, const Change& y) { return x.cycle < y.cycle; });
  std::vector<int64_t> value = b.initial;
  size_t k = 0;
  for (; k < ch.size() && ch[k].cycle <= selection.begin; ++k) value[ch[k].signal] = ch[k].value;
  fmt::format_to(o, "#{}\n$dumpvars\n", selection.begin * period);
  for (size_t s = 0; s < value.size(); ++s) put_value(buf, b.signals[s], value[s], ids[s]);
  fmt::format_to(o, "$end\n");
  std::vector<int64_t> pending = value;
  uint64_t last_time = selection.begin * period;
  std::vector<uint32_t> touched;
  while (k < ch.size() && ch[k].cycle < selection.end) {
    const uint64_t c = ch[k].cycle;
    touched.clear();
    for (; k < ch.size() && ch[k].cycle == c; ++k) {
      pending[ch[k].signal] = ch[k].value;
      touched.push_back(ch[k].signal);
    }
    bool stamped = false;
    for (uint32_t s : touched) {
      if (pending[s] == value[s]) continue;
      if (!stamped) fmt::format_to(o, "#{}\n", c * period);
      stamped = true;
      last_time = c * period;
      value[s] = pending[s];
      put_value(buf, b.signals[s], value[s], ids[s]);
    }
    if (buf.size() > (1 << 20)) {
      out.write(buf.data(), std::streamsize(buf.size()));
      buf.clear();
    }
  }
  // The run's end, so that the last values show their length.
  const uint64_t last = std::min(selection.end, std::max(in.result->cycles, selection.begin));
  if (last * period > last_time) fmt::format_to(o, "#{}\n", last * period);
  out.write(buf.data(), std::streamsize(buf.size()));
}

}  // namespace tpusim::sim
