// Chrome trace-event JSON (docs/traces.md): what Perfetto (ui.perfetto.dev) and chrome://tracing
// open. One process, one thread track per unit, complete events ("ph":"X") for instructions,
// tiles and matrix cycles, counter events ("ph":"C") for the FIFO and the UB. Times are
// microseconds of simulated time; every event carries its cycles in args. Written as a stream,
// one event per line.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/trace_model.h"

namespace tpusim::sim {

namespace {

using nlohmann::ordered_json;

// Thread ids of the tracks, in display order. Overlapping slices (matmuls drain while the next
// streams; layers overlap through prefetch) go to extra lanes: tid + kLaneStride * lane.
enum Track : int {
  kControl = 1,
  kHost,
  kWeightFetch,
  kWeightMemory,
  kWeightFifo,
  kMatrix,
  kMatrixCycles,
  kActivation,
  kLayers
};
constexpr int kLaneStride = 100;
constexpr std::string_view kTrackNames[] = {"",
                                            "control (issue)",
                                            "host DMA",
                                            "weight fetch",
                                            "weight memory",
                                            "weight FIFO (shift into shadow)",
                                            "matrix unit",
                                            "matrix cycles (Table 3 counters)",
                                            "activation unit",
                                            "layers"};

Track track_of(isa::Unit u) {
  switch (u) {
    case isa::Unit::control: return kControl;
    case isa::Unit::host_dma: return kHost;
    case isa::Unit::weight_fetch: return kWeightFetch;
    case isa::Unit::matrix: return kMatrix;
    default: return kActivation;
  }
}

class ChromeWriter {
 public:
  ChromeWriter(std::ostream& out, const TraceModel& m) : out_(out), m_(m) {}

  void write() {
    out_ << "{\"displayTimeUnit\":\"ns\",\"otherData\":";
    ordered_json other = {{"tool", "tpusim"},
                          {"workload", m_.in.workload},
                          {"engine", engine_name(m_.in.engine)},
                          {"arch", m_.arch.name},
                          {"clock_mhz", m_.arch.clock_mhz},
                          {"cycles", m_.cycles},
                          {"window", {m_.sel.begin, m_.sel.end == kNoCycle ? m_.cycles : m_.sel.end}}};
    out_ << text(other) << ",\n\"traceEvents\":[\n";
    metadata();
    instructions();
    tiles();
    matrix_cycles();
    layers();
    counters();
    out_ << "\n]}\n";
  }

 private:
  // Names come from users (a program's file name need not be UTF-8): a byte that is not UTF-8
  // becomes U+FFFD, as JSON requires, rather than stopping the write.
  static std::string text(const ordered_json& e) {
    return e.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  void emit(const ordered_json& e) {
    if (!first_) out_ << ",\n";
    first_ = false;
    out_ << text(e);
  }
  double us(uint64_t cycle) const { return cycle_us(cycle, m_.arch.clock_mhz); }
  // A duration from whole nanoseconds too (cycle_ns): ts + dur is the end's ts exactly.
  double us_between(uint64_t begin, uint64_t end) const {
    return double(cycle_ns(end, m_.arch.clock_mhz) - cycle_ns(begin, m_.arch.clock_mhz)) / 1000.0;
  }

  void thread(int tid, const std::string& name, int sort) {
    emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}});
    emit({{"ph", "M"},
          {"name", "thread_sort_index"},
          {"pid", 1},
          {"tid", tid},
          {"args", {{"sort_index", sort}}}});
  }

