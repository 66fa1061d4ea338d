// Assembler error messages: exact text, starting "name:line:col: error:", for a corpus of
// mistakes; several errors are reported together.
#include <catch2/catch.hpp>
#include <filesystem>
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
namespace fs = std::filesystem;

namespace {

// The full error text of a source that must not assemble.
std::string error_of(const std::string& text, const fs::path& base = ".") {
  try {
    assemble(text, "t.s", base);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("assembled without an error:\n" << text);
  return {};
}

}  // namespace

TEST_CASE("error messages name the file, line and column", "[isa][asm][errors]") {
  struct Case {
    std::string source;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"foo ub=1", "t.s:1:1: error: unknown mnemonic 'foo'"},
      {"nop\n  matmul ub=0, acc=0, rows=1, bogus=3",
       "t.s:2:31: error: matmul has no operand 'bogus' (operands: accumulate, switch, unsigned, ub, acc, "
       "rows, repeat, stride, lane)"},
      {"nop extra", "t.s:1:5: error: nop has no operand 'extra' (operands: none)"},
      {"matmul ub=0, acc=0", "t.s:1:1: error: matmul needs operand 'rows' (number of rows)"},
      {"matmul ub=0, ub=1, acc=0, rows=1", "t.s:1:14: error: operand 'ub' given twice"},
      {"matmul ub=0, acc=0, rows=0", "t.s:1:26: error: rows = 0 is out of range (1..65535)"},
      {"matmul ub=1<<24, acc=0, rows=1", "t.s:1:11: error: ub = 16777216 is out of range (0..16777215)"},
      {"matmul ub=-1, acc=0, rows=1", "t.s:1:11: error: ub = -1 is out of range (0..16777215)"},
      {"matmul ub=0xffffffffffffffff, acc=0, rows=1",
       "t.s:1:11: error: ub = 18446744073709551615 is out of range (0..16777215)"},
      {"act acc=0, ub=0, rows=1, func=bogus",
       "t.s:1:31: error: 'bogus' is not a func value (one of: identity, relu, relux, sigmoid, tanh)"},
      {"act acc=0, ub=0, rows=1, func=7", "t.s:1:1: error: field func = 7 is not a defined func value"},
      {"sync units=host|bogus",
       "t.s:1:17: error: 'bogus' is not a units name (one of: host, weights, matrix, act)"},
      {"sync units=0", "t.s:1:12: error: units = 0 is out of range (1..15)"},
      {".model \"abc", "t.s:1:8: error: unterminated string"},
      {".model \"a\\q\"", "t.s:1:11: error: unknown escape \\q"},
      {".bogus 1",
       "t.s:1:1: error: unknown directive '.bogus' (directives: .model .arch .meta .equ .ub .acc .weights "
       ".wimage .input .output)"},
      {"matmul ub=x, acc=0, rows=1",
       "t.s:1:11: error: unknown name 'x' (constants and regions must be defined before use)"},
      {".equ N, 4\n.equ M, N.size",
       "t.s:2:9: error: unknown name 'N.size' (.size and .end apply to regions defined earlier)"},
      {"a:\na: nop", "t.s:2:1: error: 'a' is already defined"},
      {".equ a, 1\n.ub a, 0, 1", "t.s:2:5: error: 'a' is already defined"},
      {".equ nop, 3", "t.s:1:6: error: 'nop' is a mnemonic or operand name and cannot name a symbol"},
      {".equ rows, 3", "t.s:1:6: error: 'rows' is a mnemonic or operand name and cannot name a symbol"},
      {".equ a.b, 3", "t.s:1:6: error: 'a.b' is not a name ([A-Za-z_][A-Za-z0-9_]*)"},
      {".equ X, 1/0", "t.s:1:10: error: division by zero"},
      {".equ X, 1 % (2-2)", "t.s:1:11: error: division by zero"},
      {".equ X, 12z", "t.s:1:9: error: malformed number '12z'"},
      {".equ X, 0b102", "t.s:1:9: error: malformed number '0b102'"},
      {".equ X, 0x", "t.s:1:9: error: malformed number '0x'"},
      {".equ X, 0x1g", "t.s:1:9: error: malformed number '0x1g'"},
      {".equ X, 99999999999999999999", "t.s:1:9: error: number 99999999999999999999 does not fit in 64 bits"},
      {".equ X, 0xffffffffffffffff + 1", "t.s:1:28: error: expression overflows 64 bits"},
      {".equ X, 1 << 64", "t.s:1:11: error: shift count must be 0..63"},
      {".meta k, -0xffffffffffffffff", "t.s:1:10: error: expression overflows 64 bits"},
      {".meta k, -0x8000000000000001", "t.s:1:10: error: expression overflows 64 bits"},
      {".equ X, 1e-3", "t.s:1:9: error: expected a number or a name, found '1e-3'"},
      {".equ X, (1", "t.s:1:11: error: expected ')', found end of line"},
      {".equ X, 1 2", "t.s:1:11: error: unexpected '2' after the statement"},
      {".equ X, ", "t.s:1:9: error: expected a number or a name, found end of line"},
      {"nop @", "t.s:1:5: error: unexpected character '@'"},
      {"matmul ub=0 acc=0, rows=1", "t.s:1:13: error: expected ',' between operands, found 'acc'"},
      {"42", "t.s:1:1: error: expected an instruction or directive, found '42'"},
      {".ub a, 0, 0", "t.s:1:11: error: rows = 0 is out of range (1..16777216)"},
      {".acc a, 65535, 2", "t.s:1:16: error: rows = 2 is out of range (1..1)"},
      {".acc a, 65536, 1", "t.s:1:9: error: address = 65536 is out of range (0..65535)"},
      {".weights w, 0, 4, init=ones",
       "t.s:1:24: error: unknown initializer 'ones' (zero, random(SEED) or file(\"PATH\"))"},
      {".weights w, 0, 4, fill=zero", "t.s:1:19: error: unknown option 'fill' (expected 'init=')"},
      {".output y, 0, 4, init=zero",
       "t.s:1:18: error: unknown option 'init' for .output (dtype, shape, scale)"},
      {".input x, 0, 4, dtype=int16",
       "t.s:1:8: error: host region \"x\": dtype \"int16\" is not int8, uint8 or int32"},
      {".input x, 0, 4, shape=2x3",
       "t.s:1:8: error: host region \"x\": shape does not match its 4 bytes of int8"},
      {".input x, 0, 4, shape=2x", "t.s:1:23: error: malformed shape '2x'"},
      {".input x, 0x10000000000, 4",
       "t.s:1:11: error: host address = 1099511627776 is out of range (0..1099511627775)"},
      {".meta k, json \"{bad\"", "t.s:1:15: error: not valid JSON"},
      {".model name", "t.s:1:8: error: expected a quoted model name, found 'name'"},
  };
  for (const Case& c : cases) {
    INFO(c.source);
    CHECK(error_of(c.source) == c.message);
  }
}

