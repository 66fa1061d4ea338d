// tpusim: the command-line front end. Exit codes: 0 success, 1 a simulation or check failed,
// 2 bad usage or bad input (the message names the file, line and what is wrong).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <systemc>

#include "compiler/model.h"
#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/generate.h"
#include "isa/text.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace fs = std::filesystem;
using namespace tpusim;
using tpusim::tools::write_text;

namespace tpusim::tools {

void write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  io::write_file(path, text);
}

}  // namespace tpusim::tools

namespace {

constexpr int kExitBadInput = 2;

int cmd_asm(const std::string& src, std::string out) {
  if (out.empty()) out = fs::path(src).replace_extension(".tpu").string();
  io::refuse_input_as_output(out, "-o", std::array{src});
  const isa::Program p = isa::assemble_file(src);
  isa::save_program(out, p);
  fmt::print(stderr, "{}: {} instructions, {} weight bytes, {} host regions -> {}\n", src, p.code.size(),
             p.weights.size(), p.host_regions.size(), out);
  return 0;
}

int cmd_disasm(const std::string& prog, const std::string& out, bool no_bytes) {
  io::refuse_input_as_output(out, "-o", std::array{prog});
  const isa::Program p = isa::load_program(prog);
  isa::DisasmOptions opt;
  opt.show_bytes = !no_bytes;
  if (!out.empty() && out != "-") opt.data_stem = fs::path(out).replace_extension();
  write_text(out, isa::disassemble(p, opt));
  return 0;
}

int cmd_isa(bool markdown, bool sv) {
  if (markdown) write_text("-", isa::isa_markdown());
  else if (sv) write_text("-", isa::isa_sv_package());
  else {
    for (const isa::OpcodeSpec& s : isa::kOpcodes) {
      std::string ops;
      for (const isa::Operand& o : s.operands) {
        const auto& f = isa::field_spec(o.field);
        const bool opt = o.default_value.has_value();
        ops += fmt::format(" {}{}{}", opt ? "[" : "",
                           f.kind == isa::FieldKind::flag ? std::string(f.name) : std::string(f.name) + "=",
                           opt ? "]" : "");
      }
      fmt::print("{:#04x} {:<8}{:<12}{}\n", static_cast<int>(s.opcode), s.mnemonic,
                 isa::kUnitNames[static_cast<int>(s.unit)], ops);
    }
    fmt::print("\nFull reference: docs/isa.md (or `tpusim isa --markdown`).\n");
  }
  return 0;
}

}  // namespace

