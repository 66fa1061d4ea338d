// Byte-level helpers for the .tpu container tests: little-endian fields, an independent writer
// that follows the layout in isa/program.h (so malformed files can be built wrong in exactly one
// way, with valid CRCs otherwise), a reader of the section table, and a sample Program.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "isa/program.h"
#include "test_support.h"

namespace tpusim::test {

using isa::Field;
using isa::Func;
using isa::Instruction;
using isa::Opcode;
using isa::Program;
using isa::Word;
using nlohmann::json;

// ---- little-endian field access -----------------------------------------------------------
inline uint64_t get_le(const std::vector<uint8_t>& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{b[at + i]} << (8 * i);
  return v;
}
inline void put_le(std::vector<uint8_t>& b, size_t at, int bytes, uint64_t v) {
  for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

inline size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// ---- an independent container writer ------------------------------------------------------
struct RawSection {
  uint32_t type;
  std::vector<uint8_t> data;
};

// Header (64 bytes): magic, major 1, minor 0, header size 64, section count, flags 0, file size.
// Then 32 bytes per section: type, CRC-32, offset, size, 8 reserved. Sections start 16-aligned.
inline std::vector<uint8_t> build_container(const std::vector<RawSection>& sections) {
  const size_t n = sections.size();
  std::vector<uint8_t> out(align16(64 + 32 * n), 0);
  std::memcpy(out.data(), "TPUSIMPG", 8);
  put_le(out, 8, 2, 1);
  put_le(out, 10, 2, 0);
  put_le(out, 12, 4, 64);
  put_le(out, 16, 4, n);
  for (size_t i = 0; i < n; ++i) {
    const size_t entry = 64 + 32 * i, offset = out.size();
    put_le(out, entry, 4, sections[i].type);
    put_le(out, entry + 4, 4, crc32(sections[i].data));
    put_le(out, entry + 8, 8, offset);
    put_le(out, entry + 16, 8, sections[i].data.size());
    out.insert(out.end(), sections[i].data.begin(), sections[i].data.end());
    out.resize(align16(out.size()));
  }
  put_le(out, 24, 8, out.size());
  return out;
}

struct SectionView {
  uint32_t type;
  uint32_t crc;
  size_t offset, size;
};

inline std::vector<SectionView> section_table(const std::vector<uint8_t>& file) {
  std::vector<SectionView> out;
  for (uint64_t i = 0; i < get_le(file, 16, 4); ++i) {
    const size_t e = 64 + 32 * i;
    out.push_back({static_cast<uint32_t>(get_le(file, e, 4)), static_cast<uint32_t>(get_le(file, e + 4, 4)),
                   get_le(file, e + 8, 8), get_le(file, e + 16, 8)});
  }
  return out;
}

inline std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

inline std::vector<uint8_t> code_bytes(std::initializer_list<Instruction> code) {
  std::vector<uint8_t> out;
  for (const Instruction& inst : code) {
    const Word w = isa::encode(inst);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

inline Instruction make_matmul(uint64_t ub, uint64_t acc, uint64_t rows) {
  Instruction i = isa::make_instruction(Opcode::matmul);
  i[Field::ub] = ub;
  i[Field::acc] = acc;
  i[Field::rows] = rows;
  return i;
}

inline json minimal_manifest() {
  return {{"format", "tpusim-program"},    {"model", "m"},
          {"arch", json::object()},        {"meta", json::object()},
          {"host_regions", json::array()}, {"symbols", json::array()}};
}

// A container with one halt instruction, the given manifest and host_init data, laid out as
// write_program does (all four sections, the manifest written with one-space indents), so that
// a valid one passes read_program's canonical-form check.
inline std::vector<uint8_t> container_with(const json& manifest, std::vector<uint8_t> host_init = {}) {
  return build_container({{1, code_bytes({isa::make_instruction(Opcode::halt)})},
                          {2, {}},
                          {3, bytes_of(manifest.dump(1))},
                          {4, std::move(host_init)}});
}

// Reads bytes as the file "s.tpu" (messages then start with "s.tpu: ").
inline Program read_tpu(const std::vector<uint8_t>& bytes) { return isa::read_program(bytes, "s.tpu"); }

inline Program sample_program() {
  Program p;
  Instruction act = isa::make_instruction(Opcode::activate);
  act[Field::acc] = 0;
  act[Field::ub] = 16;
  act[Field::rows] = 4;
  act[Field::func] = static_cast<uint64_t>(Func::relu);
  p.code = {make_matmul(0, 0, 4), act, isa::make_instruction(Opcode::halt)};
  for (int i = 0; i < 37; ++i) p.weights.push_back(static_cast<uint8_t>(i * 7 + 1));
  p.model = "sample";
  p.arch = {{"name", "tpu-v1"}, {"array_rows", 256}, {"clock_mhz", 700}};
  p.meta = {{"compiler", {{"version", "0.1"}, {"passes", {"tile", "schedule"}}, {"opts", {{"o", 2}}}}},
            {"scale", 0.125},
            {"offset", -3},
            {"none", nullptr}};
  p.host_regions = {
      {"x", false, 0x100, 6, "int8", {2, 3}, 0.5, {1, 2, 3, 4, 5, 6}},
      {"y", true, 0x200, 8, "int32", {2}, 0.25, {}},
      {"z", false, 0x300, 3, "uint8", {}, 0.0, {7, 8, 9}},
  };
  // Symbols in canonical order: by space, address, name.
  p.symbols = {{"acc0", "acc", 0, 4}, {"start", "code", 0, 0}, {"buf", "ub", 16, 8}, {"w", "weights", 0, 37}};
  return p;
}

}  // namespace tpusim::test
