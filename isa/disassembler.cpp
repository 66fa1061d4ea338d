#include "isa/disassembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>

#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/text.h"

namespace tpusim::isa {
namespace {

using nlohmann::json;

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "\"";
}

// A metadata value in the syntax .meta/.arch read back to the same JSON.
std::string value_text(const json& v) {
  if (v.is_string()) return quote(v.get<std::string>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) {
    std::string s = v.dump();
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
  }
  return "json " + quote(v.dump());
}

std::string operand_text(const Operand& o, uint64_t v) {
  const FieldSpec& f = field_spec(o.field);
  return f.kind == FieldKind::flag ? std::string(f.name) : fmt::format("{}={}", f.name, field_value_text(o.field, v));
}

void write_file(const std::filesystem::path& path, std::span<const uint8_t> data) {
  io::write_file(path, data);
}

// A JSON key as .meta/.arch read it: a bare name when it is one, else a quoted string.
std::string key_text(const std::string& k) {
  const bool name = !k.empty() && (std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_') &&
                    std::all_of(k.begin(), k.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
                    });
  return name ? k : quote(k);
}

// "name" or "name+off" for an address inside a named region of `space`, else empty.
std::string region_of(const Program& p, AddressSpace space, uint64_t addr) {
  auto named = [&](const std::string& name, uint64_t base) {
    return addr == base ? name : fmt::format("{}+{}", name, addr - base);
  };
  if (space == AddressSpace::host) {
    for (const HostRegion& r : p.host_regions)
      if (addr >= r.host_addr && addr - r.host_addr < r.bytes) return named(r.name, r.host_addr);
    return {};
  }
  const std::string_view space_name = kAddressSpaceNames[static_cast<int>(space)];
  for (const Symbol& s : p.symbols)
    if (s.space == space_name && addr >= s.addr && addr - s.addr < s.size) return named(s.name, s.addr);
  return {};
}

// Names of the regions an instruction's address operands point into, e.g. "ub=xin acc=acc0".
std::string symbol_hints(const Program& p, const Instruction& inst) {
  std::string out;
  for (const Operand& o : spec(inst.opcode).operands) {
    const FieldSpec& f = field_spec(o.field);
    if (f.space == AddressSpace::none) continue;
    if (o.default_value && *o.default_value == inst[o.field]) continue;  // e.g. unused qtable=0
    if (std::string name = region_of(p, f.space, inst[o.field]); !name.empty())
      append_joined(out, " ", fmt::format("{}={}", f.name, name));
  }
  return out;
}

}  // namespace

std::string field_value_text(Field field, uint64_t v) {
  const FieldSpec& f = field_spec(field);
  switch (f.kind) {
    case FieldKind::flag: return v ? "1" : "0";
    case FieldKind::enumeration: {
      const EnumValue* e = find_value(f.values, v);
      return e ? std::string(e->name) : std::to_string(v);
    }
    case FieldKind::mask: {
      std::string names;
      for (const EnumValue& e : f.values)
        if (v >> e.value & 1) append_joined(names, "|", e.name);
      return names;
    }
    case FieldKind::uint:
      if (field == Field::host || field == Field::waddr || field == Field::value) return fmt::format("{:#x}", v);
      return std::to_string(v);
  }
  return {};
}

std::string format_instruction(const Instruction& inst) {
  const OpcodeSpec& s = spec(inst.opcode);
  std::string out(s.mnemonic);
  // Valued operands first, in table order, then the flags that are set.
  std::string operands;
  for (bool flags : {false, true})
    for (const Operand& o : s.operands) {
      const uint64_t v = inst[o.field];
      const bool is_flag = field_spec(o.field).kind == FieldKind::flag;
      if (is_flag != flags || (o.default_value && *o.default_value == v)) continue;
      append_joined(operands, ", ", operand_text(o, v));
    }
  return operands.empty() ? out : out + " " + operands;
}

std::string disassemble(const Program& p, const DisasmOptions& opt) {
  const bool has_data =
      !p.weights.empty() || std::any_of(p.host_regions.begin(), p.host_regions.end(),
                                        [](const HostRegion& r) { return !r.init.empty(); });
  std::string out =
      !has_data || opt.data_stem
          ? "; tpusim program listing: `tpusim asm` turns it back into the same bytes\n"
          : "; tpusim program listing; data not shown: `tpusim disasm -o FILE` writes a listing\n"
            "; and data files that `tpusim asm` turns back into the same bytes\n";
  auto data_file = [&](const std::string& suffix, std::span<const uint8_t> data) {
    const std::filesystem::path path = opt.data_stem->string() + suffix;
    write_file(path, data);
    return quote(path.filename().string());
  };
  if (!p.model.empty()) out += fmt::format(".model {}\n", quote(p.model));
  if (p.arch.contains("name") && p.arch["name"].is_string()) {
    out += fmt::format(".arch {}", quote(p.arch["name"].get<std::string>()));
    for (const auto& [k, v] : p.arch.items())
      if (k != "name") out += fmt::format(", {}={}", key_text(k), value_text(v));
    out += "\n";
  } else if (!p.arch.empty()) {
    out += fmt::format("; arch metadata without a name cannot be written as .arch: {}\n", p.arch.dump());
  }
  for (const auto& [k, v] : p.meta.items()) out += fmt::format(".meta {}, {}\n", key_text(k), value_text(v));
  for (const HostRegion& r : p.host_regions) {
    out += fmt::format("{} {}, {:#x}, {}, dtype={}", r.output ? ".output" : ".input", r.name, r.host_addr,
                       r.bytes, r.dtype);
    if (!r.shape.empty()) out += fmt::format(", shape={}", fmt::join(r.shape, "x"));
    if (r.scale != 0.0) out += fmt::format(", scale={}", value_text(json(r.scale)));
    if (!r.init.empty()) {
      if (opt.data_stem)
        out += fmt::format(", init=file({})", data_file(".input." + r.name + ".bin", r.init));
      else
        out += fmt::format("  ; {} bytes of initial data not shown (disasm -o writes them)", r.init.size());
    }
    out += "\n";
  }
  if (!p.weights.empty()) {
    if (opt.data_stem) out += fmt::format(".wimage file({})\n", data_file(".weights.bin", p.weights));
    else out += fmt::format("; weight image: {} bytes, not shown (disasm -o writes it)\n", p.weights.size());
  }
  std::multimap<uint64_t, std::string> labels;
  for (const Symbol& s : p.symbols) {
    if (s.space == "code") labels.emplace(s.addr, s.name);
    else out += fmt::format(".{} {}, {}, {}\n", s.space, s.name, s.addr, s.size);
  }
  for (size_t i = 0; i <= p.code.size(); ++i) {
    for (auto [it, end] = labels.equal_range(i); it != end; ++it) out += it->second + ":\n";
    if (i == p.code.size()) break;
    std::string line = "    " + format_instruction(p.code[i]);
    if (opt.show_bytes) {
      const Word w = encode(p.code[i]);
      line = fmt::format("{:<60} ; {:5}: {:02x}", line, i, fmt::join(w, " "));
      if (std::string hints = symbol_hints(p, p.code[i]); !hints.empty()) line += "  " + hints;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace tpusim::isa
