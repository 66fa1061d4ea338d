// The architecture parameter table: defaults, the --set and --arch FILE parsers with their error
// messages, the validation rules, the JSON dump and the generated docs/arch.md.
#include "sim/arch.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "isa/error.h"
#include "tests/test_support.h"

using namespace tpusim;
using Catch::Contains;
using sim::Arch;

namespace {

Arch with_set(const std::string& assignment) {
  Arch a;
  sim::apply_set(a, assignment);
  return a;
}

// Writes `text` to NAME in a scratch dir and loads it as an architecture file.
struct ArchFile {
  test::ScratchDir dir;
  std::filesystem::path write(const std::string& text, const std::string& name = "arch.json") {
    test::write_text(dir / name, text);
    return dir / name;
  }
  Arch load(const std::string& text) { return sim::load_arch_file(write(text)); }
};

}  // namespace

TEST_CASE("tpu-v1 defaults are the paper's values", "[arch]") {
  const Arch a = sim::arch_preset("tpu-v1");
  CHECK(a == Arch{});
  CHECK(a.name == "tpu-v1");
  CHECK(a.array_rows == 256);  // 256 x 256 MACs
  CHECK(a.array_cols == 256);
  CHECK(a.clock_mhz == 700.0);
  CHECK(a.ub_bytes == 24u << 20);  // 24 MiB
  CHECK(a.acc_entries == 4096);    // 4 MiB = 4096 x 256 x 32 bit
  CHECK(a.weight_fifo_tiles == 4);
  CHECK(a.weight_mem_gbps == 34.0);
  CHECK(a.weight_mem_bytes == uint64_t{8} << 30);  // 8 GiB DDR3
  CHECK(a.host_gbps == 10.74);
  CHECK(a.activation_lanes == 256);
  CHECK(a.ub_row_bytes() == 256);
  CHECK(a.ub_rows() == 98304);  // 24 MiB / 256
  CHECK(a.tile_bytes() == 65536);
  CHECK_NOTHROW(sim::validate(a));
}

TEST_CASE("an unknown preset lists the known ones", "[arch]") {
  REQUIRE_THROWS_AS(sim::arch_preset("tpu-v9"), InputError);
  REQUIRE_THROWS_WITH(sim::arch_preset("tpu-v9"), Contains("'tpu-v9'") && Contains("known presets: tpu-v1"));
}

TEST_CASE("arch_params is the table, in order", "[arch]") {
  const auto params = sim::arch_params();
  REQUIRE(params.size() == 30);  // 21 of the machine and its host (its driver's too), 9 of the energy model (sim/energy.h)
  CHECK(params.front().name == "array_rows");
  CHECK(params[6].name == "weight_shift_skewed");
  CHECK(params[6].default_text == "1");
  CHECK(params[11].name == "host_driver_us");
  CHECK(params[12].name == "driver_piece_schedule");
  CHECK(params[12].default_text == "0");
  CHECK(params[13].name == "driver_host_loop");
  CHECK(params[13].default_text == "1");
  CHECK(params[14].name == "driver_partial_tiles");
  CHECK(params[14].default_text == "1");
  CHECK(params[20].name == "weight_mem_bytes");
  CHECK(params.back().name == "static_watts");
  std::set<std::string_view> reals, names;
  for (const auto& p : params) {
    names.insert(p.name);
    if (p.is_real) reals.insert(p.name);
    CHECK(!p.unit.empty());
    CHECK(!p.meaning.empty());
    CHECK(!p.source.empty());
  }
  CHECK(names.size() == params.size());
  CHECK(reals == std::set<std::string_view>{"clock_mhz", "weight_mem_gbps", "host_gbps", "host_driver_us",
                                            "energy_mac_pj", "energy_ub_read_pj_per_byte",
                                            "energy_ub_write_pj_per_byte", "energy_acc_read_pj_per_byte",
                                            "energy_acc_write_pj_per_byte", "energy_weight_fifo_pj_per_byte",
                                            "energy_dram_pj_per_byte", "energy_host_pj_per_byte",
                                            "static_watts"});
  CHECK(params[2].default_text == "700.0");
  CHECK(params[3].default_text == "25165824");
}

