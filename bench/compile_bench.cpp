// How long the compiler takes on the TPU paper's workloads (issue 4: "compiling CNN1, about 100M
// weights, takes seconds, not minutes"), phase by phase: parse (TOML, seeded weights),
// quantize (calibration runs the float reference on the model's input), lower (tiling, schedule,
// weight image) and save (.tpu container). The reference measured in the same run is the timing
// engine simulating the compiled program: the ratio says how many simulations one compile costs.
//
// Usage: compile_bench [--quick] [--json FILE]. Medians over repetitions (1 with --quick); always
// exits 0 unless a workload fails to compile (a figure over the target prints ABOVE TARGET).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "compiler/compile.h"
#include "sim/machine.h"
#include "tools/source_dir.h"

namespace {

using tpusim::bench::median;
namespace fs = std::filesystem;

constexpr double kTargetSeconds = 10.0;  // "seconds, not minutes"

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Figure {
  std::string workload;
  uint64_t weights = 0, instructions = 0, tiles = 0;
  double parse = 0, quantize = 0, lower = 0, save = 0, total = 0, simulate = 0;
  double timing_only = 0;  // a timing-only compile (LoadOptions::timing_only: no data), parse to lower
};

Figure measure(const fs::path& path, int reps) {
  const tpusim::sim::Arch arch;
  std::vector<double> parse, quantize, lower, save, total, simulate, timing_only;
  Figure f;
  f.workload = path.stem().string();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const tpusim::compiler::Compiled c = tpusim::compiler::compile_file(path, arch);
    const auto t1 = std::chrono::steady_clock::now();
    const fs::path out = fs::temp_directory_path() / ("compile_bench_" + f.workload + ".tpu");
    tpusim::isa::save_program(out, c.program);
    save.push_back(seconds_since(t1));
    total.push_back(seconds_since(t0));
    parse.push_back(c.parse_seconds);
    quantize.push_back(c.quantize_seconds);
    lower.push_back(c.lower_seconds);
    fs::remove(out);
    const auto t2 = std::chrono::steady_clock::now();
    tpusim::sim::simulate(c.program, arch, {tpusim::sim::Engine::timing, 0});
    simulate.push_back(seconds_since(t2));
    tpusim::compiler::LoadOptions o;
    o.timing_only = true;
    const auto t3 = std::chrono::steady_clock::now();
    tpusim::compiler::compile_file(path, arch, o);
    timing_only.push_back(seconds_since(t3));
    f.instructions = c.program.code.size();
    f.tiles = c.program.meta.value("weight_tiles", uint64_t{0});
    f.weights = 0;
    for (const auto& l : c.model.layers) f.weights += l.weights.size();
  }
  f.parse = median(parse);
  f.quantize = median(quantize);
  f.lower = median(lower);
  f.save = median(save);
  f.total = median(total);
  f.simulate = median(simulate);
  f.timing_only = median(timing_only);
  return f;
}

}  // namespace

// libsystemc provides main() and calls sc_main() (BUILD-NOTES.md).
extern "C" int sc_main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: compile_bench [--quick] [--json FILE]\n");
    return 2;
  }
  const int reps = args.quick ? 1 : 3;
  const fs::path dir = fs::path(tpusim::source_dir()) / "workloads" / "tpu-v1";
  std::printf("compile_bench: the six TPU paper workloads on tpu-v1, median of %d; CPU %s\n", reps,
              tpusim::bench::cpu_model().c_str());
  std::printf("%-7s %11s %6s %7s %8s %9s %7s %7s %8s %10s %9s %13s %8s\n", "app", "weights", "tiles", "instrs",
              "parse s", "quantize s", "lower s", "save s", "total s", "simulate s", "compile/sim", "timing-only s",
              "speedup");
  std::vector<Figure> figures;
  for (const char* w : {"mlp0", "mlp1", "lstm0", "lstm1", "cnn0", "cnn1"}) {
    const Figure f = measure(dir / (std::string(w) + ".toml"), reps);
    std::printf("%-7s %11llu %6llu %7llu %8.3f %10.3f %7.3f %7.3f %8.3f %10.3f %9.1fx %13.3f %7.1fx%s\n",
                f.workload.c_str(), static_cast<unsigned long long>(f.weights),
                static_cast<unsigned long long>(f.tiles), static_cast<unsigned long long>(f.instructions), f.parse,
                f.quantize, f.lower, f.save, f.total, f.simulate, f.total / f.simulate, f.timing_only,
                (f.total - f.save) / f.timing_only, f.total > kTargetSeconds ? "  ABOVE TARGET" : "");
    figures.push_back(f);
  }
  std::printf("target: every compile under %.0f s; timing-only: the compile `run --engine timing` and timing sweeps make "
              "(no seeded weights, calibration or weight image), its speedup against the full compile without saving\n",
              kTargetSeconds);
  if (!args.json.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Figure& f : figures)
      rows.push_back({{"workload", f.workload}, {"weights", f.weights}, {"weight_tiles", f.tiles},
                      {"instructions", f.instructions}, {"parse_seconds", f.parse}, {"quantize_seconds", f.quantize},
                      {"lower_seconds", f.lower}, {"save_seconds", f.save}, {"compile_seconds", f.total},
                      {"timing_simulation_seconds", f.simulate}, {"timing_only_compile_seconds", f.timing_only}});
    std::ofstream(args.json) << nlohmann::json{{"rows", rows}, {"cpu", tpusim::bench::cpu_model()}}.dump(2) << "\n";
  }
  return 0;
}
