// tpusim run and tpusim arch: simulate a program, list the architecture parameters.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

#include "compiler/compile.h"
#include "compiler/compile_memory.h"
#include "compiler/model.h"
#include "compiler/npy.h"
#include "isa/assembler.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "sim/parallel.h"
#include "sim/program_check.h"
#include "sim/reference.h"
#include "sim/report.h"
#include "sim/systolic_array.h"
#include "sim/trace.h"
#include "tools/commands.h"
#include "tools/machine_check.h"
#include "tools/freed_memory.h"
#include "tools/program_to_run.h"
#include "tools/run_progress.h"
#include "tools/run_traces.h"
#include "tools/rtl_engine.h"

namespace fs = std::filesystem;

namespace tpusim::tools {

namespace {
constexpr double kReferenceMacLimit = 2e9;  // see cmd_run
}  // namespace

// (load_any, resolve_arch, load_options: shared with tools/debug.cpp through commands.h)
// A .tpu container, or assembly source (.s) assembled on the fly.
isa::Program load_any(const std::string& path) {
  if (fs::path(path).extension() == ".s") return isa::assemble_file(path);
  if (fs::path(path).extension() != ".tpu")
    throw InputError(fmt::format(
        "{}: expected a program (.tpu), assembly source (.s), a model description (.toml), a SCALE-Sim "
        "topology (.csv) or an ONNX model (.onnx)",
        path));
  return isa::load_program(path);
}

// --arch FILE, else the architecture the program names (`.arch "NAME", key=value...`; a model:
// tpu-v1); then --set.
sim::Arch resolve_arch(const isa::Program* program, const std::string& arch_file,
                       const std::vector<std::string>& sets, const std::string& source) {
  sim::Arch arch;
  std::string described;  // where the machine before the sets was described: the --arch file, the program's .arch
  if (!arch_file.empty()) {
    arch = sim::load_arch_file(arch_file);
    described = arch_file;
  } else if (program) {
    arch = program_machine(program->arch, source);
    if (program->arch.size() >= 2) described = source + ": .arch";  // (it set parameters)
  }
  const sim::Arch before_sets = arch;
  for (const std::string& s : sets) sim::apply_set(arch, s);
  try {
    validate_machine(arch, sets);
  } catch (const InputError& e) {
    if (described.empty()) throw;
    if (sets.empty()) {
      if (!program || !arch_file.empty()) throw;  // (sim::validate's message names the --arch file's machine)
      throw InputError(fmt::format("{}: {}", described, e.what()));
    }
    // A rule the machine broke before the sets, about a key no --set gave: the file that described it
    // broke it, not --set (which validate_machine's message blames).
    const auto after = sim::arch_violation(arch), before = sim::arch_violation(before_sets);
    const bool set_gave_key = after && std::any_of(sets.begin(), sets.end(), [&](const std::string& s) {
                                return s.substr(0, s.find('=')) == after->key;
                              });
    if (!after || !before || before->key != after->key || set_gave_key) throw;
    throw InputError(fmt::format("{}: {} (with {})", described, after->text,
                                 fmt::format("--set {}", fmt::join(sets, " --set "))));
  }
  if (program)
    for (const std::string& why :
         {sim::program_arch_mismatch(program->arch, arch), sim::program_driver_mismatch(*program, arch)})
      if (!why.empty()) throw InputError(fmt::format("{}: {}", source, why));
  return arch;
}

std::string mapper_option_help() {
  std::string h = "models: turn a mapping technique off (or on), KEY=off|on (repeatable):";
  for (const compiler::MapperSwitch& m : compiler::kMapperSwitches) h += fmt::format(" {}: {};", m.key, m.doc);
  h.back() = '.';
  return h;
}

compiler::LoadOptions load_options(uint64_t batch, const std::string& input, const std::string& calibrate,
                                   const std::vector<std::string>& mapper, const std::string& precision) {
  compiler::LoadOptions o;
  if (batch) o.batch = batch;
  if (!input.empty()) o.input_file = input;
  if (!calibrate.empty()) o.calibration_file = calibrate;
  for (const std::string& m : mapper) compiler::set_mapper_switch(o.mapper, m, "--mapper");
  if (!precision.empty()) o.precision = compiler::precision_named(precision);  // CLI11 checked the name
  return o;
}

ProgramToRun load_program_or_model(std::string_view verb, const std::string& path, const std::string& arch_file,
                                   const std::vector<std::string>& sets, uint64_t batch) {
  return load_program_or_model(verb, path, arch_file, sets, load_options(batch));
}

ProgramToRun load_program_or_model(std::string_view verb, const std::string& path, const std::string& arch_file,
                                   const std::vector<std::string>& sets, const compiler::LoadOptions& options) {
  ProgramToRun r;
  load_program_or_model(r, verb, path, arch_file, sets, options, {});
  return r;
}

void load_program_or_model(ProgramToRun& r, std::string_view verb, const std::string& path,
                           const std::string& arch_file, const std::vector<std::string>& sets,
                           const compiler::LoadOptions& options,
                           const std::function<void(const compiler::Compiled&)>& quantized) {
  const bool is_model = compiler::is_model_path(path);
  const bool mapper = options.mapper != compiler::LowerOptions{};
  const char* model_flag = options.batch              ? "--batch"
                           : options.input_file       ? "--input"
                           : mapper                   ? "--mapper"
                           : options.calibration_file ? "--calibrate"
                           : options.precision        ? "--precision"
                                                      : "--output-bits";
  if ((options.batch || options.input_file || options.calibration_file || mapper ||
       options.precision || options.output_bits) &&
      !is_model)
    throw InputError(fmt::format("{}: {} applies to models (.toml, .csv, .onnx), not to programs", verb, model_flag));
  if (is_model) {
    r.arch = resolve_arch(nullptr, arch_file, sets, path);
    compiler::LoadOptions o = options;
    std::atomic<const char*> phase{nullptr};
    o.phase = &phase;
    CompileProgressLine line(fmt::format("{} {}: compiling", verb, fs::path(path).filename().string()),
                             phase);
    compiler::compile_file_into(r.compiled.emplace(), path, r.arch, o, quantized);
  } else {
    r.loaded = load_any(path);
    r.arch = resolve_arch(&r.loaded, arch_file, sets, path);
  }
}

// `inputs`: the files given on the command line; a model among them adds the .npy files its
// description names (compiler::model_files: `--report wide_mlp/fc1.npy` replaced its weights).
void refuse_outputs_over_inputs(std::initializer_list<std::pair<std::string_view, const std::string*>> outputs,
                                const std::vector<std::string>& inputs) {
  std::vector<std::string> in;
  for (const std::string& f : inputs)
    if (compiler::is_model_path(f)) compiler::append_model_files(in, {f});
    else in.push_back(f);
  for (const auto& [flag, path] : outputs) io::refuse_input_as_output(*path, flag, in);
}

void try_output(const std::string& path) {
  if (path.empty() || path == "-") return;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st)) return;
  io::OutputFile probe(path);
}

