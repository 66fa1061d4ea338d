// The architecture parameter table's parsers, rules, dump and docs (sim/arch.h). Everything here
// iterates TPUSIM_ARCH_PARAMS; the ISA-imposed limits come from isa/table.h, not from copies.
#include "sim/arch.h"
#include "sim/program_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <vector>

#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/program.h"
#include "isa/table.h"
#include "isa/text.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

constexpr ParamInfo kParams[] = {
#define TPUSIM_ARCH_INFO(name, type, def, unit, meaning, source) \
  {#name, std::is_floating_point_v<type>, #def, unit, meaning, source},
    TPUSIM_ARCH_PARAMS(TPUSIM_ARCH_INFO)
#undef TPUSIM_ARCH_INFO
};

// Where each parameter lives in Arch, in table order: exactly one member pointer is set.
struct Slot {
  uint64_t Arch::*integer = nullptr;
  double Arch::*real = nullptr;
};
constexpr Slot slot_of(uint64_t Arch::*p) { return {p, nullptr}; }
constexpr Slot slot_of(double Arch::*p) { return {nullptr, p}; }
constexpr Slot kSlots[] = {
#define TPUSIM_ARCH_SLOT(name, ...) slot_of(&Arch::name),
    TPUSIM_ARCH_PARAMS(TPUSIM_ARCH_SLOT)
#undef TPUSIM_ARCH_SLOT
};
constexpr size_t kCount = std::size(kParams);

constexpr char kUintForm[] =
    "an unsigned integer: decimal or 0x hex, optionally with a KiB, MiB or GiB suffix";
constexpr char kRealForm[] = "a real number > 0 (e.g. 700 or 1.5e3)";
constexpr char kJsonUintForm[] = "a JSON unsigned integer or a string such as \"24MiB\"";

[[noreturn]] void fail(std::string_view origin, std::string_view key, std::string_view value,
                       std::string_view problem) {
  throw InputError(fmt::format("{}: {} = {}: {}", origin, key, value, problem));
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view{}
                                     : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

size_t param_index(std::string_view key, std::string_view origin) {
  for (size_t i = 0; i < kCount; ++i)
    if (kParams[i].name == key) return i;
  std::vector<std::string_view> names{"name"};
  for (const ParamInfo& p : kParams) names.push_back(p.name);
  // (A long key is no typo of a short name: no distance to compute over megabytes.)
  const std::string_view best = key.size() <= 64 ? isa::nearest(key, names).first : names.front();
  throw InputError(fmt::format("{}: unknown parameter '{}' (did you mean {}? docs/arch.md lists them all)",
                               origin, isa::printable(key), best));
}

// Each parser returns why `text` is not a value, or "" after storing it in `out`.
std::string parse_uint(std::string_view text, uint64_t& out) {
  const std::string expected = fmt::format("expected {}", kUintForm);
  if (text.empty()) return "empty value; " + expected;
  if (text[0] == '-') return "negative; " + expected;
  uint64_t scale = 1;
  for (auto [suffix, shift] : {std::pair{"KiB", 10}, {"MiB", 20}, {"GiB", 30}})
    if (text.ends_with(suffix)) scale = uint64_t{1} << shift, text.remove_suffix(3);
  const bool hex = text.starts_with("0x") || text.starts_with("0X");
  if (hex) text.remove_prefix(2);
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, hex ? 16 : 10);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && v > kMaxU64 / scale))
    return fmt::format("too large; the maximum is {}", kMaxU64);
  if (ec != std::errc() || ptr != end)
    return (!hex && text.find('.') != std::string_view::npos ? "not a whole number; " : "malformed; ") +
           expected;
  out = v * scale;
  return {};
}

std::string check_real(double v) {
  if (!std::isfinite(v)) return fmt::format("not finite; expected {}", kRealForm);
  return v > 0 ? "" : fmt::format("not > 0; expected {}", kRealForm);
}