TEST_CASE("transfer_cycles rounds up, exactly", "[arch]") {
  CHECK(sim::transfer_cycles(65536, 34, 700) == 1350);    // 65536 * 700 / 34000 = 1349.3
  CHECK(sim::transfer_cycles(256, 10.74, 700) == 17);     // 256 * 700 / 10740 = 16.7
  CHECK(sim::transfer_cycles(1000, 1, 1000) == 1000);     // exact: 1000 * 1000 / 1000
  CHECK(sim::transfer_cycles(1074, 10.74, 1000) == 100);  // exact although 10.74 is not a binary fraction
  CHECK(sim::transfer_cycles(34000, 34, 700) == 700);     // exact: 34000 * 700 / 34000
  CHECK(sim::transfer_cycles(3, 0.3, 100) == 1);          // exact: 3 * 100 / 300
  CHECK(sim::transfer_cycles(1, 1000, 1) == 1);           // 1 / 10^6, rounded up
  CHECK(sim::transfer_cycles(0, 34, 700) == 0);
  // 2^40 bytes at the defaults: 1099511627776 * 700 / 34000 = 22637004101.3, rounded up
  CHECK(sim::transfer_cycles(uint64_t{1} << 40, 34, 700) == 22637004102);
  CHECK(sim::transfer_cycles(~uint64_t{0}, 1, 1000) == ~uint64_t{0});      // exact: 1 byte per cycle
  CHECK(sim::transfer_cycles(~uint64_t{0}, 1e-300, 700) == ~uint64_t{0});  // saturates
}

TEST_CASE("set_param parses integers: decimal, hex and binary suffixes", "[arch]") {
  CHECK(with_set("ub_bytes=24MiB").ub_bytes == 25165824);
  CHECK(with_set("ub_bytes=4KiB").ub_bytes == 4096);
  CHECK(with_set("weight_mem_bytes=8GiB").weight_mem_bytes == 8589934592);
  CHECK(with_set("array_rows=0x80").array_rows == 128);
  CHECK(with_set("array_rows=0X80").array_rows == 128);
  CHECK(with_set("ub_bytes=0x10KiB").ub_bytes == 16384);
  CHECK(with_set("acc_entries=18446744073709551615").acc_entries == 18446744073709551615u);
  CHECK(with_set(" array_cols = 128 ").array_cols == 128);
  CHECK(with_set("weight_mem_latency_cycles=0").weight_mem_latency_cycles == 0);
}

TEST_CASE("set_param parses reals and names", "[arch]") {
  CHECK(with_set("clock_mhz=1e3").clock_mhz == 1000.0);
  CHECK(with_set("host_gbps=12.5").host_gbps == 12.5);
  CHECK(with_set("weight_mem_gbps=100").weight_mem_gbps == 100.0);
  CHECK(with_set("name=big-array_v2.1").name == "big-array_v2.1");
}

TEST_CASE("set_param rejects malformed integers, naming origin, key, value and form", "[arch]") {
  Arch a;
  const auto set = [&](const char* key, const char* value) { sim::set_param(a, key, value, "--set"); };
  REQUIRE_THROWS_WITH(set("ub_bytes", ""),
                      "--set: ub_bytes = '': empty value; expected an unsigned integer: "
                      "decimal or 0x hex, optionally with a KiB, MiB or GiB suffix");
  REQUIRE_THROWS_WITH(set("array_rows", "-1"), Contains("--set: array_rows = '-1': negative; expected"));
  REQUIRE_THROWS_WITH(set("array_rows", "1.5"), Contains("array_rows = '1.5': not a whole number"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "18446744073709551616"),
                      Contains("too large; the maximum is 18446744073709551615"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "17179869184GiB"), Contains("too large"));  // 2^34 GiB = 2^64
  REQUIRE_THROWS_WITH(set("array_rows", "256x"), Contains("array_rows = '256x': malformed; expected"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "24MB"), Contains("'24MB': malformed"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "MiB"), Contains("malformed"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "0x"), Contains("malformed"));
  REQUIRE_THROWS_WITH(set("ub_bytes", "+5"), Contains("malformed"));
  REQUIRE_THROWS_AS(set("array_rows", "x"), InputError);
  CHECK(a == Arch{});  // failed sets change nothing
}

