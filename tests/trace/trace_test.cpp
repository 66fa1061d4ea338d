// Traces (sim/trace.h, docs/traces.md): the Chrome trace has one slice per executed instruction
// on its unit's track with the simulator's cycles, its matrix-cycle slices add up to the report's
// counters, the window and the filter select what they say; the VCD parses back and its signals
// change at the timeline's cycles; the event log of matmul.s is exactly the committed one; and
// every engine gives the same trace (cell registers: stepped only).
#include "sim/trace.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../sim/machine_support.h"
#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "sim/host_model.h"
#include "vcd_reader.h"
#include "tools/source_dir.h"

using namespace tpusim;
using nlohmann::json;
using sim::Engine;

namespace {

const std::string kAsm = std::string(tpusim::source_dir()) + "/workloads/asm/";
const std::vector<std::string> kPrograms = {"matmul.s", "mlp2.s", "lstm_cell.s", "conv3x3.s"};

struct Traced {
  isa::Program program;
  sim::Arch arch;
  Engine engine;
  sim::RunResult result;
  sim::TraceRecorder recorder;
  sim::TraceInput input(Engine shown) const {
    return {&program, &arch, shown, &result, &recorder, program.model};
  }
  sim::TraceInput input() const { return input(engine); }
};

std::unique_ptr<Traced> run_traced(isa::Program p, const sim::Arch& arch, Engine engine,
                                   std::vector<sim::CellRange> cells = {}) {
  auto t = std::make_unique<Traced>();
  t->program = std::move(p);
  t->arch = arch;
  t->engine = engine;
  t->recorder.record_cells(std::move(cells));
  sim::RunOptions opt;
  opt.engine = engine;
  opt.trace = &t->recorder;
  t->result = sim::simulate(t->program, t->arch, opt);
  return t;
}

std::unique_ptr<Traced> run_file(const std::string& name, Engine engine = Engine::timing) {
  const isa::Program p = isa::assemble_file(kAsm + name);
  return run_traced(p, sim::arch_preset("tpu-v1"), engine);
}

std::string chrome_text(const sim::TraceInput& in, const sim::TraceSelection& sel = {}) {
  std::ostringstream o;
  sim::write_chrome_trace(o, in, sel);
  return o.str();
}
json chrome(const Traced& t, const sim::TraceSelection& sel = {}) {
  return json::parse(chrome_text(t.input(), sel));
}

std::string vcd_text(const sim::TraceInput& in, const sim::VcdScope& scope = {},
                     const sim::TraceSelection& sel = {}) {
  std::ostringstream o;
  sim::write_vcd(o, in, sel, scope);
  return o.str();
}

std::string log_text(const sim::TraceInput& in, const sim::TraceSelection& sel = {}) {
  std::ostringstream o;
  sim::write_event_log(o, in, sel);
  return o.str();
}

std::vector<json> instruction_slices(const json& trace) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "instruction") out.push_back(e);
  return out;
}

// The track (thread id modulo lanes) of each unit, as trace_chrome.cpp numbers them.
int track_of(isa::Unit u) {
  switch (u) {
    case isa::Unit::control: return 1;
    case isa::Unit::host_dma: return 2;
    case isa::Unit::weight_fetch: return 3;
    case isa::Unit::matrix: return 6;
    default: return 8;
  }
}

std::map<std::string, uint64_t> matrix_cycle_sums(const json& trace) {
  std::map<std::string, uint64_t> sums;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "matrix") sums[e["name"]] += e["args"]["cycles"].get<uint64_t>();
  return sums;
}

}  // namespace

