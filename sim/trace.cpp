// The trace recorder and the trace options (trace.h).
#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "isa/error.h"
#include "sim/systolic_array.h"

namespace tpusim::sim {

void TraceRecorder::array_step(uint64_t cycle, const ArrayModel& array) {
  if (cell_ranges.empty() || cells_stopped_at != kNoCycle) return;
  if (max_cell_changes && cell_changes.size() >= max_cell_changes) {
    cells_stopped_at = cycle;
    return;
  }
  std::array<int32_t, kCellRegisters.size()> v;
  if (!array.registers(0, 0, v)) return;
  cells_seen = true;
  size_t s = 0;
  const bool first = cell_values_.empty();
  for (const CellRange& r : cell_ranges)
    for (uint64_t k = r.row0; k < std::min(r.row1, array.rows()); ++k)
      for (uint64_t j = r.col0; j < std::min(r.col1, array.cols()); ++j) {
        array.registers(k, j, v);
        for (int32_t value : v) {
          if (first) cell_values_.push_back(0);  // reset() zeroes every register
          if (cell_values_[s] != value) {
            cell_values_[s] = value;
            cell_changes.push_back({cycle + 1, uint32_t(s), value});
          }
          ++s;
        }
      }
}

namespace {

uint64_t parse_cycle(std::string_view text, const std::string& what, std::string_view noun = "cycle number") {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size())
    throw InputError(fmt::format("{}: '{}' is not a {}", what, text, noun));
  return v;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t next = text.find(sep, at);
    std::string item = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

// "A-B" or "A" (inclusive), as a half-open range, within [0, limit).
std::pair<uint64_t, uint64_t> parse_range(const std::string& text, uint64_t limit, const std::string& what) {
  const size_t dash = text.find('-');
  const uint64_t a = parse_cycle(text.substr(0, dash), what, "number");
  const uint64_t b = dash == std::string::npos ? a : parse_cycle(text.substr(dash + 1), what, "number");
  if (a > b)
    throw InputError(
        fmt::format("{}: {} runs backwards: expected FIRST-LAST with FIRST <= LAST", what, text));
  if (b >= limit) throw InputError(fmt::format("{}: {} is outside 0-{}", what, text, limit - 1));
  return {a, b + 1};
}

}  // namespace

void parse_trace_window(const std::string& text, TraceSelection& s, std::string_view flag) {
  const std::string what = fmt::format("{} {}", flag, text);
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    throw InputError(what + ": expected START:END in cycles (either may be empty)");
  const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
  s.begin = a.empty() ? 0 : parse_cycle(a, what);
  s.end = b.empty() ? kNoCycle : parse_cycle(b, what);
  if (s.end <= s.begin) throw InputError(what + ": END must be greater than START");
}

std::vector<LayerTag> layer_tags(const isa::Program& program) {
  const nlohmann::json* names = program.meta.contains("layers") && program.meta["layers"].is_array()
                                    ? &program.meta["layers"]
                                    : nullptr;
  std::vector<LayerTag> tags;
  for (uint64_t i = 0; i < program.code.size(); ++i) {
    if (program.code[i].opcode != isa::Opcode::debug_tag) continue;
    const uint64_t tag = program.code[i][isa::Field::tag];
    tags.push_back({i, names && tag < names->size() && (*names)[tag].is_string()
                           ? (*names)[tag].get<std::string>()
                           : fmt::format("tag {}", tag)});
  }
  return tags;
}

void parse_trace_filter(const std::string& text, const isa::Program& program, TraceSelection& s) {
  const std::vector<LayerTag> tags = layer_tags(program);
  for (const std::string& term : split(text, ',')) {
    if (term.rfind("layer=", 0) == 0) {
      const std::string name = term.substr(6);
      if (tags.empty())
        throw InputError(fmt::format(
            "--trace-filter: layer={}: the program has no layers (no `tag` instruction names one)", name));
      if (std::none_of(tags.begin(), tags.end(), [&](const LayerTag& t) { return t.name == name; })) {
        std::vector<std::string> names;
        for (const LayerTag& t : tags)
          if (std::find(names.begin(), names.end(), t.name) == names.end()) names.push_back(t.name);
        std::string known;
        for (const std::string& n : names) known += " " + n;
        throw InputError(
            fmt::format("--trace-filter: no layer '{}' in the program (layers:{})", name, known));
      }
      s.layers.push_back(name);
      continue;
    }
    const isa::OpcodeSpec* found = nullptr;
    for (const isa::OpcodeSpec& spec : isa::kOpcodes)
      if (spec.mnemonic == term) found = &spec;
    if (!found) {
      std::string names;
      for (const isa::OpcodeSpec& spec : isa::kOpcodes) {
        names += ' ';
        names += spec.mnemonic;
      }
      throw InputError(fmt::format("--trace-filter: '{}' is neither a mnemonic nor layer=NAME (mnemonics:{})",
                                   term, names));
    }
    s.opcodes.push_back(found->opcode);
  }
}

VcdScope parse_vcd_scope(const std::string& text, const Arch& arch, Engine engine) {
  VcdScope scope;
  const uint64_t all = arch.array_rows * arch.array_cols;
  if (text.empty()) {
    if (engine == Engine::stepped && all <= kDefaultVcdCells)
      scope.cells.push_back({0, arch.array_rows, 0, arch.array_cols});
    return scope;
  }
  scope.units = false;
  uint64_t cells = 0;
  for (const std::string& term : split(text, ',')) {
    const std::string what = "--vcd-scope " + term;
    if (term == "units") {
      scope.units = true;
      continue;
    }
    CellRange r;
    if (term == "array") {
      r = {0, arch.array_rows, 0, arch.array_cols};
    } else if (term.rfind("cells=", 0) == 0) {
      const std::string spec = term.substr(6);
      const size_t x = spec.find('x');
      if (x == std::string::npos)
        throw InputError(what + ": expected cells=ROWSxCOLS, e.g. cells=0-3x0-7 or cells=2x5");
      std::tie(r.row0, r.row1) = parse_range(spec.substr(0, x), arch.array_rows, what + " (rows)");
      std::tie(r.col0, r.col1) = parse_range(spec.substr(x + 1), arch.array_cols, what + " (columns)");
    } else {
      throw InputError(what + ": expected units, array or cells=ROWSxCOLS");
    }
    if (engine != Engine::stepped)
      throw InputError(
          fmt::format("{}: cell registers are only stepped on the stepped engine (--engine stepped); "
                      "this run uses '{}'",
                      what, engine_name(engine)));
    cells += (r.row1 - r.row0) * (r.col1 - r.col0);
    scope.cells.push_back(r);
  }
  if (cells > kMaxVcdCells)
    throw InputError(
        fmt::format("--vcd-scope {}: {} cells; at most {} can be traced (choose cells=ROWSxCOLS)", text,
                    cells, kMaxVcdCells));
  return scope;
}

}  // namespace tpusim::sim