std::string parse_real(std::string_view text, double& out) {
  if (text.empty()) return fmt::format("empty value; expected {}", kRealForm);
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) return fmt::format("out of range; expected {}", kRealForm);
  if (ec != std::errc() || ptr != end) return fmt::format("malformed; expected {}", kRealForm);
  std::string problem = check_real(v);
  if (problem.empty()) out = v;
  return problem;
}

std::string json_value(const json& v, const Slot& slot, Arch& arch) {
  if (slot.real) {
    if (!v.is_number()) return fmt::format("expected {}, got {}", kRealForm, v.type_name());
    std::string problem = check_real(v.get<double>());
    if (problem.empty()) arch.*slot.real = v.get<double>();
    return problem;
  }
  if (v.is_number_unsigned()) return (arch.*slot.integer = v.get<uint64_t>(), "");
  if (v.is_number_integer()) return fmt::format("negative; expected {}", kJsonUintForm);
  if (v.is_number_float() && v.get<double>() >= 0x1p64)
    return fmt::format("too large; the maximum is {}", kMaxU64);
  if (v.is_number()) return fmt::format("not an integer; expected {}", kJsonUintForm);
  return fmt::format("expected {}, got {}", kJsonUintForm, v.type_name());
}

std::string format_value(const Arch& a, size_t i) {
  return kSlots[i].integer ? fmt::format("{}", a.*kSlots[i].integer) : fmt::format("{}", a.*kSlots[i].real);
}

double value_of(const Arch& a, std::string_view name) {
  const Slot& s = kSlots[param_index(name, "arch")];
  return s.integer ? static_cast<double>(a.*s.integer) : a.*s.real;
}

// Every parameter's valid range [min, max] and where its maximum comes from. Simulated time is
// SystemC time, 64-bit picoseconds: about 1.8e7 s of simulated time at any clock. The limits on
// latencies, bandwidths and the clock keep any one instruction's duration far inside that (a
// weight tile or DMA at the lowest bandwidth takes hours of simulated time, not years); a run
// that still passes it stops with an error (sim/context.h), never wraps.
struct Bound {
  std::string_view param;
  double min, max;
  std::string note;
};
const isa::Operand& operand(isa::Opcode op, isa::Field f) { return *isa::find_operand(isa::spec(op), f); }
const isa::Operand& ub_field() { return operand(isa::Opcode::matmul, isa::Field::ub); }
std::string field_note(const isa::Operand& o) {
  return fmt::format(" (the ISA's {}-bit {} field)", o.width, isa::field_spec(o.field).name);
}
constexpr double kMaxLatency = 1e9;  // cycles: over a second at 700 MHz
constexpr std::tuple<std::string_view, double, double, std::string_view> kLimits[] = {
    {"array_rows", 1, 4096, ""},        {"array_cols", 1, 4096, ""},
    {"clock_mhz", 1, 1e5, ""},          {"weight_fifo_tiles", 1, 1024, ""},
    {"weight_mem_gbps", 1e-3, 1e6, ""}, {"weight_mem_latency_cycles", 0, kMaxLatency, ""},
    {"host_gbps", 1e-3, 1e6, ""},       {"host_latency_cycles", 0, kMaxLatency, ""},
    {"host_driver_us", 0, 1e9, ""},  // up to 1000 s: the host model's per-batch software time
    {"driver_piece_schedule", 0, 1, ""},  // a choice of two (sim/arch.h)
    {"driver_host_loop", 0, 1, ""},  // a choice of two (sim/arch.h)
    {"driver_partial_tiles", 0, 1, ""},  // a choice of two (sim/arch.h)
    {"weight_shift_skewed", 0, 1, ""},  // a choice of two (sim/arch.h)
    {"activation_lanes", 1, 65536, ""}, {"activation_latency_cycles", 0, kMaxLatency, ""},
    {"issue_cycles", 1, 1e6, ""},       {"gather_rows_per_cycle", 1, 4096, ""},       {"station_queue_depth", 1, 1024, ""},
    // The energy model's costs (sim/energy.h): positive, and small enough that a run's sums of
    // counts x costs stay far inside double's range.
    {"energy_mac_pj", 1e-6, 1e6, ""},
    {"energy_ub_read_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_ub_write_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_acc_read_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_acc_write_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_weight_fifo_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_dram_pj_per_byte", 1e-6, 1e6, ""},
    {"energy_host_pj_per_byte", 1e-6, 1e6, ""},
    {"static_watts", 1e-6, 1e6, ""}};
