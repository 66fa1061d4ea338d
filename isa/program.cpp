#include "isa/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::isa {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxSections = 16;
constexpr uint64_t kAddressLimit = uint64_t{1} << 40;  // host and weight addresses are 40 bits

uint32_t crc32(std::span<const uint8_t> data) {
  boost::crc_32_type crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<uint8_t>(uint64_t(v) >> (8 * i));
}

template <typename T>
T get(std::span<const uint8_t> in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

std::string_view section_name(uint32_t type) {
  switch (static_cast<SectionType>(type)) {
    case SectionType::code: return "code";
    case SectionType::weights: return "weights";
    case SectionType::manifest: return "manifest";
    case SectionType::host_init: return "host_init";
  }
  return "unknown";
}

// ---- manifest <-> Program ----------------------------------------------------------------

json manifest_of(const Program& p) {
  json regions = json::array();
  uint64_t init_offset = 0;
  for (const HostRegion& r : p.host_regions) {
    json j = {{"name", r.name},           {"direction", r.output ? "output" : "input"},
              {"host_addr", r.host_addr}, {"bytes", r.bytes},
              {"dtype", r.dtype},         {"shape", r.shape},
              {"scale", r.scale}};
    if (!r.init.empty()) {
      j["init_offset"] = init_offset;
      init_offset += r.init.size();
    }
    regions.push_back(std::move(j));
  }
  json symbols = json::array();
  for (const Symbol& s : p.symbols)
    symbols.push_back({{"name", s.name}, {"space", s.space}, {"addr", s.addr}, {"size", s.size}});
  return {{"format", "tpusim-program"}, {"model", p.model},  {"arch", p.arch}, {"meta", p.meta},
          {"host_regions", regions},    {"symbols", symbols}};
}

// Strict reader for one JSON object: every key must be known, every required key present.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) fail("", "an object");
  }
  template <typename T>
  T get(const std::string& key, const char* expected) {
    const json& v = raw(key, nullptr, expected);
    if (!has_type<T>(v)) fail(key, expected);
    return v.get<T>();
  }
  const json& raw(const std::string& key, bool (json::*is)() const noexcept, const char* expected) {
    seen_.insert(key);
    if (!j_.contains(key)) throw InputError(fmt::format("{}: missing key \"{}\"", where_, key));
    if (is && !(j_.at(key).*is)()) fail(key, expected);
    return j_.at(key);
  }
  // Exact JSON types: nlohmann would otherwise turn -1 into 2^64-1 or 1.5 into 1.
  template <typename T>
  static bool has_type(const json& v) {
    if constexpr (std::is_same_v<T, std::string>) return v.is_string();
    else if constexpr (std::is_same_v<T, uint64_t>) return v.is_number_unsigned();
    else if constexpr (std::is_same_v<T, double>) return v.is_number();
    else if constexpr (std::is_same_v<T, std::vector<uint64_t>>)
      return v.is_array() &&
             std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_unsigned(); });
    else static_assert(sizeof(T) == 0, "add a type check");
  }
  void done() const {
    for (const auto& [k, v] : j_.items())
      if (!seen_.count(k)) throw InputError(fmt::format("{}: unknown key \"{}\"", where_, k));
  }
  [[noreturn]] void fail(const std::string& key, const char* expected) const {
    const std::string what = key.empty() ? j_.dump() : j_.at(key).dump();
    throw InputError(fmt::format("{}{}{}: expected {}, got {}", where_, key.empty() ? "" : ".", key, expected,
                                 what.substr(0, 60)));
  }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

