// The assembler: expressions and directives. Error messages are in assembler_errors_test.cpp,
// disassembler round trips in disassembler_test.cpp.
#include "isa/assembler.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/program.h"
#include "test_support.h"

using namespace tpusim;
using namespace tpusim::isa;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using nlohmann::json;
using test::splitmix_bytes;
namespace fs = std::filesystem;

namespace {

Program ok(const std::string& text, const fs::path& base = ".") { return assemble(text, "t.s", base); }

// The value of an expression, through the 64-bit `value` field of setcfg.
uint64_t value_of(const std::string& expr, const std::string& prelude = "") {
  const Program p = ok(prelude + "\nsetcfg reg=host_stride, value=" + expr + "\n");
  REQUIRE(!p.code.empty());
  return p.code.back()[Field::value];
}

}  // namespace

// ---- expressions ----------------------------------------------------------------------------

TEST_CASE("expression precedence and associativity follow C", "[isa][asm][expr]") {
  CHECK(value_of("1 + 2 * 3") == 7);
  CHECK(value_of("(1 + 2) * 3") == 9);
  CHECK(value_of("3 * (2 + (4 - 1))") == 15);
  CHECK(value_of("1 << 4 + 1") == 32);  // + binds tighter than <<
  CHECK(value_of("1 + 2 << 3") == 24);
  CHECK(value_of("6 | 1 & 3") == 7);  // & binds tighter than |
  CHECK(value_of("(6 | 1) & 3") == 3);
  CHECK(value_of("12 & 10 | 1") == 9);
  CHECK(value_of("10 - 3 - 2") == 5);  // left to right
  CHECK(value_of("64 / 4 / 2") == 8);
  CHECK(value_of("256 >> 2 >> 1") == 32);
  CHECK(value_of("2 * 3 % 4") == 2);
  CHECK(value_of("7 / 2") == 3);
  CHECK(value_of("7 % 4") == 3);
  CHECK(value_of("-7 / 2 + 10") == 7);  // division truncates toward zero: -3 + 10
  CHECK(value_of("-1 + 3") == 2);
  CHECK(value_of("- -5") == 5);
  CHECK(value_of("~0") == 0xffffffffffffffffULL);
  CHECK(value_of("~0 & 0xff") == 255);
  CHECK(value_of("~0xff & 0xfff") == 0xf00);
  CHECK(value_of("1 << 63") == 0x8000000000000000ULL);
  CHECK(value_of("0x1e-1") == 0x1d);  // in hex, e is a digit and - subtracts
  CHECK(value_of("0x1E+2") == 0x20);
}

TEST_CASE("integer literals: decimal, hex, binary, underscores", "[isa][asm][expr]") {
  CHECK(value_of("0") == 0);
  CHECK(value_of("1_000_000") == 1000000);
  CHECK(value_of("0x10 - 0b101") == 11);
  CHECK(value_of("0xFF_FF") == 65535);
  CHECK(value_of("0XaB") == 171);
  CHECK(value_of("0b1111_0000") == 240);
  CHECK(value_of("0B11") == 3);
  CHECK(value_of("0xffffffffffffffff") == 0xffffffffffffffffULL);
  CHECK(value_of("18446744073709551615") == 0xffffffffffffffffULL);
}

TEST_CASE("names in expressions: constants, regions, .size, .end, labels", "[isa][asm][expr]") {
  CHECK(value_of("M", ".equ N, 8\n.equ M, N * 2 + 1") == 17);
  const std::string regions =
      ".ub buf, 16, 8\n.acc a, 100, 4\n.weights w, 32, 64\n.input x, 0x1000, 256\n.output y, 0x2000, 4";
  CHECK(value_of("buf", regions) == 16);
  CHECK(value_of("buf.size", regions) == 8);
  CHECK(value_of("buf.end", regions) == 24);
  CHECK(value_of("a.end", regions) == 104);
  CHECK(value_of("w", regions) == 32);
  CHECK(value_of("w.end", regions) == 96);
  CHECK(value_of("x", regions) == 0x1000);
  CHECK(value_of("x.size", regions) == 256);
  CHECK(value_of("x.end", regions) == 0x1100);
  CHECK(value_of("y.end - x", regions) == 0x1004);

  // Labels are instruction indices and may be used before they are defined.
  const Program p =
      ok("start: tag tag=finish\n"
         "  nop\n"
         "middle:\n"
         "  tag tag=middle * 10\n"
         "finish: tag tag=start\n");
  REQUIRE(p.code.size() == 4);
  CHECK(p.code[0][Field::tag] == 3);
  CHECK(p.code[2][Field::tag] == 20);
  CHECK(p.code[3][Field::tag] == 0);
  CHECK(p.symbols ==
        std::vector<Symbol>{{"start", "code", 0, 0}, {"middle", "code", 2, 0}, {"finish", "code", 3, 0}});
}