const std::vector<Bound>& bounds() {
  static const std::vector<Bound> list = [] {
    std::vector<Bound> out;
    for (auto [param, min, max, note] : kLimits) out.push_back({param, min, max, std::string(note)});
    for (auto [param, op, field] : {std::tuple{"acc_entries", isa::Opcode::matmul, isa::Field::acc},
                                    {"weight_mem_bytes", isa::Opcode::read_weights, isa::Field::waddr}})
      out.push_back({param, 1, static_cast<double>(isa::field_max(operand(op, field)) + 1),
                     field_note(operand(op, field))});
    out.push_back({"ub_bytes", 1, static_cast<double>(isa::field_max(ub_field()) + 1) * 4096,
                   " (16777216 rows, the ISA's 24-bit ub field, of at most 4096 bytes)"});
    for (const ParamInfo& p : kParams)  // the table and the ranges cannot drift apart
      if (std::none_of(out.begin(), out.end(), [&](const Bound& b) { return b.param == p.name; }))
        throw std::logic_error(fmt::format("architecture parameter {} has no valid range", p.name));
    return out;
  }();
  return list;
}
const Bound& bound_of(std::string_view param) {
  for (const Bound& b : bounds())
    if (b.param == param) return b;
  throw std::logic_error(fmt::format("no range for {}", param));
}

std::string check_name(std::string_view name) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
  return ok ? "" : "expected a non-empty name of letters, digits, '_', '.' and '-'";
}

// "; the nearest multiples are 25165800 and 25166100" for a size that is no multiple of `unit`: what
// a user who changed the array's shape (and kept tpu-v1's 24 MiB or 8 GiB) can set instead. Only
// multiples up to `largest` (the parameter's maximum, and for the UB its most rows) are named.
std::string nearest_multiples(uint64_t value, uint64_t unit, uint64_t largest) {
  const uint64_t top = largest / unit * unit;
  const uint64_t below = std::min(value / unit * unit, top);
  if (below == 0) return fmt::format("; the smallest multiple is {}", unit);
  if (below + unit > top) return fmt::format("; the nearest allowed multiple is {}", below);
  return fmt::format("; the nearest multiples are {} and {}", below, below + unit);
}

}  // namespace

