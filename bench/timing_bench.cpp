// The architect's loop on the timing engine (issue 18), as a user runs it, in processes of its
// own (wall time and peak resident memory as /usr/bin/time measures them: the largest of the
// process and its workers):
// - `tpusim run workloads/tpu-v1/APP.toml --engine timing` for the six paper apps (a timing-only
//   compile: no weights, no calibration, no weight image; docs/compiler.md);
// - `tpusim sweep workloads/sweeps/paper-matrix.toml -j 2`: app-points per second.
// Each against the same command with --full-compile (the compile with data every timing run and
// timing sweep made before timing-only compiles), measured in the same run.
//
// With --reference TPUSIM (another tpusim executable, e.g. a build of the commit before a change),
// each command also runs on it, interleaved, and its figures print beside (the `ref` columns).
//
// Usage: timing_bench [--quick] [--json FILE] [--reference TPUSIM]. Medians over repetitions (1 with
// --quick); a figure over its target prints BELOW TARGET. Exits 1 when a command fails.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "tools/source_dir.h"

extern char** environ;

namespace {

using tpusim::bench::median;
namespace fs = std::filesystem;

constexpr double kRunSeconds = 0.3, kRunMB = 250;       // `run cnn1.toml --engine timing`
constexpr double kSweepPointsPerSecond = 50, kSweepMB = 400;  // paper-matrix at -j 2

struct Measure {
  double seconds = 0, mb = 0;
};

// Runs argv (stdout and stderr to /dev/null), returns its wall time and peak RSS.
Measure run_command(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start " + args[0]);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  Measure m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.mb = double(ru.ru_maxrss) / 1024.0;  // KB (Linux) -> MiB
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    throw std::runtime_error("failed: " + line);
  }
  return m;
}

struct Pair {
  Measure timing_only, full, reference;  // medians (reference: 0 without --reference)
};

// args[0] is this build's tpusim; `reference` (when not empty) runs the same arguments.
Pair measure(std::vector<std::string> args, int reps, const std::string& reference) {
  std::vector<double> ts, tm, fs_, fm, rs, rm;
  for (int r = 0; r < reps; ++r) {
    const Measure t = run_command(args);
    std::vector<std::string> full = args;
    full.push_back("--full-compile");
    const Measure f = run_command(full);
    ts.push_back(t.seconds), tm.push_back(t.mb), fs_.push_back(f.seconds), fm.push_back(f.mb);
    if (!reference.empty()) {
      std::vector<std::string> ref = args;
      ref[0] = reference;
      const Measure m = run_command(ref);
      rs.push_back(m.seconds), rm.push_back(m.mb);
    }
  }
  return {{median(ts), median(tm)}, {median(fs_), median(fm)}, {median(rs), median(rm)}};
}

// " ref S s M MB (Xx)" after a row when a reference ran.
std::string reference_columns(const Measure& ref, const Measure& now) {
  if (ref.seconds <= 0) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "  ref %.3f s %.0f MB (%.1fx)", ref.seconds, ref.mb, ref.seconds / now.seconds);
  return buf;
}