TEST_CASE("chrome trace: one slice per executed instruction, on its unit's track, with its cycles",
          "[trace]") {
  for (const std::string& name : kPrograms) {
    INFO(name);
    const auto t = run_file(name);
    const json trace = chrome(*t);
    const auto slices = instruction_slices(trace);
    REQUIRE(slices.size() == t->result.timeline.size());
    std::vector<bool> seen(slices.size());
    for (const json& s : slices) {
      const uint64_t i = s["args"]["index"];
      REQUIRE(i < seen.size());
      CHECK(!seen[i]);
      seen[i] = true;
      const isa::Instruction& in = t->program.code[i];
      const isa::Unit unit = isa::spec(in.opcode).unit;
      CHECK(s["tid"].get<int>() % 100 == track_of(unit));
      CHECK(s["name"] == std::string(isa::spec(in.opcode).mnemonic));
      const sim::InstructionTiming& tm = t->result.timeline[i];
      CHECK(s["args"]["issue"] == tm.issue);
      CHECK(s["args"]["start"] == tm.start);
      CHECK(s["args"]["end"] == tm.end);
      const uint64_t begin = unit == isa::Unit::control ? tm.issue : tm.start;
      // Whole nanoseconds of simulated time, as microseconds (sim/trace_model.h, cycle_ns).
      const auto ns = [&](uint64_t c) { return std::llround(double(c) * 1000.0 / t->arch.clock_mhz); };
      CHECK(s["ts"].get<double>() == double(ns(begin)) / 1000.0);
      CHECK(s["dur"].get<double>() == double(ns(tm.end) - ns(begin)) / 1000.0);
      CHECK(s["args"]["text"] == isa::format_instruction(in));
    }
  }
}

// Perfetto reads ts and dur as nanoseconds, each rounded on its own (llround(x * 1000)), and drops
// a complete slice that overlaps another on its track without nesting in it
// (slice_drop_overlapping_complete_event). At 700 MHz a cycle is 1.428... ns: from unrounded
// microseconds, slices that touch (one ends in the cycle the next begins) overlapped by 1 ns.
TEST_CASE("chrome trace: every track's slices nest as Perfetto reads them", "[trace]") {
  for (const std::string& name : kPrograms) {
    INFO(name);
    const auto t = run_file(name);
    const json trace = chrome(*t);
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> tracks;
    for (const json& e : trace["traceEvents"])
      if (e["ph"] == "X") {
        const int64_t ts = std::llround(e["ts"].get<double>() * 1000.0);
        tracks[e["tid"].get<int>()].push_back({ts, ts + std::llround(e["dur"].get<double>() * 1000.0)});
      }
    size_t slices = 0, touching = 0;
    for (auto& [tid, track] : tracks) {
      std::sort(track.begin(), track.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      });
      std::vector<int64_t> open;  // ends of the slices enclosing the current one
      for (const auto& [begin, end] : track) {
        while (!open.empty() && open.back() <= begin) {
          touching += open.back() == begin;
          open.pop_back();
        }
        INFO("track " << tid << ": [" << begin << ", " << end << "] ns");
        CHECK((open.empty() || end <= open.back()));
        open.push_back(end);
        ++slices;
      }
    }
    CHECK(slices > 10);
    CHECK(touching > 0);  // slices that touch: where rounding each value on its own went wrong
  }
}

TEST_CASE("chrome trace: the matrix-cycle slices add up to the report's counters", "[trace]") {
  for (const std::string& name : kPrograms) {
    INFO(name);
    const auto t = run_file(name);
    const auto sums = matrix_cycle_sums(chrome(*t));
    const sim::MatrixCounters& m = t->result.matrix;
    auto sum = [&](const char* kind) { return sums.count(kind) ? sums.at(kind) : uint64_t{0}; };
    CHECK(sum("array active") == m.array_active);
    CHECK(sum("weight stall") == m.weight_stall);
    CHECK(sum("weight shift") == m.weight_shift);
    CHECK(sum("RAW stall") == m.raw_stall);
    CHECK(sum("input stall") == m.input_stall);
    CHECK(sum("host launch") == m.host_launch);
  }
  // The programs between them have every kind.
  const auto mlp2 = run_file("mlp2.s");
  CHECK(mlp2->result.matrix.raw_stall > 0);
  CHECK(mlp2->result.matrix.input_stall > 0);
  CHECK(mlp2->result.matrix.weight_stall > 0);
  // int: the host's launch of the next segment (nop, halt: 2 instructions), after the drain.
  const auto held = run_traced(test::assemble("nop\nint\nnop\nhalt\n"),
                               sim::arch_preset("tpu-v1"), Engine::timing);
  const auto sums = matrix_cycle_sums(chrome(*held));
  CHECK(sums.at("host launch") == sim::launch_cycles(held->arch, 2));  // 7,000 + 700 + 3
  CHECK(held->result.matrix.host_launch == 7703);
}

