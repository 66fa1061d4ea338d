#include "isa/generate.h"

#include <fmt/format.h>

#include <cctype>

#include "isa/table.h"
#include "isa/text.h"

namespace tpusim::isa {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string range_text(const Operand& o) {
  const FieldSpec& f = field_spec(o.field);
  if (f.kind == FieldKind::flag) return "0 or 1";
  if (f.kind == FieldKind::enumeration || f.kind == FieldKind::mask) {
    std::string names;
    for (const EnumValue& e : f.values) append_joined(names, ", ", fmt::format("`{}`", e.name));
    return f.kind == FieldKind::mask ? "set of " + names : names;
  }
  return fmt::format("{}..{}", o.min, field_max(o));
}

std::string default_text(const Operand& o) {
  if (!o.default_value) return "required";
  const FieldSpec& f = field_spec(o.field);
  if (f.kind == FieldKind::enumeration)
    return fmt::format("`{}`", find_value(f.values, *o.default_value)->name);
  if (f.kind == FieldKind::flag) return *o.default_value ? "set" : "clear";
  return std::to_string(*o.default_value);
}

// Which fields occupy byte `b` of an instruction, e.g. "`ub`[15:8]".
std::string byte_contents(const OpcodeSpec& s, int b) {
  if (b == 0) return fmt::format("opcode = `{:#04x}`", static_cast<int>(s.opcode));
  std::string out;
  for (const Operand& o : s.operands) {
    const int lo = std::max<int>(o.lsb, 8 * b), hi = std::min<int>(o.lsb + o.width, 8 * b + 8) - 1;
    if (lo > hi) continue;
    const std::string_view name = field_spec(o.field).name;
    const std::string part =
        o.width == 1 ? fmt::format("`{}`", name) : fmt::format("`{}`[{}:{}]", name, hi - o.lsb, lo - o.lsb);
    append_joined(out, ", ",
                  fmt::format("{} (bit{} {})", part, lo == hi ? "" : "s",
                              lo == hi ? std::to_string(lo % 8) : fmt::format("{}-{}", lo % 8, hi % 8)));
  }
  return out.empty() ? "reserved, 0" : out;
}

// "`host` points into host memory, `ub`, `src` ... into the unified buffer, ...", from the table.
std::string address_fields() {
  static constexpr std::pair<AddressSpace, std::string_view> kWhere[] = {
      {AddressSpace::host, "host memory"},
      {AddressSpace::weights, "weight memory"},
      {AddressSpace::ub, "the unified buffer"},
      {AddressSpace::acc, "the accumulators"}};
  std::string out;
  for (const auto& [space, where] : kWhere) {
    std::string names;
    for (const FieldSpec& f : kFields)
      if (f.space == space) append_joined(names, ", ", fmt::format("`{}`", f.name));
    append_joined(
        out, "; ",
        fmt::format("{} point{} into {}", names, names.find(',') == std::string::npos ? "s" : "", where));
  }
  return out;
}

void enum_table(std::string& out, std::string_view title, std::span<const EnumValue> values) {
  out += fmt::format("\n### {}\n\n| name | value | meaning |\n|---|---|---|\n", title);
  for (const EnumValue& e : values) out += fmt::format("| `{}` | {} | {} |\n", e.name, e.value, e.doc);
}

}  // namespace

