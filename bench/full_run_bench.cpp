// The full path of `tpusim run MODEL` (compile, fast engine, golden check): wall time and peak
// resident memory of the tpusim executable on paper workloads, each run with every CPU this
// process may use (the default) against `--threads 1` measured in the same run, interleaved.
// `--threads 1` still computes the golden reference beside the simulation, on its own thread;
// the other work (float reference, quantizer, golden reference, the fast engine's matmuls) is then
// on one thread. Target (issue 18): CNN1 <= 4 s. The figure before this work was 11.3 s and 968 MB
// (main at ab13906, the same command, recorded in notes/s23; this machine, 2 cores).
//
// With --reference TPUSIM (another tpusim executable, e.g. a build of the commit before a change),
// `TPUSIM run MODEL` with all threads runs too, interleaved, and prints beside (the `ref` column).
//
// full_run_bench [--quick] [--json FILE] [--reference TPUSIM]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "tools/source_dir.h"

extern char** environ;

namespace {

struct Sample {
  double seconds = 0, peak_mb = 0;
  int status = -1;
};

// Runs `TPUSIM run MODEL [--threads 1]` with its output discarded (TPUSIM: this build's, or `exe`).
Sample run_once(const std::string& model, bool one_thread, const std::string& exe = TPUSIM_BINARY) {
  std::vector<std::string> args{exe, "run", model};
  if (one_thread) args.insert(args.end(), {"--threads", "1"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  Sample s;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return s;
  }
  posix_spawn_file_actions_destroy(&fa);
  rusage use{};
  int status = 0;
  if (wait4(pid, &status, 0, &use) != pid) return s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.peak_mb = double(use.ru_maxrss) / 1024.0;  // KiB -> MiB
  s.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tpusim::bench;
  BenchArgs args;
  if (!parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: full_run_bench [--quick] [--json FILE] [--reference TPUSIM]\n");
    return 2;
  }
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  const int reps = args.quick ? 1 : 3;
  struct Workload {
    const char* name;
    double target_seconds;  // all threads; 0: none
  };
  const Workload workloads[] = {{"cnn1", 4.0}, {"lstm0", 0}};
  std::printf("full run (tpusim run MODEL: compile, fast engine, golden check), %d repetition(s), %s\n", reps,
              cpu_model().c_str());
  std::printf("%-8s %14s %14s %8s %12s %12s  %s\n", "model", "all threads", "1 thread", "speedup", "RSS all",
              "RSS 1", "target");
  std::string json = "{\n  \"bench\": \"full_run_bench\",\n  \"rows\": [\n";
  bool failed = false;
  for (size_t w = 0; w < std::size(workloads); ++w) {
    const Workload& wl = workloads[w];
    const std::string model = std::string(tpusim::source_dir()) + "/workloads/tpu-v1/" + wl.name + ".toml";
    std::vector<double> all_s, one_s, all_mb, one_mb, ref_s, ref_mb;
    for (int r = 0; r < reps; ++r) {
      if (!args.reference.empty()) {
        const Sample s = run_once(model, false, args.reference);
        if (s.status != 0) {
          std::fprintf(stderr, "full_run_bench: %s run %s exited with %d\n", args.reference.c_str(), model.c_str(),
                       s.status);
          failed = true;
        }
        ref_s.push_back(s.seconds), ref_mb.push_back(s.peak_mb);
      }
      for (bool one : {false, true}) {  // interleaved: both see the same load
        const Sample s = run_once(model, one);
        if (s.status != 0) {
          std::fprintf(stderr, "full_run_bench: tpusim run %s%s exited with %d\n", model.c_str(),
                       one ? " --threads 1" : "", s.status);
          failed = true;
        }
        (one ? one_s : all_s).push_back(s.seconds);
        (one ? one_mb : all_mb).push_back(s.peak_mb);
      }
    }
    const double a = median(all_s), o = median(one_s);
    const bool below = wl.target_seconds > 0 && a > wl.target_seconds;
    std::printf("%-8s %12.2f s %12.2f s %7.2fx %9.0f MB %9.0f MB  %s", wl.name, a, o, a > 0 ? o / a : 0.0,
                median(all_mb), median(one_mb),
                wl.target_seconds > 0 ? (below ? "<= 4 s: BELOW TARGET" : "<= 4 s: met") : "-");
    if (!ref_s.empty())
      std::printf("  ref %.2f s %.0f MB (%.2fx)", median(ref_s), median(ref_mb), a > 0 ? median(ref_s) / a : 0.0);
    std::printf("\n");
    char row[512];
    std::snprintf(row, sizeof row,
                  "    {\"model\": \"%s\", \"seconds_all_threads\": %.3f, \"seconds_one_thread\": %.3f, "
                  "\"peak_mb_all_threads\": %.1f, \"peak_mb_one_thread\": %.1f, \"target_seconds\": %.1f, "
                  "\"reference_seconds\": %.3f, \"reference_peak_mb\": %.1f}%s\n",
                  wl.name, a, o, median(all_mb), median(one_mb), wl.target_seconds, median(ref_s), median(ref_mb),
                  w + 1 < std::size(workloads) ? "," : "");
    json += row;
  }
  double load[1] = {0};
  getloadavg(load, 1);
  std::printf("load average %.2f at the end (on a busy machine the threads wait for CPUs)\n", load[0]);
  char tail[128];
  std::snprintf(tail, sizeof tail, "  ],\n  \"load_average\": %.2f\n}\n", load[0]);
  json += tail;
  if (!args.json.empty()) std::ofstream(args.json) << json;
  return failed ? 1 : 0;
}
