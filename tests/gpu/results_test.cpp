// The GPU reference data format (gpu/results.h): round trip, the committed fixture, CSV, and
// errors that name the file and the field.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "gpu/results.h"
#include "isa/error.h"
#include "tools/source_dir.h"

using namespace tpusim;

namespace {

gpu::ResultsFile sample() {
  gpu::ResultsFile f;
  f.kind = "test-fixture";
  f.note = "made up";
  f.tool = "tpusim-gpu 0.1.0";
  f.command = "build/tpusim-gpu workloads/small/mnist_mlp.toml --batch 16";
  f.date = "2025-01-01T00:00:00Z";
  f.host = "nowhere";
  f.device.name = "Fixture GPU, not real";
  f.device.compute_capability = "9.0";
  f.device.sms = 100;
  f.device.sm_clock_mhz = 1000;
  f.device.peak_int8_tops = 819.2;
  f.device.driver_version = "0 (CUDA driver API 13.0)";
  f.device.cuda_runtime_version = "13.0";
  f.device.cublaslt_version = "130000";
  f.device.peak_source = "fixture";
  gpu::Measurement m;
  m.workload = "mnist_mlp";
  m.model = "workloads/small/mnist_mlp.toml";
  m.batch = 16;
  m.timing = "end_to_end";
  m.cuda_graph = true;
  m.latency_seconds = 5e-5;
  m.latency_seconds_min = 4e-5;
  m.latency_seconds_max = 6e-5;
  m.repeats = 7;
  m.iterations = 20;
  m.inferences_per_second = 320000;
  m.tops = 0.15024128;
  m.model_macs = 3756032;
  m.gemm_macs = 3756032;
  m.weight_bytes = 234752;
  m.output_matches_reference = true;
  f.results = {m, m};
  f.results[1].timing = "device";
  f.results[1].output_matches_reference.reset();
  f.results[0].launches_queued_ahead = false;
  return f;
}

}  // namespace

TEST_CASE("results survive a JSON round trip", "[gpu][results]") {
  const gpu::ResultsFile f = sample();
  const gpu::ResultsFile g = gpu::parse_results(gpu::results_json(f), "x.json");
  REQUIRE(gpu::results_json(g) == gpu::results_json(f));
  REQUIRE(g.results.size() == 2);
  CHECK(g.results[0].output_matches_reference == std::optional<bool>(true));
  CHECK_FALSE(g.results[1].output_matches_reference.has_value());
  // Written only when known (the GPU runner's gate); absent in older files and the CPU runner's.
  CHECK(g.results[0].launches_queued_ahead == std::optional<bool>(false));
  CHECK_FALSE(g.results[1].launches_queued_ahead.has_value());
  CHECK(gpu::results_json(f).find("\"launches_queued_ahead\": false") != std::string::npos);
  CHECK(g.device.name == "Fixture GPU, not real");
}

TEST_CASE("results as CSV: a header and one row per measurement", "[gpu][results]") {
  const std::string csv = gpu::results_csv(sample());
  CHECK(csv.rfind("kind,device,compute_capability,", 0) == 0);
  CHECK(csv.find("\ntest-fixture,\"Fixture GPU, not real\",9.0,") != std::string::npos);
  CHECK(csv.find(",mnist_mlp,workloads/small/mnist_mlp.toml,16,cublaslt,end_to_end,warm,true,5e-05,4e-05,6e-05,7,20,"
                 "320000,0.15024128,3756032,3756032,234752,true,false,build/tpusim-gpu") != std::string::npos);
  CHECK(csv.find(",234752,,,build/tpusim-gpu") != std::string::npos);  // the second row: neither known
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
}

TEST_CASE("the committed fixture reads and says it is a fixture", "[gpu][results]") {
  const auto path = std::filesystem::path(tpusim::source_dir()) / "tests" / "data" / "gpu" / "fixture-gpu.json";
  const gpu::ResultsFile f = gpu::load_results(path);
  CHECK(f.kind == "test-fixture");
  CHECK(f.device.name.find("FIXTURE") != std::string::npos);
  CHECK(f.results.size() >= 4);
}

TEST_CASE("malformed results name the file and the field", "[gpu][results]") {
  std::string text = gpu::results_json(sample());
  const auto replace = [](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  // The line of a key's first occurrence in the file (results_json writes one key a line).
  const auto line = [&](const std::string& s, const std::string& key) {
    const size_t at = s.find("\"" + key + "\":");
    REQUIRE(at != std::string::npos);
    return std::to_string(1 + std::count(s.begin(), s.begin() + std::ptrdiff_t(at), '\n'));
  };
  REQUIRE_THROWS_WITH(gpu::parse_results("{", "r.json"), Catch::StartsWith("r.json: invalid JSON"));
  // Each error names the line of its key (results[0]'s keys are their first occurrence in the file),
  // else of the record it is missing from.
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "\"end_to_end\"", "\"sometimes\""), "r.json"),
                      "r.json:" + line(text, "timing") +
                          ": results[0]: timing: \"sometimes\" is not one of \"device\", \"end_to_end\"");
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "\"batch\": 16", "\"batch\": 0"), "r.json"),
                      "r.json:" + line(text, "batch") + ": results[0]: batch: expected an integer >= 1, got 0");
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "\"sms\": 100,", ""), "r.json"),
                      "r.json:" + line(text, "device") + ": device: sms: missing");
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "tpusim-gpu-results/1", "other/2"), "r.json"),
                      "r.json:" + line(text, "format") + ": format: \"other/2\", expected \"tpusim-gpu-results/1\"");
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "\"test-fixture\"", "\"guessed\""), "r.json"),
                      "r.json:" + line(text, "kind") + ": kind: \"guessed\" is not one of \"measured\", \"test-fixture\"");
  REQUIRE_THROWS_WITH(gpu::parse_results(replace(text, "\"launches_queued_ahead\": false", "\"launches_queued_ahead\": 1"), "r.json"),
                      "r.json:" + line(text, "launches_queued_ahead") +
                          ": results[0]: launches_queued_ahead: expected true or false, got 1");
  // The second record's batch: its own line, not the first record's (the array index alone, before).
  const size_t second = text.find("\"batch\": 16", text.find("\"batch\": 16") + 1);
  REQUIRE(second != std::string::npos);
  std::string bad_second = text;
  bad_second.replace(second, 11, "\"batch\": 0");
  REQUIRE_THROWS_WITH(gpu::parse_results(bad_second, "r.json"),
                      "r.json:" + std::to_string(1 + std::count(text.begin(), text.begin() + std::ptrdiff_t(second), '\n')) +
                          ": results[1]: batch: expected an integer >= 1, got 0");
  REQUIRE_THROWS_WITH(gpu::load_results("no/such/file.json"),
                      "no/such/file.json: cannot open: No such file or directory");
}

TEST_CASE("a results file from before model_macs reads its macs as the GEMMs' count", "[gpu][results]") {
  std::string text = gpu::results_json(sample());
  const auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
  };
  // The first H200 files (2026-11-28) wrote "macs" (the runner's GEMM MACs) and neither newer key.
  text = replace_all(text, "\"model_macs\": 3756032,\n", "");
  text = replace_all(text, "\"gemm_macs\": 3756032,", "\"macs\": 4000000,");
  const gpu::ResultsFile g = gpu::parse_results(text, "old.json");
  REQUIRE(g.results.size() == 2);
  CHECK(g.results[0].legacy_macs == 4000000);
  CHECK(g.results[0].model_macs == 0);
  CHECK(g.results[0].gemm_macs == 0);
}