TEST_CASE("set_param rejects bad reals and names", "[arch]") {
  Arch a;
  const auto set = [&](const char* key, const char* value) { sim::set_param(a, key, value, "arch.json:3"); };
  REQUIRE_THROWS_WITH(
      set("clock_mhz", "fast"),
      "arch.json:3: clock_mhz = 'fast': malformed; expected a real number > 0 (e.g. 700 or 1.5e3)");
  REQUIRE_THROWS_WITH(set("clock_mhz", ""), Contains("clock_mhz = '': empty value"));
  REQUIRE_THROWS_WITH(set("clock_mhz", "0"), Contains("clock_mhz = '0': not > 0"));
  REQUIRE_THROWS_WITH(set("host_gbps", "-3"), Contains("not > 0"));
  REQUIRE_THROWS_WITH(set("host_gbps", "inf"), Contains("host_gbps = 'inf': not finite"));
  REQUIRE_THROWS_WITH(set("host_gbps", "nan"), Contains("not finite"));
  REQUIRE_THROWS_WITH(set("host_gbps", "1e999"), Contains("out of range"));
  REQUIRE_THROWS_WITH(set("host_gbps", "10 GB/s"), Contains("malformed"));
  REQUIRE_THROWS_WITH(set("name", ""), Contains("name = '': expected a non-empty name"));
  REQUIRE_THROWS_WITH(set("name", "my arch"),
                      Contains("name = 'my arch': expected a non-empty name of letters"));
  CHECK(a == Arch{});
}

TEST_CASE("an unknown key names the closest known one", "[arch]") {
  Arch a;
  REQUIRE_THROWS_WITH(
      sim::set_param(a, "array_row", "128", "--set"),
      "--set: unknown parameter 'array_row' (did you mean array_rows? docs/arch.md lists them all)");
  REQUIRE_THROWS_WITH(sim::apply_set(a, "clock=800"), Contains("did you mean clock_mhz?"));
  REQUIRE_THROWS_WITH(sim::apply_set(a, "hostgbps=1"), Contains("did you mean host_gbps?"));
  REQUIRE_THROWS_WITH(sim::apply_set(a, "nmae=x"), Contains("did you mean name?"));
}

TEST_CASE("apply_set splits on the first '='", "[arch]") {
  Arch a;
  REQUIRE_THROWS_WITH(sim::apply_set(a, "array_rows"),
                      "--set: 'array_rows' is not of the form key=value (e.g. --set array_rows=128)");
  REQUIRE_THROWS_WITH(sim::apply_set(a, "name=a=b"), Contains("name = 'a=b'"));
}

TEST_CASE("a value without a key says the key is missing, not which name it is nearest", "[arch]") {
  Arch a;
  // (It read "unknown parameter '' (did you mean name?)".)
  REQUIRE_THROWS_WITH(sim::apply_set(a, "=5"),
                      "--set: '=5' has no key before '=': expected key=value (e.g. --set array_rows=128)");
  REQUIRE_THROWS_WITH(sim::apply_set(a, " =5"), Contains("has no key before '='"));
  // A JSON key or a Python dict's: the origin, then what is missing.
  REQUIRE_THROWS_WITH(sim::set_param(a, "", "5", "arch.json:3"),
                      "arch.json:3: the value '5' has no parameter name: expected a key, one of the parameters "
                      "docs/arch.md lists (e.g. array_rows)");
  CHECK(a == Arch{});
}

TEST_CASE("load_arch_file round-trips arch_to_json", "[arch]") {
  ArchFile f;
  Arch a;
  a.name = "small";
  a.array_rows = 128;
  a.array_cols = 64;
  a.clock_mhz = 937.5;
  a.ub_bytes = 1 << 20;
  a.host_gbps = 16;
  a.activation_latency_cycles = 0;
  a.weight_mem_bytes = uint64_t{1} << 30;
  CHECK(f.load(sim::arch_to_json(a).dump(2)) == a);
  CHECK(f.load(sim::arch_to_json(Arch{}).dump()) == Arch{});
}

TEST_CASE("load_arch_file applies base, then name, then parameters - strings use the text parser", "[arch]") {
  ArchFile f;
  const Arch a = f.load(R"({"ub_bytes": "8MiB", "base": "tpu-v1", "array_rows": "0x80", "clock_mhz": 1000,
                            "name": "mine", "host_gbps": "2.5e1"})");
  Arch expected;
  expected.name = "mine";
  expected.ub_bytes = 8 << 20;
  expected.array_rows = 128;
  expected.clock_mhz = 1000;
  expected.host_gbps = 25;
  CHECK(a == expected);
  CHECK(f.load("{}") == Arch{});
}

