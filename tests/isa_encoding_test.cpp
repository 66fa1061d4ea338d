// The instruction encoding: every opcode's fields land on the bits table.h gives them, decode
// inverts encode, the assembly text of an instruction assembles back to it, and the decoder
// rejects every word the table does not allow (unknown opcodes, reserved bits, undefined
// enumeration values, counts below their minimum).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/instruction.h"
#include "isa/table.h"
#include "test_support.h"

using namespace tpusim;
using namespace tpusim::isa;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

// The plainest encoder there is: copy each field's bits one at a time to the bit positions the
// table gives it. encode() must agree with it for every instruction.
Word reference_encode(const Instruction& inst) {
  Word w{};
  w[0] = static_cast<uint8_t>(inst.opcode);
  for (const Operand& o : spec(inst.opcode).operands)
    for (int i = 0; i < o.width; ++i)
      if ((inst[o.field] >> i) & 1) {
        const int bit = o.lsb + i;
        w[bit / 8] = static_cast<uint8_t>(w[bit / 8] | (1u << (bit % 8)));
      }
  return w;
}

// A legal random value for one operand: minimum, maximum, small, or uniform over the width.
uint64_t random_value(const Operand& o, std::mt19937_64& rng) {
  const FieldSpec& f = field_spec(o.field);
  const uint64_t max = field_max(o);
  switch (f.kind) {
    case FieldKind::flag: return rng() & 1;
    case FieldKind::enumeration: return f.values[rng() % f.values.size()].value;
    case FieldKind::mask:
      for (;;) {
        uint64_t m = 0;
        for (const EnumValue& e : f.values)
          if (rng() & 1) m |= uint64_t{1} << e.value;
        if (m >= o.min) return m;
      }
    case FieldKind::uint: break;
  }
  uint64_t v = 0;
  switch (rng() % 4) {
    case 0: v = o.min; break;
    case 1: v = max; break;
    case 2: {  // a random bit length, so small values are common too
      const int bits = 1 + static_cast<int>(rng() % o.width);
      v = rng() & (bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1);
      break;
    }
    default: v = rng() & max;
  }
  return v < o.min ? o.min : v;
}

Instruction random_instruction(const OpcodeSpec& s, std::mt19937_64& rng) {
  Instruction inst;
  inst.opcode = s.opcode;
  for (const Operand& o : s.operands) inst[o.field] = random_value(o, rng);
  return inst;
}

// The smallest legal instruction of an opcode: every field at its minimum (first named value).
Instruction minimal_instruction(const OpcodeSpec& s) {
  Instruction inst;
  inst.opcode = s.opcode;
  for (const Operand& o : s.operands) {
    const FieldSpec& f = field_spec(o.field);
    inst[o.field] = f.kind == FieldKind::enumeration ? f.values[0].value : o.min;
  }
  return inst;
}

Word word_of(std::initializer_list<int> bytes) {
  REQUIRE(bytes.size() == kInstructionBytes);
  Word w{};
  int i = 0;
  for (int b : bytes) w[i++] = static_cast<uint8_t>(b);
  return w;
}

void set_bit(Word& w, int bit) { w[bit / 8] = static_cast<uint8_t>(w[bit / 8] | (1u << (bit % 8))); }

// Writes `value` into the field's bits (clearing them first), bypassing encode's checks.
void poke(Word& w, const Operand& o, uint64_t value) {
  for (int i = 0; i < o.width; ++i) {
    const int bit = o.lsb + i;
    w[bit / 8] = static_cast<uint8_t>(w[bit / 8] & ~(1u << (bit % 8)));
    if ((value >> i) & 1) set_bit(w, bit);
  }
}

Instruction assemble_one(const std::string& text) {
  const Program p = assemble(text + "\n", "one.s");
  REQUIRE(p.code.size() == 1);
  return p.code[0];
}

}  // namespace

TEST_CASE("the opcode table has the documented opcodes and mnemonics", "[isa][encoding]") {
  const std::vector<std::pair<std::string, int>> expected = {
      {"nop", 0x00}, {"halt", 0x01}, {"sync", 0x02}, {"barrier", 0x03}, {"setcfg", 0x04},
      {"tag", 0x05}, {"int", 0x06},  {"rhm", 0x10},  {"whm", 0x11},  {"rw", 0x20},      {"matmul", 0x30},
      {"act", 0x40}, {"vec", 0x41},  {"pool", 0x42}};
  REQUIRE(kOpcodeCount == static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(kOpcodes[i].mnemonic == expected[i].first);
    CHECK(static_cast<int>(kOpcodes[i].opcode) == expected[i].second);
    CHECK(find_mnemonic(expected[i].first) == &kOpcodes[i]);
    CHECK(find_opcode(static_cast<uint8_t>(expected[i].second)) == &kOpcodes[i]);
  }
}