TEST_CASE("file(...) errors", "[isa][asm][errors]") {
  test::ScratchDir dir;
  test::write_bytes(dir / "three.bin", std::vector<uint8_t>{1, 2, 3});
  CHECK(error_of(".input a, 0, 4, init=file(\"three.bin\")", dir.path()) ==
        "t.s:1:27: error: file \"three.bin\" has 3 bytes; the region needs exactly 4");
  CHECK(error_of(".weights w, 0, 2, init=file(\"three.bin\")", dir.path()) ==
        "t.s:1:29: error: file \"three.bin\" has 3 bytes; the region needs exactly 2");
  CHECK(error_of(".input a, 0, 4, init=file(\"nope.bin\")", dir.path()) ==
        "t.s:1:27: error: " + (dir.path() / "nope.bin").string() +
            ": cannot open: No such file or directory");
  // A data file is a regular file (isa/file_io.h): a device is refused before anything is read.
  std::filesystem::create_symlink("/dev/zero", dir / "zero.bin");
  CHECK(error_of(".input a, 0, 4, init=file(\"zero.bin\")", dir.path()) ==
        "t.s:1:27: error: " + (dir.path() / "zero.bin").string() +
            ": is a character device, not a regular file; expected a data file");
  CHECK(error_of(".input a, 0, 4, init=file(nope.bin)", dir.path()) ==
        "t.s:1:27: error: expected a quoted file name, found 'nope.bin'");
  const std::string missing = (dir.path() / "missing.s").string();
  CHECK_THROWS_WITH(assemble_file(missing), Equals(missing + ": cannot open: No such file or directory"));
  CHECK_THROWS_WITH(assemble_file(dir.path()), Equals(dir.path().string() + ": is a directory"));
}

TEST_CASE("every listed directive is one the assembler dispatches", "[isa][asm][errors]") {
  // A directive with no arguments fails on its arguments, never as unknown.
  for (std::string_view d : kDirectives) {
    INFO(d);
    const std::string err = error_of(std::string(d));
    CHECK(err.find("unknown directive") == std::string::npos);
    CHECK(err.rfind("t.s:1:", 0) == 0);
  }
  CHECK(error_of(".bogus") ==
        "t.s:1:1: error: unknown directive '.bogus' (directives: .model .arch .meta .equ .ub .acc .weights "
        ".wimage .input .output)");
}

TEST_CASE("nesting limits stop pathological lines before they overflow the stack", "[isa][asm][errors]") {
  // An expression may nest 256 levels (255 parentheses around a literal); the 257th level is
  // reported where it starts.
  CHECK_NOTHROW(assemble(".equ a, " + std::string(255, '(') + "1" + std::string(255, ')'), "t.s"));
  CHECK(error_of(".equ a, " + std::string(257, '(') + "1" + std::string(257, ')')) ==
        "t.s:1:265: error: expression nested more than 256 levels deep");
  CHECK(error_of(".equ a, " + std::string(50000, '-') + "1") ==
        "t.s:1:265: error: expression nested more than 256 levels deep");
  // JSON values: 32 levels (the manifest allows 64, and a value sits 2 levels down).
  const std::string ok = std::string(32, '[') + std::string(32, ']');
  const std::string deep = std::string(33, '[') + std::string(33, ']');
  CHECK_NOTHROW(assemble(".meta k, json \"" + ok + "\"", "t.s"));
  CHECK(error_of(".meta k, json \"" + deep + "\"") ==
        "t.s:1:15: error: JSON nested more than 32 levels deep");
}

TEST_CASE("errors on several lines are reported together", "[isa][asm][errors]") {
  CHECK(error_of("nop\n\tbogus\nfoo bar\n.equ z, 1/0\nhalt\n") ==
        "t.s:2:2: error: unknown mnemonic 'bogus'\n"
        "t.s:3:1: error: unknown mnemonic 'foo'\n"
        "t.s:4:10: error: division by zero");

  std::string many, expected;
  for (int i = 1; i <= 25; ++i) {
    many += "bad\n";
    if (i > 20) continue;
    if (i > 1) expected += '\n';
    expected += "t.s:";
    expected += std::to_string(i);
    expected += ":1: error: unknown mnemonic 'bad'";
  }
  CHECK(error_of(many) == expected + "\nt.s: too many errors, stopping");
}