std::optional<ArchViolation> arch_violation(const Arch& a) {
  const auto violation = [](std::string key, std::string value, std::string reason, bool range) {
    std::string text = fmt::format("{} = {} {}", key, value, reason);
    return ArchViolation{std::move(key), std::move(text), std::move(reason), range};
  };
  if (std::string why = check_name(a.name); !why.empty())
    return ArchViolation{"name", fmt::format("name = '{}': {}", isa::printable(a.name), why), why, true};
  for (size_t i = 0; i < kCount; ++i) {
    const ParamInfo& p = kParams[i];
    if (p.is_real && !check_real(a.*kSlots[i].real).empty())
      return violation(std::string(p.name), format_value(a, i), "must be finite and > 0", true);
    const Bound& b = bound_of(p.name);
    if (value_of(a, p.name) < b.min)
      return violation(std::string(p.name), format_value(a, i), fmt::format("must be at least {}{}", b.min, b.note), true);
    if (value_of(a, p.name) > b.max)
      return violation(std::string(p.name), format_value(a, i), fmt::format("exceeds the maximum {}{}", b.max, b.note), true);
  }
  if (a.ub_bytes % a.ub_row_bytes() != 0)
    return violation("ub_bytes", std::to_string(a.ub_bytes),
                     fmt::format("is not a multiple of the UB row width {} (max(array_rows, array_cols)){}",
                                 a.ub_row_bytes(),
                                 nearest_multiples(a.ub_bytes, a.ub_row_bytes(),
                                                   std::min(static_cast<uint64_t>(bound_of("ub_bytes").max),
                                                            (isa::field_max(ub_field()) + 1) * a.ub_row_bytes()))),
                     false);
  if (a.ub_rows() > isa::field_max(ub_field()) + 1)
    return violation("ub_bytes", std::to_string(a.ub_bytes),
                     fmt::format("is {} rows of {} bytes, more than the {} rows{}", a.ub_rows(), a.ub_row_bytes(),
                                 isa::field_max(ub_field()) + 1, field_note(ub_field())),
                     false);
  if (a.weight_mem_bytes % a.tile_bytes() != 0)
    return violation("weight_mem_bytes", std::to_string(a.weight_mem_bytes),
                     fmt::format("is not a multiple of the tile size {} (array_rows * array_cols){}", a.tile_bytes(),
                                 nearest_multiples(a.weight_mem_bytes, a.tile_bytes(),
                                                   static_cast<uint64_t>(bound_of("weight_mem_bytes").max))),
                     false);
  return std::nullopt;
}

namespace {

// 1-based line of byte `offset` in `text`.
size_t line_at(std::string_view text, size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + std::min(offset, text.size()), '\n');
}

// The line of `"key":` in the file's text (the first occurrence; 1 when not found, e.g. escaped).
size_t key_line(std::string_view text, std::string_view key) {
  const std::string quoted = fmt::format("\"{}\"", key);
  for (size_t at = text.find(quoted); at != std::string_view::npos; at = text.find(quoted, at + 1)) {
    const size_t next = text.find_first_not_of(" \t\r\n", at + quoted.size());
    if (next != std::string_view::npos && text[next] == ':') return line_at(text, at);
  }
  return 1;
}

// "FILE:LINE: invalid JSON: ..." from nlohmann's exception (re-parsed without building values).
std::string json_error(const std::string& file, std::string_view text, const std::string& bounded_error) {
  try {
    [[maybe_unused]] const json none =
        json::parse(text, [](int, json::parse_event_t, json&) { return false; });
  } catch (const json::parse_error& e) {
    const std::string what = e.what();
    const size_t at = what.find(": ", what.find("column"));
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    return fmt::format("{}:{}: invalid JSON: {}", file, line_at(text, offset),
                       at == std::string::npos ? what : what.substr(at + 2));
  } catch (const json::exception& e) {  // e.g. a number beyond double's range: no position given
    const std::string what = e.what();
    return fmt::format("{}: invalid JSON: {}", file, what.substr(what.find("] ") + 2));
  }
  return fmt::format("{}: {}", file, bounded_error);
}

// A key given twice at the top level: JSON parsers keep the last silently, which would hide a
// typo'd edit. Returns the key and the line of its second occurrence, or nothing.
std::optional<std::pair<std::string, size_t>> duplicate_key(std::string_view text) {
  std::vector<std::string> seen;
  std::optional<std::string> dup;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !dup) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) dup = key;
      else seen.push_back(key);
    }
    return false;  // build nothing
  };
  [[maybe_unused]] const json none = json::parse(text, on_event, /*allow_exceptions=*/false);
  if (!dup) return std::nullopt;
  const std::string quoted = fmt::format("\"{}\"", *dup);
  const size_t first = text.find(quoted), second = text.find(quoted, first + 1);
  return std::pair{*dup, line_at(text, second == std::string_view::npos ? first : second)};
}