TEST_CASE("random instructions of every opcode round-trip through encode, decode and text",
          "[isa][encoding]") {
  constexpr int kPerOpcode = 2000;
  std::mt19937_64 rng(20240601);
  for (const OpcodeSpec& s : kOpcodes) {
    for (int n = 0; n < kPerOpcode; ++n) {
      const Instruction inst = random_instruction(s, rng);
      const std::string text = format_instruction(inst);
      INFO(s.mnemonic << " #" << n << ": " << text);
      REQUIRE(check(inst).empty());
      const Word w = encode(inst);
      REQUIRE(test::hex(w) == test::hex(reference_encode(inst)));
      REQUIRE(decode(w, "random") == inst);
      REQUIRE(assemble_one(text) == inst);
    }
  }
}

TEST_CASE("make_instruction applies the table's defaults", "[isa][encoding]") {
  const Instruction m = make_instruction(Opcode::matmul);
  CHECK(m[Field::repeat] == 1);
  CHECK(m[Field::stride] == 0);
  CHECK(m[Field::accumulate] == 0);
  CHECK(m[Field::rows] == 0);  // required: no default
  const Instruction a = make_instruction(Opcode::activate);
  CHECK(a[Field::mult] == 1);
  CHECK(a[Field::clip] == 127);
  CHECK(a[Field::func] == static_cast<uint64_t>(Func::identity));
  const Instruction p = make_instruction(Opcode::pool);
  CHECK(p[Field::batch] == 1);
}

