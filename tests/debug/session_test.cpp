// sim::DebugSession (sim/debugger.h), the stepping debugger's core: a debugged run ends with
// exactly simulate()'s result on the stepped engine, reports every instruction's issue, start
// and end at the cycle the timeline records, and shows the array's registers as the timing rules
// of docs/timing.md place them.
#include <catch2/catch.hpp>
#include <map>
#include <tuple>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "isa/assembler.h"
#include "sim/debugger.h"
#include "sim/host_model.h"
#include "sim/reference.h"
#include "tests/sim/same_run.h"
#include "tools/source_dir.h"

using namespace tpusim;

namespace {

const std::string kSource = tpusim::source_dir();

sim::Arch small_arch() {  // tests/data/run/small.json: a 16 x 16 array
  return sim::load_arch_file(kSource + "/tests/data/run/small.json");
}

// mnist_mlp (batch 2) compiled for a 16 x 16 array (256 accumulator rows, 64 KiB of UB), and its
// run on the stepped engine.
struct CompiledRun {
  sim::Arch arch;
  compiler::Compiled c;
  sim::RunResult expected;
};
CompiledRun mnist_mlp_16x16() {
  sim::Arch arch;
  arch.array_rows = arch.array_cols = 16;
  arch.acc_entries = 256;
  arch.ub_bytes = 64 * 1024;
  compiler::LoadOptions o;
  o.batch = 2;
  compiler::Compiled c = compiler::compile_file(kSource + "/workloads/small/mnist_mlp.toml", arch, o);
  sim::RunResult expected = sim::simulate(c.program, arch, {sim::Engine::stepped, 0});
  return {arch, std::move(c), std::move(expected)};
}

// Runs a session to its end `stride` cycles at a time; every event must match `expected`'s
// timeline (once each, in cycle order).
sim::RunResult debug_to_end(const isa::Program& p, const sim::Arch& arch, uint64_t stride,
                            const sim::RunResult& expected) {
  sim::DebugSession s(p, arch);
  std::vector<sim::InstructionEvent> events = s.first_events();
  while (!s.over()) {
    const uint64_t before = s.cycle();
    const auto more = s.advance(stride == 0 ? UINT64_MAX : s.cycle() + stride);
    for (const auto& e : more) REQUIRE((e.cycle > before && e.cycle <= s.cycle()));
    events.insert(events.end(), more.begin(), more.end());
    REQUIRE((s.over() || s.cycle() == before + stride));
  }
  REQUIRE(!s.error());
  REQUIRE(s.cycle() == expected.cycles);
  std::map<std::pair<uint64_t, sim::EventKind>, uint64_t> seen;
  for (const auto& e : events) REQUIRE(seen.emplace(std::pair{e.index, e.kind}, e.cycle).second);
  REQUIRE(seen.size() == 3 * expected.timeline.size());
  for (uint64_t i = 0; i < expected.timeline.size(); ++i) {
    INFO("instruction " << i);
    CHECK(seen[{i, sim::EventKind::issue}] == expected.timeline[i].issue);
    CHECK(seen[{i, sim::EventKind::start}] == expected.timeline[i].start);
    CHECK(seen[{i, sim::EventKind::end}] == expected.timeline[i].end);
  }
  for (size_t k = 1; k < events.size(); ++k) REQUIRE(events[k - 1].cycle <= events[k].cycle);
  return *s.result();
}

}  // namespace

TEST_CASE("a debugged run of matmul.s ends as simulate() does on the stepped engine") {
  const isa::Program p = isa::assemble_file(kSource + "/workloads/asm/matmul.s");
  const sim::Arch arch;  // tpu-v1
  const sim::RunResult expected = sim::simulate(p, arch, {sim::Engine::stepped, 0});
  test::require_same_run(debug_to_end(p, arch, 0, expected), expected);
  test::require_same_run(debug_to_end(p, arch, 1, expected), expected);
  test::require_same_run(debug_to_end(p, arch, 97, expected), expected);
}

TEST_CASE("a debugged run through int shows the host's launch holding issue, and ends as simulate() does") {
  sim::Arch arch = small_arch();
  arch.host_driver_us = 0.1;
  const isa::Program p = isa::assemble(".model \"int\"\nnop\nint\nnop\nhalt\n", "int.s");
  const sim::RunResult expected = sim::simulate(p, arch, {sim::Engine::stepped, 0});
  test::require_same_run(debug_to_end(p, arch, 1, expected), expected);
  test::require_same_run(debug_to_end(p, arch, 0, expected), expected);
  // int issues at 1, its issue cycle ends at 2 (nothing to drain), and issue is held for the launch
  // until timeline[1].end; halfway there the control unit says so.
  const uint64_t resumed = expected.timeline[1].end;
  CHECK(resumed == 2 + sim::launch_cycles(arch, 2));
  sim::DebugSession s(p, arch);
  s.advance(resumed / 2);
  CHECK(s.stations()[0].blocked == "instruction 1 (int) holds issue for the host's launch until cycle " +
                                      std::to_string(resumed));
}

