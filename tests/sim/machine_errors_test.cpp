// Programs the machine must refuse: each gets a SimError naming the instruction, never a crash
// or hang, and the machine stays usable for the next run.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemc>

#include "machine_support.h"
#include "sim/context.h"

using namespace tpusim;
using namespace tpusim::test;
using Catch::Matchers::Contains;

namespace {

void require_error(const isa::Program& p, const sim::Arch& arch, uint64_t index, const std::string& text,
                   uint64_t max_cycles = 0) {
  for (sim::Engine e : {sim::Engine::fast, sim::Engine::stepped, sim::Engine::timing}) {
    INFO("engine " << sim::engine_name(e));
    try {
      sim::simulate(p, arch, {e, max_cycles});
      FAIL("no error");
    } catch (const sim::SimError& err) {
      CHECK(err.index == index);
      CHECK_THAT(err.what(), Contains(text));
    }
  }
}
}  // namespace

TEST_CASE("the first matmul must switch to a tile", "[machine][errors]") {
  require_error(assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=0, rows=1\nhalt"), small_arch(), 1,
                "multiplies before any weight tile was made active");
}

TEST_CASE("switching to a tile no earlier read_weights fetched is refused", "[machine][errors]") {
  require_error(assemble("matmul ub=0, acc=0, rows=1, switch\nhalt"), small_arch(), 0,
                "switches to the next weight tile, but no read_weights has fetched one");
  // A later read_weights does not count (fuzz_simulate found the machine taking its tile).
  require_error(assemble(kTile + "matmul ub=0, acc=0, rows=1, switch\nrw waddr=w, tiles=1\nhalt"),
                small_arch(), 0, "no read_weights has fetched one");
}

TEST_CASE("a barrier before the matmul that would free the weight FIFO deadlocks", "[machine][errors]") {
  sim::Arch arch = small_arch();
  arch.weight_fifo_tiles = 1;
  require_error(assemble(".weights w, 0, 48, init=random(1)\nrw waddr=w, tiles=3\nbarrier\n"
                         "matmul ub=0, acc=0, rows=1, switch\nhalt"),
                arch, 1, "waits for a free weight FIFO slot");
}

TEST_CASE("a matmul reading rows a DMA is still writing needs a sync", "[machine][errors]") {
  require_error(
      assemble(kTile + ".input x, 0, 4, init=random(2)\nrw waddr=w, tiles=1\nrhm host=x, ub=0, rows=1\n"
                       "matmul ub=0, acc=0, rows=1, switch\nhalt"),
      small_arch(), 2, "add `sync units=host` before instruction 2");
}

TEST_CASE("an activate overwriting rows a matmul still reads needs a sync", "[machine][errors]") {
  // act 2 (its accumulator rows untouched by the matmul) starts at 3 and overwrites UB rows
  // 0..1 before matmul 1 reads them from cycle 12 (it waits for its tile).
  require_error(assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=0, rows=2, switch\n"
                                 "act acc=8, ub=0, rows=2\nhalt"),
                small_arch(), 2,
                "ran first (from cycle 3, before cycle 12): add `sync units=matrix` before instruction 2");
  // In program order but overlapping in time: the matmul streams rows 0..7 during [12, 20); the
  // act runs [3, 13) (2 + 8 rows), so the vec behind it starts at 13 and overwrites row 0.
  require_error(
      assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=0, rows=8, switch\n"
                       "act acc=8, ub=20, rows=8\nvec op=pass, src=30, src_b=0, ub=0, rows=1\nhalt"),
      small_arch(), 3,
      "writes UB rows that instruction 1 (matmul ub=0, acc=0, rows=8, switch) (cycles 12..19) still uses "
      "from cycle 13: add `sync units=matrix` before instruction 3");
}

