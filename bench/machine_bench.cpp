// machine_bench [--quick] [--json FILE] [--verify] [--save DIR]: the whole machine on MLP programs
// (machine_bench --programs DIR only writes DIR/mlp0.tpu and DIR/mlp1.tpu, for scripts/demo.sh)
// scheduled like a TPU compiler would (bench/mlp_program.h).
//
//   1. timing engine: simulated cycles per host second on MLP0 and MLP1 (target >= 700e6, i.e.
//      faster than the 700 MHz chip itself);
//   2. fast engine: array MACs per host second on MLP0 and MLP1, against oneDNN's int8 GEMM
//      (dnnl_gemm_s8s8s32 on one thread) running exactly the matmuls of the same program (each
//      batch x 256 x 256, A and C with row stride 256, C overwritten or accumulated as the
//      matmul says), timed in the same process, interleaved with the simulations; the ratio
//      ours / oneDNN (target >= 0.5);
//   3. stepped engine: systolic cell updates per host second (array_steps x 256 x 256 / s) on a
//      small MLP (256 -> 256 -> 256, batch 64) (target >= 1e9);
//   4. memory: for each of the timing and fast engines, a forked child builds the ~100 MB-weights
//      MLP, simulates it and sends back its peak resident set (VmHWM) through a pipe: at the
//      fork, after building the program, after simulating (target < 1 GiB).
// Every figure is the median of 11 repetitions (3 with --quick), wall time (RunResult::host_seconds
// for the simulator, steady_clock for oneDNN). Prints a table with each figure, its target, the
// ratio and "BELOW TARGET" where missed; --json writes all figures. Exits 0 even below target,
// 1 when a simulation fails or --verify finds a difference, 2 on bad arguments.
//
// --verify: every program (MLP0, MLP1, the big MLP, the small one, two edge cases) must pass
// isa::check_program and sim::check_static, run on the fast engine and leave exactly the reference executor's
// memories; prints each program's readable report. --save DIR writes the programs as DIR/NAME.tpu.
#include <dlfcn.h>
#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <systemc>
#include <vector>

#include "bench/bench_common.h"
#include "bench/mlp_program.h"
#include "isa/assembler.h"
#include "sim/machine.h"
#include "sim/reference.h"
#include "sim/report.h"
#include "sim/state.h"

#if TPUSIM_HAVE_DNNL
#include <dnnl.h>
#endif