uint64_t csv_rows(const fs::path& csv) {
  std::ifstream in(csv);
  uint64_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += !line.empty();
  return lines ? lines - 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: timing_bench [--quick] [--json FILE] [--reference TPUSIM]\n");
    return 2;
  }
  const int reps = args.quick ? 1 : 3;
  const fs::path root = tpusim::source_dir(), tpusim = TPUSIM_BINARY;
  const fs::path tmp = fs::temp_directory_path() / ("timing_bench." + std::to_string(getpid()));
  fs::create_directories(tmp);
  nlohmann::json rows = nlohmann::json::array();
  int rc = 0;
  try {
    std::printf("timing_bench: timing-only compiles against --full-compile, median of %d; CPU %s\n", reps,
                tpusim::bench::cpu_model().c_str());
    if (!args.reference.empty()) std::printf("reference (ref): %s\n", args.reference.c_str());
    std::printf("%-44s %9s %8s %9s %8s %8s %7s\n", "command", "wall s", "peak MB", "full s", "full MB", "speedup",
                "memory");
    for (const char* app : {"mlp0", "mlp1", "lstm0", "lstm1", "cnn0", "cnn1"}) {
      const fs::path model = root / "workloads/tpu-v1" / (std::string(app) + ".toml");
      const Pair p = measure({tpusim.string(), "run", model.string(), "--engine", "timing", "--report",
                              (tmp / "report.json").string()},
                             reps, args.reference);
      const bool target = std::string(app) == "cnn1";
      const bool below = target && (p.timing_only.seconds > kRunSeconds || p.timing_only.mb > kRunMB);
      std::printf("%-44s %9.3f %8.0f %9.3f %8.0f %7.1fx %6.1fx%s%s\n",
                  ("run " + std::string(app) + ".toml --engine timing").c_str(), p.timing_only.seconds,
                  p.timing_only.mb, p.full.seconds, p.full.mb, p.full.seconds / p.timing_only.seconds,
                  p.full.mb / p.timing_only.mb, below ? "  BELOW TARGET" : "",
                  reference_columns(p.reference, p.timing_only).c_str());
      rows.push_back({{"command", std::string("run ") + app + ".toml --engine timing"},
                      {"seconds", p.timing_only.seconds}, {"peak_mb", p.timing_only.mb},
                      {"full_compile_seconds", p.full.seconds}, {"full_compile_peak_mb", p.full.mb},
                      {"reference_seconds", p.reference.seconds}, {"reference_peak_mb", p.reference.mb}});
    }
    const fs::path spec = root / "workloads/sweeps/paper-matrix.toml";
    // [0] timing-only, [1] --full-compile, [2] the reference executable (timing-only where it has it).
    std::vector<double> rates[3], mbs[3], secs[3];
    uint64_t points = 0;
    for (int r = 0; r < reps; ++r)
      for (int full = 0; full < (args.reference.empty() ? 2 : 3); ++full) {
        fs::remove_all(tmp / "sweep");
        fs::create_directories(tmp / "sweep");
        const fs::path out = tmp / "sweep" / "matrix.csv";
        std::vector<std::string> cmd = {full == 2 ? args.reference : tpusim.string(), "sweep", spec.string(), "-j", "2",
                                        "-o", out.string()};
        if (full == 1) cmd.push_back("--full-compile");
        const Measure m = run_command(cmd);
        points = csv_rows(out);
        rates[full].push_back(double(points) / m.seconds);
        mbs[full].push_back(m.mb);
        secs[full].push_back(m.seconds);
      }
    const double rate = median(rates[0]), rate_full = median(rates[1]);
    const bool below = rate < kSweepPointsPerSecond || median(mbs[0]) > kSweepMB;
    std::printf("%-44s %9.3f %8.0f %9.3f %8.0f %7.1fx %6.1fx%s\n", "sweep paper-matrix.toml -j 2", median(secs[0]),
                median(mbs[0]), median(secs[1]), median(mbs[1]), rate / rate_full, median(mbs[1]) / median(mbs[0]),
                below ? "  BELOW TARGET" : "");
    std::printf("  %llu app-points: %.1f points/s (full compiles: %.1f points/s)\n",
                static_cast<unsigned long long>(points), rate, rate_full);
    if (!args.reference.empty())
      std::printf("  reference: %.3f s, %.1f points/s, %.0f MB (this build %.1fx the points/s, %.1fx less memory)\n",
                  median(secs[2]), median(rates[2]), median(mbs[2]), rate / median(rates[2]), median(mbs[2]) / median(mbs[0]));
    std::printf("targets: run cnn1.toml --engine timing <= %.1f s and <= %.0f MB; sweep >= %.0f points/s and <= %.0f MB\n",
                kRunSeconds, kRunMB, kSweepPointsPerSecond, kSweepMB);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) == 3) std::printf("load average %.2f %.2f %.2f at the end\n", load[0], load[1], load[2]);
    rows.push_back({{"command", "sweep paper-matrix.toml -j 2"}, {"points", points}, {"seconds", median(secs[0])},
                    {"points_per_second", rate}, {"peak_mb", median(mbs[0])},
                    {"full_compile_seconds", median(secs[1])}, {"full_compile_points_per_second", rate_full},
                    {"full_compile_peak_mb", median(mbs[1])}, {"reference_seconds", median(secs[2])},
                    {"reference_points_per_second", median(rates[2])}, {"reference_peak_mb", median(mbs[2])}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "timing_bench: %s\n", e.what());
    rc = 1;
  }
  fs::remove_all(tmp);
  if (!args.json.empty())
    std::ofstream(args.json) << nlohmann::json{{"rows", rows}, {"cpu", tpusim::bench::cpu_model()}}.dump(2) << "\n";
  return rc;
}
