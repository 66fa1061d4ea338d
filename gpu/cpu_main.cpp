// tpusim-cpu: the CPU reference runner. Runs model descriptions on this machine's CPU with
// oneDNN's int8 matmul (gpu/cpu_model.h), with the same int8 weights, inputs and scales the
// simulator uses (compiler::prepare_file: the parse and quantization of `tpusim run MODEL`, without
// lowering for an architecture), checks each output byte for byte against the golden reference
// executor, times each batch, and writes the reference format (gpu/reference.h) that
// `tpusim compare` reads. With --latency-limit it also finds, per model, the largest batch whose
// 99th-percentile batch latency stays within the limit (the TPU paper's Table 4 question).
// Exit codes as tpusim's: 0 success, 1 an output differs from the golden reference, 2 bad usage or
// bad input.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <dnnl.hpp>

#include "compiler/compile.h"
#include "compiler/reference.h"
#include "gpu/cpu_model.h"
#include "gpu/plan.h"
#include "gpu/provenance.h"
#include "gpu/reference.h"
#include "gpu/runner_cli.h"
#include "isa/error.h"

namespace gpu = tpusim::gpu;
namespace compiler = tpusim::compiler;

namespace {

struct Options : gpu::RunnerOptions {
  int threads = 0;
  bool no_roof = false, profile = false;
  double latency_limit_ms = 0;
  uint64_t max_batch = 4096;
};

struct Measured {
  gpu::ReferenceRow row;
  bool matches = true;
};

// One model at one batch: plan, check, time.
Measured measure(const std::string& path, uint64_t batch, const Options& o, bool check, bool quiet = false) {
  const compiler::LoadOptions lo = gpu::runner_load_options(batch ? std::optional<uint64_t>(batch) : std::nullopt);
  const compiler::QGraph graph = compiler::prepare_file(path, lo).graph;
  const gpu::GpuPlan plan = gpu::make_plan(graph);
  gpu::CpuModel model(plan, o.threads);
  Measured m;
  if (check) {
    const std::vector<int8_t> golden = compiler::run_golden(graph)[static_cast<size_t>(graph.output)];
    const std::string why = gpu::output_difference(model.infer(), golden, "CPU");
    m.matches = why.empty();
    m.row.output_matches_reference = m.matches;
    fmt::print(stderr, "{} batch {}: output {} the golden reference{}\n", graph.name, graph.batch,
               why.empty() ? "matches" : "DIFFERS from", why.empty() ? "" : ": " + why);
  }
  const gpu::Timing t = model.time(o.timing);
  gpu::ReferenceRow& r = m.row;
  r.workload = graph.name;
  r.model = path;
  r.batch = graph.batch;
  r.inferences_per_second = double(graph.batch) / t.median;
  r.latency_seconds = t.median;
  r.latency_statistic = "median";
  r.latency_p99_seconds = t.p99;
  r.engine =
      fmt::format("onednn {}.{}.{}", dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
  r.model_macs = plan.model_macs;
  r.gemm_macs = plan.gemm_macs;
  r.weight_bytes = plan.weight_bytes;
  r.threads = uint64_t(o.threads);
  r.warmup = o.timing.warmup;
  r.repeats = t.repeats;
  r.iterations = t.iterations;
  double load[1] = {0};
  if (getloadavg(load, 1) == 1) {
    r.load_average = load[0];
    // More runnable jobs than CPUs: the other jobs' time is in every batch (and a parallel region
    // waits for whichever of its threads is descheduled), so the figure is the machine's, not the model's.
    if (!quiet && load[0] >= double(gpu::usable_cpus()))
      fmt::print(stderr,
                 "  the machine is busy (load average {:.1f} on {} CPUs): these times include waiting for a CPU; "
                 "measure on a quiet machine (docs/gpu.md)\n",
                 load[0], gpu::usable_cpus());
  }
  model.infer(true);  // one more batch, profiled
  const double matmul_share = model.last_matmul_seconds() / t.median;
  if (o.profile)
    for (size_t i = 0; i < plan.steps.size(); ++i)
      fmt::print(stderr, "    step {:>3} {:<24} {:<7} {:.4f} ms\n", i, plan.step_layer[i],
                 plan.steps[i].index() == 0   ? "matmul"
                 : plan.steps[i].index() == 1 ? "pool"
                                              : "vector",
                 model.last_step_seconds()[i] * 1e3);
  if (!quiet)
    fmt::print(stderr,
               "  {:.4g} ms per batch (median; p99 {:.4g} ms), {:.0f} inferences/s, {:.3f} TOPS, {:.0f}% in "
               "oneDNN matmuls\n",
               t.median * 1e3, t.p99 * 1e3, r.inferences_per_second,
               2.0 * double(plan.model_macs) / t.median / 1e12, 100 * std::min(1.0, matmul_share));
  return m;
}

// The largest batch whose p99 batch latency is within the limit: doubling, then bisection.
void latency_sweep(const std::string& path, const Options& o, gpu::ReferenceData& out) {
  const double limit = o.latency_limit_ms / 1e3;
  std::map<uint64_t, Measured> probes;
  auto probe = [&](uint64_t b) -> const Measured& {
    if (!probes.count(b)) {
      probes.emplace(b, measure(path, b, o, false, true));
      fmt::print(stderr, "  batch {:>5}: p99 {:.4g} ms {}\n", b, probes.at(b).row.latency_p99_seconds * 1e3,
                 probes.at(b).row.latency_p99_seconds <= limit ? "within" : "over");
    }
    return probes.at(b);
  };
  auto within = [&](uint64_t b) { return probe(b).row.latency_p99_seconds <= limit; };
  fmt::print(stderr, "{}: the largest batch within a {:g} ms p99 limit\n", path, o.latency_limit_ms);
  if (!within(1)) {
    fmt::print(stderr, "  even batch 1 takes longer: no batch meets the limit\n");
    return;
  }
  uint64_t good = 1, bad = 0;
  while (bad == 0 && good < o.max_batch) {
    const uint64_t next = std::min(good * 2, o.max_batch);
    if (within(next)) good = next;
    else bad = next;
  }
  while (bad && bad - good > 1) {
    const uint64_t mid = good + (bad - good) / 2;
    if (within(mid)) good = mid;
    else bad = mid;
  }
  gpu::ReferenceRow r = probe(good).row;
  r.latency_seconds = r.latency_p99_seconds;
  r.latency_statistic = "p99";
  r.latency_limit_seconds = limit;
  r.note = good == o.max_batch ? fmt::format("--max-batch {} reached within the limit", o.max_batch)
                               : "the largest batch within the limit";
  fmt::print(stderr, "  batch {}: {:.0f} inferences/s within {:g} ms\n", good, r.inferences_per_second,
             o.latency_limit_ms);
  out.rows.push_back(r);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tpusim-cpu: run model descriptions on this CPU with oneDNN int8, check them against the golden "
      "reference and time them (docs/gpu.md, workloads/gpu-reference/README.md)"};
  Options o;
  o.threads = gpu::usable_cpus();
  o.timing = {5, 10, 5};
  gpu::add_runner_options(app, o);
  app.add_option("--threads", o.threads, "threads (default: the CPUs this process may use)")
      ->check(tpusim::tools::count_option(1, "threads", false, 4096));
  app.add_flag("--no-roof", o.no_roof, "skip measuring this CPU's int8 and memory roof");
  app.add_option("--latency-limit", o.latency_limit_ms,
                 "also find each model's largest batch whose p99 batch latency is within this many ms")
      ->check(tpusim::tools::positive_option("milliseconds"));
  app.add_option("--max-batch", o.max_batch, "the largest batch --latency-limit tries (default 4096)")
      ->check(tpusim::tools::count_option(1, "a batch size", false, tpusim::compiler::kMaxBatch));
  app.add_flag("--profile", o.profile, "print each plan step's time in the last batch");
  if (const int rc = gpu::parse_runner_args(app, argc, argv); rc >= 0) return rc;
  gpu::ReferenceData out;
  out.source = "measured";
  out.note = o.note;
  out.tool = "tpusim-cpu 0.1.0";
  const gpu::Provenance where = gpu::provenance(argc, argv);
  out.command = where.command;
  out.date = where.date;
  out.host = where.host;
  const dnnl_version_t* v = dnnl_version();
  out.device.name = fmt::format("{} ({} thread{})", gpu::cpu_name(), o.threads, o.threads == 1 ? "" : "s");
  out.device.kind = "cpu";
  out.device.details =
      fmt::format("oneDNN {}.{}.{} (CPU ISA runtime: {}), OpenMP, {} threads", v->major, v->minor, v->patch,
                  v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", o.threads);
  return gpu::run_reporting_errors("tpusim-cpu", [&] {
    gpu::check_runner_paths(o);
    bool all_match = true;
    if (!o.no_roof) {
      const gpu::CpuRoof roof = gpu::measure_cpu_roof(o.threads, 20);
      out.device.peak_int8_tops = roof.int8_tops;
      out.device.memory_gbps = roof.read_gbps;
      // The roof is a measurement like the others: on a machine with more runnable jobs than CPUs
      // it is the share of the CPUs this process got (on the project's shared 2-vCPU machine, 0.029
      // and 0.855 TOPS ten minutes apart at load 11.5 and 9.3), so it says the load it was taken at.
      double load[1] = {0};
      const bool has_load = getloadavg(load, 1) == 1;
      const bool busy = has_load && load[0] >= double(gpu::usable_cpus());
      out.device.peak_source = fmt::format(
          "measured here: the best of 20 oneDNN s8 matmuls 256 x 1024 x 1024 ({:.3f} TOPS) and of 20 reads "
          "of 256 MiB ({:.1f} GB/s), {} thread{}{}: an attainable roof, not a datasheet peak{}",
          roof.int8_tops, roof.read_gbps, o.threads, o.threads == 1 ? "" : "s",
          has_load ? fmt::format(", load average {:.1f} on {} CPUs", load[0], gpu::usable_cpus()) : "",
          busy ? " (a busy machine: the roof is the share of the CPUs this process got, and may be far below "
                 "the CPU's)"
               : "");
      fmt::print(stderr, "device: {}: int8 roof {:.3f} TOPS, read bandwidth {:.1f} GB/s (measured{})\n",
                 out.device.name, roof.int8_tops, roof.read_gbps,
                 busy ? fmt::format(" at load average {:.1f} on {} CPUs: the share this process got, not the "
                                    "CPU's roof",
                                    load[0], gpu::usable_cpus())
                      : "");
    }
    const std::vector<uint64_t> batches = o.batches.empty() ? std::vector<uint64_t>{0} : o.batches;
    for (const std::string& model : o.models) {
      for (uint64_t batch : batches) {
        Measured m = measure(model, batch, o, !o.no_check);
        all_match &= m.matches;
        out.rows.push_back(m.row);
      }
      if (o.latency_limit_ms > 0) latency_sweep(model, o, out);
    }
    const std::string text = gpu::reference_json(out);
    if (o.json_out.empty()) {
      fmt::print("{}", text);
    } else {
      gpu::write_results_file(o.json_out, text);
      fmt::print(stderr, "wrote {}\n", o.json_out);
    }
    return all_match ? 0 : 1;
  });
}