std::string short_dump(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

void apply_json_entry(Arch& arch, const std::string& key, const json& v, const std::string& origin) {
  if (v.is_string()) return set_param(arch, key, v.get_ref<const std::string&>(), origin);
  if (key == "name")
    fail(origin, key, short_dump(v), fmt::format("expected a string, got {}", v.type_name()));
  const std::string problem = json_value(v, kSlots[param_index(key, origin)], arch);
  if (!problem.empty()) fail(origin, key, short_dump(v), problem);
}

// x as m / den with the fewest fraction digits (at most 9) that read back as x: 10.74 -> 1074 / 100.
using u128 = unsigned __int128;
std::optional<std::pair<u128, u128>> as_fraction(double x) {
  for (uint64_t den = 1; den <= 1'000'000'000 && x > 0 && x < 0x1p53; den *= 10) {
    const double m = std::round(x * static_cast<double>(den));
    if (m < 0x1p53 && m / static_cast<double>(den) == x) return std::pair{u128(m), u128{den}};
  }
  return std::nullopt;
}

std::string markdown_rules() {
  std::string out =
      "- every parameter lies in its range (the table's `range` column); every real parameter is finite;\n";
  for (const Bound& b : bounds())
    if (!b.note.empty()) out += fmt::format("- `{}` <= {}{};\n", b.param, b.max, b.note);
  return out + fmt::format(
                   "- `ub_bytes` is a multiple of the UB row width and holds at most {} rows{};\n"
                   "- `weight_mem_bytes` is a multiple of the tile bytes.\n",
                   isa::field_max(ub_field()) + 1, field_note(ub_field()));
}

std::string markdown_derived() {
  const Arch a;
  return fmt::format(
      "## Derived\n\n"
      "- UB row width = max(array_rows, array_cols) bytes = {} at the defaults\n"
      "- UB rows = ub_bytes / UB row width = {} at the defaults\n"
      "- tile bytes = array_rows * array_cols = {} at the defaults\n"
      "- weight tile transfer = ceil(tile_bytes * clock_mhz / (weight_mem_gbps * 1000)) cycles = {} at the "
      "defaults ({} * {} / {} = {:.1f} rounded up)\n",
      a.ub_row_bytes(), a.ub_rows(), a.tile_bytes(),
      transfer_cycles(a.tile_bytes(), a.weight_mem_gbps, a.clock_mhz), a.tile_bytes(), a.clock_mhz,
      a.weight_mem_gbps * 1000,
      static_cast<double>(a.tile_bytes()) * a.clock_mhz / (a.weight_mem_gbps * 1000));
}

}  // namespace

std::span<const ParamInfo> arch_params() { return kParams; }

Arch arch_preset(std::string_view name) {
  if (name == "tpu-v1") return Arch{};
  throw InputError(fmt::format("unknown architecture preset '{}' (known presets: tpu-v1)", name));
}

void set_param(Arch& arch, std::string_view key, std::string_view value, std::string_view origin) {
  value = trim(value);
  if (key.empty())
    throw InputError(fmt::format("{}: the value '{}' has no parameter name: expected a key, one of the parameters "
                                 "docs/arch.md lists (e.g. array_rows)",
                                 origin, isa::printable(value)));
  if (key == "name") {
    if (std::string why = check_name(value); !why.empty())
      fail(origin, key, fmt::format("'{}'", isa::printable(value)), why);
    arch.name = value;
    return;
  }
  const Slot& slot = kSlots[param_index(key, origin)];
  const std::string problem =
      slot.integer ? parse_uint(value, arch.*slot.integer) : parse_real(value, arch.*slot.real);
  if (!problem.empty()) fail(origin, key, fmt::format("'{}'", isa::printable(value)), problem);
}

void apply_set(Arch& arch, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos)
    throw InputError(
        fmt::format("--set: '{}' is not of the form key=value (e.g. --set array_rows=128)", assignment));
  if (trim(assignment.substr(0, eq)).empty())
    throw InputError(fmt::format("--set: '{}' has no key before '=': expected key=value (e.g. --set array_rows=128)",
                                 isa::printable(assignment)));
  set_param(arch, trim(assignment.substr(0, eq)), assignment.substr(eq + 1), "--set");
}

