// tpusim debug: breakpoints, watchpoints and the print command (debug.h, docs/debugger.md).
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "isa/disassembler.h"
#include "sim/trace.h"
#include "tools/debug.h"

namespace tpusim::tools {

namespace {

using Kind = Breakpoint::Kind;

// The names `break unit` takes for unit u: the one `sync units=` uses (control has none), then
// isa::kUnitNames[u]. The first is the one messages list. unit_named and its suggestions read
// this list alone.
std::vector<std::string> names_of_unit(int u) {
  std::vector<std::string> n;
  if (u > 0) n.emplace_back(sim::sync_unit_name(isa::Unit(u)));
  if (n.empty() || n[0] != isa::kUnitNames[u]) n.emplace_back(isa::kUnitNames[u]);
  return n;
}

std::optional<isa::Unit> unit_named(std::string_view s) {
  for (int u = 0; u < sim::kUnitCount; ++u)
    for (const std::string& n : names_of_unit(u))
      if (n == s) return isa::Unit(u);
  return std::nullopt;
}

// "break: unknown unit 'S' (did you mean ...?) (one of: control host ...)".
std::string unknown_unit(const std::string& s) {
  std::vector<std::string> all;
  std::string listed;
  for (int u = 0; u < sim::kUnitCount; ++u) {
    const std::vector<std::string> n = names_of_unit(u);
    listed += (listed.empty() ? "" : " ") + n[0];
    all.insert(all.end(), n.begin(), n.end());
  }
  return fmt::format("break: unknown unit '{}'{} (one of: {})", s, did_you_mean(s, all), listed);
}

sim::EventKind event_kind(const std::vector<std::string>& a, size_t i, std::string_view usage) {
  if (a.size() <= i) return sim::EventKind::start;
  if (a.size() > i + 1)
    throw CommandError(fmt::format("break: unexpected '{}' (expected {})", a[i + 1], usage));
  for (sim::EventKind k : {sim::EventKind::issue, sim::EventKind::start, sim::EventKind::end})
    if (sim::event_name(k) == a[i]) return k;
  throw CommandError(fmt::format("break: '{}': expected issue, start or end", a[i]));
}

// A memory range of `watch` and `print`: SPACE ROW|SYMBOL [COUNT] (host: REGION [OFFSET [BYTES]]),
// checked against the machine. Returns {first, count}.
std::pair<uint64_t, uint64_t> memory_range(const isa::Program& p, const sim::Arch& arch,
                                           const std::vector<std::string>& a, std::string_view cmd) {
  const std::string& space = a[1];
  if (a.size() < 3 || a.size() > 4)
    throw CommandError(fmt::format("{}: expected `{} {} ROW [COUNT]` (a row number or a {} symbol)", cmd, cmd,
                                   space, space));
  uint64_t first = 0, count = 1;
  if (auto v = parse_number(a[2])) {
    first = *v;
  } else {
    auto s = std::find_if(p.symbols.begin(), p.symbols.end(),
                          [&](const isa::Symbol& s) { return s.space == space && s.name == a[2]; });
    if (s == p.symbols.end())
      throw CommandError(fmt::format("{}: '{}': not a row number or {} symbol", cmd, a[2], space));
    first = s->addr;
    count = s->size;
  }
  if (a.size() == 4) count = need_number(a[3], cmd);
  if (count == 0) throw CommandError(fmt::format("{}: COUNT must be at least 1", cmd));
  const uint64_t rows = space == "ub" ? arch.ub_rows() : arch.acc_entries;
  if (first >= rows || count > rows - first)
    throw CommandError(fmt::format("{}: {} rows {}..{} are outside the {} ({} rows)", cmd, space, first,
                                   first + count - 1, space == "ub" ? "unified buffer" : "accumulators",
                                   rows));
  return {first, count};
}

const sim::HostBuffer& host_region(const sim::DebugSession& s, const std::string& name,
                                   std::string_view cmd) {
  std::string names;
  for (const sim::HostBuffer& h : s.state().host) {
    if (h.name == name) return h;
    names += " " + h.name;
  }
  std::vector<std::string> regions;
  for (const sim::HostBuffer& h : s.state().host) regions.push_back(h.name);
  throw CommandError(fmt::format("{}: no host region '{}'{} (the program has:{})", cmd, name,
                                 did_you_mean(name, regions), names));
}

}  // namespace

std::string Debugger::cmd_break(const Args& a) {
  static constexpr char kUsage[] =
      "`break INDEX|LABEL [issue|start|end]`, `break cycle N`, `break OPCODE [issue|start|end]`, "
      "`break unit UNIT [issue|start|end]` or `break layer NAME`";
  if (a.size() < 2) throw CommandError(fmt::format("break: expected {}", kUsage));
  Breakpoint b;
  if (a[1] == "cycle") {
    if (a.size() != 3) throw CommandError("break: expected `break cycle N`");
    b.kind = Kind::cycle;
    b.value = need_number(a[2], "break cycle");
    if (b.value <= session_->cycle())
      throw CommandError(
          fmt::format("break: cycle {} has passed (now at cycle {})", b.value, session_->cycle()));
  } else if (a[1] == "layer") {
    if (a.size() < 3) throw CommandError("break: expected `break layer NAME`");
    std::string name = a[2];  // names may hold spaces ("tag 3" in a program without layer names)
    for (size_t k = 3; k < a.size(); ++k) name += " " + a[k];
    const std::vector<sim::LayerTag> tags = sim::layer_tags(program_);
    if (tags.empty()) throw CommandError("break: the program has no layers (no `tag` instruction names one)");
    b.kind = Kind::layer;
    b.space = name;
    std::string known;
    std::vector<std::string> names;
    for (const sim::LayerTag& t : tags) {
      if (t.name == name) b.tags.push_back(t.index);
      if (known.find(" " + t.name + ",") == std::string::npos) known += " " + t.name + ",";
      names.push_back(t.name);
    }
    known.pop_back();
    if (b.tags.empty())
      throw CommandError(fmt::format("break: no layer '{}'{} (the program's layers:{})", name,
                                     did_you_mean(name, names), known));
  } else if (a[1] == "unit") {
    if (a.size() < 3) throw CommandError("break: expected `break unit UNIT [issue|start|end]`");
    const auto u = unit_named(a[2]);
    if (!u) throw CommandError(unknown_unit(a[2]));
    b.kind = Kind::unit;
    b.value = uint64_t(*u);
    b.when = event_kind(a, 3, "issue, start or end");
  } else if (const isa::OpcodeSpec* op = isa::find_mnemonic(a[1])) {
    b.kind = Kind::opcode;
    b.value = uint64_t(op->opcode);
    b.when = event_kind(a, 2, "issue, start or end");
  } else {
    std::optional<uint64_t> index = parse_number(a[1]);
    for (const isa::Symbol& s : program_.symbols)
      if (!index && s.space == "code" && s.name == a[1]) index = s.addr;
    if (!index) {
      std::vector<std::string> words = {"cycle", "unit", "layer"};
      for (const isa::OpcodeSpec& op : isa::kOpcodes) words.emplace_back(op.mnemonic);
      for (const isa::Symbol& s : program_.symbols)
        if (s.space == "code") words.push_back(s.name);
      throw CommandError(fmt::format("break: '{}'{}: expected {}", a[1], did_you_mean(a[1], words), kUsage));
    }
    if (*index >= session_->code_size())
      throw CommandError(
          fmt::format("break: instruction {} is past the halt (the program runs instructions 0..{})", *index,
                      session_->code_size() - 1));
    b.kind = Kind::instruction;
    b.value = *index;
    b.when = event_kind(a, 2, "issue, start or end");
  }
  const int n = next_breakpoint_++;
  breakpoints_[n] = b;
  return fmt::format("breakpoint {}: {}\n", n, describe_breakpoint(b));
}

std::string Debugger::cmd_watch(const Args& a) {
  if (a.size() < 2 || (a[1] != "ub" && a[1] != "acc" && a[1] != "host"))
    throw CommandError(fmt::format(
        "watch: expected `watch ub ROW [COUNT]`, `watch acc ROW [COUNT]` or `watch host REGION`{}",
        a.size() < 2 ? "" : did_you_mean(a[1], {"ub", "acc", "host"})));
  Breakpoint b;
  b.kind = Kind::watch;
  b.space = a[1];
  if (b.space == "host") {
    if (a.size() != 3) throw CommandError("watch: expected `watch host REGION`");
    const sim::HostBuffer& h = host_region(*session_, a[2], "watch");
    b.first = h.addr;
    b.count = h.bytes.size();
  } else {
    std::tie(b.first, b.count) = memory_range(program_, arch_, a, "watch");
  }
  b.seen = watched_bytes(b);
  const int n = next_breakpoint_++;
  breakpoints_[n] = b;
  return fmt::format("watchpoint {}: {}\n", n, describe_breakpoint(b));
}

std::vector<uint8_t> Debugger::watched_bytes(const Breakpoint& b) const {
  const sim::MachineState& s = session_->state();
  const uint8_t *from = nullptr, *to = nullptr;
  if (b.space == "ub") {
    from = s.ub_row(b.first);
    to = s.ub_row(b.first + b.count);
  } else if (b.space == "acc") {
    from = reinterpret_cast<const uint8_t*>(s.acc_row(b.first));
    to = reinterpret_cast<const uint8_t*>(s.acc_row(b.first + b.count));
  } else {
    for (const sim::HostBuffer& h : s.host)
      if (h.addr == b.first && h.bytes.size() == b.count) from = h.bytes.data(), to = from + b.count;
  }
  return {from, to};
}

// What a watchpoint saw change: the first row that differs, as it is now (host: the first byte).
std::string Debugger::watch_change(const Breakpoint& b, const std::vector<uint8_t>& before) const {
  const std::vector<uint8_t> now = watched_bytes(b);
  const size_t k = size_t(std::mismatch(now.begin(), now.end(), before.begin()).first - now.begin());
  if (b.space == "host")
    return fmt::format("  byte {} was {}, is {}\n", k, int(int8_t(before[k])), int(int8_t(now[k])));
  const uint64_t row_bytes = b.space == "ub" ? arch_.ub_row_bytes() : arch_.array_cols * sizeof(int32_t);
  const uint64_t changed = [&] {
    uint64_t n = 0;
    for (uint64_t r = 0; r < b.count; ++r)
      n += !std::equal(now.begin() + r * row_bytes, now.begin() + (r + 1) * row_bytes,
                       before.begin() + r * row_bytes);
    return n;
  }();
  return fmt::format("  {} of {} rows changed; the first, now:\n", changed, b.count) +
         view_memory(*session_, b.space, b.first + k / row_bytes, 1, false);
}

std::string Debugger::describe_breakpoint(const Breakpoint& b) const {
  const std::string when(sim::event_name(b.when));
  switch (b.kind) {
    case Kind::instruction:
      return fmt::format("instruction {} {} ({})", b.value, when,
                         isa::format_instruction(program_.code[b.value]));
    case Kind::opcode: return fmt::format("every {} {}", isa::spec(isa::Opcode(b.value)).mnemonic, when);
    case Kind::unit: return fmt::format("every {} instruction {}", isa::kUnitNames[b.value], when);
    case Kind::cycle: return fmt::format("cycle {}", b.value);
    case Kind::layer: {
      std::string at;
      for (uint64_t t : b.tags) at += fmt::format("{}{}", at.empty() ? "" : ", ", t);
      return fmt::format("layer {} begins (its tag: instruction {})", b.space, at);
    }
    default: break;
  }
  if (b.space == "host") {
    for (const sim::HostBuffer& h : session_->state().host)
      if (h.addr == b.first)
        return fmt::format("host region {} ({} bytes at {:#x})", h.name, b.count, b.first);
  }
  return b.count == 1 ? fmt::format("{} row {}", b.space, b.first)
                      : fmt::format("{} rows {}..{}", b.space, b.first, b.first + b.count - 1);
}

std::string Debugger::cmd_delete(const Args& a) {
  if (a.size() == 1) {
    const size_t n = breakpoints_.size();
    breakpoints_.clear();
    return fmt::format("deleted all breakpoints and watchpoints ({})\n", n);
  }
  // Every number is checked before any is deleted: an error deletes nothing.
  std::vector<int> numbers;
  for (size_t i = 1; i < a.size(); ++i) {
    const uint64_t n = need_number(a[i], "delete");
    if (n > uint64_t(INT_MAX) || !breakpoints_.contains(int(n)))
      throw CommandError(
          fmt::format("delete: no breakpoint {} (nothing deleted; `info breakpoints` lists them)", n));
    numbers.push_back(int(n));
  }
  std::string out;
  for (int n : numbers)
    if (breakpoints_.erase(n)) out += fmt::format("deleted {}\n", n);
  return out;
}

std::string Debugger::cmd_info(const Args& a) const {
  if (a.size() != 2 || (a[1] != "breakpoints" && a[1] != "break" && a[1] != "b" && a[1] != "watchpoints"))
    throw CommandError("info: expected `info breakpoints`");
  if (breakpoints_.empty()) return "no breakpoints or watchpoints\n";
  std::string out = "Num  Type        What\n";
  for (const auto& [n, b] : breakpoints_)
    out += fmt::format("{:<4} {:<11} {}\n", n, b.kind == Kind::watch ? "watchpoint" : "breakpoint",
                       describe_breakpoint(b));
  return out;
}

std::string Debugger::cmd_print(const Args& a, bool hex) const {
  static constexpr char kUsage[] =
      "print: expected `print ub ROW [COUNT]`, `print acc ROW [COUNT]`, `print host REGION [OFFSET "
      "[BYTES]]`, "
      "`print fifo`, `print cell ROW COL`, `print weights [shadow] [ROW COL [SIZE]]` or `print tile "
      "N|active|shadow [ROW COL [SIZE]]`";
  if (a.size() < 2) throw CommandError(kUsage);
  const std::string& what = a[1];
  if (hex && what != "ub" && what != "acc" && what != "host")
    throw CommandError(fmt::format("print/x: hexadecimal is for memory (ub, acc, host), not {}", what));
  if (what == "ub" || what == "acc") {
    const auto [first, count] = memory_range(program_, arch_, a, "print");
    return view_memory(*session_, what, first, count, hex);
  }
  if (what == "host") {
    if (a.size() < 3 || a.size() > 5)
      throw CommandError("print: expected `print host REGION [OFFSET [BYTES]]`");
    const sim::HostBuffer& h = host_region(*session_, a[2], "print");
    const uint64_t offset = a.size() > 3 ? need_number(a[3], "print host") : 0;
    if (offset >= h.bytes.size())
      throw CommandError(
          fmt::format("print: offset {} is past host region {} ({} bytes)", offset, h.name, h.bytes.size()));
    const uint64_t bytes = a.size() > 4 ? need_number(a[4], "print host") : h.bytes.size() - offset;
    if (bytes == 0) throw CommandError("print: BYTES must be at least 1");
    return view_host(*session_, h.name, offset, std::min(bytes, h.bytes.size() - offset), hex);
  }
  if (what == "fifo") {
    if (a.size() != 2) throw CommandError("print: expected `print fifo`");
    return view_fifo(*session_);
  }
  if (what == "cell") {
    if (a.size() != 4) throw CommandError("print: expected `print cell ROW COL`");
    const uint64_t r = need_number(a[2], "print cell"), c = need_number(a[3], "print cell");
    if (r >= arch_.array_rows || c >= arch_.array_cols)
      throw CommandError(fmt::format("print: cell ({}, {}) is outside the {} x {} array", r, c,
                                     arch_.array_rows, arch_.array_cols));
    return view_cell(*session_, r, c);
  }
  if (what == "weights" || what == "tile") return print_weights(a);
  throw CommandError(kUsage + did_you_mean(what, {"ub", "acc", "host", "fifo", "cell", "weights", "tile"}));
}

// print weights [shadow] [ROW COL [SIZE]]: the cells' weight (or shadow weight) registers;
// print tile N|active|shadow [ROW COL [SIZE]]: a weight tile as it is in weight memory.
std::string Debugger::print_weights(const Args& a) const {
  const std::string& what = a[1];
  size_t k = 2;
  std::string title;
  std::function<int32_t(uint64_t, uint64_t)> at;
  const sim::SystolicArray& arr = session_->array();
  const uint64_t now = session_->cycle();
  if (what == "weights") {
    const bool shadow = a.size() > 2 && a[2] == "shadow";
    k += shadow;
    title = fmt::format("{} weights in the array at cycle {}", shadow ? "shadow" : "active", now);
    at = shadow ? std::function<int32_t(uint64_t, uint64_t)>(
                      [&](uint64_t r, uint64_t c) { return arr.shadow(r, c); })
                : [&](uint64_t r, uint64_t c) { return int32_t(arr.weight(r, c)); };
  } else {
    if (a.size() < 3) throw CommandError("print: expected `print tile N|active|shadow [ROW COL [SIZE]]`");
    const sim::WeightPathView w = session_->weight_path();
    uint64_t waddr = 0, number = 0;
    bool is_unsigned = false;
    uint32_t box_rows = 0, box_cols = 0;  // a partial tile's stored box (rw tile_rows x tile_cols)
    if (a[2] == "active" || a[2] == "shadow") {
      const std::optional<sim::TileView>& t = a[2] == "active" ? w.active : w.shadow;
      if (!t) throw CommandError(fmt::format("print: no {} tile at cycle {}", a[2], now));
      waddr = t->waddr, number = t->number;
      is_unsigned = t->is_unsigned;
      box_rows = t->rows, box_cols = t->cols;
    } else {
      const uint64_t n = need_number(a[2], "print tile");
      const std::optional<uint64_t> at = session_->tile_address(n);
      if (!at)
        throw CommandError(fmt::format("print: tile {} is past the weight memory ({} tiles)", n,
                                       session_->tile_count()));
      waddr = *at, number = n;
      // Signedness and box are the reading instruction's (rw's unsigned flag, tile_rows and
      // tile_cols): the first rw reading it says.
      for (const isa::Instruction& in : program_.code) {
        const sim::TileBox box = sim::tile_box(arch_, in);
        if (in.opcode == isa::Opcode::read_weights && in[isa::Field::waddr] <= waddr &&
            waddr < in[isa::Field::waddr] + in[isa::Field::tiles] * box.bytes()) {
          is_unsigned = in[isa::Field::unsigned_data] != 0;
          if (box.partial(arch_)) box_rows = uint32_t(box.rows), box_cols = uint32_t(box.cols);
          break;
        }
      }
    }
    k = 3;
    title = fmt::format("tile {} (waddr {:#x}{}) in weight memory", number, waddr,
                        is_unsigned ? ", unsigned" : "");
    const sim::WeightTile tile{program_.weights.data() + waddr, waddr, is_unsigned, box_rows, box_cols};
    at = [tile, cols = arch_.array_cols](uint64_t r, uint64_t c) { return tile.weight(r, c, cols); };
  }
  uint64_t row = 0, col = 0, size = 16;
  if (a.size() > k) {
    if (a.size() < k + 2 || a.size() > k + 3)
      throw CommandError(what == "weights" ? "print: expected `print weights [shadow] [ROW COL [SIZE]]`"
                                           : "print: expected `print tile N|active|shadow [ROW COL [SIZE]]`");
    row = need_number(a[k], "print " + what);
    col = need_number(a[k + 1], "print " + what);
    if (a.size() == k + 3) size = need_number(a[k + 2], "print " + what);
    if (row >= arch_.array_rows || col >= arch_.array_cols)
      throw CommandError(fmt::format("print: ({}, {}) is outside the {} x {} tile", row, col,
                                     arch_.array_rows, arch_.array_cols));
    if (size == 0) throw CommandError("print: SIZE must be at least 1");
  }
  return view_weights(title, row, col, size, arch_.array_rows, arch_.array_cols, at);
}

}  // namespace tpusim::tools