// The timing engine starts a matmul ahead of simulated time only when no other unit can act
// before its t0 (docs/timing.md, "Events"). Issue stopped at a sync issued before t0 can: a sync
// that does not wait for the matrix unit passes there, and what issue gives the other stations
// after it may start before t0. Here the matmul (issued at 3, available at 4) waits for its tile
// (requested at 1, 4 cycles of transfer and 3 of latency: lands at 8, shifted in by 8 + 4 = 12);
// issue sleeps until the sync's cycle 6, the sync on the idle host interface (or activation unit)
// passes, and the act (issued at 7) starts at 8, overwriting the UB rows the matmul reads from 12.
// The matmul must not start ahead at 4: its record would meet the act at 8 and the run fail
// there, not at 12. (The differential tests compare the failing cycle too: a random program found
// issue stopped at such a sync in the matrix unit's own process, by the pop of a matmul started
// ahead, its control process not yet woken.)
TEST_CASE("a matmul does not start ahead past a sync issue stopped at before its start", "[machine][errors]") {
  for (const char* units : {"host", "act"}) {
    INFO("sync units=" << units);
    const isa::Program p = assemble(kTile + fmt::format("rw waddr=w, tiles=1\nnop\nnop\n"
                                                        "matmul ub=0, acc=0, rows=2, switch\nnop\nnop\n"
                                                        "sync units={}\nact acc=8, ub=0, rows=2\nhalt",
                                                        units));
    for (sim::Engine e : {sim::Engine::fast, sim::Engine::stepped, sim::Engine::timing}) {
      INFO("engine " << sim::engine_name(e));
      try {
        sim::simulate(p, small_arch(), {e, 0});
        FAIL("no error");
      } catch (const sim::SimError& err) {
        CHECK(err.index == 7);
        CHECK_THAT(err.what(), Contains("ran first (from cycle 8, before cycle 12): add `sync units=matrix` "
                                        "before instruction 7"));
        CHECK(err.cycle == 12);  // (the matmul's start, where the conflict is seen: 8 when it started ahead)
      }
    }
  }
}

TEST_CASE("a cycle limit stops a long program cleanly", "[machine][errors]") {
  require_error(assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=0, rows=3, switch\nhalt"),
                small_arch(), 2, "did not halt within --max-cycles 10",
                10);  // reported at halt (2), still issuing
}

TEST_CASE("a program without halt is refused before it runs", "[machine][errors]") {
  require_error(assemble("nop"), small_arch(), 1, "program ends without halt");
}

TEST_CASE("addresses outside the configured memories are refused", "[machine][errors]") {
  require_error(assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=62, rows=3, switch\nhalt"),
                small_arch(), 1, "accumulator");
  require_error(assemble(kTile + "rw waddr=w, tiles=2\nhalt"), small_arch(), 0, "weight");
  require_error(assemble("rhm host=0, ub=0, rows=1\nhalt"), small_arch(), 0, "host");
}

TEST_CASE("the machine runs normally after a failed run", "[machine][errors]") {
  sim::Arch arch = small_arch();
  arch.weight_fifo_tiles = 1;
  require_error(assemble(".weights w, 0, 48, init=random(1)\nrw waddr=w, tiles=3\nbarrier\n"
                         "matmul ub=0, acc=0, rows=1, switch\nhalt"),
                arch, 1, "deadlock");
  const auto r = run_all(assemble(kTile + "rw waddr=w, tiles=1\nmatmul ub=0, acc=0, rows=3, switch\nhalt"),
                         small_arch());
  CHECK(r.fast.cycles == 22);
}