TEST_CASE("a debugged run of a compiled model, cycle by cycle, ends as simulate() does") {
  const auto [arch, c, expected] = mnist_mlp_16x16();
  test::require_same_run(debug_to_end(c.program, arch, 1, expected), expected);
  test::require_same_run(debug_to_end(c.program, arch, 0, expected), expected);
}

TEST_CASE("an abandoned session leaves the machine ready for the next run") {
  const isa::Program p = isa::assemble_file(kSource + "/tests/data/run/small.s");
  const sim::Arch arch = small_arch();
  const sim::RunResult expected = sim::simulate(p, arch, {sim::Engine::stepped, 0});
  {
    sim::DebugSession s(p, arch);
    s.advance(expected.timeline[3].start + 3);  // the matmul streams
    REQUIRE(!s.over());
    REQUIRE_THROWS_AS(sim::simulate(p, arch, {sim::Engine::fast, 0}), std::logic_error);
    REQUIRE_THROWS_AS(sim::DebugSession(p, arch), std::logic_error);
  }
  test::require_same_run(sim::simulate(p, arch, {sim::Engine::stepped, 0}), expected);
  test::require_same_run(debug_to_end(p, arch, 5, expected), expected);
}

TEST_CASE("phases follow the timeline") {
  const isa::Program p = isa::assemble_file(kSource + "/tests/data/run/small.s");
  const sim::Arch arch = small_arch();
  const sim::RunResult expected = sim::simulate(p, arch, {sim::Engine::stepped, 0});
  const auto& tl = expected.timeline;
  sim::DebugSession s(p, arch);
  REQUIRE(s.phase(0) == sim::Phase::queued);  // rw issued at 0, available at 1
  REQUIRE(s.phase(7) == sim::Phase::not_issued);
  s.advance(tl[3].start - 1);
  REQUIRE(s.phase(3) == sim::Phase::queued);
  REQUIRE(s.phase(2) == sim::Phase::done);  // sync units=host
  s.advance(tl[3].start);
  REQUIRE(s.phase(3) == sim::Phase::running);
  REQUIRE(s.started_at(3) == tl[3].start);
  REQUIRE(!s.ended_at(3));
  s.advance(tl[3].end);
  REQUIRE(s.phase(3) == sim::Phase::done);
  REQUIRE(s.ended_at(3) == tl[3].end);
}

TEST_CASE("the array's registers at each cycle follow the timing rules") {
  // small.s: one 16 x 16 tile, 4 vectors from UB rows 0..3, matmul at t0 = timeline[3].start.
  const isa::Program p = isa::assemble_file(kSource + "/tests/data/run/small.s");
  const sim::Arch arch = small_arch();
  const uint64_t N = 16, M = 16;
  const uint64_t t0 = sim::simulate(p, arch, {sim::Engine::stepped, 0}).timeline[3].start;
  sim::DebugSession s(p, arch);
  s.advance(t0 - 1);
  REQUIRE(s.weight_path().shadow);  // shifted in, not yet switched to
  REQUIRE(s.weight_path().fifo.empty());
  REQUIRE(!s.weight_path().active);
  s.advance(t0);  // the matmul starts: its tile becomes the active one
  REQUIRE(!s.weight_path().shadow);
  REQUIRE(s.weight_path().active);
  REQUIRE(s.weight_path().active->waddr == 0);
  REQUIRE(s.array().empty());  // nothing has entered yet: cycle t0's inputs move at its end
  for (uint64_t T = t0 + 1; T < t0 + 4 + N + M; ++T) {
    s.advance(T);
    INFO("cycle " << T);
    // At cycle T, x[k][j] holds element k of the vector that entered row 0 at T - 1 - k - j,
    // and cell (k, j) has switched to the new tile once that wavefront passed it.
    for (uint64_t k = 0; k < N; ++k)
      for (uint64_t j = 0; j < M; ++j) {
        const int64_t v = int64_t(T) - 1 - int64_t(k + j) - int64_t(t0);
        const bool live = v >= 0 && v < 4;
        REQUIRE(bool(s.array().x_flags(k, j) & sim::ArrayModel::kValid) == live);
        REQUIRE(bool(s.array().x_flags(k, j) & sim::ArrayModel::kSwitch) == (v == 0));
        if (live) REQUIRE(s.array().x_value(k, j) == int8_t(s.state().ub_row(uint64_t(v))[k]));
        const int8_t tile_weight = int8_t(p.weights[k * M + j]);
        if (v >= 0) REQUIRE(s.array().weight(k, j) == tile_weight);
        else REQUIRE(s.array().weight(k, j) == 0);
      }
  }
}

