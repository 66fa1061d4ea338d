// The committed files generated from the ISA table must equal what the table generates now.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "isa/generate.h"
#include "test_support.h"

using namespace tpusim;

namespace {

// "" when equal, else the first differing line of each, for a readable failure.
std::string first_difference(const std::string& committed, const std::string& generated) {
  if (committed == generated) return {};
  std::istringstream a(committed), b(generated);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la)), hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "files differ only in their final newline";
    if (!ha || !hb || la != lb)
      return "first difference at line " + std::to_string(line) +
             ":\n  committed: " + (ha ? la : "<end of file>") +
             "\n  generated: " + (hb ? lb : "<end of file>");
  }
}

void check_generated(const std::string& relative, const std::string& generated, const std::string& flag) {
  const std::string committed = test::read_text(test::source_dir() / relative);
  INFO(relative << " is out of date with isa/table.h; regenerate it with\n  build/tpusim isa " << flag
                << " > " << relative);
  CHECK(!committed.empty());
  CHECK(first_difference(committed, generated) == "");
}

}  // namespace

TEST_CASE("docs/isa.md is generated from the ISA table", "[isa][generated]") {
  check_generated("docs/isa.md", isa::isa_markdown(), "--markdown");
}

TEST_CASE("hw/rtl/tpusim_isa_pkg.sv is generated from the ISA table", "[isa][generated]") {
  check_generated("hw/rtl/tpusim_isa_pkg.sv", isa::isa_sv_package(), "--sv");
}

TEST_CASE("the generated SystemVerilog package carries the table's positions", "[isa][generated]") {
  // Spot checks against table.h, so that a generator that drops fields cannot pass by itself.
  const std::string sv = isa::isa_sv_package();
  for (const char* line :
       {"localparam int unsigned MATMUL_UB_LSB = 16;", "localparam int unsigned MATMUL_UB_WIDTH = 24;",
        "localparam int unsigned ACT_CLIP_LSB = 94;", "localparam int unsigned POOL_PSTRIDE_WIDTH = 4;",
        "OP_MATMUL = 8'h30", "OP_POOL = 8'h42", "localparam int unsigned FUNC_TANH = 4;"}) {
    INFO(line);
    CHECK(sv.find(line) != std::string::npos);
  }
}