Arch load_arch_file(const std::filesystem::path& path) {
  return parse_arch(io::read_text_file(path, io::kMaxConfigBytes, "an architecture file (JSON)"),
                    path.string());
}

Arch parse_arch(const std::string& text, const std::string& file) {
  std::string err;
  const json doc = isa::parse_json_bounded(text, /*max_depth=*/32, err);
  if (!err.empty()) throw InputError(json_error(file, text, err));
  const auto origin = [&](std::string_view key) { return fmt::format("{}:{}", file, key_line(text, key)); };
  if (const auto dup = duplicate_key(text))
    throw InputError(fmt::format("{}:{}: \"{}\" is given twice (each parameter may appear once)", file,
                                 dup->second, isa::printable(dup->first)));
  if (!doc.is_object())
    throw InputError(fmt::format(
        "{}:{}: expected a JSON object such as {{\"base\": \"tpu-v1\", \"array_rows\": 128}}, got {}", file,
        line_at(text, text.find_first_not_of(" \t\r\n")), doc.type_name()));
  Arch arch;
  if (const auto base = doc.find("base"); base != doc.end()) {
    if (!base->is_string())
      fail(origin("base"), "base", short_dump(*base), "expected a preset name such as \"tpu-v1\"");
    try {
      arch = arch_preset(base->get_ref<const std::string&>());
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", origin("base"), e.what()));
    }
  }
  if (const auto name = doc.find("name"); name != doc.end())
    apply_json_entry(arch, "name", *name, origin("name"));
  for (const auto& [key, value] : doc.items())
    if (key != "base" && key != "name") apply_json_entry(arch, key, value, origin(key));
  if (const auto v = arch_violation(arch))  // at the line of the parameter it is about
    throw InputError(fmt::format("{}: {}", doc.contains(v->key) ? origin(v->key) : file, v->text));
  return arch;
}

void validate(const Arch& arch) {
  if (const auto v = arch_violation(arch)) throw InputError(fmt::format("architecture '{}': {}", arch.name, v->text));
}

namespace {

// The machine a program's `.arch` metadata names (a preset and the parameters it lists), or
// nothing when it names none this tpusim can read: no metadata, a name alone that is no preset (an
// assembly `.arch "NAME"` says nothing about the shape), or values it cannot parse.
std::optional<Arch> declared_arch(const json& program_arch) {
  if (!program_arch.is_object() || program_arch.empty()) return std::nullopt;
  Arch declared;
  try {
    const std::string name = program_arch.value("name", std::string("tpu-v1"));
    try {
      declared = arch_preset(name);
    } catch (const InputError&) {
      // Not a preset: a compiled program lists what differs from tpu-v1.
      if (program_arch.size() < 2) return std::nullopt;
      declared.name = name;
    }
    for (const auto& [key, value] : program_arch.items())
      if (key != "name")
        set_param(declared, key, value.is_string() ? value.get<std::string>() : value.dump(), ".arch");
  } catch (const InputError&) {
    return std::nullopt;  // metadata this tpusim cannot read says nothing it can check
  }
  return declared;
}

}  // namespace

std::string program_arch_mismatch(const json& program_arch, const Arch& arch) {
  const std::optional<Arch> declared = declared_arch(program_arch);
  if (!declared || (declared->array_rows == arch.array_rows && declared->array_cols == arch.array_cols)) return {};
  return fmt::format(
      "the program was compiled for a {} x {} array (architecture '{}'), this machine's is {} x {}: its "
      "weight tiles "
      "and UB rows would be misread. Compile the model again for this machine (`tpusim run MODEL.toml` with "
      "the "
      "same --arch/--set), or drop the array_rows/array_cols settings",
      declared->array_rows, declared->array_cols, isa::printable(declared->name), arch.array_rows,
      arch.array_cols);
}