TEST_CASE("a deadlocked program ends the session with the machine's message") {
  const isa::Program p = isa::assemble_file(kSource + "/tests/data/run/deadlock.s");
  sim::DebugSession s(p, sim::Arch{});
  s.advance(UINT64_MAX);
  REQUIRE(s.over());
  REQUIRE(!s.result());
  REQUIRE(s.error());
  CHECK_THAT(*s.error(),
             Catch::Contains("deadlock at cycle") && Catch::Contains("waits for a free weight FIFO slot"));
  bool blocked = false;
  for (const auto& st : s.stations()) blocked |= !st.blocked.empty();
  CHECK(blocked);  // what each unit was waiting for when nothing could happen any more
}

namespace {

// Everything a session shows at its cycle, as plain values.
struct Snapshot {
  uint64_t cycle = 0, current = 0;
  bool over = false;
  std::vector<uint8_t> ub, host;
  std::vector<int32_t> acc, cells;  // every cell's weight, shadow, x, flags, psum, psum valid
  std::vector<std::tuple<int, std::optional<uint64_t>, std::optional<uint64_t>, std::optional<uint64_t>>>
      code;
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> tiles;  // waddr, landed, use
  std::optional<uint64_t> shadow, active;
  uint64_t shift_start = 0;
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> matmuls;
  std::vector<std::tuple<std::vector<uint64_t>, std::vector<uint64_t>, std::string>> stations;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const sim::DebugSession& s) {
  Snapshot n;
  n.cycle = s.cycle();
  n.current = s.current();
  n.over = s.over();
  n.ub = s.state().ub;
  n.acc = s.state().acc;
  for (const auto& h : s.state().host) n.host.insert(n.host.end(), h.bytes.begin(), h.bytes.end());
  const sim::SystolicArray& a = s.array();
  for (uint64_t k = 0; k < a.rows(); ++k)
    for (uint64_t j = 0; j < a.cols(); ++j)
      for (int32_t v : {int32_t(a.weight(k, j)), int32_t(a.shadow(k, j)), int32_t(a.x_value(k, j)),
                        int32_t(a.x_flags(k, j)), a.psum(k, j), int32_t(a.psum_valid(k, j))})
        n.cells.push_back(v);
  for (uint64_t i = 0; i < s.code_size(); ++i)
    n.code.emplace_back(int(s.phase(i)), s.issued_at(i), s.started_at(i), s.ended_at(i));
  const sim::WeightPathView w = s.weight_path();
  for (const auto& t : w.fifo) n.tiles.emplace_back(t.waddr, t.landed, t.use.rows, t.use.cols);
  if (w.shadow) n.shadow = w.shadow->waddr;
  if (w.active) n.active = w.active->waddr;
  n.shift_start = w.shift_start;
  for (const auto& m : s.matmuls()) n.matmuls.emplace_back(m.index, m.t0, m.vectors, m.written);
  for (const auto& st : s.stations()) {
    std::vector<uint64_t> queued;
    for (const auto& q : st.queued) queued.insert(queued.end(), {q.index, q.available});
    n.stations.emplace_back(st.running, queued, st.blocked);
  }
  return n;
}

}  // namespace

TEST_CASE("rewind returns to exactly the state a fresh session has at that cycle") {
  // mnist_mlp on 16 x 16: cycles inside its first matmul's wavefront, during the next tile's
  // shift, and in a later layer; then back from the halt.
  const auto [arch, c, expected] = mnist_mlp_16x16();
  uint64_t t0 = 0;  // the first matmul's start
  for (uint64_t i = 0; i < c.program.code.size() && !t0; ++i)
    if (c.program.code[i].opcode == isa::Opcode::matmul) t0 = expected.timeline[i].start;
  REQUIRE(t0 > 0);
  std::vector<std::pair<uint64_t, Snapshot>> fresh;
  for (uint64_t T : {t0 + 5, t0 + 40, (t0 + expected.cycles) / 2}) {
    sim::DebugSession s(c.program, arch);
    s.advance(T);
    REQUIRE(s.cycle() == T);
    fresh.emplace_back(T, snapshot(s));
  }
  sim::DebugSession s(c.program, arch);
  s.advance(expected.cycles - 10);
  for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) {  // back, further back, ...
    s.rewind(it->first);
    INFO("rewound to cycle " << it->first);
    REQUIRE(snapshot(s) == it->second);
  }
  // From the halt back, and on again: the run ends as simulate() does, with the same events.
  s.advance(UINT64_MAX);
  REQUIRE(s.over());
  s.rewind(fresh[1].first);
  REQUIRE(snapshot(s) == fresh[1].second);
  const auto events = s.advance(UINT64_MAX);
  REQUIRE(s.result());
  test::require_same_run(*s.result(), expected);
  for (const auto& e : events) {
    const auto& t = expected.timeline[e.index];
    REQUIRE(e.cycle == (e.kind == sim::EventKind::issue   ? t.issue
                        : e.kind == sim::EventKind::start ? t.start
                                                          : t.end));
    REQUIRE(e.cycle > fresh[1].first);
  }
}
