// tpusim-gpu: runs model descriptions on an NVIDIA GPU with the same int8 weights and inputs the
// simulator uses (the quantized graph of compiler::compile_file, as `tpusim run MODEL` makes it
// for tpu-v1: same calibration, same scales), checks the output bit for bit
// against the golden reference executor, times it, and writes the GPU reference data format
// (gpu/results.h; workloads/gpu-reference/README.md). Exit codes as tpusim's: 0 success, 1 an
// output differs from the reference or the GPU failed, 2 bad usage or bad input (a model refused
// at one batch is skipped and the others still measured and written); and 3 (kExitNoGpu): no GPU
// found, nothing measured.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/reference.h"
#include "gpu/device.h"
#include "gpu/plan.h"
#include "gpu/provenance.h"
#include "gpu/results.h"
#include "gpu/runner_cli.h"
#include "isa/error.h"

namespace gpu = tpusim::gpu;
namespace compiler = tpusim::compiler;

namespace {

struct Options : gpu::RunnerOptions {
  std::string csv_out, timing_mode = "both", l2 = "both", graphs = "auto";
  uint64_t graph_max_batch = 16;
  double peak_tops = 0;
};

std::vector<std::string> choices(const std::string& value, const std::string& a, const std::string& b) {
  if (value == "both") return {a, b};
  return {value};
}

// One model at one batch: check, then every requested timing. Returns false when the output differs.
bool measure(const std::string& path, uint64_t batch, const Options& o, gpu::ResultsFile& out) {
  const compiler::LoadOptions lo = gpu::runner_load_options(batch ? std::optional<uint64_t>(batch) : std::nullopt);
  // The simulator's own pipeline, so the weights, inputs and scales are the ones it runs (the
  // program it lowers for tpu-v1 is not used).
  const compiler::QGraph graph = compiler::compile_file(path, tpusim::sim::Arch{}, lo).graph;
  const gpu::GpuPlan plan = gpu::make_plan(graph);
  gpu::DeviceModel model(plan);
  std::optional<bool> matches;
  const std::vector<int8_t> output = model.infer();
  if (!o.no_check) {
    const std::vector<int8_t> golden = compiler::run_golden(graph)[static_cast<size_t>(graph.output)];
    const std::string why = gpu::output_difference(output, golden, "GPU");
    matches = why.empty();
    fmt::print(stderr, "{} batch {}: output {} the golden reference{}\n", graph.name, graph.batch,
               why.empty() ? "matches" : "DIFFERS from", why.empty() ? "" : ": " + why);
  }
  std::vector<bool> graph_modes;
  if (o.graphs == "both") graph_modes = {false, true};
  else if (o.graphs == "auto") graph_modes = {graph.batch <= o.graph_max_batch};
  else graph_modes = {o.graphs == "on"};
  for (const std::string& timing : choices(o.timing_mode, "device", "end_to_end"))
    for (const std::string& l2 : choices(o.l2, "warm", "flushed"))
      for (bool use_graph : graph_modes) {
        const gpu::Timing t = model.time(timing == "end_to_end", l2 == "flushed", use_graph, o.timing);
        gpu::Measurement m;
        m.workload = graph.name;
        m.model = path;
        m.batch = graph.batch;
        m.timing = timing;
        m.l2 = l2;
        m.cuda_graph = use_graph;
        m.latency_seconds = t.median;
        m.latency_seconds_min = t.min;
        m.latency_seconds_max = t.max;
        m.repeats = t.repeats;
        m.iterations = t.iterations;
        m.inferences_per_second = double(graph.batch) / t.median;
        m.tops = 2.0 * double(plan.model_macs) / t.median / 1e12;
        m.model_macs = plan.model_macs;
        m.gemm_macs = plan.gemm_macs;
        m.weight_bytes = plan.weight_bytes;
        m.output_matches_reference = matches;
        m.launches_queued_ahead = t.gates_expired == 0;
        if (t.gates_expired > 0)
          fmt::print(stderr,
                     "  warning: {} of the timed intervals began before the host had queued all of their "
                     "launches (a 200 ms gate expired): the time may include launch gaps\n",
                     t.gates_expired);
        fmt::print(stderr,
                   "  {:<10} L2 {:<7} graph {:<3}: {:.4g} ms per batch, {:.0f} inferences/s, {:.2f} TOPS, "
                   "{} batches per gate\n",
                   timing, l2, use_graph ? "yes" : "no", t.median * 1e3, m.inferences_per_second, m.tops,
                   t.batches_per_gate);
        out.results.push_back(m);
      }
  return !matches || *matches;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tpusim-gpu: run model descriptions on an NVIDIA GPU (int8, cuBLASLt), check them against the "
      "golden reference and time them (workloads/gpu-reference/README.md)"};
  Options o;
  gpu::add_runner_options(app, o);
  app.add_option("--csv", o.csv_out, "write the results here as CSV too");
  app.add_option("--timing", o.timing_mode, "device (kernels only), end_to_end (with host copies) or both")
      ->check(tpusim::tools::one_of_option({"device", "end_to_end", "both"}));
  app.add_option("--l2", o.l2, "warm, flushed (L2 overwritten before each batch) or both")
      ->check(tpusim::tools::one_of_option({"warm", "flushed", "both"}));
  app.add_option("--graphs", o.graphs,
                 "CUDA graphs: auto (for batches up to --graph-max-batch), on, off or both")
      ->check(tpusim::tools::one_of_option({"auto", "on", "off", "both"}));
  app.add_option("--graph-max-batch", o.graph_max_batch, "largest batch --graphs auto launches as a graph")
      ->check(tpusim::tools::count_option(0, "a batch size"));
  o.timing.warmup_seconds = 0.2;
  app.add_option("--warmup-seconds", o.timing.warmup_seconds,
                 "after --warmup, untimed batches go on until this many seconds have passed, so that an "
                 "idle GPU's clocks have risen (default 0.2)")
      ->check(tpusim::tools::number_option(0, 3600, "seconds"));
  app.add_option("--peak-tops", o.peak_tops,
                 "the device's dense int8 peak, when the runner does not know it")
      ->check(tpusim::tools::positive_option("TOPS"));
  if (const int rc = gpu::parse_runner_args(app, argc, argv); rc >= 0) return rc;
  gpu::ResultsFile results;
  results.tool = "tpusim-gpu 0.1.0";
  const gpu::Provenance where = gpu::provenance(argc, argv);
  results.command = where.command;
  results.date = where.date;
  results.host = where.host;
  results.note = o.note;
  return gpu::run_reporting_errors("tpusim-gpu", [&] {
    gpu::check_runner_paths(o);
    tpusim::io::refuse_input_as_output(o.csv_out, "--csv", gpu::model_inputs(o));
    gpu::check_output_folder(o.csv_out, "--csv");
    // The arguments and paths first (exit 2 naming what is wrong, on any machine), then the device.
    if (const std::string why = gpu::gpu_absent_reason(); !why.empty()) {
      fmt::print(stderr, "tpusim-gpu: no GPU found ({}); nothing measured (exit code {}: no GPU)\n", why,
                 gpu::kExitNoGpu);
      return gpu::kExitNoGpu;
    }
    bool all_match = true, bad_input = false;
    results.device = gpu::query_device(o.peak_tops);
    fmt::print(stderr,
               "device: {} (sm {}, {} SMs, {:.0f} MHz, {:.0f} GB/s, int8 peak {:.0f} TOPS), driver {}\n",
               results.device.name, results.device.compute_capability, results.device.sms,
               results.device.sm_clock_mhz, results.device.memory_gbps, results.device.peak_int8_tops,
               results.device.driver_version);
    const std::vector<uint64_t> batches = o.batches.empty() ? std::vector<uint64_t>{0} : o.batches;
    // A model the compiler refuses at one batch (too big for tpu-v1's unified buffer, say) is
    // reported and skipped; the others are still measured and written.
    for (const std::string& model : o.models)
      for (uint64_t batch : batches) try {
          all_match &= measure(model, batch, o, results);
        } catch (const tpusim::InputError& e) {
          fmt::print(stderr, "{} batch {}: skipped: {}\n", model, batch, e.what());
          bad_input = true;
        }
    if (!o.json_out.empty()) gpu::write_results_file(o.json_out, gpu::results_json(results));
    if (!o.csv_out.empty()) gpu::write_results_file(o.csv_out, gpu::results_csv(results));
    if (o.json_out.empty() && o.csv_out.empty()) fmt::print("{}", gpu::results_json(results));
    return !all_match ? 1 : bad_input ? 2 : 0;
  });
}