namespace {

// --labels: a .npy of integer classes, one per sample ([N]).
std::vector<int64_t> read_labels(const std::string& path) {
  const compiler::NpyArray a = compiler::read_npy(path);
  if (a.shape.size() != 1) throw InputError(fmt::format("{}: expected one class per sample, shape [N]", path));
  std::vector<int64_t> out;
  for (float v : a.to_float()) {
    if (!(v >= 0 && v < 65536 && v == std::floor(v)))
      throw InputError(fmt::format("{}: label {} is not a class number (an integer 0..65535)", path, v));
    out.push_back(int64_t(v));
  }
  return out;
}

void print_compile_summary(const compiler::Compiled& c, const std::string& source, const sim::Arch& arch) {
  const isa::Program& p = c.program;
  fmt::print(stderr, "{}: {} layers, batch {}, {} instructions, {} weight tiles ({:.1f} MB) for {} ({}x{}); "
             "parse {:.2f} s, quantize {:.2f} s, lower {:.2f} s\n",
             source, c.model.layers.size(), c.graph.batch, p.code.size(), p.meta.value("weight_tiles", uint64_t{0}),
             p.weight_bytes() / 1e6, sim::machine_name(arch), arch.array_rows, arch.array_cols,
             c.parse_seconds, c.quantize_seconds, c.lower_seconds);
  if (const auto m = p.meta.find("mapper"); m != p.meta.end() && !m->empty())
    fmt::print(stderr, "mapper: {} (docs/compiler.md \"Mapper switches\")\n",
               compiler::describe(compiler::mapper_from_json(*m, "meta.mapper")));
}

}  // namespace

