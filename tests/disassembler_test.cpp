// The disassembler: its listing (with data files) re-assembles to identical container bytes, for
// the committed workloads, a program that uses every directive, and random programs.
#include "isa/disassembler.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "isa/assembler.h"
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

// Disassembles with data files into `dir`, re-assembles the listing from there.
Program reassemble(const Program& p, const fs::path& dir, bool show_bytes = true) {
  DisasmOptions opt;
  opt.data_stem = dir / "listing";
  opt.show_bytes = show_bytes;
  const std::string text = disassemble(p, opt);
  test::write_text(dir / "listing.s", text);
  INFO("listing:\n" << text);
  try {
    return assemble_file(dir / "listing.s");
  } catch (const InputError& e) {
    FAIL("the listing does not re-assemble: " << e.what());
  }
  return {};
}

}  // namespace

TEST_CASE("workloads/asm listings re-assemble to identical bytes", "[isa][asm][roundtrip]") {
  const fs::path dir = test::source_dir() / "workloads" / "asm";
  int count = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".s") continue;
    ++count;
    INFO(e.path().string());
    const Program p = assemble_file(e.path());
    const std::vector<uint8_t> bytes = write_program(p);
    for (bool show_bytes : {true, false}) {
      test::ScratchDir tmp;
      const Program back = reassemble(p, tmp.path(), show_bytes);
      CHECK(back == p);
      CHECK(write_program(back) == bytes);
    }
  }
  CHECK(count >= 1);
}

TEST_CASE("a program using every directive re-assembles to identical bytes", "[isa][asm][roundtrip]") {
  test::ScratchDir src;
  test::write_bytes(src / "in.bin", std::vector<uint8_t>{1, 2, 3, 4});
  const Program p =
      ok(".model \"all \\\"quoted\\\" \\\\ things\\n\"\n"
         ".arch \"tpu-v1\", array_rows=256, clock_mhz=700.5, extra=json \"[1, {\\\"a\\\": null}]\"\n"
         ".meta small, 1e-05\n"
         ".meta big, 1.5e+20\n"
         ".meta neg, -0.25\n"
         ".meta negint, -7\n"
         ".meta text, \"tab\\there\"\n"
         ".meta nested, json \"{\\\"x\\\": [true, false, 1.25, \\\"s\\\"]}\"\n"
         ".input  x, 0x40, 4, dtype=uint8, shape=(2, 2), scale=0.001953125, init=file(\"in.bin\")\n"
         ".input  r, 0x80, 8, init=random(99)\n"
         ".output y, 0x100, 16, dtype=int32, shape=4, scale=1e-05\n"
         ".weights w, 0, 300, init=random(7)\n"
         ".ub u, 3, 5\n"
         ".acc a, 7, 9\n"
         "top:\n"
         "    setcfg reg=host_stride, value=0xffffffffffffffff\n"
         "    tag tag=0xdeadbeef\n"
         "    rw waddr=w, tiles=1, unsigned\n"
         "    rhm host=x, ub=u, rows=1\n"
         "    sync units=host|weights\n"
         "    matmul ub=u, acc=a, rows=5, repeat=3, stride=7, accumulate, switch, unsigned\n"
         "mid: act acc=a, ub=u, rows=2, func=tanh, mult=3, shift=4, clip=5, qtable=6, perchan\n"
         "    vec op=min, func=sigmoid, src=1, src_b=2, ub=3, rows=4, mult=0, shift=1\n"
         "    pool kind=avg, src=0, ub=9, in_w=4, out_h=2, out_w=2, batch=2, window=2, pstride=2\n"
         "    whm host=y, ub=u, rows=1\n"
         "    barrier\n"
         "    nop\n"
         "end: halt\n",
         src.path());
  test::ScratchDir tmp;
  const Program back = reassemble(p, tmp.path());
  CHECK(back == p);
  CHECK(write_program(back) == write_program(p));
  CHECK(back.meta["small"] == 1e-05);
  CHECK(back.meta["neg"] == -0.25);
}

TEST_CASE("random programs re-assemble to identical bytes", "[isa][asm][roundtrip]") {
  std::mt19937_64 rng(7);
  Program p;
  for (int i = 0; i < 400; ++i) {
    const OpcodeSpec& s = kOpcodes[rng() % kOpcodeCount];
    Instruction inst = make_instruction(s.opcode);
    for (const Operand& o : s.operands) {
      const FieldSpec& f = field_spec(o.field);
      uint64_t v = rng() & field_max(o);
      if (f.kind == FieldKind::enumeration) v = f.values[rng() % f.values.size()].value;
      if (v < o.min) v = o.min;
      inst[o.field] = v;
    }
    p.code.push_back(inst);
  }
  p.symbols = {{"l0", "code", 0, 0}, {"l1", "code", 17, 0}, {"l2", "code", 17, 0}, {"last", "code", 400, 0}};
  REQUIRE(check_program(p).empty());
  test::ScratchDir tmp;
  const Program back = reassemble(p, tmp.path());
  CHECK(back.code == p.code);
  CHECK(write_program(back) == write_program(p));
}

TEST_CASE("disassembly without a data stem summarises data in comments", "[isa][asm]") {
  Program p;
  p.weights = {1, 2, 3};
  p.host_regions = {{"x", false, 0, 2, "int8", {}, 0.0, {5, 6}}};
  p.code = {make_instruction(Opcode::halt)};
  const std::string text = disassemble(p);
  CHECK_THAT(text, Contains(".input x, 0x0, 2, dtype=int8  ; 2 bytes of initial data not shown"));
  CHECK_THAT(text, Contains("; weight image: 3 bytes, not shown"));
  CHECK_THAT(text, Contains("    halt"));
  CHECK_THAT(text, Contains(";     0: 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"));
  DisasmOptions no_bytes;
  no_bytes.show_bytes = false;
  CHECK_THAT(disassemble(p, no_bytes), !Contains("01 00 00"));
}