std::string program_driver_mismatch(const isa::Program& program, const Arch& arch) {
  // Only the compiler's programs were made with the host software's choices: an assembled one's
  // `.arch` names the machine it was written for.
  if (!program.meta.contains("compiler")) return {};
  const std::optional<Arch> declared = declared_arch(program.arch);
  if (!declared) return {};
  // The host software's choices are the table's driver_* parameters (all whole numbers).
  for (size_t i = 0; i < kCount; ++i) {
    const std::string_view name = kParams[i].name;
    const auto member = kSlots[i].integer;
    if (!name.starts_with("driver_") || !member || (*declared).*member == arch.*member) continue;
    return fmt::format(
        "the program was compiled with {} = {} (architecture '{}'), this machine's is {}: that parameter is "
        "the host software's choice when it compiles a model, so it changes nothing on a compiled program. "
        "Compile the model again for this machine (`tpusim run MODEL.toml` with the same --arch/--set), or run "
        "the program with {} = {}",
        name, (*declared).*member, isa::printable(declared->name), arch.*member, name, (*declared).*member);
  }
  return {};
}

json arch_to_json(const Arch& arch) {
  json j = {{"name", arch.name}};
  for (size_t i = 0; i < kCount; ++i)
    j[std::string(kParams[i].name)] =
        kSlots[i].integer ? json(arch.*kSlots[i].integer) : json(arch.*kSlots[i].real);
  return j;
}

std::string arch_markdown() {
  std::string out = fmt::format(
      R"(<!-- Generated from sim/arch.h by `build/tpusim arch --markdown > docs/arch.md`. Do not edit: a test fails when this file and the table differ. -->
# Architecture parameters

The machine the simulator models is described by the parameters below; the defaults are the
`tpu-v1` preset (Jouppi et al., ISCA 2017). `--arch FILE` reads a JSON object: an optional
`"base"` (a preset, default `tpu-v1`) applied first, an optional `"name"`, then any parameters,
as numbers or as strings such as `"24MiB"`. `--set key=value` sets one parameter, after `--arch`:
integers take decimal or `0x` hex with an optional `KiB`, `MiB` or `GiB` suffix
(`--set ub_bytes=24MiB`), reals take decimal or scientific notation. Unknown keys and malformed
values are errors, and the result must satisfy:

{}
Simulated time is counted in 64-bit picoseconds (SystemC time): about 1.8e7 s (213 days) of
simulated time at any clock. The ranges keep any one instruction far inside that; a run that
still goes past it stops with an error naming the instruction, never a wrapped count.

| name | default | range | unit | meaning | source |
|---|---|---|---|---|---|
)",
      markdown_rules());
  for (const ParamInfo& p : kParams) {
    const Bound& b = bound_of(p.name);
    out += fmt::format("| `{}` | {} | {} to {} | {} | {} | {} |\n", p.name, p.default_text, b.min, b.max,
                       p.unit, p.meaning, p.source);
  }
  return out + "\n" + markdown_derived();
}

uint64_t transfer_cycles(uint64_t bytes, double gbps, double clock_mhz) {
  if (bytes == 0) return 0;
  const auto clock = as_fraction(clock_mhz), rate = as_fraction(gbps);
  if (clock && rate) {  // exact: bytes * clock / (rate * 1000) clock and rate as the decimals they print as
    u128 num = 0, den = 0;
    if (!__builtin_mul_overflow(u128{bytes} * clock->first, rate->second, &num) &&
        !__builtin_mul_overflow(rate->first * clock->second, u128{1000}, &den)) {
      const u128 q = num / den + (num % den != 0);
      return q > kMaxU64 ? kMaxU64 : static_cast<uint64_t>(q);
    }
  }
  const long double q = static_cast<long double>(bytes) * clock_mhz / (static_cast<long double>(gbps) * 1000);
  if (!(q >= 0) || q >= 0x1p64L) return kMaxU64;
  return static_cast<uint64_t>(std::ceil(q - q * 1e-15L));
}

}  // namespace tpusim::sim
