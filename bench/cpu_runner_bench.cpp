// cpu_runner_bench [--quick] [--json FILE]: the CPU reference runner (gpu/cpu_model.h) against
// oneDNN's own int8 inference of the same layers.
//
// For each model (the small workloads and the six paper apps, each at its own batch): the runner's
// time per batch (gathers, oneDNN matmuls, requantization, pools, element-wise steps: everything
// tpusim-cpu times), and the time of oneDNN running the same layers its own way
// (bench/onednn_network.h: convolution, matmul, concat, pooling and binary primitives with oneDNN's
// own int8 requantization and eltwise post-ops, which round differently, hence not bit-exact), back
// to back, inputs in place.
// Both on the same threads (every CPU the process may use, or TPUSIM_BENCH_THREADS), interleaved
// batch by batch in the same process (each side first in every other pair), each batch timed alone;
// at least 15 batches a side, about a CPU second each (0.2 with --quick). The figure compared is the
// median batch of each side, in CPU time of the thread when one thread runs (on a shared machine
// wall-clock time counts the neighbours' jobs: a 0.4 ms matmul measured 8 ms when descheduled), in
// wall-clock time otherwise; the wall-clock ratio is printed beside it, with the load average.
// Prints the ratio runner / oneDNN (target: at most 2; "OVER 2x" marks a miss, the exit code
// does not). Exit 1 when the runner's output differs from the golden reference, 2 on bad arguments.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <variant>

#include "bench/bench_common.h"
#include "compiler/compile.h"
#include "compiler/reference.h"
#include "gpu/cpu_model.h"
#include "gpu/plan.h"
#include "bench/onednn_network.h"
#include "tools/source_dir.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTarget = 2.0;