// The weight fetch station goes on from a switch in the matrix unit's process, ahead of simulated
// time (docs/timing.md, "Events"); a run stopped early must not show it: at every cycle limit and
// at a deadlock, every engine (the stepped one keeps the station in simulated time) stops with the
// same message, naming the same instruction and cycle.
TEST_CASE("a run stopped early says the same on every engine after the fetch station ran ahead",
          "[machine][errors]") {
  sim::Arch arch = small_arch();
  arch.weight_fifo_tiles = 1;  // every tile after the first waits for a switch
  arch.station_queue_depth = 1;
  const auto stop = [&](const isa::Program& p, sim::Engine e, uint64_t max_cycles) {
    try {
      sim::simulate(p, arch, {e, max_cycles});
    } catch (const sim::SimError& err) {
      return fmt::format("{}: {}", err.index, err.what());
    }
    return std::string("halted");
  };
  // Every cycle limit up to the program's end. The fetch station one rw ahead of matmuls of 32
  // vectors: it waits for the switch of each, which decides the shift that frees the slot of the
  // rw after next, and that rw's end takes the next from the queue, which issue waits for.
  std::string code = ".weights w, 0, 160, init=random(1)\nrw waddr=0, tiles=1\nrw waddr=16, tiles=1\n";
  for (int t = 2; t <= 6; ++t)
    code += fmt::format("rw waddr={}, tiles=1\nmatmul ub=0, acc={}, rows=32, switch\n", 16 * t, t % 2 * 32);
  code += "matmul ub=0, acc=0, rows=32, switch\nmatmul ub=0, acc=32, rows=32, switch\n";
  const isa::Program stream = assemble(code + "halt");
  const uint64_t cycles = sim::simulate(stream, arch, {sim::Engine::timing, 0}).cycles;
  for (uint64_t limit = 1; limit <= cycles; ++limit) {
    INFO("--max-cycles " << limit);
    const std::string timing = stop(stream, sim::Engine::timing, limit);
    CHECK((timing == "halted" ||
           timing.find(fmt::format("did not halt within --max-cycles {} (instruction", limit)) != std::string::npos));
    CHECK(stop(stream, sim::Engine::stepped, limit) == timing);
    CHECK(stop(stream, sim::Engine::fast, limit) == timing);
  }
  // A deadlock: the last rw's third tile waits for a switch that comes after the barrier.
  const isa::Program stuck = assemble(code + "rw waddr=112, tiles=3\nbarrier\nmatmul ub=0, acc=0, rows=4, switch\nhalt");
  const std::string timing = stop(stuck, sim::Engine::timing, 0);
  CHECK_THAT(timing, Contains("deadlock at cycle") && Contains("waits for a free weight FIFO slot for its tile 2"));
  CHECK(stop(stuck, sim::Engine::stepped, 0) == timing);
  CHECK(stop(stuck, sim::Engine::fast, 0) == timing);
}

namespace {
// Runs `p` on engine `e` in a child process whose SystemC time first moves on to `base_ps` (as
// a long-lived process's earlier runs move it: a Python session, a sweep worker), and returns
// "INDEX: MESSAGE (cycle CYCLE)" of its error, "halted at CYCLES", or how the child died.
std::string run_from(const isa::Program& p, const sim::Arch& arch, sim::Engine e, uint64_t base_ps) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      sc_core::sc_start(sc_core::sc_time::from_value(base_ps - sc_core::sc_time_stamp().value()),
                        sc_core::SC_RUN_TO_TIME);
      out = fmt::format("halted at {}", sim::simulate(p, arch, {e, 0}).cycles);
    } catch (const sim::SimError& err) {
      out = fmt::format("{}: {} (cycle {})", err.index, err.what(), err.cycle.value_or(0));
    } catch (const std::exception& err) {
      out = fmt::format("exception: {}", err.what());
    }
    const ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == ssize_t(out.size()) ? 0 : 3);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status), out);
  return out;
}
}  // namespace

