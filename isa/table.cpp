#include "isa/table.h"

#include <array>
#include <stdexcept>
#include <string>

namespace tpusim::isa {

namespace {

// kOpcodes' entry for each opcode byte (null: none), so that the simulator's and the compiler's
// lookups per instruction (spec(), isa::encode) are an index, not a search of the table.
struct OpcodeIndex {
  std::array<const OpcodeSpec*, 256> by_byte{};
  constexpr OpcodeIndex() {
    for (const OpcodeSpec& s : kOpcodes) by_byte[static_cast<uint8_t>(s.opcode)] = &s;
  }
};
constexpr OpcodeIndex kOpcodeIndex;

}  // namespace

const OpcodeSpec* find_opcode(uint8_t byte) { return kOpcodeIndex.by_byte[byte]; }

const OpcodeSpec* find_mnemonic(std::string_view mnemonic) {
  for (const OpcodeSpec& s : kOpcodes)
    if (s.mnemonic == mnemonic) return &s;
  return nullptr;
}

const OpcodeSpec& spec(Opcode op) { return *find_opcode(static_cast<uint8_t>(op)); }

const Operand* find_operand(const OpcodeSpec& s, Field field) {
  for (const Operand& o : s.operands)
    if (o.field == field) return &o;
  return nullptr;
}

uint64_t field_max(Opcode op, Field field) {
  const Operand* o = find_operand(spec(op), field);
  if (!o) throw std::logic_error(std::string(spec(op).mnemonic) + " has no such operand");
  return field_max(*o);
}

std::optional<Field> find_field(std::string_view name) {
  for (const FieldSpec& f : kFields)
    if (f.name == name) return f.id;
  return std::nullopt;
}

const EnumValue* find_value(std::span<const EnumValue> values, std::string_view name) {
  for (const EnumValue& v : values)
    if (v.name == name) return &v;
  return nullptr;
}

const EnumValue* find_value(std::span<const EnumValue> values, uint64_t value) {
  for (const EnumValue& v : values)
    if (v.value == value) return &v;
  return nullptr;
}

}  // namespace tpusim::isa
