#include "isa/disassembler.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "isa/error.h"
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
  switch (f.kind) {
    case FieldKind::flag: return std::string(f.name);
    case FieldKind::enumeration: return fmt::format("{}={}", f.name, find_value(f.values, v)->name);
    case FieldKind::mask: {
      std::string names;
      for (const EnumValue& e : f.values)
        if (v >> e.value & 1) append_joined(names, "|", e.name);
      return fmt::format("{}={}", f.name, names);
    }
    case FieldKind::uint:
      if (o.field == Field::host || o.field == Field::waddr || o.field == Field::value)
        return fmt::format("{}={:#x}", f.name, v);
      return fmt::format("{}={}", f.name, v);
  }
  return {};
}

void write_file(const std::filesystem::path& path, std::span<const uint8_t> data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) throw InputError(fmt::format("{}: cannot write", path.string()));
}

}  // namespace

std::string format_instruction(const Instruction& inst) {
  const OpcodeSpec& s = spec(inst.opcode);
  std::string out(s.mnemonic);
  bool first = true;
  for (const Operand& o : s.operands) {
    const uint64_t v = inst[o.field];
    if (o.default_value && *o.default_value == v) continue;
    out += first ? " " : ", ";
    out += operand_text(o, v);
    first = false;
  }
  return out;
}

std::string disassemble(const Program& p, const DisasmOptions& opt) {
  std::string out = "; tpusim program listing; `tpusim asm` turns it back into the same bytes\n";
  auto data_file = [&](const std::string& suffix, std::span<const uint8_t> data) {
    const std::filesystem::path path = opt.data_stem->string() + suffix;
    write_file(path, data);
    return quote(path.filename().string());
  };
  if (!p.model.empty()) out += fmt::format(".model {}\n", quote(p.model));
  if (p.arch.contains("name") && p.arch["name"].is_string()) {
    out += fmt::format(".arch {}", quote(p.arch["name"].get<std::string>()));
    for (const auto& [k, v] : p.arch.items())
      if (k != "name") out += fmt::format(", {}={}", k, value_text(v));
    out += "\n";
  } else if (!p.arch.empty()) {
    out += fmt::format("; arch metadata without a name cannot be written as .arch: {}\n", p.arch.dump());
  }
  for (const auto& [k, v] : p.meta.items()) out += fmt::format(".meta {}, {}\n", k, value_text(v));
  for (const HostRegion& r : p.host_regions) {
    out += fmt::format("{} {}, {:#x}, {}, dtype={}", r.output ? ".output" : ".input", r.name, r.host_addr,
                       r.bytes, r.dtype);
    if (!r.shape.empty()) out += fmt::format(", shape={}", fmt::join(r.shape, "x"));
    if (r.scale != 0.0) out += fmt::format(", scale={}", value_text(json(r.scale)));
    if (!r.init.empty()) {
      if (opt.data_stem) out += fmt::format(", init=file({})", data_file("." + r.name + ".bin", r.init));
      else out += fmt::format("  ; {} bytes of initial data not shown (disasm -o writes them)", r.init.size());
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
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace tpusim::isa