// Expected bytes below are worked out by hand from the layouts in table.h. The instruction is a
// 128-bit little-endian word: bit b lives in byte b/8 at bit b%8.
TEST_CASE("hand-checked encodings", "[isa][encoding]") {
  struct Case {
    std::string text;    // as written by hand
    Word bytes;          // the encoding, worked out by hand
    std::string disasm;  // format_instruction's spelling: table order, flags last, decimal
  };
  const std::vector<Case> cases = {
      // matmul: opcode 0x30 -> byte 0.
      //   accumulate bit 8, switch bit 9 -> byte 1 = 0b011 = 0x03 (unsigned, bit 10, clear).
      //   ub     bits 16..39 = 0x123456 -> bytes 2..4  = 56 34 12
      //   acc    bits 40..55 = 0x789a   -> bytes 5..6  = 9a 78
      //   rows   bits 56..71 = 8        -> bytes 7..8  = 08 00
      //   repeat bits 72..87 = 2        -> bytes 9..10 = 02 00
      //   stride bits 88..111 = 16      -> bytes 11..13 = 10 00 00; bytes 14..15 reserved = 0
      {"matmul ub=0x123456, acc=0x789a, rows=8, repeat=2, stride=16, accumulate, switch",
       word_of(
           {0x30, 0x03, 0x56, 0x34, 0x12, 0x9a, 0x78, 0x08, 0x00, 0x02, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00}),
       "matmul ub=1193046, acc=30874, rows=8, repeat=2, stride=16, accumulate, switch"},
      // rhm: opcode 0x10. host bits 16..55 = 0x123456789a -> bytes 2..6 = 9a 78 56 34 12;
      //   ub bits 56..79 = 0xabcdef -> bytes 7..9 = ef cd ab; rows bits 80..103 = 0x010203 ->
      //   bytes 10..12 = 03 02 01; bytes 13..15 reserved.
      {"rhm host=0x123456789a, ub=0xabcdef, rows=0x010203",
       word_of(
           {0x10, 0x00, 0x9a, 0x78, 0x56, 0x34, 0x12, 0xef, 0xcd, 0xab, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00}),
       "rhm host=0x123456789a, ub=11259375, rows=66051"},
      // act: opcode 0x40. func bits 8..10 = relux (2) -> 0x02; perchan bit 11 -> 0x08;
      //   byte 1 = 0x0a. acc bits 16..31 = 0x1234 -> 34 12. ub bits 32..55 = 0x56789a -> 9a 78 56.
      //   rows bits 56..71 = 3 -> 03 00. mult bits 72..87 = 0x100 -> 00 01.
      //   shift bits 88..93 = 9 -> byte 11 bits 0..5 = 0x09.
      //   clip bits 94..101 = 101 = 0b01100101: low 2 bits (01) -> byte 11 bits 6..7 = 0x40, so
      //     byte 11 = 0x49; high 6 bits 101 >> 2 = 25 = 0x19 -> byte 12 bits 0..5.
      //   qtable bits 102..125 = 0x345679: low 2 bits (01) -> byte 12 bits 6..7 = 0x40, so
      //     byte 12 = 0x59; 0x345679 >> 2 = 0xd159e -> bytes 13..15 = 9e 15 0d.
      {"act acc=0x1234, ub=0x56789a, rows=3, mult=0x100, shift=9, clip=101, qtable=0x345679, "
       "func=relux, perchan",
       word_of(
           {0x40, 0x0a, 0x34, 0x12, 0x9a, 0x78, 0x56, 0x03, 0x00, 0x00, 0x01, 0x49, 0x59, 0x9e, 0x15, 0x0d}),
       "act func=relux, acc=4660, ub=5666970, rows=3, mult=256, shift=9, clip=101, qtable=3430009, "
       "perchan"},
      // vec: opcode 0x41. op bits 8..10 = mul (2), func bits 11..13 = relu (1) -> 0x02 | 0x08.
      //   src 16..39 = 1, src_b 40..63 = 2, ub 64..87 = 3, rows 88..103 = 4, mult 104..119 = 5,
      //   shift 120..125 = 63 -> byte 15 = 0x3f.
      {"vec op=mul, func=relu, src=1, src_b=2, ub=3, rows=4, mult=5, shift=63",
       word_of(
           {0x41, 0x0a, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x03, 0x00, 0x00, 0x04, 0x00, 0x05, 0x00, 0x3f}),
       "vec op=mul, func=relu, src=1, src_b=2, ub=3, rows=4, mult=5, shift=63"},
      // pool: opcode 0x42. kind bit 8 = avg (1) -> byte 1 = 0x01. src 16..39 = 0x10, ub 40..63 =
      //   0x20. in_w bits 64..75 = 0xabc -> byte 8 = 0xbc, byte 9 low nibble = 0xa.
      //   out_h bits 76..87 = 0x123 -> byte 9 high nibble = 0x3 (byte 9 = 0x3a), byte 10 = 0x12.
      //   out_w bits 88..99 = 0x456 -> byte 11 = 0x56, byte 12 low nibble = 0x4.
      //   batch bits 100..107 = 0x7f -> byte 12 high nibble = 0xf (byte 12 = 0xf4), byte 13 low
      //   nibble = 0x7. window bits 108..111 = 3 -> byte 13 = 0x37. pstride 112..115 = 2 -> 0x02.
      {"pool kind=avg, src=0x10, ub=0x20, in_w=0xabc, out_h=0x123, out_w=0x456, batch=0x7f, "
       "window=3, pstride=2",
       word_of(
           {0x42, 0x01, 0x10, 0x00, 0x00, 0x20, 0x00, 0x00, 0xbc, 0x3a, 0x12, 0x56, 0xf4, 0x37, 0x02, 0x00}),
       "pool kind=avg, src=16, ub=32, in_w=2748, out_h=291, out_w=1110, batch=127, window=3, pstride=2"},
      // setcfg: opcode 0x04. reg bits 16..23 = host_row_bytes (1); value bits 24..87 ->
      //   bytes 3..10, least significant first.
      {"setcfg reg=host_row_bytes, value=0x1122334455667788",
       word_of(
           {0x04, 0x00, 0x01, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00}),
       "setcfg reg=host_row_bytes, value=0x1122334455667788"},
      // sync: units bits 16..19, host = bit 0, act = bit 3 -> 0b1001 = 0x09 in byte 2.
      {"sync units=host|act", word_of({0x02, 0x00, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
       "sync units=host|act"},
      // tag: tag bits 16..47 = 0xdeadbeef -> bytes 2..5 = ef be ad de.
      {"tag tag=0xdeadbeef", word_of({0x05, 0x00, 0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
       "tag tag=3735928559"},
      // rw: unsigned bit 8 -> byte 1 = 0x01; waddr bits 16..55 = 0xff00000001 -> 01 00 00 00 ff;
      //   tiles bits 56..71 = 0xffff -> ff ff.
      {"rw waddr=0xff00000001, tiles=0xffff, unsigned",
       word_of({0x20, 0x01, 0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0}),
       "rw waddr=0xff00000001, tiles=65535, unsigned"},
      {"halt", word_of({0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), "halt"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const Instruction inst = assemble_one(c.text);
    CHECK(test::hex(encode(inst)) == test::hex(c.bytes));
    CHECK(decode(c.bytes, "hand") == inst);
    CHECK(format_instruction(inst) == c.disasm);
    CHECK(assemble_one(c.disasm) == inst);
  }
}

TEST_CASE("check and encode reject fields outside the table", "[isa][encoding]") {
  Instruction nop = make_instruction(Opcode::nop);
  nop[Field::ub] = 1;
  CHECK(check(nop) == "nop has no field ub");
  CHECK_THROWS_AS(encode(nop), InputError);

  Instruction mm = make_instruction(Opcode::matmul);
  mm[Field::rows] = 0;
  CHECK(check(mm) == "field rows = 0 is below its minimum 1");
  mm[Field::rows] = 65536;
  CHECK(check(mm) == "field rows = 65536 does not fit in 16 bits (max 65535)");
  CHECK_THROWS_WITH(encode(mm), "field rows = 65536 does not fit in 16 bits (max 65535)");
  mm[Field::rows] = 65535;
  CHECK(check(mm).empty());

  Instruction act = make_instruction(Opcode::activate);
  act[Field::rows] = 1;
  act[Field::func] = 5;
  CHECK(check(act) == "field func = 5 is not a defined func value");

  Instruction sync = make_instruction(Opcode::sync);
  CHECK(check(sync) == "field units = 0 is below its minimum 1");
  sync[Field::units] = 0x10;
  CHECK(check(sync) == "field units = 16 does not fit in 4 bits (max 15)");

  Instruction bad;
  bad.opcode = static_cast<Opcode>(0x7f);
  CHECK(check(bad) == "unknown opcode 0x7f");
}

TEST_CASE("an instruction keeps each opcode's fields in slots of their own", "[isa][encoding]") {
  // As many slots as the opcode with the most operands has (activate: 10), not one per field name.
  size_t widest = 0;
  for (const OpcodeSpec& s : kOpcodes) widest = std::max(widest, s.operands.size());
  CHECK(size_t(kFieldSlotCount) == widest);
  CHECK(sizeof(Instruction) <= 8 + 8 * (widest + 1));
  // Every field of an opcode holds its own value, whatever the others hold: each field set to a
  // distinct value in turn, all others to all ones.
  for (const OpcodeSpec& s : kOpcodes) {
    INFO(s.mnemonic);
    for (const Operand& a : s.operands) {
      CHECK(has_field(s.opcode, a.field));
      Instruction in = make_instruction(s.opcode);
      for (const Operand& b : s.operands) in[b.field] = ~uint64_t{0};
      in[a.field] = 12345;
      for (const Operand& b : s.operands) CHECK(in[b.field] == (b.field == a.field ? 12345 : ~uint64_t{0}));
    }
    // A field the opcode does not have reads 0, also after one was written (check refuses that).
    for (int f = 0; f < kFieldCount; ++f) {
      if (find_operand(s, Field(f))) continue;
      CHECK_FALSE(has_field(s.opcode, Field(f)));
      Instruction in = make_instruction(s.opcode);
      const Instruction before = in;
      in[Field(f)] = 7;
      const Instruction& read = in;
      CHECK(read[Field(f)] == 0);
      for (const Operand& b : s.operands) CHECK(in[b.field] == before[b.field]);
      CHECK(check(in) == fmt::format("{} has no field {}", s.mnemonic, kFields[f].name));
      CHECK_FALSE(in == before);
      in[Field(f)] = 0;  // written back to 0: nothing stray
      CHECK(in == before);
    }
  }
}

TEST_CASE("decode rejects every opcode byte the table does not define", "[isa][decode]") {
  int unknown = 0;
  for (int byte = 0; byte < 256; ++byte) {
    Word w{};
    w[0] = static_cast<uint8_t>(byte);
    if (find_opcode(static_cast<uint8_t>(byte))) continue;
    ++unknown;
    char expected[64];
    std::snprintf(expected, sizeof expected, "prog.tpu: instruction 3: unknown opcode 0x%02x", byte);
    CHECK_THROWS_WITH(decode(w, "prog.tpu: instruction 3"), Equals(expected));
  }
  CHECK(unknown == 256 - kOpcodeCount);
}

TEST_CASE("decode rejects each reserved bit of each opcode", "[isa][decode]") {
  // Reserved bits per opcode, counted by hand: 120 bits after the opcode byte minus the widths of
  // the opcode's fields.
  const std::vector<std::pair<std::string, int>> reserved_counts = {
      {"nop", 120},   {"halt", 120}, {"barrier", 120}, {"sync", 116},  // units 4
      {"setcfg", 48},                                                  // reg 8 + value 64
      {"tag", 88},                                                     // tag 32
      {"rhm", 32},    {"whm", 32},                                     // host 40 + ub 24 + rows 24
      {"rw", 31},  // unsigned 1 + waddr 40 + tiles 16 + tile_rows 16 + tile_cols 16
      {"matmul", 5},                                                   // 3 flags + 24 + 16 + 16 + 16 + 24 + 16
      {"act", 5},                                                      // 3+1+1 + 16+24+16+16+6+8+24
      {"vec", 4},                                                      // 3+3 + 24+24+24+16+16+6
      {"pool", 19}};                                                   // 1 + 24+24+12+12+12+8+4+4
  for (const auto& [mnemonic, count] : reserved_counts) {
    const OpcodeSpec* s = find_mnemonic(mnemonic);
    REQUIRE(s);
    const Word base = encode(minimal_instruction(*s));
    REQUIRE_NOTHROW(decode(base, "base"));
    int reserved = 0;
    for (int bit = 8; bit < kInstructionBits; ++bit) {
      bool owned = false;
      for (const Operand& o : s->operands) owned |= bit >= o.lsb && bit < o.lsb + o.width;
      if (owned) continue;
      ++reserved;
      Word w = base;
      set_bit(w, bit);
      INFO(mnemonic << " bit " << bit);
      CHECK_THROWS_WITH(
          decode(w, "p.tpu: instruction 0"),
          Equals("p.tpu: instruction 0: " + mnemonic + " has reserved bit " + std::to_string(bit) +
                 " (byte " + std::to_string(bit / 8) + ") set; reserved bits must be 0"));
    }
    CHECK(reserved == count);
  }
}

TEST_CASE("decode rejects undefined enumeration values", "[isa][decode]") {
  int rejected = 0;
  for (const OpcodeSpec& s : kOpcodes) {
    for (const Operand& o : s.operands) {
      const FieldSpec& f = field_spec(o.field);
      if (f.kind != FieldKind::enumeration) continue;
      for (uint64_t v = 0; v <= field_max(o); ++v) {
        Word w = encode(minimal_instruction(s));
        poke(w, o, v);
        INFO(s.mnemonic << "." << f.name << " = " << v);
        if (find_value(f.values, v)) {
          CHECK(decode(w, "x")[o.field] == v);
        } else {
          ++rejected;
          CHECK_THROWS_WITH(decode(w, "x"), Equals(std::string("x: ") + std::string(s.mnemonic) + ": field " +
                                                   std::string(f.name) + " = " + std::to_string(v) +
                                                   " is not a defined " + std::string(f.name) + " value"));
        }
      }
    }
  }
  // act.func 5..7, vec.op 6..7, vec.func 5..7, setcfg.reg: the 256 values of its 8 bits less the
  // defined registers (pool.kind uses both values).
  CHECK(rejected == 3 + 2 + 3 + (256 - static_cast<int>(std::size(kConfigRegValues))));
}

TEST_CASE("decode rejects counts below their minimum", "[isa][decode]") {
  int rejected = 0;
  for (const OpcodeSpec& s : kOpcodes) {
    for (const Operand& o : s.operands) {
      if (o.min == 0) continue;
      Word w = encode(minimal_instruction(s));
      poke(w, o, 0);
      ++rejected;
      const std::string name(field_spec(o.field).name);
      INFO(s.mnemonic << "." << name);
      CHECK_THROWS_WITH(decode(w, "x"), Equals("x: " + std::string(s.mnemonic) + ": field " + name +
                                               " = 0 is below its minimum " + std::to_string(o.min)));
    }
  }
  // rows of rhm, whm, matmul, act, vec; tiles; repeat; pool's in_w, out_h, out_w, batch, window,
  // pstride; units.
  CHECK(rejected == 5 + 1 + 1 + 6 + 1);
}
