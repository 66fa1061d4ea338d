// What every benchmark in bench/ shares: the --quick/--json arguments, medians, the CPU's name.
#pragma once

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tpusim::bench {

struct BenchArgs {
  bool quick = false;  // fewer and shorter repetitions
  std::string json;    // write the figures here when set
  // Benches that run the tpusim executable: another one (a build of an earlier commit) measured
  // beside it in the same run, interleaved, when set (--reference).
  std::string reference;
};

// Parses [--quick] [--json FILE] [--reference TPUSIM]; false on anything else.
inline bool parse_bench_args(int argc, char** argv, BenchArgs& args) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) args.quick = true;
    else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) args.json = argv[++i];
    else if (std::strcmp(argv[i], "--reference") == 0 && i + 1 < argc) args.reference = argv[++i];
    else return false;
  }
  return true;
}

// The median (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The "model name" of /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace tpusim::bench
