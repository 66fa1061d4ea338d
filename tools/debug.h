// tpusim debug: the stepping debugger's commands (docs/debugger.md). A Debugger holds a
// sim::DebugSession and runs one command line at a time, returning the text it prints, so the
// same code serves the terminal (readline), scripts (--script) and tests.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/debugger.h"

namespace tpusim::tools {

// A command the user got wrong: the session prints the message and goes on.
struct CommandError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
std::optional<uint64_t> parse_number(std::string_view s);           // decimal or 0x hex
uint64_t need_number(const std::string& s, std::string_view what);  // or CommandError
// " (did you mean X?)" when one of `candidates` is a near miss of a mistyped `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
std::vector<std::string> command_names();  // every command and short form (debug.cpp)

// A breakpoint or watchpoint (they share one numbering, as in gdb).
struct Breakpoint {
  enum class Kind { instruction, opcode, unit, cycle, watch, layer } kind = Kind::instruction;
  uint64_t value = 0;                           // instruction index, opcode, unit or cycle
  sim::EventKind when = sim::EventKind::start;  // instruction, opcode and unit breakpoints
  // Watchpoints: the memory ("ub", "acc" or "host"), its first row (host: byte address), its
  // rows (host: bytes), and the contents last seen.
  std::string space;
  uint64_t first = 0, count = 0;
  std::vector<uint8_t> seen;
  // Layer breakpoints: the layer's name (in `space`) and its `tag` instructions.
  std::vector<uint64_t> tags;
};

class Debugger {
 public:
  // `source`: the program's name in messages. Begins the session (throws as simulate() does).
  // `trace`: a recorder for the session's run (debug --trace, --vcd), or null.
  Debugger(const isa::Program& program, const sim::Arch& arch, std::string source,
           sim::TraceRecorder* trace = nullptr);
  ~Debugger();
  std::string banner() const;  // what the session says when it opens
  // Runs one command line and returns its output (errors included: the session goes on).
  std::string execute(std::string_view line);
  bool quit() const { return quit_; }
  sim::DebugSession& session() { return *session_; }
  // Set by the terminal's SIGINT handler (Ctrl-C): step, next and continue stop at the cycle they
  // have reached, as gdb's do. Cleared by the terminal front end before each command
  // (tools/debug.cpp), not when the motion begins: a Ctrl-C just after Enter is not lost.
  static volatile std::sig_atomic_t interrupt_requested;

 private:
  using Args = std::vector<std::string>;
  std::string dispatch(const Args& args);
  // Motion: advance to `until` or the next stop; `issues`: stop after this many issue events.
  std::string advance(uint64_t until, uint64_t issues);
  // What the breakpoints and watchpoints say of the cycle just reached (empty: none stops).
  std::string check_stops(const std::vector<sim::InstructionEvent>& events);
  std::string cmd_back(const Args& args);
  std::string cmd_reverse_continue();
  void rewind(uint64_t cycle);  // the session back to `cycle`, watchpoints reset to it
  std::string cmd_break(const Args& args);
  std::string cmd_watch(const Args& args);
  std::string cmd_delete(const Args& args);
  std::string cmd_info(const Args& args) const;
  std::string cmd_print(const Args& args, bool hex) const;
  std::string print_weights(const Args& args) const;
  std::string cmd_disasm(const Args& args) const;
  std::string cmd_restart();
  std::string describe_breakpoint(const Breakpoint& b) const;
  std::string end_of_run() const;
  std::vector<uint8_t> watched_bytes(const Breakpoint& b) const;
  std::string watch_change(const Breakpoint& b, const std::vector<uint8_t>& before) const;

  const isa::Program& program_;
  sim::Arch arch_;
  std::string source_;
  sim::TraceRecorder* trace_ = nullptr;
  std::unique_ptr<sim::DebugSession> session_;
  std::map<int, Breakpoint> breakpoints_;
  int next_breakpoint_ = 1;
  bool quit_ = false;
};

// Views of the machine (tools/debug_views.cpp), each the text of one command.
std::string format_event(const sim::DebugSession& s, const sim::InstructionEvent& e);
std::string view_memory(const sim::DebugSession& s, const std::string& space, uint64_t first, uint64_t count,
                        bool hex);
std::string view_host(const sim::DebugSession& s, const std::string& region, uint64_t offset, uint64_t bytes,
                      bool hex);
std::string view_fifo(const sim::DebugSession& s);
std::string view_cell(const sim::DebugSession& s, uint64_t row, uint64_t col);
// The wavefront in rows [row, row + size) x columns [col, col + size), clipped to the array.
std::string view_array(const sim::DebugSession& s, uint64_t row, uint64_t col, uint64_t size);
// Weights as int8 (or uint8) in rows [row, row + size) x columns [col, col + size) of a tile:
// `at(k, j)` gives each one. `title` heads the table.
std::string view_weights(const std::string& title, uint64_t row, uint64_t col, uint64_t size, uint64_t rows,
                         uint64_t cols, const std::function<int32_t(uint64_t, uint64_t)>& at);
std::string view_units(const sim::DebugSession& s);
std::string view_disasm(const sim::DebugSession& s, uint64_t first, uint64_t count);
std::string help_text(std::string_view command);

}  // namespace tpusim::tools