namespace {
// Standard output ("-") carries one file: a trace and the report (or two traces) would mix into it.
void refuse_two_on_stdout(const RunArgs& r) {
  if ((r.trace == "-") + (r.vcd == "-") + (r.log == "-") + (r.report == "-") > 1)
    throw InputError("run: only one of --trace, --vcd, --log and --report can go to standard output (-)");
}
}  // namespace

namespace {
// The trace options that need no program: each goes with its file, and the window's form.
void check_trace_options(const RunArgs& r, std::string_view command) {
  if (r.vcd.empty() && !r.vcd_scope.empty())
    throw InputError(fmt::format("{}: --vcd-scope goes with --vcd", command));
  if (r.trace.empty() && r.vcd.empty() && r.log.empty() && (!r.trace_window.empty() || !r.trace_filter.empty()))
    throw InputError(
        fmt::format("{}: --trace-window and --trace-filter go with --trace, --vcd or --log", command));
  sim::TraceSelection scratch;
  if (!r.trace_window.empty()) sim::parse_trace_window(r.trace_window, scratch);
}
}  // namespace

std::unique_ptr<TracePlan> plan_traces(const RunArgs& r, const isa::Program& p, const sim::Arch& arch,
                                       sim::Engine engine, std::string_view command) {
  check_trace_options(r, command);
  if (r.trace.empty() && r.vcd.empty() && r.log.empty()) return nullptr;
  // Standard output ("-") takes one trace, alone: debug's session would mix into it (run
  // refuses two files there before any work: refuse_run_outputs_over_inputs).
  if (command == "debug" && (r.trace == "-" || r.vcd == "-" || r.log == "-"))
    throw InputError("debug: standard output carries the session: write --trace and --vcd to files");
  for (const std::string* path : {&r.trace, &r.vcd, &r.log}) try_output(*path);
  auto plan = std::make_unique<TracePlan>();
  if (!r.trace_window.empty()) sim::parse_trace_window(r.trace_window, plan->selection);
  if (!r.trace_filter.empty()) sim::parse_trace_filter(r.trace_filter, p, plan->selection);
  if (!r.vcd.empty()) {
    plan->scope = sim::parse_vcd_scope(r.vcd_scope, arch, engine);
    plan->recorder.record_cells(plan->scope.cells);
    // A recorded change takes 16 bytes of memory and more of VCD: --trace-max-bytes bounds both.
    plan->recorder.max_cell_changes = r.trace_max_bytes / sizeof(sim::TraceRecorder::CellChange);
  }
  return plan;
}