TEST_CASE("expressions become flags, enumerations and masks by name", "[isa][asm]") {
  const Program p =
      ok(".equ R, 2\n"
         "act acc=0, ub=1, rows=R, func=relux, clip=6, perchan, unsigned\n"
         "sync units=host|weights|matrix|act\n"
         "sync units=0b0110\n"
         "matmul ub=0, acc=0, rows=1, accumulate\n"
         "vec op=pass, src=0, src_b=0, ub=0, rows=1\n");
  REQUIRE(p.code.size() == 5);
  CHECK(p.code[0][Field::func] == static_cast<uint64_t>(Func::relux));
  CHECK(p.code[0][Field::rows] == 2);
  CHECK(p.code[0][Field::per_channel] == 1);
  CHECK(p.code[0][Field::unsigned_data] == 1);
  CHECK(p.code[0][Field::clip] == 6);
  CHECK(p.code[1][Field::units] == 15);
  CHECK(p.code[2][Field::units] == 6);
  CHECK(p.code[3][Field::accumulate] == 1);
  CHECK(p.code[3][Field::switch_weights] == 0);
  CHECK(p.code[4][Field::op] == static_cast<uint64_t>(VecOp::pass));
}

TEST_CASE("lines, comments, labels and line endings", "[isa][asm]") {
  const Program p = ok("; a comment\n# another\n\na: b: nop ; trailing\r\n  halt # done\r\n");
  REQUIRE(p.code.size() == 2);
  CHECK(p.code[0].opcode == Opcode::nop);
  CHECK(p.code[1].opcode == Opcode::halt);
  CHECK(p.symbols == std::vector<Symbol>{{"a", "code", 0, 0}, {"b", "code", 0, 0}});
  CHECK(ok("").code.empty());
}

// ---- directives -----------------------------------------------------------------------------

TEST_CASE(".model, .arch and .meta", "[isa][asm][directives]") {
  const Program p =
      ok(".model \"mlp-0 \\\"v2\\\"\"\n"
         ".equ K, 256\n"
         ".arch \"tpu-v1\", array_rows=K, clock_mhz=700, ratio=0.5, note=\"x\"\n"
         ".meta layers, 3\n"
         ".meta offset, -12\n"
         ".meta scale, 0.0078125\n"
         ".meta tiny, 1.5e3\n"
         ".meta who, \"compiler\\tv1\"\n"
         ".meta cfg, json \"{\\\"a\\\": [1, 2, {\\\"b\\\": null}], \\\"c\\\": true}\"\n"
         ".meta expr, K * 2\n"
         ".meta exp1, 1e-05\n"
         ".meta exp2, 2.5E+20\n"
         ".meta negreal, -1.5\n"
         ".meta most_negative, -0x8000000000000000\n");
  CHECK(p.model == "mlp-0 \"v2\"");
  CHECK(p.arch ==
        json{{"name", "tpu-v1"}, {"array_rows", 256}, {"clock_mhz", 700}, {"ratio", 0.5}, {"note", "x"}});
  CHECK(p.meta["layers"] == 3);
  CHECK(p.meta["offset"] == -12);
  CHECK(p.meta["scale"] == 0.0078125);
  CHECK(p.meta["tiny"] == 1500.0);
  CHECK(p.meta["who"] == "compiler\tv1");
  CHECK(p.meta["cfg"] == json::parse(R"({"a": [1, 2, {"b": null}], "c": true})"));
  CHECK(p.meta["expr"] == 512);
  CHECK(p.meta["exp1"] == 1e-05);
  CHECK(p.meta["exp2"] == 2.5e20);
  CHECK(p.meta["negreal"] == -1.5);
  CHECK(p.meta["most_negative"] == INT64_MIN);
  CHECK(p.meta.size() == 11);
}

TEST_CASE(".ub, .acc and .weights define symbols, sorted by space, address and name",
          "[isa][asm][directives]") {
  const Program p =
      ok(".ub   zeta, 8, 2\n"
         ".ub   alpha, 8, 4\n"
         ".ub   first, 0, 1\n"
         ".acc  acc0, 0x10, 0x20\n"
         ".weights w, 4, 4\n"
         "go: nop\n");
  CHECK(p.symbols == std::vector<Symbol>{{"acc0", "acc", 16, 32},
                                         {"go", "code", 0, 0},
                                         {"first", "ub", 0, 1},
                                         {"alpha", "ub", 8, 4},
                                         {"zeta", "ub", 8, 2},
                                         {"w", "weights", 4, 4}});
  CHECK(p.weights == std::vector<uint8_t>(8, 0));  // the image grows to cover the region
}