void read_manifest(const json& m, std::span<const uint8_t> host_init, Program& p, const std::string& where) {
  ObjectReader top(m, where);
  if (top.get<std::string>("format", "a string") != "tpusim-program")
    throw InputError(fmt::format("{}.format: expected \"tpusim-program\"", where));
  p.model = top.get<std::string>("model", "a string");
  p.arch = top.raw("arch", &json::is_object, "an object");
  p.meta = top.raw("meta", &json::is_object, "an object");
  const json& regions = top.raw("host_regions", &json::is_array, "an array");
  for (size_t i = 0; i < regions.size(); ++i) {
    ObjectReader r(regions[i], fmt::format("{}.host_regions[{}]", where, i));
    HostRegion h;
    h.name = r.get<std::string>("name", "a string");
    const auto dir = r.get<std::string>("direction", "\"input\" or \"output\"");
    if (dir != "input" && dir != "output") r.fail("direction", "\"input\" or \"output\"");
    h.output = dir == "output";
    h.host_addr = r.get<uint64_t>("host_addr", "an unsigned integer");
    h.bytes = r.get<uint64_t>("bytes", "an unsigned integer");
    h.dtype = r.get<std::string>("dtype", "a string");
    h.shape = r.get<std::vector<uint64_t>>("shape", "an array of unsigned integers");
    h.scale = r.get<double>("scale", "a number");
    if (regions[i].contains("init_offset")) {
      const auto off = r.get<uint64_t>("init_offset", "an unsigned integer");
      if (off > host_init.size() || h.bytes > host_init.size() - off)
        throw InputError(
            fmt::format("{}.host_regions[{}]: init data [{}, +{}) lies outside the "
                        "host_init section ({} bytes)",
                        where, i, off, h.bytes, host_init.size()));
      h.init.assign(host_init.begin() + off, host_init.begin() + off + h.bytes);
    }
    r.done();
    p.host_regions.push_back(std::move(h));
  }
  const json& symbols = top.raw("symbols", &json::is_array, "an array");
  for (size_t i = 0; i < symbols.size(); ++i) {
    ObjectReader r(symbols[i], fmt::format("{}.symbols[{}]", where, i));
    Symbol s{r.get<std::string>("name", "a string"), r.get<std::string>("space", "a string"),
             r.get<uint64_t>("addr", "an unsigned integer"), r.get<uint64_t>("size", "an unsigned integer")};
    r.done();
    p.symbols.push_back(std::move(s));
  }
  top.done();
}

size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

std::string check_symbol(const Symbol& s, const Program& p) {
  if (s.space == "code") {
    if (s.size != 0 || s.addr > p.code.size())
      return fmt::format("code label \"{}\": index {} size {} (expected size 0 and index <= {})", s.name,
                         s.addr, s.size, p.code.size());
    return {};
  }
  const uint64_t limit = s.space == "weights" ? p.weight_bytes() : address_space_rows(s.space);
  if (s.size == 0 || s.addr > limit || s.size > limit - s.addr)
    return fmt::format("{} region \"{}\": [{}, +{}) is empty or reaches past {} ({})", s.space, s.name,
                       s.addr, s.size, limit,
                       s.space == "weights" ? "the end of the weight image" : "the address space");
  return {};
}

}  // namespace

json parse_json_bounded(std::string_view text, int max_depth, std::string& error) {
  int levels = 0;  // the parser reports the top level as depth 0
  auto deepest = [&](int d, json::parse_event_t, json&) { return (levels = std::max(levels, d + 1), true); };
  json j = json::parse(text.begin(), text.end(), deepest, /*allow_exceptions=*/false);
  if (j.is_discarded()) error = "not valid JSON";
  else if (levels > max_depth) error = fmt::format("JSON nested more than {} levels deep", max_depth);
  if (!error.empty()) j = json(json::value_t::discarded);
  return j;
}

WeightTileUse tile_use_of(const uint8_t* tile, uint64_t rows, uint64_t cols) {
  WeightTileUse u;
  for (uint64_t k = 0; k < rows; ++k) {
    const uint8_t* row = tile + k * cols;
    const uint8_t* first = std::find_if(row, row + cols, [](uint8_t b) { return b != 0; });
    if (first == row + cols) continue;
    const uint8_t* last = row + cols;
    while (!*(last - 1)) --last;
    u.rows = uint32_t(k + 1);
    u.cols = std::max(u.cols, uint32_t(last - row));
    u.spans += uint64_t(last - first);
  }
  return u;
}