  void metadata() {
    const std::string name = "tpusim: " + m_.in.workload + " (" + m_.arch.name + ", " +
                             std::string(engine_name(m_.in.engine)) + " engine)";
    emit({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", name}}}});
    for (int t = kControl; t <= kLayers; ++t) thread(t, std::string(kTrackNames[t]), t * kLaneStride);
  }

  // Places [begin, end) on the first lane of `track` free at `begin`; names new lanes.
  int lane(Track track, std::vector<uint64_t>& lane_free, uint64_t begin, uint64_t end) {
    size_t l = 0;
    while (l < lane_free.size() && lane_free[l] > begin) ++l;
    if (l == lane_free.size()) {
      lane_free.push_back(0);
      if (l > 0) thread(track + kLaneStride * int(l), fmt_lane(track, l), track * kLaneStride + int(l));
    }
    lane_free[l] = std::max(end, begin + 1);
    return track + kLaneStride * int(l);
  }
  static std::string fmt_lane(Track track, size_t l) {
    return std::string(kTrackNames[track]) + " (overlap " + std::to_string(l + 1) + ")";
  }

  void slice(const std::string& name, const char* cat, int tid, uint64_t begin, uint64_t end,
             ordered_json args) {
    emit({{"name", name},
          {"cat", cat},
          {"ph", "X"},
          {"ts", us(begin)},
          {"dur", us_between(begin, end)},
          {"pid", 1},
          {"tid", tid},
          {"args", std::move(args)}});
  }

  void instructions() {
    std::vector<uint64_t> matrix_lanes;
    for (uint64_t i = 0; i < m_.timeline.size(); ++i) {
      const InstructionTiming& t = m_.timeline[i];
      const bool control = m_.unit(i) == isa::Unit::control;
      const uint64_t begin = control ? t.issue : t.start;
      if (!m_.keep(i, begin, t.end)) continue;
      const isa::Instruction& in = m_.inst(i);
      const isa::OpcodeSpec& spec = isa::spec(in.opcode);
      ordered_json args = {{"index", i}, {"text", m_.text(i)}};
      if (const std::string* layer = m_.layer(i)) args["layer"] = *layer;
      args["issue"] = t.issue;
      args["start"] = t.start;
      args["end"] = t.end;
      args["cycles"] = t.end - begin;
      if (!control) args["queued"] = t.start - t.issue;  // from issue to start: queue, interlocks, weights
      if (in.opcode == isa::Opcode::matmul) args["streaming_end"] = t.start + m_.stream_cycles(i);
      ordered_json fields = ordered_json::object();
      for (const isa::Operand& o : spec.operands)
        fields[std::string(isa::field_spec(o.field).name)] = in[o.field];
      args["fields"] = std::move(fields);
      const Track track = track_of(spec.unit);
      const int tid = track == kMatrix ? lane(kMatrix, matrix_lanes, begin, t.end) : track;
      slice(std::string(spec.mnemonic), "instruction", tid, begin, t.end, std::move(args));
    }
  }

  void tiles() {
    const auto& tiles = m_.in.recorder->tiles;
    for (size_t g = 0; g < tiles.size(); ++g) {
      const TraceRecorder::Tile& t = tiles[g];
      if (!m_.passes(t.rw)) continue;
      const std::string name = "tile " + std::to_string(g);
      ordered_json args = {{"tile", g},
                           {"rw", t.rw},
                           {"tile_of_rw", m_.tile_in_rw(g)},
                           {"request", t.request},
                           {"begin", t.xfer_begin},
                           {"end", t.xfer_end},
                           {"landed", t.landed}};
      if (t.shift_begin != kNoCycle) args["shift_begin"] = t.shift_begin;
      if (t.shift_end != kNoCycle) args["shift_end"] = t.shift_end;
      if (m_.in_window(t.xfer_begin, t.xfer_end))
        slice(name, "tile", kWeightMemory, t.xfer_begin, t.xfer_end, args);
      if (m_.in_window(t.landed, t.landed))
        emit({{"name", name + " landed"},
              {"cat", "tile"},
              {"ph", "i"},
              {"s", "t"},
              {"ts", us(t.landed)},
              {"pid", 1},
              {"tid", kWeightFifo},
              {"args", {{"tile", g}, {"rw", t.rw}, {"cycle", t.landed}}}});
      if (t.shift_begin != kNoCycle && m_.in_window(t.shift_begin, t.shift_end))
        slice("shift " + name, "tile", kWeightFifo, t.shift_begin, t.shift_end, std::move(args));
    }
  }

  void matrix_cycles() {
    for (const MatrixSpan& s : m_.matrix_spans) {
      if (!m_.keep(s.index, s.begin, s.end)) continue;
      slice(std::string(kMatrixKindNames[size_t(s.kind)]), "matrix", kMatrixCycles, s.begin, s.end,
            {{"begin", s.begin}, {"end", s.end}, {"cycles", s.end - s.begin}, {"instruction", s.index}});
    }
  }

  // A layer spans its instructions' [start, end) (control ones at issue).
  void layers() {
    struct Span {
      uint64_t begin = kNoCycle, end = 0, first = 0, count = 0;
    };
    std::vector<std::pair<const std::string*, Span>> spans;
    for (uint64_t i = 0; i < m_.timeline.size(); ++i) {
      const std::string* layer = m_.layer(i);
      if (!layer || !m_.passes(i)) continue;
      if (spans.empty() || spans.back().first != layer) spans.push_back({layer, Span{kNoCycle, 0, i, 0}});
      Span& s = spans.back().second;
      const InstructionTiming& t = m_.timeline[i];
      s.begin = std::min(s.begin, m_.unit(i) == isa::Unit::control ? t.issue : t.start);
      s.end = std::max(s.end, t.end);
      ++s.count;
    }
    std::stable_sort(spans.begin(), spans.end(),
                     [](const auto& a, const auto& b) { return a.second.begin < b.second.begin; });
    std::vector<uint64_t> lanes;
    for (const auto& [name, s] : spans) {
      if (!m_.in_window(s.begin, s.end)) continue;
      slice(*name, "layer", lane(kLayers, lanes, s.begin, s.end), s.begin, s.end,
            {{"begin", s.begin}, {"end", s.end}, {"first_instruction", s.first}, {"instructions", s.count}});
    }
  }

  // Two counters, "weight FIFO" and "UB", each with two series (Perfetto shows one track per
  // series, named "<counter> <series>"): their values at the window's start, then every change
  // inside it, both series in every event.
  void counters() {
    counter("weight FIFO", Series::fifo_slots, "slots in use", Series::fifo_landed, "tiles landed");
    counter("UB", Series::ub_in_use, "rows in use", Series::ub_footprint, "rows touched");
  }

  void counter(const char* name, Series a, const char* a_key, Series b, const char* b_key) {
    const std::vector<Sample>&sa = m_.series[size_t(a)], &sb = m_.series[size_t(b)];
    auto value_at = [](const std::vector<Sample>& s, uint64_t c) {
      return std::prev(std::upper_bound(s.begin(), s.end(), c,
                                        [](uint64_t x, const Sample& y) { return x < y.cycle; }))
          ->value;
    };
    auto sample = [&](uint64_t cycle) {
      emit({{"name", name},
            {"ph", "C"},
            {"ts", us(cycle)},
            {"pid", 1},
            {"args", {{a_key, value_at(sa, cycle)}, {b_key, value_at(sb, cycle)}}}});
    };
    sample(m_.sel.begin);
    std::vector<uint64_t> at;
    for (const auto* s : {&sa, &sb})
      for (const Sample& x : *s)
        if (x.cycle > m_.sel.begin && x.cycle < m_.sel.end) at.push_back(x.cycle);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (uint64_t c : at) sample(c);
  }

  std::ostream& out_;
  const TraceModel& m_;
  bool first_ = true;
};

}  // namespace

void write_chrome_trace(std::ostream& out, const TraceInput& in, const TraceSelection& selection) {
  const TraceModel model(in, selection);
  ChromeWriter(out, model).write();
}

}  // namespace tpusim::sim
