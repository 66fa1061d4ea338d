// The sweep scheduler's cost estimates (tools/sweep/schedule.h) against measured seconds: each
// point of a spec (paper-matrix by default) compiled for its machine and simulated in this process
// as a sweep worker does (its model prepared once, then lowered and simulated per point), the
// median of --repeat runs (and of its lowering alone), beside the scheduler's estimate, its
// activation-unit term and the pieces it counted (compiler::pieces) with the program's. The summary gives the typical (geometric mean) and worst factor between
// estimate and measurement (max(e/m, m/e)), over every point, over the points above 10 ms (below,
// a point's time is mostly noise on a shared host) and over CNN1's. To compare two estimators, run
// the bench built from each, interleaved: the measured side is the same code.
//
// Usage: sweep_cost_bench [--repeat N] [--estimate-only] [SPEC]. Model points only (a program's
// estimate is a default). --estimate-only: the estimates alone (estimate_costs, repeated N times:
// its time, as a sweep's parent spends it before any point runs), nothing compiled or simulated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "compiler/compile.h"
#include "sim/machine.h"
#include "tools/sweep/schedule.h"
#include "tools/sweep/spec.h"
#include "tools/source_dir.h"

namespace {

using namespace tpusim;
using tools::sweep::PointCost;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The factor between estimate and measurement, max(e/m, m/e): typical (geometric mean) and worst;
// and the same once the estimates are scaled by the one factor that fits them best (their
// geometric mean e/m): a scheduler needs only the points' order and relative size, and a loaded
// host slows every point alike.
struct Errors {
  std::vector<double> logs;  // ln(estimate / measured)
  void add(double e, double m) { logs.push_back(std::log(std::max(e, 1e-6) / std::max(m, 1e-6))); }
  static std::string summary(const std::vector<double>& l, double shift) {
    double sum = 0, worst = 0;
    for (double x : l) sum += std::abs(x - shift), worst = std::max(worst, std::abs(x - shift));
    return fmt_factor(std::exp(sum / double(l.size()))) + " typical, " + fmt_factor(std::exp(worst)) + " worst";
  }
  std::string text() const {
    if (logs.empty()) return "-";
    double mean = 0;
    for (double x : logs) mean += x / double(logs.size());
    return summary(logs, 0) + "; scaled by " + fmt_factor(std::exp(-mean)) + ": " + summary(logs, mean);
  }
  static std::string fmt_factor(double f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", f);
    return buf;
  }
};

}  // namespace

