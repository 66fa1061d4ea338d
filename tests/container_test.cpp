// The .tpu container: exact byte layout, round trip, determinism, and what write_program refuses.
// Damaged containers are in container_malformed_test.cpp.
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
using Catch::Matchers::Equals;
using nlohmann::json;

TEST_CASE("the plain CRC-32 used by these tests is the standard one", "[isa][container]") {
  CHECK(test::crc32(test::as_bytes("123456789")) == 0xCBF43926u);  // the CRC-32 check value
  CHECK(test::crc32({}) == 0u);
}

TEST_CASE("write_program lays the container out byte for byte as specified", "[isa][container]") {
  const Program p = sample_program();
  const std::vector<uint8_t> file = write_program(p);

  CHECK(std::string(file.begin(), file.begin() + 8) == "TPUSIMPG");
  CHECK(get_le(file, 8, 2) == 1);   // major
  CHECK(get_le(file, 10, 2) == 0);  // minor
  CHECK(get_le(file, 12, 4) == 64);
  CHECK(get_le(file, 16, 4) == 4);  // code, weights, manifest, host_init
  CHECK(get_le(file, 20, 4) == 0);
  CHECK(get_le(file, 24, 8) == file.size());
  for (size_t i = 32; i < 64; ++i) CHECK(file[i] == 0);

  const std::vector<SectionView> table = section_table(file);
  REQUIRE(table.size() == 4);
  CHECK(table[0].type == 1);
  CHECK(table[1].type == 2);
  CHECK(table[2].type == 3);
  CHECK(table[3].type == 4);
  CHECK(table[0].offset == 192);  // 64-byte header + 4 x 32-byte entries, already 16-aligned
  CHECK(table[0].size == 3 * 16);
  CHECK(table[1].offset == 192 + 48);
  CHECK(table[1].size == 37);
  CHECK(table[2].offset == 240 + 48);  // 37 bytes of weights padded to 48
  CHECK(table[3].size == 9);           // x's 6 bytes then z's 3 (y is an output)

  std::vector<RawSection> raw;
  for (const SectionView& s : table) {
    const std::vector<uint8_t> data(file.begin() + s.offset, file.begin() + s.offset + s.size);
    CHECK(s.crc == test::crc32(data));
    CHECK(s.offset % 16 == 0);
    raw.push_back({s.type, data});
  }
  CHECK(test::hex(raw[0].data) == test::hex(code_bytes({p.code[0], p.code[1], p.code[2]})));
  CHECK(raw[1].data == p.weights);
  CHECK(raw[3].data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});

  // The manifest holds every field of the Program; init data is referenced by offset.
  const json m = json::parse(raw[2].data.begin(), raw[2].data.end());
  CHECK(m["format"] == "tpusim-program");
  CHECK(m["model"] == "sample");
  CHECK(m["arch"] == p.arch);
  CHECK(m["meta"] == p.meta);
  CHECK(m["host_regions"][0]["init_offset"] == 0);
  CHECK(m["host_regions"][0]["direction"] == "input");
  CHECK(m["host_regions"][1]["direction"] == "output");
  CHECK_FALSE(m["host_regions"][1].contains("init_offset"));
  CHECK(m["host_regions"][2]["init_offset"] == 6);
  CHECK(m["symbols"][2] == json{{"name", "buf"}, {"space", "ub"}, {"addr", 16}, {"size", 8}});

  // Our independent writer produces the same bytes from the same sections.
  CHECK(test::hex(build_container(raw)) == test::hex(file));
}