std::string isa_markdown() {
  std::string out =
      "<!-- Generated from isa/table.h by `build/tpusim isa --markdown > docs/isa.md`. Do not edit: "
      "a test fails when this file and the table differ. -->\n"
      "# The tpusim instruction set\n\n"
      "A TPU-v1-style CISC instruction set (Jouppi et al., ISCA 2017, section 2): the host issues "
      "instructions to a control unit that dispatches each to one execution station of a 4-stage "
      "pipeline (host DMA, weight fetch, matrix unit, activation unit); stations overlap, and "
      "`sync`/`barrier` order them where data dependencies need it. There is no program counter "
      "and no branch.\n\n"
      "## Encoding\n\n"
      "Every instruction is 16 bytes, little-endian: read the bytes as one 128-bit unsigned integer "
      "whose bit 0 is bit 0 of byte 0. Bits 0-7 are the opcode, bits 8-15 the opcode's flags, "
      "bits 16-127 its operands. A field `f[hi:lo]` in a byte means bits lo..hi of field f sit in "
      "that byte, from the byte's bit given. Bits no field owns are reserved and must be 0; the "
      "decoder rejects an instruction with a reserved bit set, an unknown opcode, an undefined "
      "enumeration value or a count below its minimum.\n\n"
      "Addresses: " +
      address_fields() +
      ". Host and weight addresses count bytes; UB and accumulator addresses count rows. A UB row "
      "holds one vector of int8 (or uint8) values and is as wide as the "
      "array's larger side (256 bytes on tpu-v1): a matmul reads array_rows bytes of each input "
      "row, an activate writes array_cols bytes. An accumulator row holds array_cols int32 values. "
      "The ISA's field widths bound addresses; the configured machine's sizes bound them further, "
      "and the simulator rejects an instruction that reaches outside a modelled memory.\n\n"
      "Integer semantics: `round_half_away` rounds to nearest, ties away from zero; results "
      "saturate to the output type's range. Requantization computes in 64 bits, so no "
      "intermediate overflows.\n\n"
      "Not modelled from the paper's list: the alternate host read/write instructions (the "
      "simulator's host is a memory image).\n\n"
      "## Summary\n\n| opcode | mnemonic | paper name | unit | operands |\n|---|---|---|---|---|\n";
  for (const OpcodeSpec& s : kOpcodes) {
    std::string ops;
    for (const Operand& o : s.operands)
      append_joined(ops, ", ", fmt::format("`{}`", field_spec(o.field).name));
    out += fmt::format("| `{:#04x}` | `{}` | {} | {} | {} |\n", static_cast<int>(s.opcode), s.mnemonic,
                       s.paper_name, kUnitNames[static_cast<int>(s.unit)], ops.empty() ? "none" : ops);
  }
  for (const OpcodeSpec& s : kOpcodes) {
    out += fmt::format("\n## `{}`: {}\n\n{}\n\n- Unit: {}\n- Waits for: {}\n", s.mnemonic, s.paper_name,
                       s.semantics, kUnitNames[static_cast<int>(s.unit)], s.waits_for);
    if (!s.operands.empty()) {
      out += "\n| field | bits | width | values | default | meaning |\n|---|---|---|---|---|---|\n";
      for (const Operand& o : s.operands) {
        const FieldSpec& f = field_spec(o.field);
        out += fmt::format("| `{}` | {}-{} | {} | {} | {} | {} |\n", f.name, o.lsb, o.lsb + o.width - 1,
                           o.width, range_text(o), default_text(o), f.doc);
      }
    }
    out += "\n| byte | contents |\n|---|---|\n";
    for (int b = 0; b < kInstructionBytes; ++b) {
      std::string c = byte_contents(s, b);
      // Collapse runs of reserved bytes into one row.
      int e = b;
      while (c == "reserved, 0" && e + 1 < kInstructionBytes && byte_contents(s, e + 1) == c) ++e;
      out += fmt::format("| {} | {} |\n", e == b ? std::to_string(b) : fmt::format("{}-{}", b, e), c);
      b = e;
    }
  }
  out += "\n## Named values\n";
  enum_table(out, "`func`: activation functions", kFuncValues);
  enum_table(out, "`op`: element-wise operations of `vec`", kVecOpValues);
  enum_table(out, "`kind`: pooling", kPoolKindValues);
  enum_table(out, "`units`: bits of the `sync` mask", kUnitMaskValues);
  enum_table(out, "`reg`: configuration registers of `setcfg`", kConfigRegValues);
  return out;
}

std::string isa_sv_package() {
  std::string out =
      "// Generated from isa/table.h by `build/tpusim isa --sv > hw/rtl/tpusim_isa_pkg.sv`.\n"
      "// Do not edit: a test fails when this file and the table differ.\n"
      "package tpusim_isa_pkg;\n\n";
  out += fmt::format(
      "  localparam int unsigned INSTR_BYTES = {};\n  localparam int unsigned INSTR_BITS = {};\n\n",
      kInstructionBytes, kInstructionBits);
  out += "  typedef enum logic [7:0] {\n";
  for (int i = 0; i < kOpcodeCount; ++i)
    out += fmt::format("    OP_{} = 8'h{:02x}{}\n", upper(kOpcodes[i].mnemonic),
                       static_cast<int>(kOpcodes[i].opcode), i + 1 < kOpcodeCount ? "," : "");
  out +=
      "  } opcode_e;\n\n  // Field positions: <MNEMONIC>_<FIELD>_LSB and _WIDTH, bit positions in the "
      "128-bit word.\n";
  for (const OpcodeSpec& s : kOpcodes)
    for (const Operand& o : s.operands) {
      const std::string n = upper(s.mnemonic) + "_" + upper(field_spec(o.field).name);
      out += fmt::format("  localparam int unsigned {}_LSB = {};\n  localparam int unsigned {}_WIDTH = {};\n",
                         n, o.lsb, n, o.width);
    }
  auto values = [&](std::string_view prefix, std::span<const EnumValue> vs) {
    out += "\n";
    for (const EnumValue& e : vs)
      out += fmt::format("  localparam int unsigned {}_{} = {};\n", prefix, upper(e.name), e.value);
  };
  values("FUNC", kFuncValues);
  out += fmt::format(
      "  // sigmoid and tanh read y as fixed point with CURVE_FRACTION_BITS fraction bits, clamped to\n"
      "  // [CURVE_INPUT_MIN, CURVE_INPUT_MAX].\n"
      "  localparam int unsigned CURVE_FRACTION_BITS = {};\n  localparam int CURVE_INPUT_MIN = {};\n"
      "  localparam int CURVE_INPUT_MAX = {};\n",
      kCurveFractionBits, kCurveInputMin, kCurveInputMax);
  values("VEC", kVecOpValues);
  values("POOL", kPoolKindValues);
  values("UNIT_BIT", kUnitMaskValues);
  values("CFG", kConfigRegValues);
  out += "\nendpackage : tpusim_isa_pkg\n";
  return out;
}

}  // namespace tpusim::isa