TEST_CASE("chrome trace: a workload name that is not UTF-8 is written as U+FFFD", "[trace]") {
  // A program's file name is its workload's name when it has no .model: any bytes at all.
  const auto t = run_file("matmul.s");
  sim::TraceInput in = t->input();
  in.workload = "caf\xe9";
  const json trace = json::parse(chrome_text(in));
  CHECK(trace["otherData"]["workload"] == "caf\xef\xbf\xbd");
  CHECK(trace["traceEvents"][0]["args"]["name"].get<std::string>().starts_with("tpusim: caf\xef\xbf\xbd ("));
}

TEST_CASE("chrome trace: counters for the weight FIFO and the UB", "[trace]") {
  const auto t = run_file("mlp2.s");
  std::map<std::string, int64_t> peak;
  const json trace = chrome(*t);
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "C")
      for (const auto& [key, value] : e["args"].items()) {
        const std::string series = e["name"].get<std::string>() + " " + key;
        peak[series] = std::max(peak[series], value.get<int64_t>());
      }
  CHECK(peak.size() == 4);
  CHECK(peak.at("weight FIFO slots in use") == 3);  // three tiles requested up front, 4 slots
  // Each tile lands after the previous one has switched in (1350-cycle transfers), so it shifts
  // at once: none waits in the FIFO.
  CHECK(peak.at("weight FIFO tiles landed") == 0);
  CHECK(peak.at("UB rows touched") == int64_t(t->result.ub_peak_rows));
  // 16-row blocks, used one at a time: the DMAs run one after the other, each matmul streams its
  // 16 rows alone, each act follows its matmuls.
  CHECK(peak.at("UB rows in use") == 16);
}

TEST_CASE("chrome trace: the window keeps what overlaps it", "[trace]") {
  const auto t = run_file("mlp2.s");
  const auto& tl = t->result.timeline;
  sim::TraceSelection sel;
  sim::parse_trace_window(std::to_string(tl[10].start) + ":" + std::to_string(tl[10].start + 300), sel);
  size_t expected = 0;
  for (uint64_t i = 0; i < tl.size(); ++i) {
    const bool control = isa::spec(t->program.code[i].opcode).unit == isa::Unit::control;
    const uint64_t b = control ? tl[i].issue : tl[i].start, e = tl[i].end;
    expected += b == e ? (b >= sel.begin && b < sel.end) : (b < sel.end && e > sel.begin);
  }
  const auto slices = instruction_slices(chrome(*t, sel));
  CHECK(slices.size() == expected);
  CHECK(slices.size() < tl.size());
  for (const json& s : slices) {
    const uint64_t i = s["args"]["index"];
    CHECK(tl[i].end >= sel.begin);
    CHECK(std::min(tl[i].issue, tl[i].start) < sel.end);
  }
}

TEST_CASE("chrome trace: filters by mnemonic and by layer", "[trace]") {
  const auto t = run_file("mlp2.s");
  sim::TraceSelection sel;
  sim::parse_trace_filter("matmul, act", t->program, sel);
  const auto slices = instruction_slices(chrome(*t, sel));
  size_t expected = 0;
  for (uint64_t i = 0; i < t->result.timeline.size(); ++i)
    expected += t->program.code[i].opcode == isa::Opcode::matmul ||
                t->program.code[i].opcode == isa::Opcode::activate;
  CHECK(slices.size() == expected);
  for (const json& s : slices) CHECK((s["name"] == "matmul" || s["name"] == "act"));

  // mlp2.s has tags but no layer names: "tag N". A program with meta.layers: its names.
  sim::TraceSelection by_tag;
  sim::parse_trace_filter("layer=tag 1", t->program, by_tag);
  std::vector<std::string> names;
  for (const json& s : instruction_slices(chrome(*t, by_tag))) names.push_back(s["name"]);
  CHECK(names == std::vector<std::string>{"tag", "matmul", "matmul", "act", "sync"});

  isa::Program named = t->program;
  named.meta["layers"] = {"input", "hidden", "logits", "output"};
  sim::TraceSelection by_name;
  sim::parse_trace_filter("layer=logits,matmul", named, by_name);
  const auto again = run_traced(named, t->arch, Engine::timing);
  const auto logits = instruction_slices(chrome(*again, by_name));
  REQUIRE(logits.size() == 1);
  CHECK(logits[0]["args"]["layer"] == "logits");
  CHECK_THROWS_WITH(sim::parse_trace_filter("layer=nope", named, by_name),
                    Catch::Contains("no layer 'nope'") && Catch::Contains("input hidden logits output"));
  CHECK_THROWS_WITH(sim::parse_trace_filter("matmull", named, by_name),
                    Catch::Contains("'matmull' is neither a mnemonic"));
}