std::vector<WeightTileUse> tile_uses(const Program& p, uint64_t rows, uint64_t cols) {
  std::vector<WeightTileUse> uses;
  const auto it = p.meta.find("tile_uses");
  if (it == p.meta.end()) return uses;
  const uint64_t tiles = rows > 0 && cols > 0 ? p.weight_bytes() / (rows * cols) : 0;
  // [rows, cols, spans, waddr] per tile; the older form [rows, cols, spans] lists whole tiles.
  const bool with_addresses = it->is_array() && !it->empty() && (*it)[0].is_array() && (*it)[0].size() == 4;
  if (!it->is_array() || (!with_addresses && it->size() != tiles))
    throw InputError(fmt::format("meta.tile_uses: expected one [rows, cols, spans, waddr] per weight tile, got {}",
                                 it->dump().substr(0, 60)));
  const size_t n = with_addresses ? 4 : 3;
  uses.reserve(it->size());  // (one allocation: sim::run_record_bytes counts it)
  // A tile ends after its useful box (a partial tile stored compactly; an empty one as one byte)
  // or after a whole tile; the next one starts there.
  const auto ends_at = [&](const WeightTileUse& u, uint64_t at) {
    return at == u.waddr + uint64_t(std::max<uint32_t>(u.rows, 1)) * std::max<uint32_t>(u.cols, 1) ||
           at == u.waddr + rows * cols;
  };
  for (const json& t : *it) {
    const bool ok = t.is_array() && t.size() == n &&
                    std::all_of(t.begin(), t.end(), [](const json& v) { return v.is_number_unsigned(); }) &&
                    t[0].get<uint64_t>() <= rows && t[1].get<uint64_t>() <= cols &&
                    t[2].get<uint64_t>() <= t[0].get<uint64_t>() * t[1].get<uint64_t>();
    if (!ok)
      throw InputError(fmt::format("meta.tile_uses[{}]: expected [rows <= {}, cols <= {}, spans <= rows x cols{}], got {}",
                                   uses.size(), rows, cols, with_addresses ? ", waddr" : "", t.dump().substr(0, 60)));
    const uint64_t waddr = with_addresses ? t[3].get<uint64_t>() : uses.size() * rows * cols;
    if (uses.empty() ? waddr != 0 : !ends_at(uses.back(), waddr))
      throw InputError(fmt::format("meta.tile_uses[{}]: a tile at weight address {}, not where the tile before ends: "
                                   "expected one [rows, cols, spans, waddr] per weight tile, in address order",
                                   uses.size(), waddr));
    uses.push_back({t[0].get<uint32_t>(), t[1].get<uint32_t>(), t[2].get<uint64_t>(), waddr});
  }
  if (!uses.empty() && !ends_at(uses.back(), p.weight_bytes()))
    throw InputError(fmt::format("meta.tile_uses: the last tile (at weight address {}) does not end the weight "
                                 "image's {} bytes: expected one [rows, cols, spans, waddr] per weight tile",
                                 uses.back().waddr, p.weight_bytes()));
  return uses;
}

size_t tile_index_at(const std::vector<WeightTileUse>& uses, uint64_t waddr) {
  const auto it = std::lower_bound(uses.begin(), uses.end(), waddr,
                                   [](const WeightTileUse& u, uint64_t a) { return u.waddr < a; });
  if (it == uses.end() || it->waddr != waddr)
    throw InputError(fmt::format("meta.tile_uses has no tile at weight address {:#x}", waddr));
  return size_t(it - uses.begin());
}

const WeightTileUse& tile_use_at(const std::vector<WeightTileUse>& uses, uint64_t waddr) {
  return uses[tile_index_at(uses, waddr)];
}

