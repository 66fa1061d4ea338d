// The energy model (sim/energy.h) on workloads/asm/matmul.s, with round energies so that every
// figure is exact arithmetic on the program's actions:
//   rw 1 tile          dram 65536 B, weight FIFO 65536 B
//   rhm 8 rows         host link 8 x 256 = 2048 B, UB write 2048 B
//   matmul 8 vectors   UB read 2048 B, accumulator write 8 x 256 x 4 = 8192 B (no accumulate)
//   act 8 rows         accumulator read 8192 B, UB write 2048 B
//   whm 8 rows         host link 2048 B, UB read 2048 B
//   array_active 8 cycles x 65536 cells = 524288 MACs; 3077 cycles at 700 MHz.
#include "sim/energy.h"

#include <catch2/catch.hpp>

#include "isa/assembler.h"
#include "sim/machine.h"
#include "sim/report.h"
#include "tools/source_dir.h"

using namespace tpusim;

namespace {

sim::Arch round_energies() {
  sim::Arch a;
  a.energy_mac_pj = 1;
  a.energy_ub_read_pj_per_byte = 2;
  a.energy_ub_write_pj_per_byte = 3;
  a.energy_acc_read_pj_per_byte = 4;
  a.energy_acc_write_pj_per_byte = 5;
  a.energy_weight_fifo_pj_per_byte = 6;
  a.energy_dram_pj_per_byte = 7;
  a.energy_host_pj_per_byte = 8;
  a.static_watts = 10;
  return a;
}

}  // namespace

TEST_CASE("energy: actions and joules of matmul.s, the arithmetic by hand") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/matmul.s");
  const sim::Arch a = round_energies();
  sim::RunOptions opt;
  opt.engine = sim::Engine::timing;
  const sim::RunResult r = sim::simulate(p, a, opt);
  REQUIRE(r.cycles == 3077);
  REQUIRE(r.array_macs == 524288);
  const sim::ActionCounts c = sim::count_actions(p, a, r.timeline.size(), r.array_macs);
  using A = sim::EnergyAction;
  CHECK(c[A::mac] == 524288);
  CHECK(c[A::ub_read] == 4096);    // matmul 2048 + whm 2048
  CHECK(c[A::ub_write] == 4096);   // rhm 2048 + act 2048
  CHECK(c[A::acc_read] == 8192);   // act
  CHECK(c[A::acc_write] == 8192);  // matmul
  CHECK(c[A::weight_fifo] == 65536);
  CHECK(c[A::dram] == 65536);
  CHECK(c[A::host_link] == 4096);  // rhm 2048 + whm 2048

  // pJ: 524288 x 1 + 4096 x 2 + 4096 x 3 + 8192 x 4 + 8192 x 5 + 65536 x 6 + 65536 x 7 + 4096 x 8
  //   = 524288 + 8192 + 12288 + 32768 + 40960 + 393216 + 458752 + 32768 = 1503232 pJ;
  // static: 10 W x 3077 / 700e6 s = 4.3957142857e-5 J.
  const double seconds = 3077 / 700e6;
  const sim::Energy e = sim::energy_of(c, a, seconds);
  CHECK(e.joules[0] == Approx(524288e-12).epsilon(1e-12));
  CHECK(e.joules[5] == Approx(393216e-12).epsilon(1e-12));
  CHECK(e.static_joules == Approx(10 * seconds).epsilon(1e-12));
  const double total = 1503232e-12 + 10 * seconds;
  CHECK(e.total() == Approx(total).epsilon(1e-12));

  // The report: energy, per inference (batch 1: matmul.s has no .meta batch), power, TOPS/W.
  const sim::ReportInput in{&p, &a, opt.engine, &r, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
  const auto j = sim::make_report(in);
  CHECK(j["energy_joules"].get<double>() == Approx(total).epsilon(1e-12));
  CHECK(j["joules_per_inference"].get<double>() == Approx(total).epsilon(1e-12));
  CHECK(j["average_watts"].get<double>() == Approx(total / seconds).epsilon(1e-12));  // 10.342 W
  CHECK(j["tops_per_watt"].get<double>() ==
        Approx(j["tops"].get<double>() / (total / seconds)).epsilon(1e-12));
  CHECK(j["energy"]["dram"].get<double>() == Approx(458752e-12).epsilon(1e-12));
  CHECK(j["energy"]["static"].get<double>() == Approx(10 * seconds).epsilon(1e-12));
}

TEST_CASE("energy: every engine gives the same energy (it depends on the program, not the data)") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/matmul.s");
  const sim::Arch a;
  double joules[3];
  int i = 0;
  for (sim::Engine e : {sim::Engine::fast, sim::Engine::stepped, sim::Engine::timing}) {
    sim::RunOptions opt;
    opt.engine = e;
    const sim::RunResult r = sim::simulate(p, a, opt);
    const sim::ReportInput in{&p, &a, e, &r, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
    joules[i++] = sim::make_report(in)["energy_joules"].get<double>();
  }
  CHECK(joules[0] == joules[1]);
  CHECK(joules[0] == joules[2]);
}