TEST_CASE("trace options: bad windows and scopes are refused", "[trace]") {
  sim::TraceSelection s;
  CHECK_THROWS_WITH(sim::parse_trace_window("100", s), Catch::Contains("expected START:END"));
  CHECK_THROWS_WITH(sim::parse_trace_window("100:50", s), Catch::Contains("END must be greater than START"));
  CHECK_THROWS_WITH(sim::parse_trace_window("1k:", s), Catch::Contains("'1k' is not a cycle number"));
  sim::parse_trace_window(":500", s);
  CHECK(s.begin == 0);
  CHECK(s.end == 500);
  const sim::Arch small = test::small_arch();
  CHECK(sim::parse_vcd_scope("", small, Engine::stepped).cells.size() == 1);  // 16 cells: all, by default
  CHECK(sim::parse_vcd_scope("", small, Engine::fast).cells.empty());
  CHECK(sim::parse_vcd_scope("", sim::arch_preset("tpu-v1"), Engine::stepped).cells.empty());
  CHECK_THROWS_WITH(sim::parse_vcd_scope("array", small, Engine::fast), Catch::Contains("--engine stepped"));
  CHECK_THROWS_WITH(sim::parse_vcd_scope("cells=0-4x0", small, Engine::stepped),
                    Catch::Contains("outside 0-3"));
  CHECK_THROWS_WITH(sim::parse_vcd_scope("array", sim::arch_preset("tpu-v1"), Engine::stepped),
                    Catch::Contains("65536 cells; at most 4096"));
  CHECK_THROWS_WITH(sim::parse_vcd_scope("wires", small, Engine::stepped),
                    Catch::Contains("expected units, array"));
  // A reversed range is not "outside" the array, and rows are not cycles.
  CHECK_THROWS_WITH(sim::parse_vcd_scope("cells=3-1x0", small, Engine::stepped),
                    Catch::Contains("(rows): 3-1 runs backwards: expected FIRST-LAST with FIRST <= LAST"));
  CHECK_THROWS_WITH(sim::parse_vcd_scope("cells=0xb", small, Engine::stepped),
                    Catch::Contains("(columns): 'b' is not a number"));
  // tpusim view's --window: the messages name the option the user typed.
  CHECK_THROWS_WITH(sim::parse_trace_window("7", s, "view: --window"),
                    Catch::StartsWith("view: --window 7: expected START:END"));
  const sim::VcdScope one = sim::parse_vcd_scope("units,cells=1-2x3", small, Engine::stepped);
  CHECK(one.units);
  CHECK(one.cells == std::vector<sim::CellRange>{{1, 3, 3, 4}});
}

TEST_CASE("every engine gives the same trace, VCD and log", "[trace]") {
  for (const std::string& name : kPrograms) {
    INFO(name);
    const auto timing = run_file(name, Engine::timing);
    const std::string c = chrome_text(timing->input(Engine::fast)), v = vcd_text(timing->input(Engine::fast)),
                      l = log_text(timing->input(Engine::fast));
    for (Engine e : {Engine::fast, Engine::stepped}) {
      const auto other = run_file(name, e);
      CHECK(chrome_text(other->input(Engine::fast)) == c);
      CHECK(vcd_text(other->input(Engine::fast)) == v);
      CHECK(log_text(other->input(Engine::fast)) == l);
    }
  }
}