namespace {

using namespace tpusim;
using bench::cpu_model;
using bench::median;
using bench::MlpSpec;
using isa::Field;
using isa::Opcode;

constexpr double kCyclesTarget = 700e6;
constexpr double kGemmRatioTarget = 0.5;
constexpr double kCellTarget = 1e9;
constexpr double kMemoryTarget = 1024.0 * 1024 * 1024;  // bytes

struct Options {
  bool quick = false, verify = false, programs_only = false;
  std::string json, save_dir;
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A field of /proc/self/status in bytes ("VmHWM:   12345 kB").
uint64_t status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return std::stoull(line.substr(prefix.size())) * 1024;
  return 0;
}

sim::RunResult run(const isa::Program& p, sim::Engine e) { return sim::simulate(p, sim::Arch{}, {e, 0}); }

// This thread's CPU time in seconds.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A simulation with the wall and CPU time of the whole simulate() call. RunResult::host_seconds
// is the wall time of the simulation proper (without the program checks and the memories'
// allocation); sim_cpu_seconds() scales it by the CPU share of the whole call, i.e. removes
// the time this thread spent descheduled, which on a loaded machine can be most of it.
struct Timed {
  sim::RunResult result;
  double wall = 0, cpu = 0;
  double sim_cpu_seconds() const { return result.host_seconds * std::min(1.0, cpu / wall); }
};

Timed run_timed(const isa::Program& p, sim::Engine e) {
  const double w0 = now_seconds(), c0 = thread_seconds();
  Timed t{run(p, e)};
  t.cpu = thread_seconds() - c0;
  t.wall = now_seconds() - w0;
  return t;
}

// ---- figures, with their targets, for the table and the JSON ----

struct Figure {
  std::string name, unit;
  double value = 0, target = 0;
  bool below_is_good = false;  // memory: lower is better
  double ratio() const {
    if (below_is_good) return value > 0 ? target / value : 0;
    return target > 0 ? value / target : 0;
  }
  bool met() const { return below_is_good ? value < target : value >= target; }
};

std::string human(double v, const std::string& unit) {
  if (unit == "bytes") return fmt::format("{:.1f} MiB", v / (1024.0 * 1024));
  if (unit == "ratio") return fmt::format("{:.3f}", v);
  if (unit == "MAC/s") return fmt::format("{:.1f}e9 {}", v / 1e9, unit);
  if (v >= 1e9) return fmt::format("{:.3f}e9 {}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.1f}e6 {}", v / 1e6, unit);
  return fmt::format("{:.4g} {}", v, unit);
}

// ---- oneDNN on the program's matmuls ----

struct Gemm {
  uint64_t ub, acc, rows;
  const uint8_t* tile;
  bool accumulate;
};

// The matmuls of `p` in program order, each with the tile it multiplies by (rw order).
std::vector<Gemm> program_gemms(const isa::Program& p) {
  const sim::Arch arch;
  std::deque<const uint8_t*> fifo;
  const uint8_t* active = nullptr;
  std::vector<Gemm> out;
  for (const isa::Instruction& in : p.code) {
    if (in.opcode == Opcode::read_weights)
      for (uint64_t t = 0; t < in[Field::tiles]; ++t)
        fifo.push_back(p.weights.data() + in[Field::waddr] + t * arch.tile_bytes());
    if (in.opcode != Opcode::matmul) continue;
    if (in[Field::switch_weights]) {
      active = fifo.front();
      fifo.pop_front();
    }
    out.push_back({in[Field::ub], in[Field::acc], in[Field::rows] * in[Field::repeat], active,
                   in[Field::accumulate] != 0});
  }
  return out;
}

#if TPUSIM_HAVE_DNNL
// libdnnl here runs on OpenMP (libgomp, DNNL_CPU_RUNTIME = OMP): one thread through
// omp_set_num_threads, looked up at run time (the benchmark does not link libgomp itself).
bool use_one_omp_thread() {
  auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (set != nullptr) set(1);
  return get == nullptr || get() == 1;
}

// Runs the matmuls with oneDNN on a UB-sized A buffer and an accumulator-sized C buffer; seconds.
class OneDnnSequence {
 public:
  explicit OneDnnSequence(const isa::Program& p) : gemms_(program_gemms(p)) {
    const sim::Arch arch;
    ub_.resize(arch.ub_rows() * arch.ub_row_bytes());
    isa::fill_random(std::span<uint8_t>(reinterpret_cast<uint8_t*>(ub_.data()), ub_.size()), 99);
    acc_.assign(arch.acc_entries * arch.array_cols, 0);
  }
  double run() { return run_both().first; }
  // Wall and thread CPU seconds of one pass over the matmuls.
  std::pair<double, double> run_both() {
    const int32_t zero = 0;
    const double t0 = now_seconds(), c0 = thread_seconds();
    for (const Gemm& g : gemms_) {
      const dnnl_status_t st =
          dnnl_gemm_s8s8s32('N', 'N', 'F', static_cast<dnnl_dim_t>(g.rows), 256, 256, 1.f,
                            ub_.data() + g.ub * 256, 256, 0, reinterpret_cast<const int8_t*>(g.tile), 256, 0,
                            g.accumulate ? 1.f : 0.f, acc_.data() + g.acc * 256, 256, &zero);
      if (st != dnnl_success) throw std::runtime_error("dnnl_gemm_s8s8s32 failed");
    }
    const double cpu = thread_seconds() - c0;
    return {now_seconds() - t0, cpu};
  }
  size_t count() const { return gemms_.size(); }
  double macs() const {
    double m = 0;
    for (const Gemm& g : gemms_) m += static_cast<double>(g.rows) * 256 * 256;
    return m;
  }

 private:
  std::vector<Gemm> gemms_;
  std::vector<int8_t> ub_;
  std::vector<int32_t> acc_;
};
#endif

// ---- memory: one forked child per engine ----

struct MemoryReport {
  uint64_t at_fork = 0, after_build = 0, after_run = 0, weight_bytes = 0, cycles = 0;
  int ok = 0;
};

MemoryReport measure_memory(sim::Engine engine) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    MemoryReport r;
    r.at_fork = status_bytes("VmHWM");
    try {
      const isa::Program p = bench::make_mlp_program(bench::big_mlp_spec());
      r.weight_bytes = p.weights.size();
      r.after_build = status_bytes("VmHWM");
      const sim::RunResult res = run(p, engine);
      r.cycles = res.cycles;
      r.after_run = status_bytes("VmHWM");
      r.ok = 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "machine_bench: memory child ({}): {}\n", sim::engine_name(engine), e.what());
    }
    const ssize_t n = write(fds[1], &r, sizeof r);
    close(fds[1]);
    _exit(n == static_cast<ssize_t>(sizeof r) && r.ok ? 0 : 1);
  }
  close(fds[1]);
  MemoryReport r;
  const ssize_t n = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != static_cast<ssize_t>(sizeof r)) r.ok = 0;
  return r;
}

