// Programs the machine must refuse: each gets a SimError naming the instruction, never a crash
// or hang, and the machine stays usable for the next run.
#include "machine_support.h"

using namespace tpusim;
using namespace tpusim::test;
using Catch::Matchers::Contains;

namespace {
const std::string kTile = ".weights w, 0, 16, init=random(1)\n";

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
