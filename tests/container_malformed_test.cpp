// Damaged .tpu containers: every one must give an InputError whose message says what is wrong,
// never a crash or a silently different program. Truncation at every length, every header and
// table byte, every section byte, and sections that are wrong in one way with valid CRCs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "container_bytes.h"
#include "isa/error.h"
#include "isa/instruction.h"
#include "isa/program.h"
#include "test_support.h"

using namespace tpusim;
using namespace tpusim::isa;
using namespace tpusim::test;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;
using nlohmann::json;

TEST_CASE("truncated containers are rejected at every length", "[isa][container][malformed]") {
  const Program p = sample_program();
  const std::vector<uint8_t> file = write_program(p);
  for (size_t n = 0; n < file.size(); ++n) {
    const std::vector<uint8_t> cut(file.begin(), file.begin() + n);
    INFO("length " << n << " of " << file.size());
    if (n < 64)
      CHECK_THROWS_WITH(read_tpu(cut), Equals("s.tpu: truncated: " + std::to_string(n) +
                                              " bytes, a program header needs 64"));
    else
      CHECK_THROWS_WITH(read_tpu(cut),
                        Equals("s.tpu: header says the file is " + std::to_string(file.size()) +
                               " bytes but it is " + std::to_string(n) + " (truncated or padded)"));
  }
}

TEST_CASE("truncated containers with a patched size field are rejected", "[isa][container][malformed]") {
  // The size field made to agree with the cut: the reader must then find the damage elsewhere.
  // Even a cut in the final padding is an error: only the canonical layout is accepted.
  const std::vector<uint8_t> file = write_program(sample_program());
  const std::vector<SectionView> table = section_table(file);
  const size_t data_end = table.back().offset + table.back().size;
  REQUIRE(data_end < file.size());  // the sample ends in padding, so both cases are covered
  for (size_t n = 64; n < file.size(); ++n) {
    std::vector<uint8_t> cut(file.begin(), file.begin() + n);
    put_le(cut, 24, 8, n);
    INFO("length " << n << " of " << file.size());
    if (n < data_end) CHECK_THROWS_AS(read_tpu(cut), InputError);
    else
      CHECK_THROWS_WITH(read_tpu(cut),
                        StartsWith("s.tpu: not in canonical form (first difference at byte 24)"));
  }
}

TEST_CASE("damaged headers and section tables are rejected", "[isa][container][malformed]") {
  const std::vector<uint8_t> good = write_program(sample_program());
  std::vector<uint8_t> f = good;

  SECTION("wrong magic") {
    f[3] = 'X';
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: not a tpusim program (bad magic; expected \"TPUSIMPG\")"));
  }
  SECTION("wrong major version") {
    put_le(f, 8, 2, 2);
    CHECK_THROWS_WITH(read_tpu(f),
                      Equals("s.tpu: format version 2.0 is not supported (this tpusim reads 1.0 to 1.0)"));
  }
  SECTION("a newer minor version") {
    put_le(f, 10, 2, 7);
    CHECK_THROWS_WITH(read_tpu(f),
                      Equals("s.tpu: format version 1.7 is not supported (this tpusim reads 1.0 to 1.0)"));
  }
  SECTION("a non-zero padding byte") {
    // The weights section (37 bytes at 240) is padded to 288 with zeros.
    REQUIRE(section_table(good)[1].offset == 240);
    REQUIRE(section_table(good)[1].size == 37);
    f[240 + 37] = 1;
    CHECK_THROWS_WITH(read_tpu(f), StartsWith("s.tpu: not in canonical form (first difference at byte 277)"));
  }
  SECTION("header size") {
    put_le(f, 12, 4, 32);
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: header size 32 (expected 64)"));
  }
  SECTION("file size field disagrees with the file") {
    f.push_back(0);
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: header says the file is " + std::to_string(good.size()) +
                                          " bytes but it is " + std::to_string(good.size() + 1) +
                                          " (truncated or padded)"));
  }
  SECTION("more than 16 sections") {
    put_le(f, 16, 4, 17);
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: section count 17 exceeds the maximum 16"));
    put_le(f, 16, 4, 0xFFFFFFFF);
    CHECK_THROWS_WITH(read_tpu(f), Contains("exceeds the maximum 16"));
  }
  SECTION("header flags") {
    f[20] = 1;
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: header flags at byte 20 must be 0"));
  }
  SECTION("reserved header bytes") {
    f[40] = 1;
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: reserved header byte 40 is not 0"));
  }
  SECTION("unknown section type") {
    put_le(f, 64 + 32, 4, 9);
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: section 1 has unknown type 9"));
  }
  SECTION("a section that appears twice") {
    put_le(f, 64 + 32, 4, 1);  // the weights entry claims to be code
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: section code appears twice"));
  }
  SECTION("reserved bytes of a section entry") {
    f[64 + 32 + 24] = 1;
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: section weights: reserved bytes are not 0"));
  }
  SECTION("a section reaching past the end of the file") {
    put_le(f, 64 + 32 + 16, 8, good.size());
    CHECK_THROWS_WITH(read_tpu(f),
                      Equals("s.tpu: section weights: [240, +" + std::to_string(good.size()) +
                             ") lies outside the file (" + std::to_string(good.size()) + " bytes)"));
    put_le(f, 64 + 32 + 16, 8, ~uint64_t{0});  // size + offset would wrap around
    CHECK_THROWS_WITH(read_tpu(f), Contains("lies outside the file"));
  }
  SECTION("a section overlapping the header") {
    put_le(f, 64 + 8, 8, 0);
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: section code: offset 0 lies inside the header or section "
                                          "table (which end at 192)"));
  }
  SECTION("one flipped bit anywhere in the header or the table") {
    for (size_t i = 0; i < 192; ++i) {
      std::vector<uint8_t> g = good;
      g[i] ^= static_cast<uint8_t>(1u << (i % 8));
      INFO("byte " << i);
      CHECK_THROWS_AS(read_tpu(g), InputError);
    }
  }
}