// One batch's wall-clock time and the CPU time of the calling thread (with one thread, all of the
// batch's work: the time a busy machine's other jobs take the CPU away is not in it).
struct Sample {
  double wall = 0, cpu = 0;
  Sample operator+(const Sample& o) const { return {wall + o.wall, cpu + o.cpu}; }
};
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
template <typename F>
Sample time_one(F&& f) {
  const double c0 = thread_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  f();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), thread_cpu_seconds() - c0};
}
std::array<double, 3> load_average() {
  std::array<double, 3> l{};
  if (getloadavg(l.data(), 3) != 3) l = {};
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  // [--quick] [--json FILE] [MODEL...]: MODEL names the workload files to run, without .toml:
  // lstm0, resblock; lstm1 is both small/lstm1 and tpu-v1/lstm1.
  tpusim::bench::BenchArgs args;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") args.quick = true;
    else if (a == "--json" && i + 1 < argc) args.json = argv[++i];
    else if (!a.empty() && a[0] != '-') only.push_back(a);
    else {
      fmt::print(stderr, "usage: cpu_runner_bench [--quick] [--json FILE] [MODEL...]\n");
      return 2;
    }
  }
  // Each at its description's batch, the batch the demo measures: the small workloads (--quick:
  // only these) and the six paper apps.
  std::vector<std::string> models;
  for (const char* small : {"mnist_mlp", "tiny_cnn", "lenet5", "resblock", "inception", "lstm1"})
    models.push_back(std::string("workloads/small/") + small + ".toml");
  if (!args.quick || !only.empty())
    for (const char* app : {"mlp0", "mlp1", "lstm0", "lstm1", "cnn0", "cnn1"})
      models.push_back(std::string("workloads/tpu-v1/") + app + ".toml");
  if (!only.empty()) {
    std::vector<std::string> chosen;
    for (const std::string& name : only) {
      size_t found = 0;
      for (const std::string& m : models)
        if (m.ends_with("/" + name + ".toml")) chosen.push_back(m), ++found;
      if (!found) {
        fmt::print(stderr, "cpu_runner_bench: no model {} (the small workloads and mlp0 ... cnn1)\n", name);
        return 2;
      }
    }
    models = chosen;
  }
  const char* env_threads = std::getenv("TPUSIM_BENCH_THREADS");
  const int threads = env_threads ? std::max(1, std::atoi(env_threads)) : tpusim::gpu::usable_cpus();
  // CPU seconds of each side per model (about; at least kMinBatches batches each): the batches
  // are interleaved, runner and oneDNN alternately first, so the machine's load hits both alike.
  const double budget = args.quick ? 0.2 : 1.0;
  constexpr int kMinBatches = 15, kMaxBatches = 4000;
  const std::array<double, 3> load0 = load_average();
  fmt::print(
      "CPU runner vs oneDNN's own int8 layers on the same shapes: {}, {} thread{}, load average {:.2f} "
      "{:.2f} "
      "{:.2f}\n"
      "the median batch of each, interleaved; ratio = runner / oneDNN in {} (wall-clock ratio beside)\n",
      tpusim::bench::cpu_model(), threads, threads == 1 ? "" : "s", load0[0], load0[1], load0[2],
      threads == 1 ? "CPU time of the thread (what the machine's load cannot inflate)" : "wall-clock time");
  fmt::print("{:<12} {:>6} {:>8} {:>12} {:>12} {:>7} {:>7}  {:<11} {}\n", "model", "batch", "batches", "runner ms",
             "oneDNN ms", "ratio", "wall", "", "oneDNN's output against the golden reference");
  nlohmann::json out = {{"cpu", tpusim::bench::cpu_model()},
                        {"threads", threads},
                        {"target_max_ratio", kTarget},
                        {"ratio_clock", threads == 1 ? "thread_cpu_time" : "wall"},
                        {"load_average_start", load0}};
  bool exact = true;
  tpusim::compiler::LoadOptions int8;
  int8.precision = tpusim::compiler::Precision::int8;  // the runner's kernels are int8
  int8.mapper.concat_inplace = false;  // the plan reads a concat as its parts
  for (const std::string& path : models) {
    const tpusim::compiler::QGraph graph =
        tpusim::compiler::prepare_file(std::string(tpusim::source_dir()) + "/" + path, int8).graph;
    const tpusim::gpu::GpuPlan plan = tpusim::gpu::make_plan(graph);
    tpusim::gpu::CpuModel runner(plan, threads);
    const std::vector<int8_t> golden = tpusim::compiler::run_golden(graph)[size_t(graph.output)];
    if (runner.infer() != golden) {
      fmt::print("{}: the runner's output DIFFERS from the golden reference\n", graph.name);
      exact = false;
    }
    tpusim::bench::OneDnnNetwork onednn(plan);
    onednn.run();
    // How far oneDNN's own rounding takes its output from the golden reference's (the runner's).
    const tpusim::bench::OutputDifference diff = tpusim::bench::output_difference(onednn.output(), golden);
    // Warm-up (a few batches each), which also sizes the run.
    Sample warm{};
    for (int i = 0; i < 3; ++i) warm = time_one([&] { runner.infer(); }) + time_one([&] { onednn.run(); });
    const int batches =
        int(std::clamp(budget / std::max(1e-9, warm.cpu), double(kMinBatches), double(kMaxBatches)));
    std::vector<double> ours_cpu, theirs_cpu, ours_wall, theirs_wall;
    for (int i = 0; i < batches; ++i) {
      Sample a, b;
      if (i % 2) {
        a = time_one([&] { runner.infer(); });
        b = time_one([&] { onednn.run(); });
      } else {
        b = time_one([&] { onednn.run(); });
        a = time_one([&] { runner.infer(); });
      }
      ours_cpu.push_back(a.cpu), theirs_cpu.push_back(b.cpu);
      ours_wall.push_back(a.wall), theirs_wall.push_back(b.wall);
    }
    using tpusim::bench::median;
    const double wall_ratio = median(ours_wall) / median(theirs_wall);
    const double a = threads == 1 ? median(ours_cpu) : median(ours_wall);
    const double b = threads == 1 ? median(theirs_cpu) : median(theirs_wall);
    fmt::print("{:<12} {:>6} {:>8} {:>12.4f} {:>12.4f} {:>7.2f} {:>7.2f}  {:<11} {:.1f}% equal, max |diff| {}\n",
               graph.name, graph.batch, batches, a * 1e3, b * 1e3, a / b, wall_ratio,
               a / b <= kTarget ? "within 2x" : "OVER 2x", 100 * diff.equal_share, diff.max_abs);
    out["models"].push_back({{"workload", graph.name},
                             {"batch", graph.batch},
                             {"gemm_macs", plan.gemm_macs},
                             {"batches", batches},
                             {"runner_seconds", a},
                             {"onednn_seconds", b},
                             {"ratio", a / b},
                             {"runner_wall_seconds", median(ours_wall)},
                             {"onednn_wall_seconds", median(theirs_wall)},
                             {"wall_ratio", wall_ratio},
                             {"onednn_primitives", onednn.primitives()},
                             {"onednn_equal_share", diff.equal_share},
                             {"onednn_max_abs_difference", diff.max_abs}});
  }
  const std::array<double, 3> load1 = load_average();
  out["load_average_end"] = load1;
  fmt::print("load average at the end {:.2f} {:.2f} {:.2f}\n", load1[0], load1[1], load1[2]);
  if (!args.json.empty()) std::ofstream(args.json) << out.dump(2) << "\n";
  return exact ? 0 : 1;
}