std::vector<MatmulMacs> matmul_macs(const Program& p, uint64_t rows, uint64_t cols) {
  std::vector<MatmulMacs> list;
  const auto it = p.meta.find("matmul_macs");
  if (it == p.meta.end()) return list;
  if (!it->is_array())
    throw InputError(fmt::format("meta.matmul_macs: expected an array of [instruction, macs], got {}",
                                 it->dump().substr(0, 60)));
  list.reserve(it->size());  // (one allocation: sim::run_record_bytes counts it)
  for (const json& e : *it) {
    const bool copy = e.is_array() && e.size() == 3 && e[2] == "copy";
    const bool pair = e.is_array() && (e.size() == 2 || copy) && e[0].is_number_unsigned() && e[1].is_number_unsigned();
    const uint64_t i = pair ? e[0].get<uint64_t>() : 0, macs = pair ? e[1].get<uint64_t>() : 0;
    if (!pair || macs > rows * cols)
      throw InputError(fmt::format("meta.matmul_macs[{}]: expected [instruction, macs <= {} x {}] or [instruction, "
                                   "macs, \"copy\"], got {}",
                                   list.size(), rows, cols, e.dump().substr(0, 60)));
    if (!list.empty() && i <= list.back().instruction)
      throw InputError(fmt::format("meta.matmul_macs[{}]: instruction {} after instruction {}: expected ascending "
                                   "instructions",
                                   list.size(), i, list.back().instruction));
    if (i >= p.code.size() || p.code[i].opcode != Opcode::matmul)
      throw InputError(fmt::format("meta.matmul_macs[{}]: instruction {} is not a matmul (the program has {} "
                                   "instructions)",
                                   list.size(), i, p.code.size()));
    list.push_back({i, macs, copy});
  }
  return list;
}

const MatmulMacs* matmul_macs_at(const std::vector<MatmulMacs>& list, uint64_t i) {
  const auto it = std::lower_bound(list.begin(), list.end(), i,
                                   [](const MatmulMacs& m, uint64_t at) { return m.instruction < at; });
  return it != list.end() && it->instruction == i ? &*it : nullptr;
}

bool symbol_order(const Symbol& a, const Symbol& b) {
  return std::tie(a.space, a.addr, a.name) < std::tie(b.space, b.addr, b.name);
}

uint64_t address_space_rows(std::string_view space) {
  const Field f = space == "ub" ? Field::ub : Field::acc;
  return field_max(*find_operand(spec(Opcode::matmul), f)) + 1;
}

std::string check_name(std::string_view name) {
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (name.empty() || !alpha(name[0]) || !std::all_of(name.begin(), name.end(), [&](char c) {
        return alpha(c) || std::isdigit(static_cast<unsigned char>(c));
      }))
    return fmt::format("'{}' is not a name ([A-Za-z_][A-Za-z0-9_]*)", name);
  if (find_mnemonic(name) || find_field(name))
    return fmt::format("'{}' is a mnemonic or operand name and cannot name a symbol", name);
  return {};
}

std::string check_program(const Program& p) {
  std::set<std::string> names;
  static const std::set<std::string> dtypes = {"int8", "uint8", "int32"};
  if (p.weights_not_computed)
    return fmt::format("a timing-only compile's program (its {}-byte weight image not computed) runs on the "
                       "timing engine only and cannot be written",
                       p.weights_not_computed);
  if (p.weights.size() > kMaxDataBytes)
    return fmt::format("weight image of {} bytes exceeds the limit of {} bytes", p.weights.size(),
                       kMaxDataBytes);
  for (const HostRegion& r : p.host_regions) {
    if (std::string err = check_name(r.name); !err.empty()) return "host region: " + err;
    if (!names.insert(r.name).second) return fmt::format("host region \"{}\" defined twice", r.name);
    if (!dtypes.count(r.dtype))
      return fmt::format("host region \"{}\": dtype \"{}\" is not int8, uint8 or int32", r.name, r.dtype);
    if (!std::isfinite(r.scale) || std::signbit(r.scale))
      return fmt::format("host region \"{}\": scale {} is not a finite number >= 0", r.name, r.scale);
    if (r.bytes == 0 || r.bytes > kMaxDataBytes || r.host_addr >= kAddressLimit ||
        r.bytes > kAddressLimit - r.host_addr)
      return fmt::format(
          "host region \"{}\": [{:#x}, +{}) is empty, larger than {} bytes or exceeds the "
          "40-bit host address space",
          r.name, r.host_addr, r.bytes, kMaxDataBytes);
    if (!r.shape.empty()) {
      unsigned __int128 n = r.dtype == "int32" ? 4 : 1;
      for (uint64_t d : r.shape) n = std::min<unsigned __int128>(n * d, kAddressLimit + 1);
      if (n != r.bytes)
        return fmt::format("host region \"{}\": shape does not match its {} bytes of {}", r.name, r.bytes,
                           r.dtype);
    }
    if (!r.init.empty() && (r.output || r.init.size() != r.bytes))
      return fmt::format(
          "host region \"{}\": initial data must be given for inputs only and "
          "cover all {} bytes",
          r.name, r.bytes);
  }
  static const std::set<std::string> spaces = {"code", "ub", "acc", "weights"};
  for (const Symbol& s : p.symbols) {
    if (!spaces.count(s.space))
      return fmt::format("symbol \"{}\": space \"{}\" is not code, ub, acc or weights", s.name, s.space);
    if (std::string err = check_name(s.name); !err.empty()) return "symbol: " + err;
    if (!names.insert(s.name).second)
      return fmt::format("symbol \"{}\" is defined twice (names are shared by symbols and host regions)",
                         s.name);
    if (std::string err = check_symbol(s, p); !err.empty()) return err;
  }
  if (!std::is_sorted(p.symbols.begin(), p.symbols.end(), symbol_order))
    return "symbols are not in canonical order (by space, address, name)";
  if (!p.arch.empty() && !(p.arch.contains("name") && p.arch["name"].is_string()))
    return "arch must be empty or have a string \"name\"";
  return {};
}