// libsystemc provides main() and calls sc_main() (BUILD-NOTES.md).
extern "C" int sc_main(int argc, char** argv) {
  int repeat = 3;
  bool estimate_only = false;
  std::string spec_path = std::string(tpusim::source_dir()) + "/workloads/sweeps/paper-matrix.toml";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--estimate-only") == 0) estimate_only = true;
    else if (argv[i][0] != '-') spec_path = argv[i];
    else {
      std::fprintf(stderr, "usage: sweep_cost_bench [--repeat N] [--estimate-only] [SPEC]\n");
      return 2;
    }
  }
  const tools::sweep::Spec spec = tools::sweep::load_spec(spec_path);
  std::vector<const tools::sweep::Point*> todo;
  for (const tools::sweep::Point& p : spec.points)
    if (p.workload->is_model) todo.push_back(&p);
  std::vector<double> estimate_seconds;
  std::vector<PointCost> costs;
  for (int r = 0; r < (estimate_only ? repeat : 1); ++r) {
    const auto t0 = Clock::now();
    costs = tools::sweep::estimate_costs(spec, todo);
    estimate_seconds.push_back(since(t0));
  }
  const double estimating = tpusim::bench::median(estimate_seconds);
  if (estimate_only) {
    std::printf("%-8s %11s %6s %7s %10s %10s %10s\n", "workload", "array", "acc", "pieces", "activates", "estimate",
                "prepare");
    for (size_t i = 0; i < todo.size(); ++i)
      std::printf("%-8s %5llu x %-4llu %6llu %7llu %10.0f %9.4fs %9.4fs\n", todo[i]->workload->name.c_str(),
                  (unsigned long long)todo[i]->arch.array_rows, (unsigned long long)todo[i]->arch.array_cols,
                  (unsigned long long)todo[i]->arch.acc_entries, (unsigned long long)costs[i].pieces,
                  costs[i].activates, costs[i].run, costs[i].prepare);
    std::printf("\nestimating the %zu points: %.4fs (median of %d)\n", todo.size(), estimating, repeat);
    return 0;
  }
  const bool timing_only = spec.engine == sim::Engine::timing && !spec.full_compile;

  std::map<std::string, compiler::Compiled> prepared;
  std::map<std::string, std::pair<double, double>> prepare_seconds;  // estimate, measured
  Errors all, big, cnn1;
  std::printf("%-8s %11s %6s %7s %8s %8s %8s %10s %10s %10s %10s %6s\n", "workload", "array", "acc", "pieces",
              "instr.", "matmuls", "acts", "measured", "lowering", "estimate", "act. term", "e/m");
  for (size_t i = 0; i < todo.size(); ++i) {
    const tools::sweep::Point& p = *todo[i];
    const PointCost& c = costs[i];
    compiler::LoadOptions o;
    o.batch = p.batch;
    o.timing_only = timing_only;
    o.mapper = p.mapper;
    auto it = prepared.find(c.model);
    if (it == prepared.end()) {
      const auto t0 = Clock::now();
      it = prepared.emplace(c.model, compiler::prepare_file(p.workload->path, o)).first;
      prepare_seconds[p.workload->name + (p.batch ? " batch " + std::to_string(*p.batch) : "")] = {c.prepare, since(t0)};
    }
    std::vector<double> runs, lowers;
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = Clock::now();
      compiler::lower_for(it->second, p.arch, p.mapper);
      lowers.push_back(since(t0));
      sim::RunOptions opt;
      opt.engine = spec.engine;
      opt.max_cycles = spec.max_cycles;
      (void)sim::simulate(it->second.program, p.arch, opt);
      runs.push_back(since(t0));
    }
    const double m = tpusim::bench::median(runs), e = c.run;
    const double lowering = tpusim::bench::median(lowers);
    // What the point's program holds: instructions, of them matmuls and activates; the pieces its
    // batch runs in, beside the estimate's ("e/p").
    uint64_t acts = 0, matmuls = 0;
    const uint64_t piece = it->second.program.meta.value("batch_piece", uint64_t{0});
    const uint64_t pieces = piece ? (it->second.model.batch + piece - 1) / piece : 1;
    const std::string pieces_text = std::to_string(c.pieces) + "/" + std::to_string(pieces);
    for (const isa::Instruction& in : it->second.program.code) {
      acts += in.opcode == isa::Opcode::activate;
      matmuls += in.opcode == isa::Opcode::matmul;
    }
    all.add(e, m);
    if (m >= 0.01) big.add(e, m);
    if (p.workload->name == "cnn1") cnn1.add(e, m);
    std::printf("%-8s %5llu x %-4llu %6llu %7s %8zu %8llu %8llu %9.4fs %9.4fs %9.4fs %9.4fs %6.2f\n",
                p.workload->name.c_str(), (unsigned long long)p.arch.array_rows,
                (unsigned long long)p.arch.array_cols, (unsigned long long)p.arch.acc_entries, pieces_text.c_str(),
                it->second.program.code.size(), (unsigned long long)matmuls, (unsigned long long)acts, m, lowering, e,
                c.activation, e / m);
  }
  std::printf("\nestimating the %zu points (estimate_costs, in the sweep's parent before any point runs): %.3fs\n",
              todo.size(), estimating);
  std::printf("\npreparation (once per model):\n");
  for (const auto& [name, s] : prepare_seconds)
    std::printf("  %-20s estimate %.4fs, measured %.4fs\n", name.c_str(), s.first, s.second);
  std::printf("\nestimate against measured, factor max(e/m, m/e) (median of %d runs a point):\n", repeat);
  std::printf("  all %zu points:        %s\n", all.logs.size(), all.text().c_str());
  std::printf("  %zu points over 10 ms: %s\n", big.logs.size(), big.text().c_str());
  std::printf("  CNN1's %zu points:      %s\n", cnn1.logs.size(), cnn1.text().c_str());
  return 0;
}