TEST_CASE("a flipped bit in any section byte fails its CRC", "[isa][container][malformed]") {
  const std::vector<uint8_t> good = write_program(sample_program());
  const char* names[] = {"", "code", "weights", "manifest", "host_init"};
  int flips = 0;
  for (const SectionView& s : section_table(good)) {
    REQUIRE(s.size > 0);
    for (size_t i = s.offset; i < s.offset + s.size; ++i) {
      std::vector<uint8_t> f = good;
      f[i] ^= static_cast<uint8_t>(1u << (i % 8));
      INFO("byte " << i);
      ++flips;
      CHECK_THROWS_WITH(read_tpu(f),
                        StartsWith(std::string("s.tpu: section ") + names[s.type] + ": CRC-32 mismatch") &&
                            Contains("CRC") && Contains("corrupted"));
    }
  }
  CHECK(flips > 1000);
}

TEST_CASE("bad sections are rejected even with correct CRCs", "[isa][container][malformed]") {
  const json manifest = minimal_manifest();

  SECTION("our writer builds a valid minimal container") {
    const Program p = read_tpu(container_with(manifest));
    CHECK(p.code == std::vector<Instruction>{make_instruction(Opcode::halt)});
    CHECK(p.model == "m");
  }
  SECTION("a valid container laid out differently is not canonical") {
    const auto compact = build_container({{1, code_bytes({make_instruction(Opcode::halt)})},
                                          {2, {}},
                                          {3, bytes_of(manifest.dump())},
                                          {4, {}}});
    CHECK_THROWS_WITH(read_tpu(compact), StartsWith("s.tpu: not in canonical form"));
    const auto no_weights = build_container(
        {{1, code_bytes({make_instruction(Opcode::halt)})}, {3, bytes_of(manifest.dump(1))}, {4, {}}});
    CHECK_THROWS_WITH(read_tpu(no_weights),
                      StartsWith("s.tpu: not in canonical form (first difference at byte 16)"));
  }
  SECTION("code section not a multiple of 16 bytes") {
    std::vector<uint8_t> code = code_bytes({make_instruction(Opcode::halt)});
    code.push_back(0);
    const auto f = build_container({{1, code}, {3, bytes_of(manifest.dump())}});
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: code section is 17 bytes, not a multiple of 16"));
  }
  SECTION("missing code section") {
    CHECK_THROWS_WITH(read_tpu(build_container({{3, bytes_of(manifest.dump())}})),
                      Equals("s.tpu: missing the code section"));
  }
  SECTION("missing manifest section") {
    CHECK_THROWS_WITH(read_tpu(build_container({{1, {}}})), Equals("s.tpu: missing the manifest section"));
  }
  SECTION("an invalid instruction names its index") {
    std::vector<uint8_t> code = code_bytes({make_matmul(0, 0, 1), make_matmul(1, 2, 3)});
    code[16 + 1] = 0x80;  // bit 15 of instruction 1 (the flag byte's top bit)
    const auto f = build_container({{1, code}, {3, bytes_of(manifest.dump())}});
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: instruction 1: matmul has reserved bit 15 (byte 1) set; "
                                          "reserved bits must be 0"));
  }
  SECTION("manifest is not JSON") {
    const auto f = build_container({{1, {}}, {3, bytes_of("{\"format\": \"tpusim-program\",")}});
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: manifest section: not valid JSON"));
  }
  SECTION("manifest nested deeper than 64 levels (deeper ones overflowed the stack)") {
    const std::string deep = std::string(65, '[') + std::string(65, ']');
    const auto f = build_container({{1, {}}, {3, bytes_of(deep)}});
    CHECK_THROWS_WITH(read_tpu(f), Equals("s.tpu: manifest section: JSON nested more than 64 levels deep"));
    const std::string very_deep = std::string(100000, '[') + std::string(100000, ']');
    CHECK_THROWS_WITH(read_tpu(build_container({{1, {}}, {3, bytes_of(very_deep)}})),
                      Equals("s.tpu: manifest section: JSON nested more than 64 levels deep"));
  }
  SECTION("manifest is JSON but not an object") {
    CHECK_THROWS_WITH(read_tpu(container_with(json::array({1, 2}))),
                      Equals("s.tpu: manifest: expected an object, got [1,2]"));
  }
  SECTION("unknown manifest key") {
    json m = manifest;
    m["colour"] = "blue";
    CHECK_THROWS_WITH(read_tpu(container_with(m)), Equals("s.tpu: manifest: unknown key \"colour\""));
  }
  SECTION("missing manifest key") {
    json m = manifest;
    m.erase("symbols");
    CHECK_THROWS_WITH(read_tpu(container_with(m)), Equals("s.tpu: manifest: missing key \"symbols\""));
  }
  SECTION("wrong format name") {
    json m = manifest;
    m["format"] = "something-else";
    CHECK_THROWS_WITH(read_tpu(container_with(m)),
                      Equals("s.tpu: manifest.format: expected \"tpusim-program\""));
  }
  SECTION("a key of the wrong type") {
    json m = manifest;
    m["model"] = 5;
    CHECK_THROWS_WITH(read_tpu(container_with(m)), Equals("s.tpu: manifest.model: expected a string, got 5"));
  }
  json region = {{"name", "x"},     {"direction", "input"},   {"host_addr", 0}, {"bytes", 4},
                 {"dtype", "int8"}, {"shape", json::array()}, {"scale", 0.0}};
  SECTION("a valid region with init data") {
    json m = manifest;
    region["init_offset"] = 0;
    m["host_regions"].push_back(region);
    const Program p = read_tpu(container_with(m, {1, 2, 3, 4}));
    REQUIRE(p.host_regions.size() == 1);
    CHECK(p.host_regions[0].init == std::vector<uint8_t>{1, 2, 3, 4});
    // Init data at another offset is readable but not canonical: host_init holds exactly the
    // regions' data, in order.
    m["host_regions"][0]["init_offset"] = 2;
    CHECK_THROWS_WITH(read_tpu(container_with(m, {9, 9, 1, 2, 3, 4})),
                      StartsWith("s.tpu: not in canonical form"));
  }
  SECTION("unknown key in a host region") {
    json m = manifest;
    region["colour"] = 1;
    m["host_regions"].push_back(region);
    CHECK_THROWS_WITH(read_tpu(container_with(m)),
                      Equals("s.tpu: manifest.host_regions[0]: unknown key \"colour\""));
  }
  SECTION("bad direction") {
    json m = manifest;
    region["direction"] = "sideways";
    m["host_regions"].push_back(region);
    CHECK_THROWS_WITH(read_tpu(container_with(m)),
                      Equals("s.tpu: manifest.host_regions[0].direction: expected \"input\" or \"output\", "
                             "got \"sideways\""));
  }
  SECTION("region init outside host_init") {
    json m = manifest;
    region["init_offset"] = 2;
    m["host_regions"].push_back(region);
    CHECK_THROWS_WITH(read_tpu(container_with(m, {1, 2, 3, 4})),
                      Equals("s.tpu: manifest.host_regions[0]: init data [2, +4) lies outside the "
                             "host_init section (4 bytes)"));
    region["init_offset"] = ~uint64_t{0};  // offset + bytes would wrap around
    m["host_regions"][0] = region;
    CHECK_THROWS_WITH(read_tpu(container_with(m, {1, 2, 3, 4})),
                      Contains("lies outside the host_init section"));
  }
  SECTION("init data on an output region") {
    json m = manifest;
    region["direction"] = "output";
    region["init_offset"] = 0;
    m["host_regions"].push_back(region);
    CHECK_THROWS_WITH(read_tpu(container_with(m, {1, 2, 3, 4})),
                      Equals("s.tpu: host region \"x\": initial data must be given for inputs only and "
                             "cover all 4 bytes"));
  }
  SECTION("a region beyond the 40-bit host address space") {
    json m = manifest;
    region["host_addr"] = uint64_t{1} << 40;
    m["host_regions"].push_back(region);
    CHECK_THROWS_WITH(read_tpu(container_with(m)), Contains("exceeds the 40-bit host address space"));
  }
  SECTION("unknown key in a symbol") {
    json m = manifest;
    m["symbols"].push_back({{"name", "a"}, {"space", "ub"}, {"addr", 0}, {"size", 1}, {"x", 0}});
    CHECK_THROWS_WITH(read_tpu(container_with(m)), Equals("s.tpu: manifest.symbols[0]: unknown key \"x\""));
  }
  SECTION("a negative symbol address") {
    json m = manifest;
    m["symbols"].push_back({{"name", "a"}, {"space", "ub"}, {"addr", -1}, {"size", 1}});
    CHECK_THROWS_WITH(read_tpu(container_with(m)),
                      Equals("s.tpu: manifest.symbols[0].addr: expected an unsigned integer, got -1"));
  }
}