namespace {
// A malloc'ed block of `n` bytes as glibc takes it: an 8-byte header, 16-byte multiples, 32 at least.
uint64_t heap_chunk(uint64_t n) { return std::max<uint64_t>(32, (n + 8 + 15) / 16 * 16); }
uint64_t string_heap(const std::string& s) {  // beyond the short-string buffer (15 characters)
  return s.size() > 15 ? heap_chunk(s.capacity() + 1) : 0;
}
}  // namespace

uint64_t json_heap_bytes(const json& v) {
  uint64_t bytes = 0;
  switch (v.type()) {
    case json::value_t::object:
      bytes = heap_chunk(sizeof(json::object_t));
      for (const auto& [key, item] : v.get_ref<const json::object_t&>())
        // a tree node: its links (std::_Rb_tree_node_base, 32 bytes) and the key-value pair
        bytes += heap_chunk(32 + sizeof(json::object_t::value_type)) + string_heap(key) + json_heap_bytes(item);
      break;
    case json::value_t::array: {
      const json::array_t& a = v.get_ref<const json::array_t&>();
      bytes = heap_chunk(sizeof(json::array_t)) + (a.capacity() ? heap_chunk(a.capacity() * sizeof(json)) : 0);
      for (const json& item : a) bytes += json_heap_bytes(item);
      break;
    }
    case json::value_t::string:
      bytes = heap_chunk(sizeof(json::string_t)) + string_heap(v.get_ref<const json::string_t&>());
      break;
    case json::value_t::binary:
      bytes = heap_chunk(sizeof(json::binary_t)) + heap_chunk(v.get_binary().size());
      break;
    default:
      break;  // numbers, booleans, null: inside the 16-byte value
  }
  return bytes;
}

namespace {
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t init_bytes(const Program& p) {
  uint64_t init = 0;
  for (const HostRegion& r : p.host_regions) init += r.init.size();
  return init;
}
uint64_t manifest_bytes(const Program& p) {
  uint64_t manifest = json_heap_bytes(p.meta) + json_heap_bytes(p.arch) + string_heap(p.model);
  for (const Symbol& s : p.symbols) manifest += sizeof(Symbol) + string_heap(s.name);
  return manifest;
}
}  // namespace

std::vector<std::pair<std::string, uint64_t>> program_bytes(const Program& p) {
  return {{fmt::format("program of {} instructions", p.code.size()), saturating_mul(p.code.capacity(), sizeof(Instruction))},
          {"weight image", p.weights.size()},
          {"host regions' initial contents", init_bytes(p)},
          {"manifest", manifest_bytes(p)}};
}

uint64_t program_file_bytes(const Program& p) {
  // (the header, section table and alignment: under 4 KiB)
  const uint64_t parts[] = {saturating_mul(p.code.size(), kInstructionBytes), p.weights.size(), init_bytes(p),
                            manifest_bytes(p), 4096};
  uint64_t bytes = 0;
  for (uint64_t n : parts) bytes = std::min(UINT64_MAX - n, bytes) + n;
  return bytes;
}