TEST_CASE("read_program inverts write_program", "[isa][container]") {
  const Program p = sample_program();
  const Program back = read_tpu(write_program(p));
  CHECK(back.code == p.code);
  CHECK(back.weights == p.weights);
  CHECK(back.model == p.model);
  CHECK(back.arch == p.arch);
  CHECK(back.meta == p.meta);
  CHECK(back.host_regions == p.host_regions);
  CHECK(back.symbols == p.symbols);
  CHECK(back == p);

  SECTION("an empty program") {
    const Program empty;
    CHECK(read_tpu(write_program(empty)) == empty);
  }
  SECTION("through files") {
    test::ScratchDir dir;
    save_program(dir / "p.tpu", p);
    CHECK(test::read_bytes(dir / "p.tpu") == write_program(p));
    CHECK(load_program(dir / "p.tpu") == p);
    const std::string missing = (dir / "missing.tpu").string();
    CHECK_THROWS_WITH(load_program(missing), Equals(missing + ": cannot open: No such file or directory"));
    CHECK_THROWS_WITH(load_program(dir.path()), Equals(dir.path().string() + ": is a directory"));
  }
}

TEST_CASE("write_program is deterministic", "[isa][container]") {
  const Program a = sample_program();
  Program b = sample_program();
  // Same content, metadata built in another order.
  b.meta = json::object();
  b.meta["none"] = nullptr;
  b.meta["offset"] = -3;
  b.meta["scale"] = 0.125;
  b.meta["compiler"] = {{"opts", {{"o", 2}}}, {"passes", {"tile", "schedule"}}, {"version", "0.1"}};
  REQUIRE(a == b);
  CHECK(write_program(a) == write_program(a));
  CHECK(write_program(a) == write_program(b));
  CHECK(write_program(read_tpu(write_program(a))) == write_program(a));
}

TEST_CASE("write_program refuses inconsistent programs", "[isa][container]") {
  Program p = sample_program();
  SECTION("a region defined twice") {
    p.host_regions[1].name = "x";
    CHECK_THROWS_WITH(write_program(p), Equals("host region \"x\" defined twice"));
  }
  SECTION("init data of the wrong size") {
    p.host_regions[0].init.pop_back();
    CHECK_THROWS_WITH(write_program(p), Equals("host region \"x\": initial data must be given for "
                                               "inputs only and cover all 6 bytes"));
  }
  SECTION("a shape that does not match the bytes") {
    p.host_regions[1].shape = {3};
    CHECK_THROWS_WITH(write_program(p),
                      Equals("host region \"y\": shape does not match its 8 bytes of int32"));
  }
  SECTION("an unknown symbol space") {
    p.symbols[0].space = "dram";
    CHECK_THROWS_WITH(write_program(p),
                      Equals("symbol \"acc0\": space \"dram\" is not code, ub, acc or weights"));
  }
  SECTION("symbols out of canonical order") {
    std::swap(p.symbols[0], p.symbols[1]);
    CHECK_THROWS_WITH(write_program(p),
                      Equals("symbols are not in canonical order (by space, address, name)"));
  }
  SECTION("an instruction out of range") {
    p.code[0][Field::rows] = 0;
    CHECK_THROWS_WITH(write_program(p), Equals("field rows = 0 is below its minimum 1"));
  }
}

// One definition for the compiler's meta.tile_uses and the machine's spans of a gathering
// matmul's tile without them (it was written twice, compiler/weight_image.cpp and sim/machine.cpp).
TEST_CASE("tile_use_of is the box and row spans of a tile's nonzero cells", "[isa][container]") {
  const std::vector<uint8_t> tile = {0, 0, 0, 0, 0,   // row 0: empty
                                     0, 3, 0, 0, 9,   // row 1: columns 1..4, span 4
                                     0, 0, 0, 0, 0,   // row 2: empty
                                     7, 0, 0, 0, 0};  // row 3: column 0, span 1
  // Box: rows 0..3 (4), columns 0..4 (5); spans 4 + 1.
  CHECK(tile_use_of(tile.data(), 4, 5) == WeightTileUse{4, 5, 5, 0});
  // The first two rows only: row 1's box and span.
  CHECK(tile_use_of(tile.data(), 2, 5) == WeightTileUse{2, 5, 4, 0});
  CHECK(tile_use_of(tile.data(), 1, 5) == WeightTileUse{});
}
