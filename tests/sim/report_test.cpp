// The report: its keys are the schema's (report_keys), the fractions add up as the TPU paper's
// counters do, and docs/report.md is generated from the same table.
#include "sim/report.h"

#include <fstream>
#include <sstream>

#include "machine_support.h"

using namespace tpusim;

namespace {
nlohmann::ordered_json report_of(const isa::Program& p, const sim::Arch& arch, const sim::RunResult& r) {
  sim::ReportInput in{&p, &arch, sim::Engine::fast, &r, true, "reference executor", std::nullopt, std::nullopt};
  return sim::make_report(in);
}
}  // namespace

TEST_CASE("report keys are the schema's, in order", "[report]") {
  const isa::Program p = isa::assemble_file(std::string(TPUSIM_SOURCE_DIR) + "/workloads/asm/mlp2.s");
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
  const isa::Program p = isa::assemble_file(std::string(TPUSIM_SOURCE_DIR) + "/workloads/asm/matmul.s");
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
  const std::string table = sim::format_report(j);
  CHECK_THAT(table, Catch::Contains("cycles       3077 (4.396 us)"));
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

TEST_CASE("docs/report.md is generated from the schema", "[report]") {
  std::ifstream f(std::string(TPUSIM_SOURCE_DIR) + "/docs/report.md");
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str() == sim::report_markdown());
}