TEST_CASE("load_arch_file names the file and the key's line", "[arch]") {
  ArchFile f;
  const std::string file = (f.dir / "arch.json").string();
  const auto fails = [&](const std::string& text, const std::string& message) {
    INFO(text);
    REQUIRE_THROWS_WITH(f.load(text), message);
  };
  fails("{\n  \"array_rows\": 128,\n  \"array_colz\": 128\n}",
        file + ":3: unknown parameter 'array_colz' (did you mean array_cols? docs/arch.md lists them all)");
  fails("{\n  \"array_rows\": true\n}", file +
                                            ":2: array_rows = true: expected a JSON unsigned integer or a "
                                            "string such as \"24MiB\", got boolean");
  fails("{\"clock_mhz\": 700,\n\n\"array_rows\": -4}", file +
                                                           ":3: array_rows = -4: negative; expected a JSON "
                                                           "unsigned integer or a string such as \"24MiB\"");
  fails("{\n\"acc_entries\": 1.5}", file +
                                        ":2: acc_entries = 1.5: not an integer; expected a JSON unsigned "
                                        "integer or a string such as \"24MiB\"");
  fails("{\n\"ub_bytes\": 18446744073709551616}", file +
                                                      ":2: ub_bytes = 1.8446744073709552e+19: too large; "
                                                      "the maximum is 18446744073709551615");
  fails("{\n\"ub_bytes\": [1, 2]}", file +
                                        ":2: ub_bytes = [1,2]: expected a JSON unsigned integer or a "
                                        "string such as \"24MiB\", got array");
  fails("{\n\"clock_mhz\": {\"a\": 1}}", file +
                                             ":2: clock_mhz = {\"a\":1}: expected a real number > 0 (e.g. "
                                             "700 or 1.5e3), got object");
  fails("{\n\"clock_mhz\": -700}", file +
                                       ":2: clock_mhz = -700: not > 0; expected a real number > 0 (e.g. "
                                       "700 or 1.5e3)");
  fails("{\"name\": \"ub_byte\", \"host_gbps\": 1,\n \"ub_byte\": 5}",  // the key, not the value
        file + ":2: unknown parameter 'ub_byte' (did you mean ub_bytes? docs/arch.md lists them all)");
  fails("{\n\n \"ub_bytes\": \"24XiB\"}",
        file +
            ":3: ub_bytes = '24XiB': malformed; expected an unsigned "
            "integer: decimal or 0x hex, optionally with a KiB, MiB or GiB suffix");
  fails("{\n \"name\": 7}", file + ":2: name = 7: expected a string, got number");
  fails("{\n \"name\": \"a b\"}", file +
                                      ":2: name = 'a b': expected a non-empty name of letters, digits, "
                                      "'_', '.' and '-'");
  fails("{\n \"base\": \"tpu-v2\"}",
        file + ":2: unknown architecture preset 'tpu-v2' (known presets: tpu-v1)");
  fails("{\n \"base\": 1}", file + ":2: base = 1: expected a preset name such as \"tpu-v1\"");
  fails("\n\n[1, 2]",
        file + ":3: expected a JSON object such as {\"base\": \"tpu-v1\", \"array_rows\": 128}, got array");
}

TEST_CASE("load_arch_file reports JSON syntax errors at their line", "[arch]") {
  ArchFile f;
  const std::string file = (f.dir / "arch.json").string();
  REQUIRE_THROWS_WITH(f.load("{\n  \"array_rows\": 128\n  \"array_cols\": 128\n}"),
                      Catch::Matches(file + ":3: invalid JSON: syntax error while parsing object - .*"));
  REQUIRE_THROWS_WITH(f.load("{\n  \"array_rows\": 12x\n}"), Catch::Matches(file + ":2: invalid JSON: .*"));
  REQUIRE_THROWS_WITH(f.load("{\"array_rows\": 128,}"), Catch::Matches(file + ":1: invalid JSON: .*"));
  REQUIRE_THROWS_WITH(f.load(""), Catch::Matches(file + ":1: invalid JSON: .*end of input.*"));
  REQUIRE_THROWS_WITH(f.load("{\n\"a\": \"unterminated\n}"), Catch::Matches(file + ":2: invalid JSON: .*"));
  REQUIRE_THROWS_WITH(f.load("{\"clock_mhz\": 1e400}"),
                      file + ": invalid JSON: number overflow parsing '1e400'");
  const std::string deep = "{\"a\": " + std::string(40, '[') + std::string(40, ']') + "}";
  REQUIRE_THROWS_WITH(f.load(deep), file + ": JSON nested more than 32 levels deep");
  const std::string deeper = std::string(100000, '[');  // invalid and deep: no stack overflow
  REQUIRE_THROWS_WITH(f.load(deeper), Contains(":1: invalid JSON"));
}

