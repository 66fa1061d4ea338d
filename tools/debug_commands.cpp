// tpusim debug: parsing and running the debugger's commands (debug.h, docs/debugger.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "isa/disassembler.h"
#include "isa/text.h"
#include "sim/reference.h"
#include "tools/debug.h"

namespace tpusim::tools {

namespace {

using sim::EventKind;

constexpr size_t kMaxEventLines = 20;  // events a motion command lists before summarising

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> words;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

std::optional<uint64_t> parse_number(std::string_view s) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return std::nullopt;
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(std::string(s), &used, s.starts_with("0x") ? 16 : 10);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const auto [best, d] = isa::nearest(word, candidates);
  // Near: at most a third of the letters wrong (two in a short word: a swap), never all of them.
  if (d == 0 || d >= word.size() || d > std::max<size_t>(2, word.size() / 3)) return "";
  return fmt::format(" (did you mean {}?)", best);
}

uint64_t need_number(const std::string& s, std::string_view what) {
  if (auto v = parse_number(s)) return *v;
  const bool hex = s.starts_with("0x");
  const std::string_view digits = std::string_view(s).substr(hex ? 2 : 0);
  if (!digits.empty() &&
      digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") == std::string_view::npos)
    throw CommandError(fmt::format("{}: {} is too large (at most {})", what, s, UINT64_MAX));
  throw CommandError(fmt::format("{}: '{}' is not a number", what, s));
}

volatile std::sig_atomic_t Debugger::interrupt_requested = 0;

Debugger::Debugger(const isa::Program& program, const sim::Arch& arch, std::string source,
                   sim::TraceRecorder* trace)
    : program_(program), arch_(arch), source_(std::move(source)), trace_(trace) {
  session_ = std::make_unique<sim::DebugSession>(program_, arch_, trace_);
}

Debugger::~Debugger() = default;

std::string Debugger::banner() const {
  std::string out = fmt::format("tpusim debug: {} ({} instructions) on {} ({} x {} array), stepped engine\n",
                                std::filesystem::path(source_).filename().string(), session_->code_size(),
                                sim::machine_name(arch_), arch_.array_rows, arch_.array_cols);
  for (const auto& e : session_->first_events()) out += format_event(*session_, e);
  return out + "at cycle 0; `help` lists the commands\n";
}

std::string Debugger::execute(std::string_view line) {
  const Args args = split(line);
  if (args.empty() || args[0].starts_with("#")) return "";
  try {
    return dispatch(args);
  } catch (const CommandError& e) {
    return fmt::format("error: {}\n", e.what());
  } catch (const InputError& e) {
    return fmt::format("error: {}\n", e.what());
  }
}

std::string Debugger::dispatch(const Args& a) {
  const std::string& c = a[0];
  auto arg = [&](size_t i, uint64_t fallback, std::string_view what) {
    return a.size() > i ? need_number(a[i], what) : fallback;
  };
  auto at_most = [&](size_t n) {
    if (a.size() > n) throw CommandError(fmt::format("{}: unexpected '{}' (see `help {}`)", c, a[n], c));
  };
  if (c == "help" || c == "h") return help_text(a.size() > 1 ? a[1] : "");
  if (c == "step" || c == "s") {
    at_most(2);
    const uint64_t n = arg(1, 1, "step");
    if (n == 0) throw CommandError("step: the number of cycles must be at least 1");
    return advance(n > UINT64_MAX - session_->cycle() ? UINT64_MAX : session_->cycle() + n, 0);
  }
  if (c == "next" || c == "n") {
    at_most(2);
    const uint64_t n = arg(1, 1, "next");
    if (n == 0) throw CommandError("next: the number of instructions must be at least 1");
    return advance(UINT64_MAX, n);
  }
  if (c == "continue" || c == "c") {
    at_most(1);
    return advance(UINT64_MAX, 0);
  }
  if (c == "back") return cmd_back(a);
  if (c == "reverse-continue" || c == "rc") {
    at_most(1);
    return cmd_reverse_continue();
  }
  if (c == "break" || c == "b") return cmd_break(a);
  if (c == "watch") return cmd_watch(a);
  if (c == "delete" || c == "d") return cmd_delete(a);
  if (c == "info" || c == "i") return cmd_info(a);
  if (c == "print" || c == "p") return cmd_print(a, false);
  if (c == "print/x" || c == "p/x") return cmd_print(a, true);
  if (c == "array") {
    if (a.size() == 1) return view_array(*session_, 0, 0, std::max(arch_.array_rows, arch_.array_cols));
    if (a.size() != 4) throw CommandError("array: expected `array` or `array ROW COL SIZE`");
    const uint64_t r = need_number(a[1], "array"), col = need_number(a[2], "array"),
                   size = need_number(a[3], "array");
    if (r >= arch_.array_rows || col >= arch_.array_cols)
      throw CommandError(fmt::format("array: cell ({}, {}) is outside the {} x {} array", r, col,
                                     arch_.array_rows, arch_.array_cols));
    if (size == 0) throw CommandError("array: SIZE must be at least 1");
    return view_array(*session_, r, col, size);
  }
  if (c == "units" || c == "u") {
    at_most(1);
    return view_units(*session_);
  }
  if (c == "disasm" || c == "l") return cmd_disasm(a);
  if (c == "restart") {
    at_most(1);
    return cmd_restart();
  }
  if (c == "quit" || c == "q" || c == "exit") {
    at_most(1);
    quit_ = true;
    return "";
  }
  throw CommandError(
      fmt::format("unknown command '{}'{} (`help` lists the commands)", c, did_you_mean(c, command_names())));
}

std::string Debugger::advance(uint64_t until, uint64_t issues) {
  if (session_->over()) return end_of_run() + "the run is over; `restart` runs it again\n";
  for (const auto& [n, b] : breakpoints_)
    if (b.kind == Breakpoint::Kind::cycle && b.value > session_->cycle()) until = std::min(until, b.value);
  std::string hits;
  uint64_t issued = 0;
  // interrupt_requested is cleared by the front end before each command (tools/debug.cpp): a
  // Ctrl-C typed after Enter, before the run gets here, still stops it.
  auto stop = [&](const std::vector<sim::InstructionEvent>& events) {
    hits += check_stops(events);
    for (const sim::InstructionEvent& e : events) issued += e.kind == EventKind::issue;
    return !hits.empty() || (issues && issued >= issues) || interrupt_requested;
  };
  const std::vector<sim::InstructionEvent> events = session_->advance(until, stop);
  if (interrupt_requested && hits.empty() && !session_->over()) hits = "interrupted (Ctrl-C)\n";
  std::string out;
  for (size_t k = 0; k < events.size() && k < kMaxEventLines; ++k) out += format_event(*session_, events[k]);
  if (events.size() > kMaxEventLines)
    out += fmt::format("  ... and {} more events\n", events.size() - kMaxEventLines);
  out += hits;
  return out + (session_->over() ? end_of_run() : fmt::format("at cycle {}\n", session_->cycle()));
}

std::string Debugger::check_stops(const std::vector<sim::InstructionEvent>& events) {
  std::string hits;
  for (auto& [n, b] : breakpoints_) {
    if (b.kind == Breakpoint::Kind::cycle) {
      if (b.value == session_->cycle()) hits += fmt::format("breakpoint {}: {}\n", n, describe_breakpoint(b));
      continue;
    }
    if (b.kind == Breakpoint::Kind::watch) {
      std::vector<uint8_t> now = watched_bytes(b);
      if (now == b.seen) continue;
      hits += fmt::format("watchpoint {}: {} changed\n", n, describe_breakpoint(b)) + watch_change(b, b.seen);
      b.seen = std::move(now);
      continue;
    }
    for (const sim::InstructionEvent& e : events) {
      const isa::Opcode op = program_.code[e.index].opcode;
      if (b.kind == Breakpoint::Kind::layer) {
        if (e.kind == EventKind::start && std::find(b.tags.begin(), b.tags.end(), e.index) != b.tags.end())
          hits += fmt::format("breakpoint {}: layer {} begins: instruction {} {}\n", n, b.space, e.index,
                              isa::format_instruction(program_.code[e.index]));
        continue;
      }
      const bool match = e.kind == b.when &&
                         (b.kind == Breakpoint::Kind::instruction ? e.index == b.value
                          : b.kind == Breakpoint::Kind::opcode    ? uint64_t(op) == b.value
                                                                  : uint64_t(isa::spec(op).unit) == b.value);
      if (match)
        hits += fmt::format("breakpoint {}: instruction {} {}s: {}\n", n, e.index, sim::event_name(e.kind),
                            isa::format_instruction(program_.code[e.index]));
    }
  }
  return hits;
}

void Debugger::rewind(uint64_t cycle) {
  session_->rewind(cycle);
  for (auto& [n, b] : breakpoints_)
    if (b.kind == Breakpoint::Kind::watch) b.seen = watched_bytes(b);
}

// back [N]: N cycles back (default 1), by replaying the run from cycle 0 (sim/debugger.h).
std::string Debugger::cmd_back(const Args& a) {
  if (a.size() > 2) throw CommandError(fmt::format("back: unexpected '{}' (see `help back`)", a[2]));
  const uint64_t n = a.size() > 1 ? need_number(a[1], "back") : 1, now = session_->cycle();
  if (n == 0) throw CommandError("back: the number of cycles must be at least 1");
  if (n > now)
    throw CommandError(fmt::format("back: at cycle {}, there are only {} cycles to go back", now, now));
  rewind(now - n);
  return fmt::format("back to cycle {} (the run replayed from cycle 0)\nat cycle {}\n", now - n, now - n);
}

// reverse-continue: back to the latest earlier cycle at which a breakpoint or watchpoint stops.
// The run replays from cycle 0 to the cycle before this one, noting every stop, then replays to
// the last one noted.
std::string Debugger::cmd_reverse_continue() {
  const uint64_t now = session_->cycle();
  if (now == 0) throw CommandError("reverse-continue: already at cycle 0");
  rewind(0);
  uint64_t last = 0;
  std::string last_hits;
  auto note = [&](const std::vector<sim::InstructionEvent>& events) {
    std::string hits = check_stops(events);
    if (!hits.empty() && session_->cycle() < now) {
      last = session_->cycle();
      last_hits = std::move(hits);
    }
    return false;
  };
  session_->advance(now - 1, note);
  // Cycle breakpoints stop at their cycle even when nothing happens in it (advance() runs to it).
  for (const auto& [n, b] : breakpoints_)
    if (b.kind == Breakpoint::Kind::cycle && b.value < now && b.value > last) {
      last = b.value;
      last_hits = fmt::format("breakpoint {}: {}\n", n, describe_breakpoint(b));
    }
  rewind(last);
  if (last_hits.empty())
    return fmt::format("no breakpoint or watchpoint stops before cycle {}: back to the start\nat cycle 0\n",
                       now);
  return last_hits + fmt::format("at cycle {}\n", last);
}

std::string Debugger::end_of_run() const {
  if (const auto& e = session_->error())
    return fmt::format("the run failed at cycle {}: {}\n", session_->cycle(), *e);
  const sim::RunResult& r = *session_->result();
  std::string why;
  const bool same = sim::same_memories(*r.state, sim::run_reference(program_, arch_), &why);
  return fmt::format("the program halted at cycle {} ({} cycles); {}\n", session_->cycle(), r.cycles,
                     same ? "the memories match the reference executor"
                          : "the memories differ from the reference executor: " + why);
}

std::string Debugger::cmd_restart() {
  rewind(0);
  std::string out = "restarted\n";
  for (const auto& e : session_->first_events()) out += format_event(*session_, e);
  return out + "at cycle 0\n";
}

std::string Debugger::cmd_disasm(const Args& a) const {
  if (a.size() > 3) throw CommandError("disasm: expected `disasm [FIRST [COUNT]]`");
  const uint64_t n = session_->code_size();
  uint64_t first = session_->current() > 4 ? session_->current() - 4 : 0, count = 10;
  if (a.size() > 1) first = need_number(a[1], "disasm");
  if (a.size() > 2) count = need_number(a[2], "disasm");
  if (count == 0) throw CommandError("disasm: COUNT must be at least 1");
  if (first >= n)
    throw CommandError(
        fmt::format("disasm: instruction {} is past the program's end ({} instructions)", first, n));
  return view_disasm(*session_, first, std::min(count, n - first));
}

}  // namespace tpusim::tools
