// One decoded instruction: its opcode and the value of every field the table gives it.
// encode/decode are the only code that knows bit positions, and they take them from table.h.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "isa/table.h"

namespace tpusim::isa {

using Word = std::array<uint8_t, kInstructionBytes>;

struct Instruction {
  Opcode opcode = Opcode::nop;
  std::array<uint64_t, kFieldCount> fields{};  // fields the opcode does not have stay 0

  uint64_t operator[](Field f) const { return fields[static_cast<int>(f)]; }
  uint64_t& operator[](Field f) { return fields[static_cast<int>(f)]; }
  bool operator==(const Instruction&) const = default;
};

// An instruction with every operand at its assembly default (required ones 0).
Instruction make_instruction(Opcode op);

// Empty when every field is in range and named where it must be; else what is wrong, e.g.
// "field rows = 0 is below its minimum 1". Fields the opcode lacks must be 0.
std::string check(const Instruction& inst);

// Throws InputError when check() fails.
Word encode(const Instruction& inst);

// Throws InputError("unknown opcode 0x7f", "reserved bits set: ...", out-of-range fields).
// `where` prefixes messages, e.g. "prog.tpu: instruction 12".
Instruction decode(std::span<const uint8_t, kInstructionBytes> word, const std::string& where);

}  // namespace tpusim::isa
