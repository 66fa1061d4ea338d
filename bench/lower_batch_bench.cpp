// The lowering against the batch (an architect's batch sweep): CNN1's timing-only compile (the one
// `run --engine timing` and timing sweeps make) parsed and quantized once per batch, then lowered
// at batches 128 to 2048, median of 5 (1 with --quick): wall and process CPU seconds (the CPU
// figure is the one to read on a loaded machine), the pieces the batch runs in, and the CPU time
// per 1000 samples, about constant when the lowering scales linearly in the batch
// (docs/compiler.md, "Performance of the compiler").
//
// Usage: lower_batch_bench [--quick] [--json FILE]. Always exits 0 unless the model fails to compile.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/bench_common.h"
#include "compiler/compile.h"
#include "sim/machine.h"
#include "tools/source_dir.h"

namespace {

using tpusim::bench::median;
namespace fs = std::filesystem;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Figure {
  uint64_t batch = 0, instructions = 0, piece = 0;
  double wall = 0, cpu = 0;  // medians of the lowering's seconds
};

Figure measure(const fs::path& path, uint64_t batch, int reps) {
  const tpusim::sim::Arch arch;
  tpusim::compiler::LoadOptions o;
  o.timing_only = true;
  o.batch = batch;
  tpusim::compiler::Compiled c = tpusim::compiler::prepare_file(path, o);
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_seconds();
    tpusim::compiler::lower_for(c, arch);
    cpu.push_back(cpu_seconds() - c0);
    wall.push_back(c.lower_seconds);
  }
  return {batch, c.program.code.size(), c.program.meta.value("batch_piece", uint64_t{0}), median(wall), median(cpu)};
}

}  // namespace

// libsystemc provides main() and calls sc_main() (BUILD-NOTES.md).
extern "C" int sc_main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: lower_batch_bench [--quick] [--json FILE]\n");
    return 2;
  }
  const int reps = args.quick ? 1 : 5;
  const fs::path model = fs::path(tpusim::source_dir()) / "workloads" / "tpu-v1" / "cnn1.toml";
  std::printf("lower_batch_bench: CNN1's timing-only lowering on tpu-v1 against the batch, median of %d; CPU %s\n",
              reps, tpusim::bench::cpu_model().c_str());
  std::printf("%6s %6s %9s %8s %7s %15s\n", "batch", "piece", "instrs", "lower s", "CPU s", "CPU s/1000 smp");
  nlohmann::json rows = nlohmann::json::array();
  for (const uint64_t b : {128, 256, 512, 1024, 2048}) {
    const Figure f = measure(model, b, reps);
    std::printf("%6llu %6llu %9llu %8.3f %7.3f %15.3f\n", static_cast<unsigned long long>(f.batch),
                static_cast<unsigned long long>(f.piece), static_cast<unsigned long long>(f.instructions), f.wall,
                f.cpu, f.cpu * 1000 / double(f.batch));
    std::fflush(stdout);
    rows.push_back({{"batch", f.batch}, {"batch_piece", f.piece}, {"instructions", f.instructions},
                    {"lower_seconds", f.wall}, {"lower_cpu_seconds", f.cpu}});
  }
  if (!args.json.empty())
    std::ofstream(args.json) << nlohmann::json{{"rows", rows}, {"cpu", tpusim::bench::cpu_model()}}.dump(2) << "\n";
  return 0;
}