TEST_CASE("init=random(SEED) is splitmix64's top bytes", "[isa][asm][directives]") {
  // Published splitmix64 outputs for seed 0: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
  // 0x06c45d188009454f, 0xf88bb8a8724c81ec.
  std::vector<uint8_t> four(4);
  fill_random(four, 0);
  CHECK(four == std::vector<uint8_t>{0xe2, 0x6e, 0x06, 0xf8});
  std::vector<uint8_t> many(1000);
  fill_random(many, 12345);
  CHECK(many == splitmix_bytes(12345, 1000));

  const Program p = ok(".weights w, 16, 8, init=random(5)\n.input x, 0, 300, init=random(0x1234)\n");
  std::vector<uint8_t> expected(16, 0);
  for (uint8_t b : splitmix_bytes(5, 8)) expected.push_back(b);
  CHECK(p.weights == expected);
  REQUIRE(p.host_regions.size() == 1);
  CHECK(p.host_regions[0].init == splitmix_bytes(0x1234, 300));
}

TEST_CASE("init=zero and init=file(...) and .wimage", "[isa][asm][directives]") {
  test::ScratchDir dir;
  test::write_bytes(dir / "w.bin", std::vector<uint8_t>{1, 2, 3, 4});
  test::write_bytes(dir / "img.bin", std::vector<uint8_t>{9, 8, 7, 6, 5, 4});
  test::write_bytes(dir / "in.bin", std::vector<uint8_t>{0x80, 0x7f, 0, 1});
  fs::create_directory(dir / "sub");
  test::write_bytes(dir / "sub" / "x.bin", std::vector<uint8_t>{42, 43});

  SECTION(".weights init=file") {
    const Program p = ok(".weights w, 2, 4, init=file(\"w.bin\")\n", dir.path());
    CHECK(p.weights == std::vector<uint8_t>{0, 0, 1, 2, 3, 4});
  }
  SECTION(".weights init=zero over a random image") {
    const Program p = ok(".weights a, 0, 4, init=random(1)\n.weights b, 1, 2, init=zero\n", dir.path());
    const std::vector<uint8_t> r = splitmix_bytes(1, 4);
    CHECK(p.weights == std::vector<uint8_t>{r[0], 0, 0, r[3]});
  }
  SECTION(".wimage replaces the start of the image and may grow it") {
    const Program p = ok(".weights w, 0, 4, init=file(\"w.bin\")\n.wimage file(\"img.bin\")\n", dir.path());
    CHECK(p.weights == std::vector<uint8_t>{9, 8, 7, 6, 5, 4});
    const Program q = ok(".weights w, 0, 8\n.wimage file(\"w.bin\")\n", dir.path());
    CHECK(q.weights == std::vector<uint8_t>{1, 2, 3, 4, 0, 0, 0, 0});
  }
  SECTION(".input and .output with every option") {
    const Program p =
        ok(".input  x, 0x100, 4, dtype=uint8, shape=2x2, scale=0.5, init=file(\"in.bin\")\n"
           ".input  z, 0x200, 2, init=file(\"sub/x.bin\")\n"
           ".input  s, 0x300, 6, shape=(1, 2, 3), init=zero\n"
           ".output y, 0x1000, 16, dtype=int32, shape=2x2, scale=2\n",
           dir.path());
    REQUIRE(p.host_regions.size() == 4);
    CHECK(p.host_regions[0] == HostRegion{"x", false, 0x100, 4, "uint8", {2, 2}, 0.5, {0x80, 0x7f, 0, 1}});
    CHECK(p.host_regions[1] == HostRegion{"z", false, 0x200, 2, "int8", {}, 0.0, {42, 43}});
    CHECK(p.host_regions[2] == HostRegion{"s", false, 0x300, 6, "int8", {1, 2, 3}, 0.0, {0, 0, 0, 0, 0, 0}});
    CHECK(p.host_regions[3] == HostRegion{"y", true, 0x1000, 16, "int32", {2, 2}, 2.0, {}});
    CHECK(p.symbols.empty());  // host regions are listed as regions, not symbols
  }
  SECTION("assemble_file resolves file(...) beside the source") {
    test::write_text(dir / "sub" / "p.s", ".input a, 0, 2, init=file(\"x.bin\")\n");
    const Program p = assemble_file(dir / "sub" / "p.s");
    CHECK(p.host_regions.at(0).init == std::vector<uint8_t>{42, 43});
  }
}

TEST_CASE("matmul.s assembles to the documented program", "[isa][asm]") {
  const Program p = assemble_file(test::source_dir() / "workloads" / "asm" / "matmul.s");
  REQUIRE(p.code.size() == 8);
  CHECK(format_instruction(p.code[3]) == "matmul ub=0, acc=0, rows=8, switch");
  CHECK(test::hex(encode(p.code[3])) == "30 02 00 00 00 00 00 08 00 01 00 00 00 00 00 00");
  CHECK(format_instruction(p.code[4]) == "act acc=0, ub=8, rows=8, shift=8");
  CHECK(p.weights.size() == 65536);
  CHECK(p.weights == splitmix_bytes(2, 65536));
  REQUIRE(p.host_regions.size() == 2);
  CHECK(p.host_regions[0].init == splitmix_bytes(1, 2048));
  CHECK(p.model == "matmul-8x256x256");
  CHECK(p.arch == json{{"name", "tpu-v1"}});
}
