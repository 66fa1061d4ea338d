// The report: its keys are the schema's (report_keys), the fractions add up as the TPU paper's
// counters do, and docs/report.md is generated from the same table.
#include "sim/report.h"

#include <fstream>
#include <sstream>

#include "machine_support.h"
#include "sim/host_model.h"
#include "tools/source_dir.h"

using namespace tpusim;

namespace {
nlohmann::ordered_json report_of(const isa::Program& p, const sim::Arch& arch, const sim::RunResult& r) {
  sim::ReportInput in{&p, &arch, sim::Engine::fast, &r, true, "reference executor", std::nullopt, std::nullopt,
                      std::nullopt};
  return sim::make_report(in);
}
}  // namespace

TEST_CASE("report keys are the schema's, in order", "[report]") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/mlp2.s");
  const sim::Arch arch;
  const sim::RunResult r = sim::simulate(p, arch, {sim::Engine::timing, 0});
  const auto j = report_of(p, arch, r);
  std::vector<std::string> keys, want;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  for (const sim::ReportKey& k : sim::report_keys()) want.emplace_back(k.name);
  CHECK(keys == want);
  keys.clear();
  want.clear();
  for (const auto& [k, v] : j["breakdown"].items()) keys.push_back(k);
  for (const sim::ReportKey& k : sim::breakdown_keys()) want.emplace_back(k.name);
  CHECK(keys == want);
  // Every architecture parameter, in table order, after the name.
  keys.clear();
  want = {"name"};
  for (const auto& [k, v] : j["arch"].items()) keys.push_back(k);
  for (const sim::ParamInfo& pi : sim::arch_params()) want.emplace_back(pi.name);
  CHECK(keys == want);
}

TEST_CASE("report figures follow from the counters", "[report]") {
  const isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/matmul.s");
  const sim::Arch arch;
  const sim::RunResult r = sim::simulate(p, arch, {sim::Engine::timing, 0});
  const auto j = report_of(p, arch, r);
  const auto& b = j["breakdown"];
  // matmul.s: 3077 cycles (tests/sim/machine_test.cpp works them out).
  CHECK(j["cycles"] == 3077);
  CHECK(j["seconds"].get<double>() == Approx(3077 / 700e6));
  CHECK(j["macs"] == 8 * 256 * 256);
  CHECK(j["tops"].get<double>() == Approx(2.0 * 8 * 256 * 256 / (3077 / 700e6) / 1e12));
  CHECK(j["batch"] == 1);
  CHECK(j["inferences_per_second"].get<double>() == Approx(700e6 / 3077));
  CHECK(j["ub_peak_bytes"] == 16 * 256);
  CHECK(j["acc_peak_rows"] == 8);
  CHECK(j["instructions"]["matmul"] == 1);
  CHECK(j["instruction_cycles"]["matmul"] == 2226 - 1707);
  CHECK(b["array_active"].get<double>() == Approx(8.0 / 3077));
  CHECK(b["weight_shift"].get<double>() == Approx(256.0 / 3077));
  CHECK(b["array_active"].get<double>() + b["weight_stall"].get<double>() + b["weight_shift"].get<double>() +
            b["non_matrix"].get<double>() ==
        Approx(1.0));
  CHECK(b["useful_macs"].get<double>() + b["unused_macs"].get<double>() ==
        Approx(b["array_active"].get<double>()));
  CHECK(j["output_matches_reference"] == true);
  // The host model (sim/host_model.h): 8 instructions x 16 bytes downloaded in one DMA of
  // host_latency_cycles 700 + ceil(128 x 700 / 10740 = 8.3) = 709 cycles = 1.012857 us, plus the
  // driver's 10 us: 11.012857 us; with the program's 3077 cycles (4.395714 us) 15.408571 us.
  REQUIRE(p.code.size() == 8);
  CHECK(j["host_overhead_seconds"].get<double>() == Approx(10e-6 + 709 / 700e6).epsilon(1e-12));
  CHECK(j["latency_seconds"].get<double>() == Approx(10e-6 + (709 + 3077) / 700e6).epsilon(1e-12));
  const std::string table = sim::format_report(j);
  CHECK_THAT(table, Catch::Contains("cycles       3077 (4.396 us)"));
  CHECK_THAT(
      table,
      Catch::Contains(
          "latency      15.409 us per batch with the host (11.013 us driver and instruction download)"));
  CHECK_THAT(table, Catch::Contains("weight shift    8.32%"));
}