std::vector<uint8_t> write_program(const Program& p) {
  if (std::string err = check_program(p); !err.empty()) throw InputError(err);
  std::vector<uint8_t> code, init;
  code.reserve(p.code.size() * sizeof(Word));
  for (const Instruction& inst : p.code) {
    const Word w = encode(inst);
    code.insert(code.end(), w.begin(), w.end());
  }
  for (const HostRegion& r : p.host_regions) init.insert(init.end(), r.init.begin(), r.init.end());
  const std::string manifest = manifest_of(p).dump(1);
  const std::pair<SectionType, std::span<const uint8_t>> sections[] = {
      {SectionType::code, code},
      {SectionType::weights, p.weights},
      {SectionType::manifest, {reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size()}},
      {SectionType::host_init, init}};
  const size_t n = std::size(sections);
  size_t offset = align16(kHeaderBytes + n * kSectionEntryBytes);
  size_t total = offset;
  for (const auto& section : sections) total = align16(total + section.second.size());
  std::vector<uint8_t> out;
  out.reserve(total);  // one allocation: growing would hold the weight image twice more, briefly
  out.resize(offset);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put<uint16_t>(out, 8, kVersionMajor);
  put<uint16_t>(out, 10, kVersionMinor);
  put<uint32_t>(out, 12, kHeaderBytes);
  put<uint32_t>(out, 16, n);
  for (size_t i = 0; i < n; ++i) {
    const auto& [type, data] = sections[i];
    const size_t entry = kHeaderBytes + i * kSectionEntryBytes;
    put<uint32_t>(out, entry, static_cast<uint32_t>(type));
    put<uint32_t>(out, entry + 4, crc32(data));
    put<uint64_t>(out, entry + 8, offset);
    put<uint64_t>(out, entry + 16, data.size());
    out.resize(align16(offset + data.size()));
    std::copy(data.begin(), data.end(), out.begin() + offset);
    offset = out.size();
  }
  put<uint64_t>(out, 24, out.size());
  return out;
}

