// Small text helpers shared by the assembler, disassembler and generators.
#pragma once

#include <string>
#include <string_view>

namespace tpusim::isa {

// out += sep + item, without the separator before the first item.
inline void append_joined(std::string& out, std::string_view sep, std::string_view item) {
  if (!out.empty()) out += sep;
  out += item;
}

}  // namespace tpusim::isa