// SystemC runs the program through sc_elab_and_sim(), which calls sc_main() (BUILD-NOTES.md);
// main() is ours so that the SystemC banner never reaches a user's terminal.
extern "C" int sc_main(int argc, char** argv) {
  CLI::App app{"tpusim: a cycle-accurate TPU-v1-style accelerator simulator and its tools"};
  app.failure_message(tools::failure_message);
  app.require_subcommand(1);
  app.set_version_flag("--version", "tpusim 0.1.0");

  std::string src, out, prog;
  bool no_bytes = false, markdown = false, sv = false;
  CLI::App* a = app.add_subcommand("asm", "Assemble a text program into a .tpu container");
  a->add_option("source", src, "assembly source (.s)")->required();
  a->add_option("-o,--output", out, "output .tpu (default: the source with .tpu)");
  CLI::App* d =
      app.add_subcommand("disasm", "Print a .tpu program as assembly that re-assembles to the same bytes");
  d->add_option("program", prog, "program (.tpu)")->required();
  d->add_option("-o,--output", out,
                "write the listing here, with the weight image and input data beside it as .bin files "
                "(default: stdout, data summarised)");
  d->add_flag("--no-bytes", no_bytes, "leave out the index and encoding comments");
  CLI::App* i = app.add_subcommand("isa", "Print the instruction set (summary, --markdown or --sv)");
  i->add_flag("--markdown", markdown, "docs/isa.md, generated from the ISA table");
  i->add_flag("--sv", sv, "the SystemVerilog package, generated from the ISA table");

  tools::RunArgs run;
  CLI::App* r = app.add_subcommand(
      "run", "Simulate a program on the configured machine and report cycles and counters");
  r->add_option("program", run.program,
                "program (.tpu), assembly source (.s), model description (.toml, compiled first), "
                "SCALE-Sim topology (.csv) or ONNX model (.onnx, docs/onnx.md)");
  r->add_option("--batch", run.batch, "models: override the description's batch size")
      ->check(tools::count_option(1, "a batch size"));
  r->add_option("--input", run.input,
                "models: the input samples (.npy, batch first; an ONNX model's own layout, e.g. [N, C, H, W]); "
                "the batch becomes their number");
  r->add_option("--labels", run.labels,
                "models: the class of each input sample (.npy of integers, [N]): report top-1 accuracy, float "
                "and int8 as simulated");
  r->add_option("--save-output", run.save_output,
                "models: write the output as simulated, dequantized (value x scale), to this float32 .npy, batch "
                "first in the model's layout (ONNX: [N, C], or [N, C, H, W] for a map)");
  r->add_flag("--layer-errors", run.layer_errors,
             "models: report each layer's quantization error (its int8 or 16-bit output against the float "
             "model's, on the calibration samples: max and rms error, SQNR), the report's "
             "layer_quantization_error and a table");
  r->add_flag("--int8-elements", run.int8_elements, "models: the earlier spelling of --precision int8");
  r->add_option("--calibrate", run.calibrate,
                "models: calibrate the int8 scales on these samples (.npy, as --input) instead of the inputs' first");
  r->add_option("--precision", run.precision,
                "models: auto (the default: 16-bit weights, LSTM h, gates and cell where int8 loses too much), "
                "int8 (every weight and tensor int8, the description's weight_bits and output_bits keys set aside; "
                "--int8-elements is its earlier spelling) or wide (every layer's weights 16-bit, weight_bits keys "
                "set aside); auto replaces only the description's [quantization] precision (docs/compiler.md)")
      ->check(tools::one_of_option({"auto", "int8", "wide"}));
  r->add_option("--output-bits", run.output_bits,
                "models: the model output's width, 8 or 16 (int16 with twice the calibrated range as headroom); "
                "default: the description's [quantization] output_bits, else 16 where the output layer reads a "
                "16-bit tensor (docs/compiler.md)")
      ->check(tools::one_of_option({"8", "16"}));
  r->add_option("--arch", run.arch_file,
                "architecture file (JSON, docs/arch.md); default: the program's .arch");
  r->add_option("--set", run.sets, "override one architecture parameter, KEY=VALUE (repeatable)");
  r->add_option("--mapper", run.mapper, tools::mapper_option_help());
  r->add_option("--engine", run.engine,
                "fast (default), stepped (every cell every cycle), timing (no data) or rtl (stepped, with the "
                "Verilated RTL array; docs/timing.md)");
  r->add_option("--report", run.report,
                "write the JSON report here (docs/report.md) instead of printing a table");
  r->add_option("--max-cycles", run.max_cycles,
                "stop with an error when the program runs longer (0: no limit)")
      ->check(tools::count_option(0, "cycles; 0: no limit"));
  r->add_flag("--no-check", run.no_check,
              "do not compare the results with the reference executor (and, for a model, the golden reference)");
  r->add_flag("--full-compile", run.full_compile,
              "models, timing engine: compile with data (seeded weights, calibration, the weight image) as for the "
              "other engines; the timing-only compile's reference in bench/timing_bench (same cycles, slower)");
  r->add_flag("--full-check", run.full_check,
              "models: compare every memory with the ISA reference executor even for paper-scale models (slow)");
  r->add_flag("--report-schema", run.report_schema, "print docs/report.md, the report's keys");
  r->add_option("--trace", run.trace,
                "write a Chrome trace-event JSON (open in ui.perfetto.dev or chrome://tracing; docs/traces.md)");
  r->add_option("--trace-window", run.trace_window,
                "trace and log only cycles START:END (either may be empty, e.g. 1000: or :5000)");
  r->add_option("--trace-filter", run.trace_filter,
                "trace and log only these instructions: mnemonics and layer=NAME, comma-separated (e.g. matmul,act)");
  r->add_option("--vcd", run.vcd, "write VCD waveforms (open in GTKWave; docs/traces.md)");
  r->add_option("--vcd-scope", run.vcd_scope,
                "VCD signals: units, array, cells=R0-R1xC0-C1, comma-separated (default: units, and every cell "
                "of a stepped array of at most 256 cells)");
  r->add_option("--log", run.log, "write the plain-text event log (cycle, unit, event) here, - for stdout");
  r->add_option("--trace-max-bytes", run.trace_max_bytes,
                "refuse to write a trace, VCD or log file larger than this (default 1 GiB; 0: no limit)")
      ->transform(tools::count_option(0, "bytes; 0: no limit", true));
  r->add_option(
       "--max-memory", run.max_memory,
       "refuse a run whose memories (UB, accumulators, weights, host buffers) need more bytes than this "
       "(default: 3/4 of the memory this process may use)")
      ->transform(tools::count_option(1, "bytes", true));
  r->add_option("--threads", run.threads,
                "threads for the compiler's reference runs, the golden check and the fast engine (default: the "
                "CPUs this process may use; results are the same on any number)")
      ->check(tools::count_option(1, "threads"));
  tools::CompileArgs comp;
  CLI::App* c = app.add_subcommand("compile", "Compile a model description into a program (.tpu)");
  c->add_option("model", comp.model,
                "model description (.toml, docs/model-format.md), SCALE-Sim topology (.csv) or ONNX model (.onnx)")
      ->required();
  c->add_option("--input", comp.input, "the input samples the program carries (.npy, as for run)");
  c->add_option("--calibrate", comp.calibrate, "calibrate the int8 scales on these samples (.npy, as for run)");
  c->add_flag("--int8-elements", comp.int8_elements, "the earlier spelling of --precision int8");
  c->add_option("--precision", comp.precision, "auto, int8 or wide (as for run)")
      ->check(tools::one_of_option({"auto", "int8", "wide"}));
  c->add_option("--output-bits", comp.output_bits, "the model output's width, 8 or 16 (as for run)")
      ->check(tools::one_of_option({"8", "16"}));
  c->add_option("-o,--output", comp.output, "output .tpu (default: the model with .tpu)");
  c->add_option("--arch", comp.arch_file, "architecture file (JSON, docs/arch.md); default: tpu-v1");
  c->add_option("--set", comp.sets, "override one architecture parameter, KEY=VALUE (repeatable)");
  c->add_option("--mapper", comp.mapper, tools::mapper_option_help());
  c->add_option("--batch", comp.batch, "override the description's batch size")
      ->check(tools::count_option(1, "a batch size"));
  c->add_option("--max-memory", comp.max_memory,
                "refuse a compile whose estimated memory (docs/limits.md) needs more bytes than this (default: 3/4 "
                "of the memory this process may use)")
      ->transform(tools::count_option(1, "bytes", true));
  bool arch_json = false;
  CLI::App* ar = app.add_subcommand(
      "arch", "List the architecture parameters (--markdown: docs/arch.md, --json: tpu-v1)");
  ar->add_flag("--markdown", markdown, "docs/arch.md, generated from the parameter table");
  ar->add_flag("--json", arch_json, "the tpu-v1 parameters as an --arch file");
  tools::CompareArgs cmp;
  CLI::App* cm = app.add_subcommand(
      "compare", "The simulated TPU beside measured and published figures of real machines (docs/gpu.md)");
  cm->add_option("reference", cmp.gpu_files,
                 "reference data: JSON files or folders of them (workloads/gpu-reference/README.md); default: "
                 "workloads/gpu-reference");
  cm->add_option("--arch", cmp.arch_file, "architecture file (JSON, docs/arch.md); default: tpu-v1");
  cm->add_option("--set", cmp.sets, "override one architecture parameter, KEY=VALUE (repeatable)");
  cm->add_option("--tpu-report", cmp.tpu_reports, "use these `tpusim run --report` files instead of simulating");
  cm->add_option("--models-root", cmp.models_root, "directory the reference data's model paths are relative to (default: .)");
  cm->add_option("--timing", cmp.timing, "GPU runner figures to use: end_to_end (default) or device")
      ->check(tools::one_of_option({"end_to_end", "device"}));
  cm->add_option("--l2", cmp.l2, "GPU runner figures to use: warm (default) or flushed")->check(tools::one_of_option({"warm", "flushed"}));
  cm->add_option("--graph", cmp.graph, "GPU runner figures to use: any (the faster, default), yes or no (CUDA graphs)")
      ->check(tools::one_of_option({"any", "yes", "no"}));
  cm->add_option("--model", cmp.models, "also simulate this description at its own batch (repeatable)");
  cm->add_flag("--int8", cmp.int8,
               "simulate the variant tpusim-cpu and tpusim-gpu run: every weight and tensor int8 (default: each "
               "description's own precision; the LSTMs' gates and cells are 16-bit)");
  cm->add_option("--latency-limit", cmp.latency_limit_ms,
                 "also find each workload's largest simulated batch whose latency is within this many ms")
      ->check(tools::positive_option("milliseconds"));
  cm->add_option("--max-batch", cmp.max_batch, "the largest batch --latency-limit tries (default 4096)")
      ->check(tools::count_option(1, "a batch size", false, tpusim::compiler::kMaxBatch));
  cm->add_option("--csv", cmp.csv_out, "write the table here as CSV");
  cm->add_option("--json", cmp.json_out, "write the table here as JSON");
  cm->add_option("--plot", cmp.plot_prefix, "write PREFIX.png and PREFIX.svg (scripts/plot_compare.py) and PREFIX.json");
  cm->add_option("--plot-script", cmp.plot_script, "the plotting script (default: the source tree's)");
  cm->add_option("--python", cmp.python, "Python with matplotlib (default: /usr/bin/python3, else python3)");
  tools::ValidateArgs val;
  CLI::App* va = app.add_subcommand(
      "validate", "The six TPU paper workloads simulated beside the paper's hardware counters (docs/validation.md)");
  va->add_option("--workloads", val.workloads, "directory of mlp0.toml ... cnn1.toml (default: workloads/tpu-v1)");
  va->add_option("--app", val.apps, "only this app (repeatable): mlp0, mlp1, lstm0, lstm1, cnn0 or cnn1");
  va->add_option("--arch", val.arch_file, "architecture file (JSON, docs/arch.md); default: tpu-v1");
  va->add_option("--set", val.sets, "override one architecture parameter, KEY=VALUE (repeatable)");
  va->add_option("--mapper", val.mapper, tools::mapper_option_help());
  va->add_flag("--markdown", val.markdown, "print the table as markdown (docs/validation.md, the README)");
  va->add_option("--json", val.json_out, "write the comparison here as JSON (- for standard output)");
  va->add_option("--csv", val.csv_out, "write the comparison here as CSV, one row per app (- for standard output)");
  va->add_flag("-q,--quiet", val.quiet, "no progress lines on standard error");
  va->add_flag("--bounds", val.bounds,
               "no simulation: the active share and useful fraction Table 1 allows each weight-bound app on "
               "this machine, beside the paper's (docs/validation.md, \"What Table 1 allows\")");
  const auto limit = [&](const char* name, double& v, const char* what) {
    va->add_option(name, v, what)->check(tools::positive_option());
  };
  limit("--max-tops-error", val.max_tops_error, "exit 1 when an app's TOPS error exceeds this many percent");
  limit("--max-mean-tops-error", val.max_mean_tops_error, "exit 1 when the mean TOPS error exceeds this many percent");
  limit("--max-share-error", val.max_share_error,
        "exit 1 when an active, weight stall, weight shift or non-matrix share is off by more points");
  limit("--max-counter-error", val.max_counter_error,
        "exit 1 when an unused-MACs, RAW-stall or input-stall share is off by more points");
  tools::SweepCommand sweep(app);  // sweep, sweep merge (tools/sweep/command.cpp)
  tools::DebugArgs dbg;
  CLI::App* db = app.add_subcommand("debug", "Step through a run cycle by cycle on the stepped engine (docs/debugger.md)");
  db->add_option(
      "program", dbg.program,
      "program (.tpu), assembly source (.s), or a model, compiled first: description (.toml), SCALE-Sim "
      "topology (.csv) or ONNX model (.onnx)");
  db->add_option("--script", dbg.script, "run the commands in this file (- for standard input) instead of a terminal");
  db->add_option("--batch", dbg.batch, "models: override the description's batch size")
      ->check(tools::count_option(1, "a batch size"));
  db->add_option("--arch", dbg.arch_file, "architecture file (JSON, docs/arch.md); default: the program's .arch");
  db->add_option("--set", dbg.sets, "override one architecture parameter, KEY=VALUE (repeatable)");
  db->add_option("--trace", dbg.trace,
                 "when the session ends, write the run's Chrome trace (the run goes on to its halt first)");
  db->add_option("--vcd", dbg.vcd, "when the session ends, write the run's VCD waveforms (as --trace)");
  db->add_option("--vcd-scope", dbg.vcd_scope, "VCD signals, as for tpusim run");
  tools::ViewArgs view;
  CLI::App* vw = app.add_subcommand(
      "view", "Write one self-contained HTML page that shows a stepped run cycle by cycle (docs/view.md)");
  vw->add_option(
      "program", view.program,
      "program (.tpu), assembly source (.s), or a model, compiled first: description (.toml), SCALE-Sim "
      "topology (.csv) or ONNX model (.onnx)");
  vw->add_option("-o,--output", view.output, "the HTML file to write")->required();
  vw->add_option("--window", view.window,
                 "cycles START:END the page holds (default: from a little before the first matmul, as many "
                 "cycles as keep the page small)");
  vw->add_option("--batch", view.batch, "models: override the description's batch size")
      ->check(tools::count_option(1, "a batch size"));
  vw->add_option("--arch", view.arch_file, "architecture file (JSON, docs/arch.md); default: the program's .arch");
  vw->add_option("--set", view.sets, "override one architecture parameter, KEY=VALUE (repeatable)");

  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += " " + sub->get_name();
    known |= argc > 1 && sub->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    fmt::print(stderr, "tpusim: unknown subcommand '{}' (one of:{}); see tpusim --help\n", argv[1], names);
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    if (*a) return cmd_asm(src, out);
    if (*d) return cmd_disasm(prog, out, no_bytes);
    if (*i) return cmd_isa(markdown, sv);
    if (*r) return tools::cmd_run(run);
    if (*c) return tools::cmd_compile(comp);
    if (*ar) return tools::cmd_arch(markdown, arch_json);
    if (*cm) return tools::cmd_compare(cmp);
    if (*va) return tools::cmd_validate(val);
    if (sweep.chosen()) return sweep.run();
    if (*db) return tools::cmd_debug(dbg);
    if (*vw) return tools::cmd_view(view);
  } catch (const InputError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "tpusim: out of memory: the inputs need more memory than this process can have (see "
               "docs/limits.md; `run --max-memory` checks a run's estimate before allocating)\n");
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tpusim: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