TEST_CASE("load_arch_file: missing files, directories and rule violations", "[arch]") {
  ArchFile f;
  const std::string missing = (f.dir / "none.json").string();
  REQUIRE_THROWS_WITH(sim::load_arch_file(missing), missing + ": cannot open: No such file or directory");
  REQUIRE_THROWS_WITH(sim::load_arch_file(f.dir.path()), f.dir.path().string() + ": is a directory");
  // Only regular files, their size checked before reading (isa/file_io.h).
  std::filesystem::create_symlink("/dev/zero", f.dir / "zero.json");
  REQUIRE_THROWS_WITH(
      sim::load_arch_file(f.dir / "zero.json"),
      (f.dir / "zero.json").string() +
          ": is a character device, not a regular file; expected an architecture file (JSON)");
  std::ofstream(f.dir / "big.json").put('{');
  std::filesystem::resize_file(f.dir / "big.json", (uint64_t{16} << 20) + 1);  // sparse: nothing is written
  REQUIRE_THROWS_WITH(
      sim::load_arch_file(f.dir / "big.json"),
      (f.dir / "big.json").string() +
          ": 16777217 bytes (16.0 MiB), more than the 16777216 bytes (16.0 MiB) allowed for an "
          "architecture file (JSON)");
  // A rule between parameters is reported at the line of the parameter it names (sim::arch_violation).
  REQUIRE_THROWS_WITH(f.load("{\"ub_bytes\": 1000}"),
                      (f.dir / "arch.json").string() +
                          ":1: ub_bytes = 1000 is not a multiple of the UB row width "
                          "256 (max(array_rows, array_cols)); the nearest multiples are 768 and 1024");
  REQUIRE_THROWS_WITH(f.load("{\n  \"base\": \"tpu-v1\",\n  \"array_rows\": 128,\n  \"ub_bytes\": 1000\n}"),
                      (f.dir / "arch.json").string() +
                          ":4: ub_bytes = 1000 is not a multiple of the UB row width "
                          "256 (max(array_rows, array_cols)); the nearest multiples are 768 and 1024");
  // A rule about a parameter the file does not give: the file alone (tpu-v1's 24 MiB UB is no
  // multiple of a 300-byte row).
  REQUIRE_THROWS_WITH(f.load("{\n  \"array_rows\": 300\n}"),
                      (f.dir / "arch.json").string() +
                          ": ub_bytes = 25165824 is not a multiple of the UB row width "
                          "300 (max(array_rows, array_cols)); the nearest multiples are 25165800 and 25166100");
}

