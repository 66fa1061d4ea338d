// The tpusim subcommands, one function each, shared by tools/tpusim.cpp (the CLI11 front end)
// and the files that implement them. Each returns the process exit code or throws InputError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}
namespace tpusim::isa {
struct Program;
}
namespace tpusim::sim {
struct Arch;
}
namespace tpusim::compiler {
struct LoadOptions;
}

namespace tpusim::tools {

// Writes `text` to `path` (isa/file_io.h: temporary file + rename), or to standard output for
// "" or "-".
void write_text(const std::string& path, const std::string& text);

inline constexpr uint64_t kDefaultTraceMaxBytes = uint64_t{1} << 30;

// --mapper's help: the switches of compiler/lower_options.h.
std::string mapper_option_help();

struct RunArgs {
  std::string program, arch_file, report, engine = "fast";
  std::vector<std::string> sets;
  uint64_t max_cycles = 0;
  uint64_t batch = 0;  // models only: overrides the description's batch (0: keep it)
  std::string input, labels, calibrate;  // models only: .npy samples, their classes, calibration samples
  std::string save_output;               // models only: the simulated output, dequantized, as a float32 .npy
  bool layer_errors = false;             // models only: each layer's quantization error (report and table)
  std::vector<std::string> mapper;        // models only: mapper switches, KEY=on|off (compiler/lower_options.h)
  std::string precision;                 // models only: auto, int8 or wide (empty: the description's)
  bool no_check = false, report_schema = false, full_compile = false;
  bool int8_elements = false;  // models only: --int8-elements, the earlier spelling of --precision int8
  unsigned output_bits = 0;    // models only: the output's width, 8 or 16 (0: the description's)
  bool full_check = false;  // models: also compare every memory with the ISA reference executor
  // Traces (docs/traces.md): Chrome trace JSON, VCD waveforms, the event log ("-": stdout).
  std::string trace, vcd, log, trace_window, trace_filter, vcd_scope;
  uint64_t trace_max_bytes = kDefaultTraceMaxBytes;  // each trace file; 0: no limit
  uint64_t max_memory = 0;  // bytes a run's memories may take; 0: derived from this machine (run.cpp)
  unsigned threads = 0;     // sim::set_threads (sim/parallel.h); 0: the CPUs this process may use
};
int cmd_run(const RunArgs& args);        // tools/run.cpp

struct CompileArgs {
  std::string model, output, arch_file, input, calibrate, precision;
  std::vector<std::string> sets;
  std::vector<std::string> mapper;  // KEY=on|off (compiler/lower_options.h)
  uint64_t batch = 0;
  bool int8_elements = false;
  unsigned output_bits = 0;  // 8 or 16 (0: the description's)
  uint64_t max_memory = 0;   // bytes the compile may take; 0: derived from this machine (run.cpp)
};
int cmd_compile(const CompileArgs& args);  // tools/run.cpp
int cmd_arch(bool markdown, bool json);  // tools/run.cpp

// Loading what run and debug take (tools/run.cpp): a program (.tpu or .s), the architecture
// (--arch FILE, else the program's .arch, else tpu-v1; then --set), a model's load options;
// tools/program_to_run.h puts them together.
isa::Program load_any(const std::string& path);
sim::Arch resolve_arch(const isa::Program* program, const std::string& arch_file,
                       const std::vector<std::string>& sets, const std::string& source);
compiler::LoadOptions load_options(uint64_t batch, const std::string& input = "", const std::string& calibrate = "",
                                   const std::vector<std::string>& mapper = {}, const std::string& precision = "");


struct DebugArgs {
  std::string program, script, arch_file;
  std::string trace, vcd, vcd_scope;  // the debugged run's traces, written when the session ends
  std::vector<std::string> sets;
  uint64_t batch = 0;
};
int cmd_debug(const DebugArgs& args);  // tools/debug.cpp (the stepping debugger, docs/debugger.md)

struct ViewArgs {
  std::string program, output, arch_file, window;
  std::vector<std::string> sets;
  uint64_t batch = 0;
};
int cmd_view(const ViewArgs& args);  // tools/view.cpp (the HTML explorer, docs/view.md)

struct CompareArgs {
  std::vector<std::string> gpu_files, tpu_reports, sets;
  std::vector<std::string> models;  // simulated rows for these descriptions too, at their own batch
  double latency_limit_ms = 0;      // > 0: also each workload's largest simulated batch within it
  uint64_t max_batch = 4096;        // the largest batch the latency sweep tries
  std::string arch_file, models_root, timing = "end_to_end", l2 = "warm", graph = "any";
  std::string csv_out, json_out, plot_prefix, plot_script, python;  // python: "" = /usr/bin/python3 or python3
  bool int8 = false;  // simulate the all-int8 variant the runners run (every weight and tensor int8)
};
int cmd_compare(const CompareArgs& args);  // tools/compare.cpp

// tpusim validate (tools/validate.cpp, docs/validation.md): the six TPU paper workloads simulated
// on the timing engine beside the paper's Table 3 counters and row 9 TOPS, with the errors.
struct ValidateArgs {
  std::string arch_file, workloads, json_out, csv_out;  // workloads: default workloads/tpu-v1
  std::vector<std::string> sets, apps;                   // apps: default all six
  std::vector<std::string> mapper;                       // --mapper KEY=on|off, as for run
  bool markdown = false, quiet = false;
  bool bounds = false;  // --bounds: what Table 1 allows (no simulation), not the comparison
  // Limits (0: not checked); any exceeded makes the exit code 1.
  double max_tops_error = 0, max_mean_tops_error = 0, max_share_error = 0, max_counter_error = 0;
};
int cmd_validate(const ValidateArgs& args);

// tpusim sweep, sweep merge and the hidden sweep worker (tools/sweep/, docs/sweeps.md).
struct SweepArgs {
  std::string spec, output, db, jsonl, shard, plot_prefix, python;
  unsigned jobs = 0;  // 0: every core this process may use
  bool resume = false, dry_run = false, retry_failed = false, full_compile = false;
};
struct SweepMergeArgs {
  std::vector<std::string> inputs;
  std::string output, db, jsonl;
};
int cmd_sweep(const SweepArgs& args);
int cmd_sweep_merge(const SweepMergeArgs& args);
int cmd_sweep_worker();
// Registers the subcommands on `app` (which must outlive this); run() runs the one parsed.
class SweepCommand {
 public:
  explicit SweepCommand(CLI::App& app);
  bool chosen() const;
  int run() const;

 private:
  CLI::App *sweep_ = nullptr, *merge_ = nullptr, *worker_ = nullptr;
  SweepArgs args_;
  SweepMergeArgs merge_args_;
};

}  // namespace tpusim::tools