TEST_CASE("VCD: parses back, and its unit signals change at the timeline's cycles", "[trace][vcd]") {
  for (const std::string& name : kPrograms) {
    INFO(name);
    const auto t = run_file(name);
    const test::Vcd vcd = test::read_vcd(vcd_text(t->input()));
    const uint64_t period = vcd.period_ps;
    REQUIRE(period == 1429);  // 700 MHz, in SystemC's picoseconds
    const auto& tl = t->result.timeline;
    for (uint64_t i = 0; i < tl.size(); ++i) {
      const isa::Opcode op = t->program.code[i].opcode;
      INFO("instruction " << i);
      if (op == isa::Opcode::matmul) {
        CHECK(vcd.at("tpu.matrix.busy", tl[i].start * period) == "1");
        CHECK(vcd.at("tpu.matrix.busy", tl[i].end * period - 1) == "1");
        CHECK(vcd.at("tpu.matrix.streaming_index", tl[i].start * period) == test::bits(i));
        CHECK(vcd.at("tpu.matrix.array_active", tl[i].start * period) == "1");
      }
      if (op == isa::Opcode::read_host || op == isa::Opcode::write_host) {
        CHECK(vcd.at("tpu.host_dma.busy", tl[i].start * period) == "1");
        CHECK(vcd.at("tpu.host_dma.index", tl[i].start * period) == test::bits(i));
        // The DMA station runs one at a time: idle at the end unless the next starts then.
        const bool next_starts =
            std::any_of(tl.begin(), tl.end(), [&](const auto& x) { return x.start == tl[i].end; });
        if (!next_starts) CHECK(vcd.at("tpu.host_dma.busy", tl[i].end * period) == "0");
      }
    }
    // The matrix unit is busy exactly while some matmul is in flight.
    for (const auto& [time, value] : vcd.changes.at("tpu.matrix.busy")) {
      const uint64_t c = time / period;
      bool in_flight = false;
      for (uint64_t i = 0; i < tl.size(); ++i)
        in_flight |= t->program.code[i].opcode == isa::Opcode::matmul && tl[i].start <= c && c < tl[i].end;
      CHECK(value == (in_flight ? "1" : "0"));
    }
    CHECK(vcd.end_time == t->result.cycles * period);
  }
}

TEST_CASE("VCD: every cell's registers on the stepped engine", "[trace][vcd]") {
  const isa::Program p = test::assemble(R"(
    .weights w, 0, 16, init=random(1)
    .input x, 0, 12, init=random(2)
    rw waddr=w, tiles=1
    rhm host=x, ub=0, rows=3
    sync units=host
    matmul ub=0, acc=0, rows=3, switch
    halt)");
  const sim::Arch arch = test::small_arch();
  const sim::VcdScope scope = sim::parse_vcd_scope("", arch, Engine::stepped);
  const auto t = run_traced(p, arch, Engine::stepped, scope.cells);
  const test::Vcd vcd = test::read_vcd(vcd_text(t->input(), scope));
  REQUIRE(vcd.period_ps == 1000);
  // After the switch, cell (k, j) holds W[k][j] (int8): the last value of its weight register.
  for (uint64_t k = 0; k < 4; ++k)
    for (uint64_t j = 0; j < 4; ++j) {
      const std::string cell = "tpu.array.cell_" + std::to_string(k) + "_" + std::to_string(j);
      const auto& w = vcd.changes.at(cell + ".weight");
      const int8_t expected = int8_t(p.weights[k * 4 + j]);
      CHECK(test::signed_value(w.back().second, 16) == expected);
      // The switch wavefront reaches cell (k, j) at t0 + k + j (docs/timing.md): its register
      // holds the new weight from the next cycle.
      if (expected != 0) CHECK(w.back().first == (t->result.timeline[3].start + k + j + 1) * 1000);
      CHECK(vcd.changes.at(cell + ".psum").size() > 1);
    }
  // Unit signals are there too, and a units-only scope has no cells.
  CHECK(vcd.changes.count("tpu.matrix.busy"));
  const test::Vcd units =
      test::read_vcd(vcd_text(t->input(), sim::parse_vcd_scope("units", arch, Engine::stepped)));
  CHECK(units.changes.count("tpu.array.cell_0_0.weight") == 0);
}

