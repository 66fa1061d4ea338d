// Program -> text assembly that re-assembles to identical bytes (docs/assembly.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "isa/program.h"

namespace tpusim::isa {

// One instruction as assembly text, e.g. "matmul ub=0, acc=0, rows=8, switch". Operands at their
// default value are left out; flags appear only when set.
std::string format_instruction(const Instruction& inst);

// A field's value as the assembly writes it after `name=`: an enumeration's or a mask's names
// ("host|act"), hexadecimal for addresses, else decimal (an undefined enumeration value: its number).
std::string field_value_text(Field field, uint64_t value);

struct DisasmOptions {
  // Where the weight image and input initial data go. When set, they are written as
  // "<data_stem>.weights.bin" and "<data_stem>.<region>.bin" and referenced with file("...")
  // relative to the listing, so the listing re-assembles to an identical .tpu file. When unset,
  // they are summarised in comments only.
  std::optional<std::filesystem::path> data_stem;
  bool show_bytes = true;  // a comment with each instruction's index and encoding
};

std::string disassemble(const Program& program, const DisasmOptions& options = {});

}  // namespace tpusim::isa
