#include "isa/instruction.h"

#include <fmt/format.h>

#include "isa/error.h"

namespace tpusim::isa {
namespace {

using u128 = unsigned __int128;

u128 load(std::span<const uint8_t, kInstructionBytes> bytes) {
  u128 w = 0;
  for (int i = kInstructionBytes - 1; i >= 0; --i) w = (w << 8) | bytes[i];
  return w;
}

u128 mask_of(int lsb, int width) { return ((u128{1} << width) - 1) << lsb; }

// Bits of the word that some operand of `s` (or the opcode byte) owns.
u128 used_bits(const OpcodeSpec& s) {
  u128 used = mask_of(0, 8);
  for (const Operand& o : s.operands) used |= mask_of(o.lsb, o.width);
  return used;
}

std::string check_operand(const Operand& o, uint64_t v) {
  const FieldSpec& f = field_spec(o.field);
  if (v > field_max(o))
    return fmt::format("field {} = {} does not fit in {} bits (max {})", f.name, v, o.width, field_max(o));
  if (v < o.min) return fmt::format("field {} = {} is below its minimum {}", f.name, v, o.min);
  if (f.kind == FieldKind::enumeration && !find_value(f.values, v))
    return fmt::format("field {} = {} is not a defined {} value", f.name, v, f.name);
  if (f.kind == FieldKind::mask) {
    uint64_t named = 0;
    for (const EnumValue& e : f.values) named |= uint64_t{1} << e.value;
    if (v & ~named) return fmt::format("field {} = {:#x} sets undefined bits", f.name, v);
  }
  return {};
}

}  // namespace

Instruction make_instruction(Opcode op) {
  // Each opcode's instruction at its defaults, built once (the compiler makes millions).
  static const std::array<Instruction, 256> defaults = [] {
    std::array<Instruction, 256> d{};
    for (const OpcodeSpec& s : kOpcodes) {
      Instruction& inst = d[static_cast<uint8_t>(s.opcode)];
      inst.opcode = s.opcode;
      for (const Operand& o : s.operands) inst[o.field] = o.default_value.value_or(0);
    }
    return d;
  }();
  Instruction inst = defaults[static_cast<uint8_t>(op)];
  inst.opcode = op;  // (an opcode the table lacks: no fields, as before)
  return inst;
}

std::string check(const Instruction& inst) {
  const OpcodeSpec* s = find_opcode(static_cast<uint8_t>(inst.opcode));
  if (!s) return fmt::format("unknown opcode {:#04x}", static_cast<int>(inst.opcode));
  if (Field stray; inst.has_stray_field(stray))
    return fmt::format("{} has no field {}", s->mnemonic, field_spec(stray).name);
  for (int i = 0; i < kFieldCount; ++i) {
    const Field f = static_cast<Field>(i);
    if (const Operand* o = find_operand(*s, f))
      if (std::string err = check_operand(*o, inst[f]); !err.empty()) return err;
  }
  return {};
}

Word encode(const Instruction& inst) {
  if (std::string err = check(inst); !err.empty()) throw InputError(err);
  u128 w = static_cast<uint8_t>(inst.opcode);
  for (const Operand& o : spec(inst.opcode).operands) w |= u128{inst[o.field]} << o.lsb;
  Word out{};
  for (int i = 0; i < kInstructionBytes; ++i) out[i] = static_cast<uint8_t>(w >> (8 * i));
  return out;
}

Instruction decode(std::span<const uint8_t, kInstructionBytes> bytes, const std::string& where) {
  const u128 w = load(bytes);
  const OpcodeSpec* s = find_opcode(bytes[0]);
  if (!s) throw InputError(fmt::format("{}: unknown opcode {:#04x}", where, bytes[0]));
  if (const u128 stray = w & ~used_bits(*s); stray != 0) {
    int bit = 0;
    while (!((stray >> bit) & 1)) ++bit;
    throw InputError(fmt::format("{}: {} has reserved bit {} (byte {}) set; reserved bits must be 0", where,
                                 s->mnemonic, bit, bit / 8));
  }
  Instruction inst;
  inst.opcode = s->opcode;
  for (const Operand& o : s->operands)
    inst[o.field] = static_cast<uint64_t>((w >> o.lsb) & ((u128{1} << o.width) - 1));
  if (std::string err = check(inst); !err.empty())
    throw InputError(fmt::format("{}: {}: {}", where, s->mnemonic, err));
  return inst;
}

}  // namespace tpusim::isa