TEST_CASE("validate: every rule, with a failing example", "[arch]") {
  const auto fails = [](const std::string& assignment, const std::string& message) {
    INFO(assignment);
    const Arch a = with_set(assignment);
    REQUIRE_THROWS_WITH(sim::validate(a), "architecture 'tpu-v1': " + message);
  };
  fails("array_rows=0", "array_rows = 0 must be at least 1");
  fails("issue_cycles=0", "issue_cycles = 0 must be at least 1");
  fails("weight_fifo_tiles=0", "weight_fifo_tiles = 0 must be at least 1");
  fails("array_rows=4097", "array_rows = 4097 exceeds the maximum 4096");
  fails("array_cols=8192", "array_cols = 8192 exceeds the maximum 4096");
  fails("weight_fifo_tiles=1025", "weight_fifo_tiles = 1025 exceeds the maximum 1024");
  fails("activation_lanes=65537", "activation_lanes = 65537 exceeds the maximum 65536");
  fails("station_queue_depth=2000", "station_queue_depth = 2000 exceeds the maximum 1024");
  fails("clock_mhz=100001", "clock_mhz = 100001 exceeds the maximum 100000");
  // The lower ends and the latencies' upper end: what keeps simulated time inside 64-bit
  // picoseconds (docs/arch.md).
  fails("clock_mhz=0.5", "clock_mhz = 0.5 must be at least 1");
  fails("clock_mhz=1e-300", "clock_mhz = 1e-300 must be at least 1");
  fails("weight_mem_gbps=0.0009", "weight_mem_gbps = 0.0009 must be at least 0.001");
  fails("host_gbps=1e-12", "host_gbps = 1e-12 must be at least 0.001");
  fails("weight_mem_latency_cycles=1000000001",
        "weight_mem_latency_cycles = 1000000001 exceeds the maximum 1000000000");
  fails("host_latency_cycles=18446744073709551615",
        "host_latency_cycles = 18446744073709551615 exceeds the maximum 1000000000");
  fails("activation_latency_cycles=4611686018427387904",
        "activation_latency_cycles = 4611686018427387904 exceeds the maximum 1000000000");
  fails("issue_cycles=1000001", "issue_cycles = 1000001 exceeds the maximum 1000000");
  fails("weight_mem_gbps=2e6", "weight_mem_gbps = 2000000 exceeds the maximum 1000000");
  fails("host_gbps=1000000.5", "host_gbps = 1000000.5 exceeds the maximum 1000000");
  fails("acc_entries=65537", "acc_entries = 65537 exceeds the maximum 65536 (the ISA's 16-bit acc field)");
  fails("weight_mem_bytes=1099511693312",  // 2^40 + 65536
        "weight_mem_bytes = 1099511693312 exceeds the maximum 1099511627776 (the ISA's 40-bit waddr field)");
  fails("weight_mem_bytes=100000",
        "weight_mem_bytes = 100000 is not a multiple of the tile size 65536 (array_rows * array_cols); the nearest "
        "multiples are 65536 and 131072");
  // A shape that is no power of two leaves tpu-v1's 8 GiB no multiple of its tiles: the message says
  // what to set instead (8589934592 = 44739242 x 192 + 128).
  {
    Arch a = with_set("array_rows=8");
    sim::apply_set(a, "array_cols=24");
    REQUIRE_THROWS_WITH(sim::validate(a),
                        "architecture 'tpu-v1': weight_mem_bytes = 8589934592 is not a multiple of the tile size 192 "
                        "(array_rows * array_cols); the nearest multiples are 8589934464 and 8589934656");
  }
  // Only multiples the parameter's range allows are named (review32 #4): at the maximum weight
  // memory, 2^40 = 5726623061 x 192 + 64, the multiple above (1099511627904) exceeds it; the
  // maximum UB, 2^36 bytes, holds more than 2^24 rows of 200 bytes, so the largest it may have is
  // 2^24 x 200 = 3355443200.
  {
    Arch a = with_set("array_rows=8");
    sim::apply_set(a, "array_cols=24");
    sim::apply_set(a, "weight_mem_bytes=1099511627776");
    REQUIRE_THROWS_WITH(sim::validate(a),
                        "architecture 'tpu-v1': weight_mem_bytes = 1099511627776 is not a multiple of the tile size "
                        "192 (array_rows * array_cols); the nearest allowed multiple is 1099511627712");
    Arch b = with_set("array_rows=200");
    sim::apply_set(b, "array_cols=24");
    sim::apply_set(b, "ub_bytes=68719476736");
    REQUIRE_THROWS_WITH(sim::validate(b),
                        "architecture 'tpu-v1': ub_bytes = 68719476736 is not a multiple of the UB row width 200 "
                        "(max(array_rows, array_cols)); the nearest allowed multiple is 3355443200");
  }
  fails("weight_mem_bytes=1000", "weight_mem_bytes = 1000 is not a multiple of the tile size 65536 (array_rows * "
                                 "array_cols); the smallest multiple is 65536");
  fails("ub_bytes=1000",
        "ub_bytes = 1000 is not a multiple of the UB row width 256 (max(array_rows, array_cols)); the nearest "
        "multiples are 768 and 1024");
  fails(
      "ub_bytes=4294967552",  // (2^24 + 1) rows of 256 bytes
      "ub_bytes = 4294967552 is 16777217 rows of 256 bytes, more than the 16777216 rows (the ISA's 24-bit ub "
      "field)");
}

