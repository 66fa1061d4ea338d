// tpusim debug: the stepping debugger's front end (docs/debugger.md). Reads commands from a
// terminal (GNU readline: line editing and history), a script (--script FILE, or - for standard
// input) or standard input when it is not a terminal, and runs them through a Debugger.
#include "tools/debug.h"

#include <fmt/format.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "isa/error.h"
#include "sim/machine.h"
#include "tools/commands.h"
#include "tools/program_to_run.h"
#include "tools/run_traces.h"

namespace tpusim::tools {

namespace {

constexpr char kPrompt[] = "(tpusim) ";

struct HelpEntry {
  std::string_view name, usage, text, short_form;
};

constexpr HelpEntry kHelp[] = {
    {"step", "step [N]", "run N cycles (default 1); stops early at a breakpoint or watchpoint", "s"},
    {"next", "next [N]",
     "run until the control unit has issued N more instructions (default 1): issue is in program order, so "
     "`next` walks the program one instruction at a time",
     "n"},
    {"continue", "continue", "run until a breakpoint, a watchpoint or the end of the run", "c"},
    {"back", "back [N]",
     "go back N cycles (default 1): the run replays from cycle 0, so every view is exactly what it was", ""},
    {"reverse-continue", "reverse-continue",
     "go back to the latest earlier cycle at which a breakpoint or watchpoint stops (cycle 0 if none)", "rc"},
    {"break",
     "break INDEX|LABEL [issue|start|end] | break cycle N | break OPCODE [issue|start|end] | "
     "break unit UNIT [issue|start|end] | break layer NAME",
     "stop when an instruction (by index or code label), any instruction with that opcode (matmul, act, rhm, "
     "...) or any instruction of a unit (control, host, weights, matrix, act) issues, starts (the default) "
     "or ends; at a cycle; or when a layer begins (its tag instruction starts)",
     "b"},
    {"watch", "watch ub ROW [COUNT] | watch acc ROW [COUNT] | watch host REGION",
     "stop when a memory range changes (ROW: a number or a ub/acc symbol of the program)", ""},
    {"delete", "delete [NUM...]", "delete breakpoints and watchpoints (all of them without NUM)", "d"},
    {"info", "info breakpoints", "list breakpoints and watchpoints", "i"},
    {"print",
     "print[/x] ub ROW [COUNT] | acc ROW [COUNT] | host REGION [OFFSET [BYTES]] | fifo | cell ROW COL | "
     "weights [shadow] [ROW COL [SIZE]] | tile N|active|shadow [ROW COL [SIZE]]",
     "show unified-buffer rows (int8), accumulator rows (int32), host memory (int8), the weight FIFO with "
     "the shadow and active tiles, one cell's registers, the cells' active (or shadow) weights, or a "
     "weight tile from weight memory (a window of SIZE x SIZE weights, default 16, from ROW COL); /x: "
     "memory (ub, acc, host) in hexadecimal",
     "p"},
    {"array", "array [ROW COL SIZE]",
     "the array's wavefront: which cells hold live data this cycle; ROW COL SIZE zooms to SIZE x SIZE cells "
     "(at most 8 x 8 also shows each cell's input and partial sum)",
     ""},
    {"units", "units", "what each unit is doing, what it has queued and why it waits", "u"},
    {"disasm", "disasm [FIRST [COUNT]]",
     "the program with each instruction's state and cycles (default: around the last one issued, marked =>)",
     "l"},
    {"restart", "restart", "run the program again from cycle 0 (breakpoints and watchpoints stay)", ""},
    {"quit", "quit", "leave the debugger (also: exit, end of input)", "q"},
    {"help", "help [COMMAND]", "the list of commands, or one command's details", "h"},
};

// Runs `lines` (a script): each command is echoed after the prompt, then its output.
int run_script(Debugger& d, std::istream& in) {
  for (std::string line; !d.quit() && std::getline(in, line);) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.back() == '\r') line.pop_back();
    std::string out = kPrompt + line.substr(first) + "\n" + d.execute(line);
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

void on_interrupt(int) { Debugger::interrupt_requested = 1; }

// Ctrl-C while readline waits for a line: drop the line and prompt again (readline calls this
// when a signal interrupts its read).
int on_signal_event() {
  if (!Debugger::interrupt_requested) return 0;
  Debugger::interrupt_requested = 0;
  rl_replace_line("", 0);
  rl_crlf();
  rl_on_new_line();
  rl_redisplay();
  return 0;
}

// The terminal: readline with history; an empty line repeats the last command (as in gdb).
// Ctrl-C stops a running step, next or continue (Debugger::interrupt_requested) instead of
// ending the session.
int run_terminal(Debugger& d) {
  struct sigaction interrupt = {};
  struct sigaction before = {};
  interrupt.sa_handler = on_interrupt;
  sigemptyset(&interrupt.sa_mask);
  interrupt.sa_flags = SA_RESTART;  // output and the simulation carry on; readline has its own handler
  sigaction(SIGINT, &interrupt, &before);
  rl_signal_event_hook = on_signal_event;
  std::string last;
  while (!d.quit()) {
    std::fflush(stdout);
    char* raw = readline(kPrompt);
    if (!raw) {  // end of input (Ctrl-D)
      std::fputs("\n", stdout);
      break;
    }
    std::string line = raw;
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos) {
      line = last;
    } else {
      add_history(line.c_str());
      last = line;
    }
    // A Ctrl-C from here on is this command's (one at the prompt was the line's: on_signal_event).
    Debugger::interrupt_requested = 0;
    const std::string out = d.execute(line);
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  rl_signal_event_hook = nullptr;
  sigaction(SIGINT, &before, nullptr);
  return 0;
}

}  // namespace

std::vector<std::string> command_names() {
  std::vector<std::string> names = {"print/x", "exit"};
  for (const HelpEntry& h : kHelp) {
    names.emplace_back(h.name);
    if (!h.short_form.empty()) names.emplace_back(h.short_form);
  }
  return names;
}

std::string help_text(std::string_view command) {
  if (command.empty()) {
    std::string out = "commands (`help COMMAND` for details):\n";
    for (const HelpEntry& h : kHelp) out += fmt::format("  {:<16} {}\n", h.name, h.text);
    return out + "an empty line repeats the last command; docs/debugger.md has an example session\n";
  }
  for (const HelpEntry& h : kHelp)
    if (h.name == command || h.short_form == command)
      return fmt::format("{}\n  {}\n", h.usage, h.text) +
             (h.short_form.empty() ? "" : fmt::format("  short form: {}\n", h.short_form));
  throw CommandError(fmt::format("help: no command '{}'{} (`help` lists them)", command,
                                 did_you_mean(command, command_names())));
}

int cmd_debug(const DebugArgs& a) {
  if (a.program.empty()) throw InputError("debug: a program is required (see tpusim debug --help)");
  // The traces are written when the session ends: never over the program, architecture or script.
  refuse_outputs_over_inputs({{"--trace", &a.trace}, {"--vcd", &a.vcd}}, {a.program, a.arch_file, a.script});
  const ProgramToRun to_run = load_program_or_model("debug", a.program, a.arch_file, a.sets, a.batch);
  std::ifstream script_file;
  if (!a.script.empty() && a.script != "-") {
    // A directory opens as a stream that reads nothing: say so rather than run an empty session.
    std::error_code ec;
    if (std::filesystem::is_directory(a.script, ec))
      throw InputError(fmt::format("{}: cannot read the debugger script: it is a directory", a.script));
    script_file.open(a.script);
    if (!script_file)
      throw InputError(
          fmt::format("{}: cannot read the debugger script: {}", a.script, std::strerror(errno)));
  }
  RunArgs trace_args;
  trace_args.trace = a.trace;
  trace_args.vcd = a.vcd;
  trace_args.vcd_scope = a.vcd_scope;
  const isa::Program& p = to_run.program();
  const std::unique_ptr<TracePlan> traces =
      plan_traces(trace_args, p, to_run.arch, sim::Engine::stepped, "debug");
  std::optional<Debugger> d;
  try {
    d.emplace(p, to_run.arch, a.program, traces ? &traces->recorder : nullptr);
  } catch (const sim::SimError& e) {
    throw InputError(fmt::format("{}: {}", a.program, e.what()));
  }
  const std::string banner = d->banner();
  std::fwrite(banner.data(), 1, banner.size(), stdout);
  if (script_file.is_open()) run_script(*d, script_file);
  else if (a.script == "-" || !isatty(STDIN_FILENO)) run_script(*d, std::cin);
  else run_terminal(*d);
  if (!traces) return 0;
  // The traces show the whole run: it goes on from where the session left it to its halt.
  sim::DebugSession& s = d->session();
  // Say so: on a large model the rest of the run takes a while, and nothing else is printed.
  if (!s.over())
    fmt::print(stderr,
               "{}: the session ended at cycle {}; the run goes on to its halt for {} (Ctrl-C abandons {})\n",
               a.program, s.cycle(),
               a.trace.empty() ? "--vcd"
               : a.vcd.empty() ? "--trace"
                               : "--trace and --vcd",
               a.trace.empty() || a.vcd.empty() ? "it" : "them");
  std::fflush(stderr);
  s.finish_run();
  if (!s.result()) {
    fmt::print(stderr, "{}: no trace written: the run failed at cycle {}: {}\n", a.program, s.cycle(),
               s.error().value_or("it did not halt"));
    return 0;
  }
  write_traces(trace_args, *traces,
               {&p, &to_run.arch, sim::Engine::stepped, &*s.result(), &traces->recorder,
                p.model.empty() ? a.program : p.model});
  return 0;
}

}  // namespace tpusim::tools
