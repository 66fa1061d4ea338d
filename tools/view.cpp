// tpusim view: one self-contained HTML file that shows a stepped run (docs/view.md). The window
// is the debugger's run (sim::DebugSession, the stepped engine): every cycle of it is reached
// in turn and what the page shows is read from the session then: every cell's registers, the
// weight FIFO, shadow and active tiles, each instruction's state; the instruction timeline and
// the occupancy of the unified buffer and the accumulators come from the whole run's timeline.
// The page (tools/view/view.html, embedded at build time) draws it with plain JavaScript and
// canvas: no library, no network.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "isa/disassembler.h"
#include "isa/error.h"
#include "sim/debugger.h"
#include "sim/hazards.h"
#include "sim/trace.h"
#include "tools/commands.h"
#include "tools/program_to_run.h"

namespace tpusim::tools {

extern const char kViewTemplate[];  // tools/view/view.html (generated view_asset.cpp)

namespace {

constexpr uint64_t kMaxCellCycles = uint64_t{1} << 24;  // cells x window cycles a file may hold
constexpr uint64_t kDefaultCellCycles = uint64_t{1} << 18;
constexpr int kRegisters = 6;  // weight, shadow, x, x flags, psum, psum valid (print cell's)

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '<') out += "\\u003c";  // never `</script>` inside the page's script
    else if (uint8_t(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
    else out += c;
  }
  out += '"';
  return out;
}

template <typename T>
std::string json_list(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

// The window: --window START:END (END exclusive), or from a little before the first matmul, as
// many cycles as kDefaultCellCycles cell-cycles allow (at least 32, at most 1024).
std::pair<uint64_t, uint64_t> choose_window(const std::string& text, const isa::Program& p,
                                            const sim::Arch& arch, const sim::RunResult& r) {
  const uint64_t cells = arch.array_rows * arch.array_cols;
  uint64_t begin = 0, end = 0;
  if (!text.empty()) {
    sim::TraceSelection sel;
    sim::parse_trace_window(text, sel, "view: --window");
    begin = sel.begin;
    end = std::min(sel.end, r.cycles + 1);
    if (begin > r.cycles)
      throw InputError(fmt::format("view: --window {}: the run ends at cycle {}", text, r.cycles));
    if ((end - begin) * cells > kMaxCellCycles)
      throw InputError(
          fmt::format("view: --window {}: {} cycles of {} cells is too much for one page (at most {} "
                      "cell-cycles: {} cycles "
                      "of this array)",
                      text, end - begin, cells, kMaxCellCycles, kMaxCellCycles / cells));
    return {begin, end};
  }
  const uint64_t length = std::clamp<uint64_t>(kDefaultCellCycles / cells, 32, 1024);
  // A little before: two array heights (the shift of a tile), at most a quarter of the window.
  const uint64_t lead = std::min(2 * arch.array_rows, length / 4);
  for (uint64_t i = 0; i < r.timeline.size(); ++i)
    if (p.code[i].opcode == isa::Opcode::matmul) {
      begin = r.timeline[i].start > lead ? r.timeline[i].start - lead : 0;
      break;
    }
  return {begin, std::min(begin + length, r.cycles + 1)};
}

// Accumulator rows holding results no activate has read yet, at each cycle of [begin, end):
// a matmul writes its rows from its start, an act has read its rows at its end.
std::vector<uint64_t> live_acc_rows(const isa::Program& p, const sim::Arch& arch, const sim::RunResult& r,
                                    uint64_t begin, uint64_t end) {
  struct Event {
    uint64_t cycle;
    bool write;
    sim::RowRange rows;
  };
  std::vector<Event> events;
  for (uint64_t i = 0; i < r.timeline.size(); ++i) {
    const sim::RowRange a = sim::acc_rows(p.code[i]);
    if (a.rows == 0) continue;
    const bool write = p.code[i].opcode == isa::Opcode::matmul;
    events.push_back({write ? r.timeline[i].start : r.timeline[i].end, write, a});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.cycle < b.cycle; });
  std::vector<uint8_t> live(arch.acc_entries, 0);
  uint64_t count = 0;
  std::vector<uint64_t> out;
  size_t k = 0;
  for (uint64_t c = 0; c < end; ++c) {
    for (; k < events.size() && events[k].cycle <= c; ++k)
      for (uint64_t row = events[k].rows.first; row < std::min(events[k].rows.end(), arch.acc_entries);
           ++row) {
        count += events[k].write && !live[row];
        count -= !events[k].write && live[row];
        live[row] = events[k].write;
      }
    if (c >= begin) out.push_back(count);
  }
  return out;
}

// UB rows written so far (the footprint of every write that has started) at each cycle.
std::vector<uint64_t> written_ub_rows(const isa::Program& p, const sim::Arch& arch, const sim::RunResult& r,
                                      uint64_t begin, uint64_t end) {
  std::vector<std::pair<uint64_t, sim::RowRange>> writes;
  const sim::PackTimeline pack(p.code);
  sim::ActPool act_pool;  // the setcfg registers in force, in issue (program) order
  sim::Planes planes;
  for (uint64_t i = 0; i < r.timeline.size(); ++i) {
    sim::track_act_pool(act_pool, p.code[i]);
    sim::track_planes(planes, p.code[i]);
    if (isa::spec(p.code[i].opcode).unit == isa::Unit::control) continue;
    for (const sim::RowRange& w : sim::accesses(p.code[i], arch, pack.at(i), act_pool, planes).ub_writes)
      writes.emplace_back(r.timeline[i].start, w);
  }
  std::sort(writes.begin(), writes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint8_t> written(arch.ub_rows(), 0);
  uint64_t count = 0;
  size_t k = 0;
  std::vector<uint64_t> out;
  for (uint64_t c = begin; c < end; ++c) {
    for (; k < writes.size() && writes[k].first <= c; ++k)
      for (uint64_t row = writes[k].second.first; row < std::min(writes[k].second.end(), arch.ub_rows());
           ++row) {
        count += !written[row];
        written[row] = 1;
      }
    out.push_back(count);
  }
  return out;
}

std::string tile_json(const sim::Arch&, const sim::TileView& t) {
  return fmt::format("[{},{}]", t.number, t.landed);
}

// What the page shows of each cycle of the window, read from a debugging session.
struct Frames {
  std::vector<int32_t> first;      // every cell's registers at the window's first cycle
  std::vector<std::string> diffs;  // per later cycle: [cell register index, value, ...]
  std::vector<std::string> fifo_states;
  std::vector<uint64_t> fifo_at, current_at;
};

void read_cells(const sim::SystolicArray& a, std::vector<int32_t>& v) {
  v.clear();
  for (uint64_t k = 0; k < a.rows(); ++k)
    for (uint64_t j = 0; j < a.cols(); ++j)
      v.insert(v.end(), {a.weight(k, j), a.shadow(k, j), a.x_value(k, j), a.x_flags(k, j), a.psum(k, j),
                         a.psum_valid(k, j)});
}

Frames record(const isa::Program& p, const sim::Arch& arch, uint64_t begin, uint64_t end) {
  Frames f;
  sim::DebugSession s(p, arch);
  std::map<std::string, uint64_t> fifo_index;
  std::vector<int32_t> now, before;
  for (uint64_t c = begin; c < end; ++c) {
    s.advance(c);
    if (s.cycle() != c) throw std::logic_error("view: the session did not reach the window's cycle");
    read_cells(s.array(), now);
    if (c == begin) {
      f.first = now;
    } else {
      std::string d;
      for (size_t i = 0; i < now.size(); ++i)
        if (now[i] != before[i]) d += fmt::format("{}{},{}", d.empty() ? "" : ",", i, now[i]);
      f.diffs.push_back(fmt::format("[{}]", d));
    }
    std::swap(now, before);
    const sim::WeightPathView w = s.weight_path();
    std::string tiles;
    for (const sim::TileView& t : w.fifo) {
      if (!tiles.empty()) tiles += ',';
      tiles += tile_json(arch, t);
    }
    const std::string state =
        fmt::format("[[{}],{},{},{}]", tiles, w.shadow ? tile_json(arch, *w.shadow) : "null",
                    w.shadow ? w.shift_start : 0,
                    w.active ? fmt::format("{}", w.active->number) : "null");
    auto [it, added] = fifo_index.emplace(state, f.fifo_states.size());
    if (added) f.fifo_states.push_back(state);
    f.fifo_at.push_back(it->second);
    f.current_at.push_back(s.current());
  }
  return f;
}

}  // namespace

int cmd_view(const ViewArgs& a) {
  if (a.program.empty()) throw InputError("view: a program or model is required (see tpusim view --help)");
  if (a.output.empty()) throw InputError("view: -o VIEW.html is required");
  refuse_outputs_over_inputs({{"-o", &a.output}}, {a.program, a.arch_file});
  const auto t0 = std::chrono::steady_clock::now();
  // Tried first, so that an unwritable path fails before the runs; opened after them (a Ctrl-C
  // during the runs leaves nothing), written to a temporary file beside it and renamed when
  // complete (isa/file_io.h): a failed write leaves no partial page.
  try_output(a.output);
  const ProgramToRun to_run = load_program_or_model("view", a.program, a.arch_file, a.sets, a.batch);
  const isa::Program& p = to_run.program();
  const sim::Arch& arch = to_run.arch;
  // The whole run first (the timeline, the window's default) on the fast engine, which gives
  // every instruction the stepped engine's cycles (docs/timing.md, engines); then the window
  // cycle by cycle on the stepped engine.
  sim::RunResult whole;
  try {
    whole = sim::simulate(p, arch, {sim::Engine::fast, 0});
  } catch (const sim::SimError& e) {
    throw InputError(fmt::format("{}: {}", a.program, e.what()));
  }
  const auto [begin, end] = choose_window(a.window, p, arch, whole);
  const Frames frames = record(p, arch, begin, end);
  const std::vector<uint64_t> acc_live = live_acc_rows(p, arch, whole, begin, end);
  const std::vector<uint64_t> ub_written = written_ub_rows(p, arch, whole, begin, end);

  std::string code;
  for (uint64_t i = 0; i < whole.timeline.size(); ++i) {
    const sim::InstructionTiming& t = whole.timeline[i];
    code += fmt::format("{}[{},{},{},{},{}]", i ? "," : "", json_string(isa::format_instruction(p.code[i])),
                        int(isa::spec(p.code[i].opcode).unit), t.issue, t.start, t.end);
  }
  std::string layers;
  for (const sim::LayerTag& l : sim::layer_tags(p))
    if (l.index < whole.timeline.size())
      layers += fmt::format("{}[{},{},{}]", layers.empty() ? "" : ",", json_string(l.name), l.index,
                            whole.timeline[l.index].start);
  std::string units;
  for (std::string_view u : isa::kUnitNames) {
    if (!units.empty()) units += ',';
    units += json_string(u);
  }
  const std::string name = std::filesystem::path(a.program).filename().string();
  const std::string data = fmt::format(
      "{{\"workload\":{},\"arch\":{{\"name\":{},\"rows\":{},\"cols\":{},\"ub_rows\":{},\"acc_entries\":{},"
      "\"fifo_tiles\":{},\"clock_mhz\":{}}},\"cycles\":{},\"window\":[{},{}],\"units\":[{}],\"code\":[{}],"
      "\"layers\":[{}],\"first\":{},\"diffs\":[{}],\"fifo_states\":[{}],\"fifo_at\":{},\"current_at\":{},"
      "\"acc_live\":{},\"ub_written\":{},\"registers\":{}}}",
      json_string(name), json_string(arch.name), arch.array_rows, arch.array_cols, arch.ub_rows(),
      arch.acc_entries, arch.weight_fifo_tiles, arch.clock_mhz, whole.cycles, begin, end, units, code, layers,
      json_list(frames.first), fmt::join(frames.diffs, ","), fmt::join(frames.fifo_states, ","),
      json_list(frames.fifo_at), json_list(frames.current_at), json_list(acc_live), json_list(ub_written),
      kRegisters);
  std::string page = kViewTemplate;
  const std::string marker = "/*TPUSIM_VIEW_DATA*/null";
  const size_t at = page.find(marker);
  if (at == std::string::npos) throw std::logic_error("view: the page template has no data marker");
  page.replace(at, marker.size(), data);
  write_text(a.output, page);  // (-: standard output; a file goes through a temporary beside it)
  fmt::print(stderr, "wrote {} ({:.1f} MB, self-contained): cycles {}..{} of {} ({} x {} array), {:.2f} s\n",
             a.output, double(page.size()) / 1e6, begin, end - 1, whole.cycles, arch.array_rows,
             arch.array_cols, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (end - begin < whole.cycles + 1)
    fmt::print(stderr, "the page holds a window of the run; --window START:END chooses another\n");
  return 0;
}

}  // namespace tpusim::tools