// SystemC counts 64-bit picoseconds: a run's last cycle, its horizon, is what the process has not
// yet simulated, less a margin (Context::horizon). The weight fetch station run on by a switch
// in the matrix unit's process (docs/timing.md, "Events") hands a wait that passes the horizon
// back to its thread at the cycle the thread would have woken at, and the thread fails there. It
// handed it back at the cycle it had reached before the switch (review30 #2): an event notified
// 100.8M cycles in the past (sc_time arithmetic wraps), which SystemC fired at the switch, so the
// run failed 900.8M cycles early, at the switch, where no wait passed the horizon yet.
TEST_CASE("the fetch station hands a wait past the horizon back where its thread would wake", "[machine][errors]") {
  sim::Arch arch = small_arch();
  arch.clock_mhz = 1e5;  // 10 ps a cycle
  arch.weight_fifo_tiles = 1;
  arch.weight_mem_gbps = 0.001;  // a 16-byte tile: 16 x 1e5 = 1.6e6 cycles
  arch.weight_mem_latency_cycles = 1000000000;
  arch.host_gbps = 0.001;  // 1e5 cycles a byte
  arch.host_latency_cycles = 1000000000;
  // 16 DMAs of 1.1e9 cycles first (a horizon is at least 2^34 cycles away), then tiles A, B and
  // C: C waits for B's slot from the cycle A's slot freed; B's shift waits for the switch to A,
  // which the matmul makes after another DMA, between A's landing and B's. No matmul uses B, so
  // only the station waits past the horizon.
  std::string code = ".weights w, 0, 48, init=random(1)\n.input x, 0, 1024, init=random(2)\n";
  for (int i = 0; i < 16; ++i) code += "rhm host=x, ub=0, rows=256\n";
  code += "sync units=host\nrw waddr=0, tiles=1\nrw waddr=16, tiles=1\nrw waddr=32, tiles=1\n"
          "rhm host=x, ub=0, rows=256\nsync units=host\nmatmul ub=0, acc=0, rows=1, switch\n";
  const isa::Program p = assemble(code + "halt");
  const size_t rw_b = 18, matmul_a = 22;
  // (At this process's own horizon the run ends.) With one slot, B is requested when A's shift
  // frees it, and C's station waits for B's slot from the cycle after; B lands a transfer and a
  // latency later; the switch to A comes between.
  const sim::RunResult dry = sim::simulate(p, arch, {sim::Engine::timing, 0});
  const uint64_t requested = dry.timeline[rw_b].end - 1;
  const uint64_t landed = requested + sim::transfer_cycles(16, arch.weight_mem_gbps, arch.clock_mhz) +
                          arch.weight_mem_latency_cycles;
  const uint64_t now = dry.timeline[matmul_a].start;
  REQUIRE(requested + 1 < now);
  REQUIRE(now < landed);
  CHECK(dry.cycles > landed + 4);  // (the halt waits for C's request)
  // A process that has already simulated so long that this run's horizon is B's landing; B's
  // shift (4 rows) ends past it, and so does the wait of C's station for B's slot
  // (Context::horizon = (2^64 - 1 - base) / period - kHorizonMargin).
  const uint64_t base = UINT64_MAX - 10 * (landed + sim::Context::kHorizonMargin);
  // Where each engine's first wait passes the horizon: the stepped array shifts B in row by row
  // from its landing and waits there for the next row; on the other engines C's station waits for
  // B's slot, freed when the shift ends, 4 rows later, and fails when it wakes there. (SimError::cycle
  // is the failing cycle; without the fix fast and timing said 18,740,800,006: the switch.)
  const auto error = [&](uint64_t wait_end, uint64_t at) {
    return fmt::format("23: instruction 23 (halt): simulated time overflow: a wait ends at cycle {} + 0, past cycle "
                       "{}, the last a run can reach at clock_mhz = 100000",
                       wait_end, landed) +
           fmt::format(" (SystemC counts 64-bit picoseconds, about 213 days); lower the latencies or raise the "
                       "bandwidths (docs/arch.md gives every parameter's range) (cycle {})",
                       at);
  };
  CHECK(run_from(p, arch, sim::Engine::stepped, base) == error(landed + 1, landed));
  CHECK(run_from(p, arch, sim::Engine::fast, base) == error(landed + 4, landed + 4));
  CHECK(run_from(p, arch, sim::Engine::timing, base) == error(landed + 4, landed + 4));
}
