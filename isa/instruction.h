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

namespace detail {
// Where an Instruction keeps each field: a slot shared by fields that no opcode has together (a
// greedy colouring of the table's fields in enum order, computed here from kOpcodes), so that an
// instruction holds as many values as the opcode with the most operands, not one per field name
// (a compiled CNN1 has over a million instructions). `has[opcode byte]`: the opcode's fields.
struct FieldSlots {
  std::array<uint8_t, kFieldCount> slot{};
  int count = 0;
  std::array<uint64_t, 256> has{};  // bit f: the opcode has Field f
};
constexpr FieldSlots field_slots() {
  static_assert(kFieldCount <= 64, "Instruction's field masks are 64 bits");
  FieldSlots s;
  for (const OpcodeSpec& op : kOpcodes)
    for (const Operand& o : op.operands) s.has[static_cast<uint8_t>(op.opcode)] |= uint64_t{1} << int(o.field);
  for (int f = 0; f < kFieldCount; ++f) {
    uint64_t taken = 0;  // slots of earlier fields that share an opcode with f
    for (int g = 0; g < f; ++g)
      for (const OpcodeSpec& op : kOpcodes) {
        const uint64_t m = s.has[static_cast<uint8_t>(op.opcode)];
        if ((m >> f & 1) && (m >> g & 1)) taken |= uint64_t{1} << s.slot[g];
      }
    int k = 0;
    while (taken >> k & 1) ++k;
    s.slot[f] = static_cast<uint8_t>(k);
    s.count = k + 1 > s.count ? k + 1 : s.count;
  }
  return s;
}
inline constexpr FieldSlots kFieldSlots = field_slots();
}  // namespace detail

// Values an instruction stores: the most operands any opcode has (activate's 10 today).
inline constexpr int kFieldSlotCount = detail::kFieldSlots.count;
static_assert(kFieldSlotCount <= 16, "fields need too many Instruction slots");

// Whether opcode `op` has field `f` (the table's operands).
constexpr bool has_field(Opcode op, Field f) {
  return detail::kFieldSlots.has[static_cast<uint8_t>(op)] >> static_cast<int>(f) & 1;
}

// Reading a field the opcode does not have gives 0. Writing one (only hand-built, malformed
// instructions do) keeps it aside for check() to refuse; an instruction holds at most one such
// field, and its opcode is set before its fields (a field's slot is shared with other opcodes').
struct Instruction {
  Opcode opcode = Opcode::nop;

 private:
  Field stray_field_ = Field::count_;  // (here: beside the opcode, in the padding before slots)

 public:
  std::array<uint64_t, kFieldSlotCount> slots{};  // by detail::kFieldSlots.slot

  uint64_t operator[](Field f) const {
    return has_field(opcode, f) ? slots[detail::kFieldSlots.slot[static_cast<int>(f)]] : 0;
  }
  uint64_t& operator[](Field f) {
    if (has_field(opcode, f)) return slots[detail::kFieldSlots.slot[static_cast<int>(f)]];
    if (stray_ == 0) stray_field_ = f;
    return stray_;
  }
  // A field the opcode does not have that was written nonzero (check() names it), if any.
  bool has_stray_field(Field& which) const {
    which = stray_field_;
    return stray_ != 0;
  }
  bool operator==(const Instruction& o) const {
    return opcode == o.opcode && slots == o.slots && stray_ == o.stray_ && (stray_ == 0 || stray_field_ == o.stray_field_);
  }

 private:
  uint64_t stray_ = 0;
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