Program read_program(std::span<const uint8_t> in, const std::string& source) {
  auto fail = [&](const std::string& msg) { return InputError(fmt::format("{}: {}", source, msg)); };
  if (in.size() < kHeaderBytes)
    throw fail(fmt::format("truncated: {} bytes, a program header needs {}", in.size(), kHeaderBytes));
  if (std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    throw fail("not a tpusim program (bad magic; expected \"TPUSIMPG\")");
  const auto major = get<uint16_t>(in, 8), minor = get<uint16_t>(in, 10);
  if (major != kVersionMajor || minor > kVersionMinor)
    throw fail(fmt::format("format version {}.{} is not supported (this tpusim reads {}.0 to {}.{})", major,
                           minor, kVersionMajor, kVersionMajor, kVersionMinor));
  if (get<uint32_t>(in, 12) != kHeaderBytes)
    throw fail(fmt::format("header size {} (expected {})", get<uint32_t>(in, 12), kHeaderBytes));
  const auto count = get<uint32_t>(in, 16);
  if (count > kMaxSections)
    throw fail(fmt::format("section count {} exceeds the maximum {}", count, kMaxSections));
  if (get<uint32_t>(in, 20) != 0) throw fail("header flags at byte 20 must be 0");
  if (get<uint64_t>(in, 24) != in.size())
    throw fail(fmt::format("header says the file is {} bytes but it is {} (truncated or padded)",
                           get<uint64_t>(in, 24), in.size()));
  for (size_t i = 32; i < kHeaderBytes; ++i)
    if (in[i] != 0) throw fail(fmt::format("reserved header byte {} is not 0", i));
  const size_t table_end = kHeaderBytes + size_t{count} * kSectionEntryBytes;
  if (table_end > in.size()) throw fail("truncated: section table runs past the end of the file");

  std::span<const uint8_t> data[5];
  bool present[5] = {};
  for (uint32_t i = 0; i < count; ++i) {
    const size_t e = kHeaderBytes + i * kSectionEntryBytes;
    const auto type = get<uint32_t>(in, e);
    const auto crc = get<uint32_t>(in, e + 4);
    const auto off = get<uint64_t>(in, e + 8), size = get<uint64_t>(in, e + 16);
    if (type < 1 || type > 4) throw fail(fmt::format("section {} has unknown type {}", i, type));
    if (present[type]) throw fail(fmt::format("section {} appears twice", section_name(type)));
    if (get<uint64_t>(in, e + 24) != 0)
      throw fail(fmt::format("section {}: reserved bytes are not 0", section_name(type)));
    if (off < table_end)
      throw fail(
          fmt::format("section {}: offset {} lies inside the header or section table (which end at {})",
                      section_name(type), off, table_end));
    if (off > in.size() || size > in.size() - off)
      throw fail(fmt::format("section {}: [{}, +{}) lies outside the file ({} bytes)", section_name(type),
                             off, size, in.size()));
    present[type] = true;
    data[type] = in.subspan(off, size);
    if (crc32(data[type]) != crc)
      throw fail(
          fmt::format("section {}: CRC-32 mismatch (stored {:#010x}, computed {:#010x}): "
                      "the file is corrupted",
                      section_name(type), crc, crc32(data[type])));
  }
  for (SectionType t : {SectionType::code, SectionType::manifest})
    if (!present[static_cast<int>(t)])
      throw fail(fmt::format("missing the {} section", section_name(static_cast<uint32_t>(t))));

  Program p;
  const auto code = data[static_cast<int>(SectionType::code)];
  if (code.size() % kInstructionBytes != 0)
    throw fail(fmt::format("code section is {} bytes, not a multiple of {}", code.size(), kInstructionBytes));
  p.code.reserve(code.size() / kInstructionBytes);
  for (size_t i = 0; i < code.size(); i += kInstructionBytes)
    p.code.push_back(decode(code.subspan(i).first<kInstructionBytes>(),
                            fmt::format("{}: instruction {}", source, i / kInstructionBytes)));
  const auto w = data[static_cast<int>(SectionType::weights)];
  p.weights.assign(w.begin(), w.end());
  const auto m = data[static_cast<int>(SectionType::manifest)];
  std::string json_error;
  const json manifest = parse_json_bounded({reinterpret_cast<const char*>(m.data()), m.size()},
                                           /*max_depth=*/64, json_error);
  if (!json_error.empty()) throw fail("manifest section: " + json_error);
  read_manifest(manifest, data[static_cast<int>(SectionType::host_init)], p, source + ": manifest");
  if (std::string err = check_program(p); !err.empty()) throw fail(err);
  // Only the canonical form is accepted, so that reading and writing a program are exact
  // inverses (and disassembly always re-assembles to the same bytes).
  const std::vector<uint8_t> canonical = write_program(p);
  if (!std::equal(in.begin(), in.end(), canonical.begin(), canonical.end())) {
    size_t at = 0;
    while (at < in.size() && at < canonical.size() && in[at] == canonical[at]) ++at;
    throw fail(
        fmt::format("not in canonical form (first difference at byte {}): sections must come in "
                    "type order, 16-byte aligned and zero-padded, host_init must hold exactly the "
                    "regions' data in order, and the manifest must be formatted as tpusim writes it",
                    at));
  }
  return p;
}

Program load_program(const std::filesystem::path& path) {
  io::InputFile f(path, io::kMaxProgramBytes, "a program (.tpu)");
  // The header first: a file that is not a program, or whose header disagrees with its size, is
  // refused before the rest is read.
  std::vector<uint8_t> bytes(std::min<uint64_t>(f.size(), kHeaderBytes));
  f.read(bytes);
  if (bytes.size() < kHeaderBytes || !std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
    return read_program(bytes, path.string());  // throws the header's error
  if (get<uint64_t>(bytes, 24) != f.size())
    throw InputError(fmt::format("{}: header says the file is {} bytes but it is {} (truncated or padded)",
                                 path.string(), get<uint64_t>(bytes, 24), f.size()));
  bytes.resize(f.size());
  f.read(std::span(bytes).subspan(kHeaderBytes));
  return read_program(bytes, path.string());
}

void save_program(const std::filesystem::path& path, const Program& program) {
  io::write_file(path, write_program(program));
}

}  // namespace tpusim::isa