TEST_CASE("validate: limits themselves pass - latencies may be 0 - reals and the name are checked",
          "[arch]") {
  Arch a;
  a.weight_mem_latency_cycles = a.host_latency_cycles = a.activation_latency_cycles = 0;
  a.array_rows = a.array_cols = 4096;
  a.ub_bytes = (uint64_t{1} << 24) * 4096;
  a.acc_entries = 65536;
  a.weight_mem_bytes = uint64_t{1} << 40;
  a.clock_mhz = 1e5;
  a.weight_mem_gbps = a.host_gbps = 1e6;
  a.weight_fifo_tiles = a.station_queue_depth = 1024;
  a.activation_lanes = 65536;
  a.weight_mem_latency_cycles = a.host_latency_cycles = a.activation_latency_cycles = 1'000'000'000;
  a.issue_cycles = 1'000'000;
  CHECK_NOTHROW(sim::validate(a));
  a.clock_mhz = 1;
  a.weight_mem_gbps = a.host_gbps = 1e-3;
  CHECK_NOTHROW(sim::validate(a));
  a = Arch{};
  a.array_rows = 128;  // row width stays 256 (max of rows and cols)
  CHECK_NOTHROW(sim::validate(a));

  a = Arch{};
  a.clock_mhz = 0;
  REQUIRE_THROWS_WITH(sim::validate(a), "architecture 'tpu-v1': clock_mhz = 0 must be finite and > 0");
  a.clock_mhz = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(sim::validate(a), Contains("clock_mhz = nan must be finite and > 0"));
  a = Arch{};
  a.host_gbps = -1;
  REQUIRE_THROWS_WITH(sim::validate(a), Contains("host_gbps = -1 must be finite and > 0"));
  a = Arch{};
  a.name = "";
  REQUIRE_THROWS_WITH(sim::validate(a), Contains("name = '': expected a non-empty name"));
}

TEST_CASE("arch_to_json holds the name and every parameter, with their types", "[arch]") {
  Arch a;
  a.name = "x";
  a.ub_bytes = 1 << 20;
  const nlohmann::json j = sim::arch_to_json(a);
  REQUIRE(j.is_object());
  std::set<std::string> keys, expected{"name"};
  for (const auto& p : sim::arch_params()) expected.insert(std::string(p.name));
  for (const auto& [key, value] : j.items()) keys.insert(key);
  CHECK(keys == expected);
  CHECK(j.size() == sim::arch_params().size() + 1);
  CHECK(j["name"] == "x");
  CHECK(j["ub_bytes"].is_number_unsigned());
  CHECK(j["ub_bytes"].get<uint64_t>() == 1 << 20);
  CHECK(j["weight_mem_bytes"].get<uint64_t>() == uint64_t{8} << 30);
  CHECK(j["clock_mhz"].is_number_float());
  CHECK(j["host_gbps"].get<double>() == 10.74);
  for (const auto& p : sim::arch_params()) CHECK(j[std::string(p.name)].is_number_float() == p.is_real);
}

TEST_CASE("docs/arch.md is generated from the parameter table", "[arch]") {
  const std::string committed = test::read_text(test::source_dir() / "docs/arch.md");
  const std::string generated = sim::arch_markdown();
  INFO(
      "docs/arch.md is out of date with sim/arch.h; regenerate it with\n"
      "  build/tpusim arch --markdown > docs/arch.md");
  REQUIRE(!committed.empty());
  std::istringstream a(committed), b(generated);
  std::string la, lb;
  int line = 1;
  while (std::getline(a, la) && std::getline(b, lb) && la == lb) ++line;
  INFO("first difference near line " << line << ":\n  committed: " << la << "\n  generated: " << lb);
  CHECK(committed == generated);
}

TEST_CASE("arch_markdown lists every parameter and the derived quantities", "[arch]") {
  const std::string md = sim::arch_markdown();
  CHECK(md.starts_with("<!-- Generated from sim/arch.h by `build/tpusim arch --markdown > docs/arch.md`."));
  for (const auto& p : sim::arch_params()) CHECK_THAT(md, Contains("| `" + std::string(p.name) + "` | "));
  CHECK_THAT(md, Contains("| `ub_bytes` | 25165824 | 1 to 68719476736 | bytes |"));
  CHECK_THAT(md, Contains("| `clock_mhz` | 700.0 | 1 to 100000 | MHz |"));
  CHECK_THAT(md, Contains("| `host_latency_cycles` | 700 | 0 to 1000000000 | cycles |"));
  CHECK_THAT(md, Contains("| `weight_mem_gbps` | 34.0 | 0.001 to 1000000 | GB/s |"));
  CHECK_THAT(md, Contains("= 1350 at the defaults (65536 * 700 / 34000 = 1349.3 rounded up)"));
  CHECK_THAT(md, Contains("`--set key=value`"));
  CHECK_THAT(md, Contains("`acc_entries` <= 65536 (the ISA's 16-bit acc field)"));
}