// tests/data/run/skew_end.s (its comment has the arithmetic): tile 1 shifts in skewed by column
// at cycles 36..39 while the array idles, cell (r, j) written in cycle 36 + r + j (its register
// shows it from 37 + r + j), and the run halts at 44: the last columns' writes are stepped while
// nothing else uses the array (MatrixUnit::catch_up), by the run's end at the latest.
TEST_CASE("VCD: a skewed shift's last columns reach the shadow registers while the array idles",
          "[trace][vcd]") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/tests/data/run/skew_end.s");
  sim::Arch arch = test::small_arch();
  arch.weight_mem_gbps = 1;
  REQUIRE(arch.weight_shift_skewed == 1);
  const sim::VcdScope scope = sim::parse_vcd_scope("array", arch, Engine::stepped);
  const auto t = run_traced(p, arch, Engine::stepped, scope.cells);
  REQUIRE(t->result.cycles == 44);
  REQUIRE(t->result.timeline[2].start == 24);  // the switch that frees the shadow slot
  const test::Vcd vcd = test::read_vcd(vcd_text(t->input(), scope));
  int moved = 0;
  for (uint64_t k = 0; k < 4; ++k)
    for (uint64_t j = 0; j < 4; ++j) {
      const std::string cell = "tpu.array.cell_" + std::to_string(k) + "_" + std::to_string(j);
      const auto& shadow = vcd.changes.at(cell + ".shadow");
      const int8_t tile0 = int8_t(p.weights[k * 4 + j]), tile1 = int8_t(p.weights[16 + k * 4 + j]);
      INFO("cell (" << k << ", " << j << ")");
      CHECK(test::signed_value(shadow.back().second, 16) == tile1);
      if (tile1 != tile0) {
        CHECK(shadow.back().first == (37 + k + j) * 1000);
        ++moved;
      }
    }
  CHECK(moved >= 12);  // (random bytes: almost every cell's value changes)
}

TEST_CASE("VCD: the window starts the dump at its first cycle", "[trace][vcd]") {
  const auto t = run_file("mlp2.s");
  sim::TraceSelection sel;
  sim::parse_trace_window("2000:3000", sel);
  const test::Vcd vcd = test::read_vcd(vcd_text(t->input(), {}, sel));
  CHECK(vcd.first_time == 2000 * 1429);
  CHECK(vcd.end_time <= 3000 * 1429);
}

// data/matmul.log, checked by hand against docs/timing.md (tpu-v1: 256 x 256, 700 MHz):
//   rw issues at 0, starts at 1 and requests its tile: on the bus [1, 1351) (65536 B at 34 GB/s
//   = 1350 cycles), landed at 1351 + 100 = 1451, shifted in [1451, 1707) (256 rows);
//   rhm starts at 2 and ends at 2 + 700 (latency) + 134 (2048 B at 10.74 GB/s) = 836;
//   sync units=host holds issue [3, 836): input stall (no matmul waits yet);
//   matmul issues at 836, waits from 837: weight stall [837, 1451), weight shift [1451, 1707),
//   starts at 1707 and ends at 1707 + 8 + 511 = 2226; act [2226, 2242) (8 + 8 rows);
//   sync units=act held [839, 2242), RAW stall where no matrix span covers it: [1715, 2242);
//   whm [2243, 3077); halt ends at 3077.
TEST_CASE("the event log of matmul.s, line by line", "[trace][log]") {
  const auto t = run_file("matmul.s");
  std::ifstream f(std::string(tpusim::source_dir()) + "/tests/trace/data/matmul.log");
  std::stringstream expected;
  expected << f.rdbuf();
  REQUIRE(!expected.str().empty());
  CHECK(log_text(t->input()) == expected.str());
}
