// Reference data (gpu/reference.h): the minimal file a person writes by hand, the reference
// format, the GPU runner's format, folders, the committed published figures, and errors that
// name the file, the record and the key.
#include "gpu/reference.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "isa/error.h"
#include "tools/source_dir.h"

using namespace tpusim;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::string& text) {
  try {
    gpu::parse_reference(text, "f.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("reference: a minimal hand-written file is one record", "[reference]") {
  const gpu::ReferenceData d = gpu::parse_reference(
      R"({"model": "workloads/small/mnist_mlp.toml", "batch": 8, "throughput": 12500, "device": "my laptop"})",
      "f.json");
  CHECK(d.source == "measured");
  CHECK(d.device.name == "my laptop");
  REQUIRE(d.rows.size() == 1);
  CHECK(d.rows[0].workload == "mnist_mlp");  // the description's file name
  CHECK(d.rows[0].model == "workloads/small/mnist_mlp.toml");
  CHECK(d.rows[0].batch == 8);
  CHECK(d.rows[0].inferences_per_second == 12500);
  CHECK(d.rows[0].latency_seconds == 0);  // not given
}

TEST_CASE("reference: a latency alone gives batch / latency inferences per second", "[reference]") {
  const gpu::ReferenceData d = gpu::parse_reference(
      R"({"workload": "mlp0", "batch": 200, "latency_seconds": 0.004, "device": "x"})", "f.json");
  CHECK(d.rows[0].inferences_per_second == Approx(50000));  // 200 / 4 ms
  CHECK(d.rows[0].model.empty());
}

TEST_CASE("reference: errors name the file, the record and the key", "[reference]") {
  CHECK(error_of("{").find("f.json: invalid JSON") == 0);
  CHECK(
      error_of(R"({"model": "m.toml", "batch": 1, "throughput": 5})") ==
      "f.json: device: missing: the machine the figures are for, e.g. \"device\": \"Intel Xeon E5-2699 v3\"");
  CHECK(error_of(R"({"model": "m.toml", "batch": 1, "device": "x"})") ==
        "f.json: needs inferences_per_second (or throughput: inferences per second) or latency_seconds (of "
        "one batch)");
  CHECK(error_of(R"({"batch": 1, "throughput": 5, "device": "x"})") ==
        "f.json: needs \"model\" (a description's path) or \"workload\" (a name such as \"mlp0\")");
  CHECK(error_of(R"({"model": "m.toml", "batch": 0, "throughput": 5, "device": "x"})") ==
        "f.json:1: batch: expected an integer >= 1, got 0");
  CHECK(error_of(R"({"model": "m.toml", "batch": 1, "inferences_per_secnd": 5, "device": "x"})") ==
        "f.json:1: inferences_per_secnd: unknown key (did you mean \"inferences_per_second\"?)");
  CHECK(
      error_of(R"({"source": "published", "model": "m.toml", "batch": 1, "throughput": 5, "device": "x"})") ==
      "f.json: citation: missing: published figures need the publication they come from");
  CHECK(error_of(R"({"source": "guessed", "model": "m.toml", "batch": 1, "throughput": 5, "device": "x"})") ==
        "f.json:1: source: \"guessed\" is not one of \"measured\", \"published\", \"test-fixture\"");
  CHECK(error_of(R"({"device": "x", "results": [{"workload": "a", "batch": 1, "throughput": -1}]})") ==
        "f.json:1: results[0]: throughput: expected a number > 0, got -1");
  CHECK(error_of(R"({"format": "csv/1", "device": "x"})") ==
        "f.json: format: \"csv/1\", expected \"tpusim-reference/1\" or \"tpusim-gpu-results/1\" (or no "
        "format key)");
  CHECK(error_of(R"({"device": "x", "results": [{"workload": "a", "batch": 1, "throughput": 5, "load_average": -2}]})") ==
        "f.json:1: results[0]: load_average: expected a number >= 0, got -2");
  // A hand-written file on several lines: the line of the key (the record's keys are the file's).
  CHECK(error_of("{\n  \"model\": \"m.toml\",\n  \"batch\": 16,\n  \"throughput\": -5,\n  \"device\": \"x\"\n}") ==
        "f.json:4: throughput: expected a number > 0, got -5");
  CHECK(error_of("{\n  \"model\": \"m.toml\", \"batch\": 16, \"throughput\": 5,\n  \"devise\": \"x\"\n}") ==
        "f.json:3: devise: unknown key (did you mean \"device\"?)");
  // The top-level key's line, not that of the same key inside a record before it (line 5; review32
  // #3), nor of the key's name inside a string value (line 2).
  CHECK(error_of("{\n  \"device\": \"\\\"batch\\\": {[\",\n  \"results\": [\n    {\"workload\": \"mlp0\",\n     \"batch\": 8,\n"
                 "     \"inferences_per_second\": 1000}\n  ],\n  \"batch\": 4\n}") ==
        "f.json:8: batch: unknown key (did you mean \"date\"?)");
  // A record of results[] or ratios[] (and the device's object): the line of the key in that record,
  // else the record's first line (errors named only the array index, not where in the file it is).
  const std::string records =
      "{\n"                                                          // 1
      "  \"device\": \"x\",\n"                                     // 2
      "  \"results\": [\n"                                          // 3
      "    {\"workload\": \"a\", \"batch\": 1, \"throughput\": 5},\n"  // 4
      "    {\"workload\": \"\\\"batch\\\": 0, [{\",\n"            // 5: the key's name in a string
      "     \"batch\": BATCH,\n"                                    // 6
      "     \"throughput\": 5},\n"                                  // 7
      "    {\"workload\": \"c\",\n"                                 // 8
      "     \"throughput\": 5 REST}\n"                              // 9
      "  ],\n"                                                       // 10
      "  \"ratios\": [\n"                                           // 11
      "    {\"workload\": \"a\", \"of\": \"x\", \"to\": \"y\",\n"     // 12
      "     \"value\": VALUE}\n"                                    // 13
      "  ]\n"                                                        // 14
      "}\n";
  const auto with = [&](std::string batch, std::string rest, std::string value) {
    std::string t = records;
    t.replace(t.find("BATCH"), 5, batch);
    t.replace(t.find("REST"), 4, rest);
    t.replace(t.find("VALUE"), 5, value);
    return t;
  };
  CHECK(error_of(with("0", ", \"batch\": 2", "3")) == "f.json:6: results[1]: batch: expected an integer >= 1, got 0");
  CHECK(error_of(with("1", "", "3")) == "f.json:8: results[2]: batch: missing");
  CHECK(error_of(with("1", ",\n \"bacth\": 2", "3")) ==
        "f.json:10: results[2]: bacth: unknown key (did you mean \"batch\"?)");
  CHECK(error_of(with("1", ", \"batch\": 2", "-1")) == "f.json:13: ratios[0]: value: expected a number > 0, got -1");
  CHECK(error_of("{\n  \"results\": [{\"workload\": \"a\", \"batch\": 1, \"throughput\": 5}],\n  \"device\": {\n"
                 "    \"name\": \"x\",\n    \"kind\": \"fpga\"}\n}") ==
        "f.json:5: device: kind: \"fpga\" is not one of \"cpu\", \"gpu\", \"tpu\", \"other\"");
  CHECK(error_of("{\"device\": \"x\",\n \"results\": [\n  7]}") == "f.json:3: results[0]: expected an object, got 7");
  CHECK(error_of("[1, 2]") ==
        "f.json: expected a JSON object (reference data: workloads/gpu-reference/README.md)");
  // A number beyond a double is the parser's out_of_range, not its parse_error: still bad input.
  CHECK(error_of("{\"device\": \"x\", \"results\": [{\"workload\": \"a\", \"batch\": 1e400}]}")
            .find("f.json: invalid JSON: [json.exception.out_of_range.406] number overflow") == 0);
  // A key given twice: the parser keeps the last, and the line named is the last's (line 4).
  CHECK(error_of("{\"device\": \"x\",\n"
                 " \"results\": [{\"workload\": \"a\", \"batch\": 1, \"throughput\": 5}],\n"
                 " \"results\": [{\"workload\": \"a\", \"batch\": 1, \"throughput\": 5},\n"
                 "  {\"workload\": \"b\", \"batch\": 0, \"throughput\": 5}]}") ==
        "f.json:4: results[1]: batch: expected an integer >= 1, got 0");
}

TEST_CASE("reference: the reference format round-trips", "[reference]") {
  gpu::ReferenceData d;
  d.path = "x.json";
  d.source = "published";
  d.citation = "Someone et al. 2017";
  d.device = {"Dev", "cpu", 1.5, 20, "made up", "4 threads"};
  gpu::ReferenceRow r;
  r.workload = "mlp0";
  r.model = "workloads/tpu-v1/mlp0.toml";
  r.batch = 16;
  r.inferences_per_second = 5482;
  r.latency_seconds = 0.0072;
  r.latency_statistic = "p99";
  r.latency_limit_seconds = 0.007;
  r.where = "Table 4";
  r.load_average = 9.5;
  d.rows.push_back(r);
  d.ratios.push_back({"mlp1", "TPU", "K80", 60, "Table 6"});
  const gpu::ReferenceData back = gpu::parse_reference(gpu::reference_json(d), "x.json");
  CHECK(back.source == "published");
  CHECK(back.citation == d.citation);
  CHECK(back.device.peak_int8_tops == 1.5);
  CHECK(back.device.memory_gbps == 20);
  CHECK(back.device.details == "4 threads");
  REQUIRE(back.rows.size() == 1);
  CHECK(back.rows[0].inferences_per_second == 5482);
  CHECK(back.rows[0].latency_seconds == 0.0072);
  CHECK(back.rows[0].latency_statistic == "p99");
  CHECK(back.rows[0].latency_limit_seconds == 0.007);
  CHECK(back.rows[0].where == "Table 4");
  CHECK(back.rows[0].load_average == 9.5);
  REQUIRE(back.ratios.size() == 1);
  CHECK(back.ratios[0].value == 60);
}

TEST_CASE("reference: the GPU runner's format is read as reference data", "[reference]") {
  const auto files = gpu::load_reference(fs::path(tpusim::source_dir()) / "tests/data/gpu/fixture-gpu.json");
  REQUIRE(files.size() == 1);
  const gpu::ReferenceData& d = files[0];
  CHECK(d.source == "test-fixture");
  CHECK(d.device.name == "TEST FIXTURE GPU");
  CHECK(d.device.kind == "gpu");
  CHECK(d.device.peak_int8_tops == 1000);
  CHECK(d.device.memory_gbps == 2000);
  REQUIRE(!d.rows.empty());
  CHECK(d.rows[0].workload == "mnist_mlp");
  CHECK(d.rows[0].timing == "end_to_end");
  CHECK(d.rows[0].latency_seconds == 5e-5);
  CHECK(d.rows[0].inferences_per_second == 320000);
}

TEST_CASE("reference: the committed published figures (TPU paper, Table 4)", "[reference]") {
  const auto files = gpu::load_reference(fs::path(tpusim::source_dir()) / "workloads/gpu-reference/published");
  REQUIRE(files.size() == 3);  // haswell, k80, tpu (sorted by path)
  for (const gpu::ReferenceData& d : files) {
    CHECK(d.source == "published");
    CHECK(d.citation.find("Jouppi et al.") == 0);
    REQUIRE(d.rows.size() == 1);
    CHECK(d.rows[0].workload == "mlp0");
    CHECK(d.rows[0].latency_limit_seconds == 0.007);
    CHECK(d.rows[0].latency_statistic == "p99");
  }
  CHECK(files[0].rows[0].batch == 16);
  CHECK(files[0].rows[0].inferences_per_second == 5482);
  CHECK(files[0].rows[0].latency_seconds == 0.0072);
  CHECK(files[1].rows[0].batch == 16);
  CHECK(files[1].rows[0].inferences_per_second == 13461);
  CHECK(files[1].rows[0].latency_seconds == 0.0067);
  CHECK(files[2].rows[0].batch == 200);
  CHECK(files[2].rows[0].inferences_per_second == 225000);
  CHECK(files[2].rows[0].latency_seconds == 0.0070);
  CHECK(files[2].device.peak_int8_tops == 92);
  CHECK(files[2].ratios.size() == 4);
}

TEST_CASE("reference: a missing path and an empty folder say so", "[reference]") {
  const fs::path dir = fs::temp_directory_path() / "tpusim-reference-test-empty";
  fs::create_directories(dir);
  std::ofstream(dir / "README.md") << "not data\n";
  CHECK_THROWS_WITH(
      gpu::load_reference(dir / "nope.json"),
      Catch::Contains("nope.json: no such file or folder (reference data: a JSON file, or a folder"));
  CHECK_THROWS_WITH(gpu::load_reference(dir), Catch::Contains("a folder with no .json reference data in it"));
  fs::remove_all(dir);
}
