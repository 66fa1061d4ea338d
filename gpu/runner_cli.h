// What the two reference runners' command lines share (tpusim-cpu: cpu_main.cpp, tpusim-gpu:
// main.cpp): the options both take, the exit codes (0 success, 1 an output differs from the golden
// reference or the run failed, 2 bad usage or input), the check of an output against the golden
// reference and the writing of a results file.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/timing.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "compiler/model.h"
#include "tools/cli_options.h"

namespace tpusim::gpu {

struct RunnerOptions {
  std::vector<std::string> models;
  std::vector<uint64_t> batches;  // empty: each description's own batch
  std::string json_out, note;
  TimingOptions timing;
  bool no_check = false;
};

// Every file the runner reads: each model and the .npy files its description names.
inline std::vector<std::string> model_inputs(const RunnerOptions& o) {
  std::vector<std::string> files;
  compiler::append_model_files(files, o.models);
  return files;
}

// An output file's folder exists and the file is not itself a folder (InputError naming the file
// and `flag` otherwise); "" is standard output.
inline void check_output_folder(const std::string& path, const char* flag) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  const fs::path dir = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{}: cannot write: no folder {} ({})", path, dir.string(), flag));
  if (fs::is_directory(path, ec))
    throw InputError(fmt::format("{}: cannot write: a folder, not a file ({})", path, flag));
}

// Before any measurement: every model is a file and the results file's folder exists (InputError
// naming the path otherwise), so that a typo fails at once rather than after minutes of work.
inline void check_runner_paths(const RunnerOptions& o) {
  namespace fs = std::filesystem;
  for (const std::string& m : o.models) {
    std::error_code ec;
    if (!fs::exists(m, ec)) throw InputError(fmt::format("{}: no such model file", m));
    if (fs::is_directory(m, ec))
      throw InputError(fmt::format("{}: a folder, not a model (give .toml descriptions, .csv SCALE-Sim topologies "
                                   "or .onnx models)",
                                   m));
  }
  // `tpusim-cpu mlp.toml -o mlp.toml` wrote the results over the description (or its .npy data).
  io::refuse_input_as_output(o.json_out, "-o", model_inputs(o));
  check_output_folder(o.json_out, "-o");
}

// The models, --batch, -o/--json, --warmup, --iterations, --repeats, --no-check and --note.
inline void add_runner_options(CLI::App& app, RunnerOptions& o) {
  app.add_option("models", o.models, "model descriptions (.toml) or SCALE-Sim topologies (.csv)")->required();
  app.add_option("--batch", o.batches, "batch sizes to run (repeatable; default: each description's batch)")
      ->check(tools::count_option(1, "a batch size", false, compiler::kMaxBatch));  // the largest batch a model takes
  app.add_option("-o,--json", o.json_out, "write the results here (JSON); default: standard output");
  app.add_option("--warmup", o.timing.warmup,
                 fmt::format("untimed batches before timing (default {})", o.timing.warmup))
      ->check(tools::count_option(0, "untimed batches"));
  app.add_option("--iterations", o.timing.iterations,
                 fmt::format("batches per timed repeat (default {})", o.timing.iterations))
      ->check(tools::count_option(1, "batches per repeat"));
  app.add_option("--repeats", o.timing.repeats,
                 fmt::format("timed repeats; the median is reported (default {})", o.timing.repeats))
      ->check(tools::count_option(1, "repeats"));
  app.add_flag("--no-check", o.no_check, "skip the check against the golden reference executor");
  app.add_option("--note", o.note, "a note stored in the results file");
}

// Parses the command line; a value to return from main (0 for --help, 2 for bad usage), or -1 to go on.
inline int parse_runner_args(CLI::App& app, int argc, char** argv) {
  app.failure_message(tools::failure_message);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

// Differing bytes and the largest difference, or "" when equal. `device` names the runner's side.
inline std::string output_difference(const std::vector<int8_t>& got, const std::vector<int8_t>& want,
                                     const char* device) {
  if (got.size() != want.size()) return fmt::format("{} output bytes, expected {}", got.size(), want.size());
  size_t count = 0, first = 0;
  int worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (count++ == 0) first = i;
      worst = std::max(worst, std::abs(int{got[i]} - int{want[i]}));
    }
  if (count == 0) return {};
  return fmt::format("{} of {} bytes differ (first at byte {}: {} {}, golden {}; largest difference {})",
                     count, got.size(), first, device, int{got[first]}, int{want[first]}, worst);
}

// Writes `text` to `path` (InputError when it cannot).
inline void write_results_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  if (!f) throw InputError(fmt::format("{}: cannot write", path));
}

// Runs `body` (which returns the exit code) with the runners' error handling: bad input exits 2,
// any other failure 1, each with its message on standard error.
template <typename F>
int run_reporting_errors(const char* tool, F&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", tool, e.what());
    return 1;
  }
}

}  // namespace tpusim::gpu