// A trace streams to a temporary file beside `path` (isa/file_io.h), renamed when complete:
// a full disk or --trace-max-bytes leaves no partial file.
template <typename Writer>
void write_trace_file(const std::string& path, const char* what, uint64_t max_bytes, Writer&& writer) {
  const auto t0 = std::chrono::steady_clock::now();
  if (path == "-") {
    writer(std::cout);
    std::cout.flush();
    return;
  }
  io::OutputFile f(path);
  f.limit(max_bytes,
          "--trace-max-bytes; raise it, or narrow the trace with --trace-window, --trace-filter or "
          "--vcd-scope");
  writer(f.stream());
  const uint64_t bytes = f.bytes_written();
  f.commit();
  fmt::print(stderr, "wrote {} ({}, {:.1f} MB, {:.2f} s)\n", path, what, double(bytes) / 1e6,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void write_traces(const RunArgs& r, const TracePlan& plan, const sim::TraceInput& in) {
  const uint64_t max = r.trace_max_bytes;
  if (plan.recorder.cells_stopped_at != sim::kNoCycle)
    throw InputError(fmt::format(
        "--vcd {}: not written: the traced cells' registers changed more than {} times by cycle {} (16 bytes "
        "each to record, more to write), over --trace-max-bytes {}; narrow --vcd-scope (cells=R0-R1xC0-C1) or "
        "--trace-window, or raise --trace-max-bytes",
        r.vcd, plan.recorder.max_cell_changes, plan.recorder.cells_stopped_at, io::size_text(max)));
  if (!r.trace.empty())
    write_trace_file(r.trace, "Chrome trace", max,
                     [&](std::ostream& o) { sim::write_chrome_trace(o, in, plan.selection); });
  if (!r.vcd.empty())
    write_trace_file(r.vcd, "VCD", max,
                     [&](std::ostream& o) { sim::write_vcd(o, in, plan.selection, plan.scope); });
  if (!r.log.empty())
    write_trace_file(r.log, "event log", max,
                     [&](std::ostream& o) { sim::write_event_log(o, in, plan.selection); });
}

namespace {

// A memory check's figures: the parts, each named with its size, and their saturating sum
// against --max-memory (default 3/4 of what this process may use).
struct MemoryTally {
  explicit MemoryTally(uint64_t max_memory)
      : usable(io::usable_memory_bytes()), limit(max_memory ? max_memory : usable / 4 * 3) {}
  void add(const std::string& what, uint64_t bytes) {
    total = compiler::sat_add(total, bytes);
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", what, io::size_text(bytes));
  }
  // The sum of a list of (what, bytes), as isa::program_bytes and the like give them.
  template <typename List>
  static uint64_t sum(const List& list) {
    uint64_t n = 0;
    for (const auto& [what, bytes] : list) n = compiler::sat_add(n, bytes);
    return n;
  }
  bool over() const { return total > limit; }
  std::string default_text(uint64_t max_memory) const {
    return max_memory ? std::string()
                      : fmt::format(" (default: 3/4 of the {} this process may use)", io::size_text(usable));
  }
  uint64_t usable, limit, total = 0;
  std::string parts;
};

// The memories a run allocates (sim::state_bytes; twice when the reference executor checks the
// result) against --max-memory, default 3/4 of what this process may use: refused with the figures
// before anything is allocated, instead of dying with bad_alloc.
void check_run_memory(const RunArgs& r, const isa::Program& p, const sim::Arch& arch, sim::Engine engine,
                      const compiler::Compiled* compiled) {
  MemoryTally m(r.max_memory);
  const bool timing = engine == sim::Engine::timing;  // no memories: the program and its timeline only
  if (!timing)
    for (const auto& [what, bytes] : sim::state_bytes(p, arch)) m.add(what, bytes);
  const bool twice = !r.no_check && !timing;  // the reference check runs on a copy of the memories
  if (twice) m.total = compiler::sat_mul(m.total, 2);
  // The stepped engine's array (once: the reference executor has none), with tpu-v1's skewed
  // shift the delay registers on its top edge too (array_cols^2 / 2 weights).
  if (engine == sim::Engine::stepped)
    m.add("systolic array registers",
          sim::SystolicArray::register_bytes(arch.array_rows, arch.array_cols, arch.weight_shift_skewed != 0));
  // Every engine: the program as loaded, and the records the run keeps of it (the timeline, the
  // matrix unit's spans, ...: sim::run_record_bytes), each from the sizes of its structs (a
  // paper-scale CNN at a large batch: about 600 instructions a sample, about 150 bytes each).
  m.add(fmt::format("program of {} instructions", p.code.size()), MemoryTally::sum(isa::program_bytes(p)));
  m.add("the run's records", MemoryTally::sum(sim::run_record_bytes(p)));
  if (compiled) {  // the model compiled for it, still held (compiler::compiled_bytes)
    m.add("the compiled model", MemoryTally::sum(compiler::compiled_bytes(*compiled)));
    // and what its lowering held beside it (freed, but the process's peak: Compiled::lowering_bytes)
    m.add("the lowering's working state", compiled->lowering_bytes);
  }
  if (!m.over()) return;
  throw InputError(fmt::format(
      "{}: the run needs about {} ({}{}), more than the {} allowed by --max-memory{}; lower the sizes{} or "
      "raise --max-memory",
      r.program, io::size_text(m.total), m.parts, twice ? "; the memories twice, for the reference check" : "",
      io::size_text(m.limit), m.default_text(r.max_memory), twice ? ", run with --no-check" : ""));
}

// `compile`, once lowered: the compiled model, its program and the file's bytes (serialized whole
// before they are written) against --max-memory, as run's check counts them.
void check_write_memory(const CompileArgs& a, const compiler::Compiled& c) {
  MemoryTally m(a.max_memory);
  m.add("the compiled model", MemoryTally::sum(compiler::compiled_bytes(c)));
  m.add(fmt::format("program of {} instructions", c.program.code.size()), MemoryTally::sum(isa::program_bytes(c.program)));
  m.add("the lowering's working state", c.lowering_bytes);
  m.add("the file's bytes", isa::program_file_bytes(c.program));
  if (!m.over()) return;
  throw InputError(fmt::format(
      "{}: writing the program needs about {} ({}), more than the {} allowed by --max-memory{}; lower the batch or "
      "the layer sizes or raise --max-memory",
      a.model, io::size_text(m.total), m.parts, io::size_text(m.limit), m.default_text(a.max_memory)));
}

// Every file `run` writes, checked against every file it reads before any work.
void refuse_run_outputs_over_inputs(const RunArgs& r) {
  refuse_two_on_stdout(r);
  refuse_outputs_over_inputs(
      {{"--report", &r.report}, {"--trace", &r.trace}, {"--vcd", &r.vcd}, {"--log", &r.log},
       {"--save-output", &r.save_output}},
      {r.program, r.arch_file, r.input, r.labels, r.calibrate});
  if (r.save_output == "-") throw InputError("run: --save-output writes a .npy file, not standard output");
  try_output(r.report);
  try_output(r.save_output);  // (the traces are tried in plan_traces): an unwritable report fails before the run
}

// Station instructions up to halt: what RunProgress counts to.
uint64_t station_instructions(const isa::Program& p) {
  uint64_t n = 0;
  for (const isa::Instruction& in : p.code) {
    if (in.opcode == isa::Opcode::halt) break;
    n += isa::spec(in.opcode).unit != isa::Unit::control;
  }
  return n;
}

}  // namespace

namespace {
// --int8-elements: the earlier spelling of --precision int8 (every weight and tensor int8, the
// description's keys set aside: compiler::apply_precision).
void int8_alias(compiler::LoadOptions& o, bool int8_elements) {
  if (!int8_elements) return;
  if (o.precision && *o.precision != compiler::Precision::int8)
    throw InputError(fmt::format("--int8-elements is --precision int8, and --precision is {}",
                                 compiler::kPrecisionNames[static_cast<size_t>(*o.precision)]));
  o.precision = compiler::Precision::int8;
}
}  // namespace

int cmd_run(const RunArgs& r) {
  if (r.report_schema) {
    write_text("-", sim::report_markdown());
    return 0;
  }
  if (r.program.empty()) throw InputError("run: a program is required (see tpusim run --help)");
  refuse_run_outputs_over_inputs(r);
  // Usage errors before the compile (a paper model's takes seconds): the engine's name and the
  // trace options.
  const bool rtl = r.engine == "rtl";
  sim::RunOptions opt;
  try {
    opt.engine = rtl ? sim::Engine::stepped : sim::parse_engine(r.engine);
  } catch (const InputError& e) {
    throw InputError(fmt::format("run: {}, or rtl (the stepped engine with the Verilated RTL array)", e.what()));
  }
  check_trace_options(r, "run");
  if (r.threads) sim::set_threads(r.threads);
  compiler::LoadOptions options = load_options(r.batch, r.input, r.calibrate, r.mapper, r.precision);
  options.max_memory = r.max_memory;
  int8_alias(options, r.int8_elements);
  if (r.output_bits) options.output_bits = static_cast<uint8_t>(r.output_bits);
  // The timing engine has no memories: its compile computes no data (LoadOptions::timing_only).
  options.timing_only = r.engine == "timing" && !r.full_compile;
  options.golden_reference = r.engine != "timing" && !r.no_check;  // (start_golden below)
  if (options.timing_only) keep_freed_memory(true);
  // Only --labels needs the float model after the compile (the check reuses the calibration's output).
  options.release_float_parameters = r.labels.empty() && !r.layer_errors;
  // A model's golden output depends only on the quantized graph: it is computed beside the
  // lowering and the simulation (on the cores they leave idle), from the moment the graph is final.
  // (Declared after to_run: the future, which waits for its thread, goes first.)
  ProgramToRun to_run;
  std::future<std::vector<int8_t>> golden;
  const auto start_golden = [&](const compiler::Compiled& c) {
    if (r.no_check || r.engine == "timing") return;
    try {
      golden = std::async(std::launch::async, [&c] { return compiler::golden_output(c); });
    } catch (const std::system_error&) {
      // no thread to be had: check_output computes it after the run
    }
  };
  load_program_or_model(to_run, "run", r.program, r.arch_file, r.sets, options, start_golden);
  if (!r.labels.empty() && !to_run.compiled) throw InputError("run: --labels applies to models, not to programs");
  if (!r.save_output.empty() && !to_run.compiled)
    throw InputError("run: --save-output applies to models, not to programs");
  if (r.layer_errors && !to_run.compiled) throw InputError("run: --layer-errors applies to models, not to programs");
  if (r.layer_errors && r.engine == "timing")
    throw InputError("run: --layer-errors needs the model's data: the fast, stepped or rtl engine, not timing");
  if (!r.save_output.empty() && r.engine == "timing")
    throw InputError("run: --save-output needs the output computed: the fast, stepped or rtl engine, not timing");
  const std::vector<int64_t> labels = r.labels.empty() ? std::vector<int64_t>{} : read_labels(r.labels);
  if (!r.labels.empty() && to_run.compiled) compiler::check_labels(*to_run.compiled, labels, "--labels " + r.labels);
  std::optional<compiler::Compiled>& compiled = to_run.compiled;
  const sim::Arch& arch = to_run.arch;
  if (compiled && r.report.empty()) print_compile_summary(*compiled, r.program, arch);
  const isa::Program& p = to_run.program();
  // rtl: the stepped engine with the Verilated RTL array (tools/rtl_engine.h).
  if (rtl) opt.array = &rtl_array(arch.array_rows, arch.array_cols);
  opt.max_cycles = r.max_cycles;
  check_run_memory(r, p, arch, opt.engine, compiled ? &*compiled : nullptr);
  const std::unique_ptr<TracePlan> traces = plan_traces(r, p, arch, opt.engine);
  if (traces) opt.trace = &traces->recorder;
  sim::RunProgress progress;
  opt.progress = &progress;
  sim::RunResult result;
  try {
    RunProgressLine line("run " + fs::path(r.program).filename().string(), progress, station_instructions(p));
    result = sim::simulate(p, arch, opt);
  } catch (const sim::SimError& e) {
    throw InputError(fmt::format("{}: {}", r.program, e.what()));
  }
  if (traces)
    write_traces(r, *traces,
                 {&p, &arch, opt.engine, &result, &traces->recorder, p.model.empty() ? r.program : p.model});
  sim::ReportInput in{&p, &arch, opt.engine, &result, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
  std::string why;
  std::vector<std::string> against;
  // The ISA reference executor re-runs every instruction with the plainest loops: for a model with
  // large array work (LeNet's padded tiles: 1.2e10 cell MACs, 5 s; CNN1: 5e11, minutes) that is slow, so a model checks its
  // output against the golden model reference instead, unless --full-check.
  const bool reference = !compiled || r.full_check || double(result.array_macs) <= kReferenceMacLimit;
  if (result.state && !r.no_check && reference) {
    in.output_matches_reference = sim::same_memories(*result.state, sim::run_reference(p, arch), &why);
    against.push_back("reference executor");
  }
  // A model: the output region against the golden reference executor of the quantized model.
  if (compiled && result.state && !r.no_check) {
    const sim::HostBuffer* out = nullptr;
    for (const sim::HostBuffer& h : result.state->host)
      if (h.name == "output") out = &h;
    if (!out) throw std::logic_error("a compiled program without an \"output\" host region");
    const bool computed = golden.valid();
    const std::vector<int8_t> want = computed ? golden.get() : std::vector<int8_t>{};
    const compiler::OutputCheck check = compiler::check_output(*compiled, out->bytes, arch, computed ? &want : nullptr);
    if (!check.matches) why = "output differs from the golden model reference: " + check.first_difference;
    in.output_matches_reference = in.output_matches_reference.value_or(true) && check.matches;
    in.quantization_error = std::array{check.error.max_abs, check.error.relative, check.error.rms};
    against.push_back("golden model reference");
    if (!r.labels.empty()) {
      const compiler::Accuracy a = compiler::top1_accuracy(*compiled, out->bytes, arch, labels);
      in.accuracy = sim::ReportInput::Accuracy{a.samples, double(a.correct_float) / double(a.samples),
                                               double(a.correct_int8) / double(a.samples)};
    }
  }
  if (r.layer_errors) {
    in.layer_errors.emplace();
    for (const compiler::LayerError& e : compiler::layer_errors(*compiled))
      in.layer_errors->push_back({e.layer, e.bits, e.scale, e.max_abs, e.max_float, e.rms, e.rms_relative, e.sqnr_db});
  }
  if (!r.labels.empty() && !in.accuracy)
    throw InputError("run: --labels needs the output checked (not --no-check, not the timing engine)");
  if (!r.save_output.empty()) {
    const sim::HostBuffer* out = nullptr;
    if (result.state)
      for (const sim::HostBuffer& h : result.state->host)
        if (h.name == "output") out = &h;
    if (!out) throw std::logic_error("--save-output: no \"output\" host region");
    compiler::write_npy(r.save_output, compiler::simulated_output_npy(*compiled, out->bytes, arch));
  }
  for (const std::string& a : against) in.checked_against += (in.checked_against.empty() ? "" : " and ") + a;
  nlohmann::ordered_json report = sim::make_report(in);
  if (rtl) report["engine"] = "rtl";
  for (const auto& w : report["mapping_warnings"]) fmt::print(stderr, "warning: {}\n", w.get<std::string>());
  if (!r.report.empty()) {
    write_text(r.report, report.dump(2) + "\n");
    fmt::print(stderr, "{}: {} cycles on {} ({} engine) -> {}\n", r.program, result.cycles,
               sim::machine_name(arch), r.engine, r.report);
  } else if (r.trace == "-" || r.vcd == "-" || r.log == "-") {
    // A trace on standard output stays a file of its own kind: the report goes to standard error.
    const std::string text = sim::format_report(report);
    std::fwrite(text.data(), 1, text.size(), stderr);
  } else {
    write_text("-", sim::format_report(report));
  }
  if (in.output_matches_reference == false) {
    fmt::print(stderr, "{}: results differ from the {}: {}\n", r.program, in.checked_against, why);
    return 1;
  }
  return 0;
}

int cmd_compile(const CompileArgs& a) {
  if (!compiler::is_model_path(a.model))
    throw InputError(fmt::format(
        "{}: expected a model description (.toml), a SCALE-Sim topology (.csv) or an ONNX model (.onnx)", a.model));
  const std::string out = a.output.empty() ? fs::path(a.model).replace_extension(".tpu").string() : a.output;
  refuse_outputs_over_inputs({{"-o", &out}}, {a.model, a.arch_file, a.input, a.calibrate});
  try_output(out);  // a folder, or one that does not exist: before the compile (seconds for a paper app)
  const sim::Arch arch = resolve_arch(nullptr, a.arch_file, a.sets, a.model);
  compiler::LoadOptions o = load_options(a.batch, a.input, a.calibrate, a.mapper, a.precision);
  int8_alias(o, a.int8_elements);
  if (a.output_bits) o.output_bits = static_cast<uint8_t>(a.output_bits);
  o.max_memory = a.max_memory;
  std::atomic<const char*> phase{nullptr};
  o.phase = &phase;
  std::optional<CompileProgressLine> line;
  line.emplace(fmt::format("compile {}", fs::path(a.model).filename().string()), phase);
  const compiler::Compiled c = compiler::compile_file(a.model, arch, o);
  line.reset();
  check_write_memory(a, c);
  isa::save_program(out, c.program);
  print_compile_summary(c, a.model, arch);
  fmt::print(stderr, "wrote {}\n", out);
  return 0;
}

int cmd_arch(bool markdown, bool json) {
  if (markdown) write_text("-", sim::arch_markdown());
  else if (json) write_text("-", sim::arch_to_json(sim::Arch{}).dump(2) + "\n");
  else
    for (const sim::ParamInfo& p : sim::arch_params())
      fmt::print("{:<28}{:>14} {:<15}{}\n", p.name, p.default_text, p.unit, p.meaning);
  return 0;
}

}  // namespace tpusim::tools