// ---- --verify ----

bool verify(const std::vector<std::pair<std::string, isa::Program>>& programs, const std::string& save_dir) {
  bool all_ok = true;
  const sim::Arch arch;
  for (const auto& [name, p] : programs) {
    try {
      if (std::string err = isa::check_program(p); !err.empty()) throw InputError("check_program: " + err);
      sim::check_static(p, arch);
      const sim::RunResult r = run(p, sim::Engine::fast);
      const double t0 = now_seconds();
      const sim::MachineState ref = sim::run_reference(p, arch);
      const double ref_s = now_seconds() - t0;
      std::string why;
      const bool same = sim::same_memories(*r.state, ref, &why);
      sim::ReportInput in;
      in.program = &p;
      in.arch = &arch;
      in.engine = sim::Engine::fast;
      in.result = &r;
      in.output_matches_reference = same;
      fmt::print("== {}: {} instructions, {} weight bytes; fast {:.3f} s, reference {:.3f} s: {}\n{}\n", name,
                 p.code.size(), p.weights.size(), r.host_seconds, ref_s,
                 same ? "same memories" : "DIFFERENT: " + why, sim::format_report(sim::make_report(in)));
      // Output statistics: a sanity check that the requantization keeps values alive.
      for (const sim::HostBuffer& h : r.state->host) {
        if (!h.output) continue;
        uint64_t zeros = 0, sat = 0;
        double sq = 0;
        for (uint8_t b : h.bytes) {
          const int v = static_cast<int8_t>(b);
          zeros += v == 0;
          sat += v == 127 || v == -128;
          sq += double(v) * v;
        }
        const double n = static_cast<double>(h.bytes.size());
        fmt::print("   output {}: rms {:.1f}, {:.1f}% zero, {:.1f}% saturated\n", h.name, std::sqrt(sq / n),
                   100 * zeros / n, 100 * sat / n);
      }
      all_ok = all_ok && same;
      if (!save_dir.empty()) isa::save_program(std::filesystem::path(save_dir) / (name + ".tpu"), p);
    } catch (const std::exception& e) {
      fmt::print("== {}: FAILED: {}\n", name, e.what());
      all_ok = false;
    }
  }
  return all_ok;
}

int usage() {
  fmt::print(stderr,
             "usage: machine_bench [--quick] [--json FILE] [--verify] [--save DIR] | --programs DIR\n");
  return 2;
}

}  // namespace