TEST_CASE("batch comes from the program's metadata", "[report]") {
  isa::Program p;
  CHECK(sim::program_batch(p) == 1);
  p.meta["batch"] = 200;
  CHECK(sim::program_batch(p) == 200);
  p.meta["batch"] = "two hundred";
  CHECK(sim::program_batch(p) == 1);
}

TEST_CASE("pieces: how a batch that does not fit whole runs, from the program's metadata", "[report]") {
  isa::Program p = isa::assemble_file(std::string(tpusim::source_dir()) + "/workloads/asm/matmul.s");
  const sim::Arch arch;
  const sim::RunResult r = sim::simulate(p, arch, {sim::Engine::timing, 0});
  CHECK(report_of(p, arch, r)["pieces"].is_null());  // no metadata: nothing said
  p.meta["batch"] = 32;
  p.meta["batch_piece"] = 32;
  CHECK(report_of(p, arch, r)["pieces"].is_null());  // one piece
  // The whole model once per piece (tpu-v1's driver): 32 / 12 = 3 pieces, the last of 8.
  p.meta["batch_piece"] = 12;
  auto j = report_of(p, arch, r);
  CHECK(j["pieces"].dump() == R"({"piece":12,"pieces":3,"schedule":"whole model"})");
  CHECK_THAT(sim::format_report(j),
             Catch::Contains("\npieces       batch 32 in 3 pieces of 12 (the whole model once per piece)\n"));
  // The piece schedule: each run of layers in its own pieces (meta.piece_segments, compiler/lower.cpp).
  p.meta["batch_piece"] = 16;
  p.meta["piece_segments"] = nlohmann::json::parse(
      R"([{"first_layer":"conv1","last_layer":"fc1","piece":16,"pieces":2},)"
      R"({"first_layer":"fc2","last_layer":"fc2","piece":32,"pieces":1}])");
  j = report_of(p, arch, r);
  CHECK(j["pieces"]["schedule"] == "piece schedule");
  CHECK(j["pieces"]["pieces"] == 2);
  CHECK(j["pieces"]["segments"] == p.meta["piece_segments"]);
  CHECK_THAT(sim::format_report(j),
             Catch::Contains("\npieces       batch 32 by the piece schedule: conv1..fc1 in 2 pieces of 16, fc2 over "
                             "the whole batch\n"));
  // Metadata not of the compiler's form (a program's meta is the user's to write): nothing said.
  p.meta["piece_segments"] = nlohmann::json::array({1});
  CHECK(report_of(p, arch, r)["pieces"].is_null());
  p.meta.erase("piece_segments");
  p.meta["batch_piece"] = "twelve";
  CHECK(report_of(p, arch, r)["pieces"].is_null());
}

TEST_CASE("docs/report.md is generated from the schema", "[report]") {
  std::ifstream f(std::string(tpusim::source_dir()) + "/docs/report.md");
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str() == sim::report_markdown());
}

TEST_CASE("the host model: driver time and instruction download around the program", "[report]") {
  sim::Arch a;
  a.host_driver_us = 25;
  a.host_latency_cycles = 100;
  a.host_gbps = 7;  // 10 bytes per cycle at 700 MHz
  // 1000 instructions x 16 bytes = 16000 bytes / 10 per cycle = 1600 cycles, + 100 = 1700 cycles
  // (2.428571 us); the driver 25 us; the program 7000 cycles (10 us).
  const sim::BatchLatency l = sim::batch_latency(a, 7000, 1000);
  CHECK(l.driver_seconds == Approx(25e-6).epsilon(1e-12));
  CHECK(l.instruction_seconds == Approx(1700 / 700e6).epsilon(1e-12));
  CHECK(l.program_seconds == Approx(10e-6).epsilon(1e-12));
  CHECK(l.total() == Approx(25e-6 + 1700 / 700e6 + 10e-6).epsilon(1e-12));
  a.host_driver_us = 0;
  a.host_latency_cycles = 0;
  CHECK(sim::batch_latency(a, 0, 0).total() == 0);  // nothing to download, no driver: no latency
}