int sc_main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") opt.quick = true;
    else if (a == "--verify") opt.verify = true;
    else if (a == "--json" && i + 1 < argc) opt.json = argv[++i];
    else if (a == "--save" && i + 1 < argc) opt.save_dir = argv[++i];
    else if (a == "--programs" && i + 1 < argc) opt.save_dir = argv[++i], opt.programs_only = true;
    else return usage();
  }
  const int reps = opt.quick ? 3 : 11;
  std::vector<Figure> figures;
  nlohmann::json js;
  js["cpu"] = cpu_model();
  js["repetitions"] = reps;

  if (opt.programs_only) {
    for (const auto& [name, spec] :
         {std::pair{"mlp0", bench::mlp0_spec()}, std::pair{"mlp1", bench::mlp1_spec()}})
      isa::save_program(std::filesystem::path(opt.save_dir) / (std::string(name) + ".tpu"),
                        bench::make_mlp_program(spec));
    return 0;
  }
  try {
    // (4) first, while this process is small: the children inherit its resident set.
    nlohmann::json jm = nlohmann::json::object();
    for (sim::Engine e : {sim::Engine::timing, sim::Engine::fast}) {
      const MemoryReport m = measure_memory(e);
      const std::string en(sim::engine_name(e));
      if (!m.ok) {
        fmt::print(stderr, "machine_bench: the memory child for the {} engine failed\n", en);
        return 1;
      }
      figures.push_back({fmt::format("peak RSS, {} engine, 100 MB weights", en), "bytes",
                         static_cast<double>(m.after_run), kMemoryTarget, true});
      jm[en] = {{"vmhwm_at_fork", m.at_fork},     {"vmhwm_after_build", m.after_build},
                {"vmhwm_after_run", m.after_run}, {"build_share", m.after_build - m.at_fork},
                {"weight_bytes", m.weight_bytes}, {"cycles", m.cycles}};
    }
    js["memory"] = jm;

    const std::vector<std::pair<std::string, MlpSpec>> specs = {{"mlp0", bench::mlp0_spec()},
                                                                {"mlp1", bench::mlp1_spec()}};
    std::vector<std::pair<std::string, isa::Program>> programs;
    for (const auto& [name, spec] : specs) programs.emplace_back(name, bench::make_mlp_program(spec));
    const isa::Program small = bench::make_mlp_program({"mlp-small", {256, 256, 256}, 64, 4});

    if (opt.verify) {
      std::vector<std::pair<std::string, isa::Program>> all = programs;
      all.emplace_back("mlp-big", bench::make_mlp_program(bench::big_mlp_spec()));
      all.emplace_back("mlp-small", small);
      // Partial tiles (zero-padded weights, narrow DMAs) and the largest batch.
      all.emplace_back("mlp-odd", bench::make_mlp_program({"mlp-odd", {300, 520, 700, 10}, 7, 5}));
      all.emplace_back("mlp-b2048", bench::make_mlp_program({"mlp-b2048", {512, 768, 256}, 2048, 6}));
      if (!verify(all, opt.save_dir)) return 1;
    }

    // (1) timing engine and (2) fast engine against oneDNN, per model.
#if TPUSIM_HAVE_DNNL
    const bool one_thread = use_one_omp_thread();
    js["onednn_one_thread"] = one_thread;
#endif
    run(programs[0].second, sim::Engine::timing);  // elaborate the SystemC design once, outside any timing
    for (const auto& [name, p] : programs) {
      // *_cpu: the same figure in this thread's CPU time (SystemC's processes are coroutines on
      // this thread, oneDNN runs on it): time spent descheduled on a loaded machine excluded.
      std::vector<double> cps, cps_cpu, macs_s, macs_cpu, dnnl_s, dnnl_cpu;
      uint64_t cycles = 0, array_macs = 0;
#if TPUSIM_HAVE_DNNL
      OneDnnSequence dnnl(p);
      dnnl.run();  // warm up (oneDNN's kernel generation, first touches)
#endif
      run(p, sim::Engine::fast);  // warm up
      for (int r = 0; r < reps; ++r) {
        const Timed t = run_timed(p, sim::Engine::timing);
        cycles = t.result.cycles;
        cps.push_back(static_cast<double>(cycles) / t.result.host_seconds);
        cps_cpu.push_back(static_cast<double>(cycles) / t.sim_cpu_seconds());
        const Timed f = run_timed(p, sim::Engine::fast);
        array_macs = f.result.array_macs;
        macs_s.push_back(static_cast<double>(array_macs) / f.result.host_seconds);
        macs_cpu.push_back(static_cast<double>(array_macs) / f.sim_cpu_seconds());
#if TPUSIM_HAVE_DNNL
        const auto [wall, cpu] = dnnl.run_both();
        dnnl_s.push_back(dnnl.macs() / wall);
        dnnl_cpu.push_back(dnnl.macs() / cpu);
#endif
      }
      const double cps_m = median(cps), macs_m = median(macs_s);
      figures.push_back(
          {fmt::format("timing engine, {}: simulated cycles/s", name), "cycles/s", cps_m, kCyclesTarget});
      figures.push_back({"  same, in CPU time", "cycles/s", median(cps_cpu), kCyclesTarget});
      nlohmann::json jp = {{"cycles", cycles},
                           {"array_macs", array_macs},
                           {"timing_cycles_per_s", cps_m},
                           {"timing_cycles_per_s_runs", cps},
                           {"timing_cycles_per_cpu_s", median(cps_cpu)},
                           {"timing_cycles_per_cpu_s_runs", cps_cpu},
                           {"fast_macs_per_s", macs_m},
                           {"fast_macs_per_s_runs", macs_s},
                           {"fast_macs_per_cpu_s", median(macs_cpu)},
                           {"fast_macs_per_cpu_s_runs", macs_cpu}};
      figures.push_back({fmt::format("fast engine, {}: array MACs/s", name), "MAC/s", macs_m, 0});
#if TPUSIM_HAVE_DNNL
      const double dnnl_m = median(dnnl_s);
      std::vector<double> paired;  // per repetition: ours / oneDNN measured back to back
      for (size_t r = 0; r < macs_s.size(); ++r) paired.push_back(macs_s[r] / dnnl_s[r]);
      figures.push_back(
          {fmt::format("oneDNN s8s8s32 1 thread, same matmuls, {}: MACs/s", name), "MAC/s", dnnl_m, 0});
      figures.push_back(
          {fmt::format("fast engine / oneDNN, {}", name), "ratio", macs_m / dnnl_m, kGemmRatioTarget});
      const double ratio_cpu = median(macs_cpu) / median(dnnl_cpu);
      figures.push_back({fmt::format("  same, in CPU time ({:.1f}e9 / {:.1f}e9 MAC/s)",
                                     median(macs_cpu) / 1e9, median(dnnl_cpu) / 1e9),
                         "ratio", ratio_cpu, kGemmRatioTarget});
      jp["onednn_macs_per_s"] = dnnl_m;
      jp["onednn_macs_per_s_runs"] = dnnl_s;
      jp["onednn_macs_per_cpu_s"] = median(dnnl_cpu);
      jp["onednn_macs_per_cpu_s_runs"] = dnnl_cpu;
      jp["fast_over_onednn"] = macs_m / dnnl_m;
      jp["fast_over_onednn_cpu"] = ratio_cpu;
      jp["fast_over_onednn_paired_median"] = median(paired);
      jp["matmuls"] = dnnl.count();
#endif
      js["models"][name] = jp;
    }

    // (3) stepped engine.
    {
      run(small, sim::Engine::stepped);  // warm up
      std::vector<double> cells;
      uint64_t steps = 0;
      std::vector<double> cells_cpu;
      for (int r = 0; r < reps; ++r) {
        const Timed s = run_timed(small, sim::Engine::stepped);
        steps = s.result.array_steps;
        cells.push_back(static_cast<double>(steps) * 256 * 256 / s.result.host_seconds);
        cells_cpu.push_back(static_cast<double>(steps) * 256 * 256 / s.sim_cpu_seconds());
      }
      figures.push_back(
          {"stepped engine, 256-256-256 b64: cell updates/s", "cells/s", median(cells), kCellTarget});
      js["stepped"] = {{"array_steps", steps},
                       {"cell_updates_per_s", median(cells)},
                       {"runs", cells},
                       {"cell_updates_per_cpu_s", median(cells_cpu)},
                       {"cpu_runs", cells_cpu}};
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "machine_bench: {}\n", e.what());
    return 1;
  }

  // The table.
  fmt::print("\nmachine_bench ({} repetitions, medians; {})\n", reps, cpu_model());
  fmt::print("{:<52} {:>18} {:>18} {:>7}\n", "figure", "value", "target", "ratio");
  for (const Figure& f : figures) {
    const std::string target =
        f.target == 0 ? "-" : (f.below_is_good ? "< " : ">= ") + human(f.target, f.unit);
    fmt::print("{:<52} {:>18} {:>18} {:>7}{}\n", f.name, human(f.value, f.unit), target,
               f.target == 0 ? "-" : fmt::format("{:.2f}", f.ratio()),
               f.target == 0 || f.met() ? "" : "  BELOW TARGET");
  }
  for (const auto& [engine, m] : js["memory"].items())
    fmt::print(
        "  memory, {} engine: {:.1f} MiB at fork, {:.1f} MiB after building the program "
        "(its share {:.1f} MiB, weights {:.1f} MiB), {:.1f} MiB after simulating\n",
        engine, m["vmhwm_at_fork"].get<double>() / 1048576, m["vmhwm_after_build"].get<double>() / 1048576,
        m["build_share"].get<double>() / 1048576, m["weight_bytes"].get<double>() / 1048576,
        m["vmhwm_after_run"].get<double>() / 1048576);

  if (!opt.json.empty()) {
    nlohmann::json jf = nlohmann::json::array();
    for (const Figure& f : figures)
      jf.push_back({{"name", f.name},
                    {"unit", f.unit},
                    {"value", f.value},
                    {"target", f.target},
                    {"lower_is_better", f.below_is_good},
                    {"ratio", f.ratio()},
                    {"met", f.met()}});
    js["figures"] = jf;
    std::ofstream out(opt.json);
    out << js.dump(2) << "\n";
    if (!out) {
      fmt::print(stderr, "machine_bench: cannot write {}\n", opt.json);
      return 1;
    }
  }
  return 0;
}
