// Speed of the stepped engine: cell updates per host second of SystolicArray::step() on square
// arrays (256x256 is the TPU's; 128 and 64 show the per-row overhead), single-threaded.
//
// The array runs a steady matmul stream: every input is valid, every period of 4 * rows() cycles
// starts with a kSwitch wavefront, and the next period's tile shifts into the shadow during cycles
// 2 * rows() .. 3 * rows() - 1 (within the timing contract for square arrays). A quarter of the
// row-cycles take the select path, as a stream of 4 * rows()-vector matmuls would.
// Target: 1e9 cell updates per second on 256x256.
//
// Usage: stepped_bench [--quick] [--json FILE]. Prints one line per array and the median over
// repetitions; always exits 0 (a figure under the target prints BELOW TARGET).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "sim/systolic_array.h"

namespace {

using tpusim::sim::SystolicArray;
constexpr double kTarget = 1e9;

struct Figure {
  std::string array;
  uint64_t cycles = 0;
  double seconds = 0;
  double cell_updates_per_second = 0;
};

// Random inputs, generated before timing: a small pool of left vectors and one shadow row.
struct Stream {
  uint64_t n;
  std::vector<int16_t> values;  // kPool vectors of n values
  std::vector<int16_t> shadow_row;
  static constexpr uint64_t kPool = 61;

  Stream(uint64_t rows, uint64_t cols, uint32_t seed) : n(rows), values(kPool * rows), shadow_row(cols) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> int8(-128, 127);
    for (auto& v : values) v = static_cast<int16_t>(int8(rng));
    for (auto& v : shadow_row) v = static_cast<int16_t>(int8(rng));
  }
  std::span<const int16_t> left(uint64_t cycle) const {
    return {values.data() + (cycle % kPool) * n, static_cast<size_t>(n)};
  }
};

// Steps `cycles` cycles of the stream; returns seconds. `sink` keeps the results observable.
double run_once(SystolicArray& array, const Stream& stream, uint64_t cycles, int64_t& sink) {
  const uint64_t n = array.rows(), period = 4 * n;
  std::vector<uint8_t> flags(n, SystolicArray::kValid);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t c = 0; c < cycles; ++c) {
    const uint64_t phase = c % period;
    // The switch wavefront: row k carries kSwitch at cycle (period start) + k.
    if (phase < n) flags[phase] = SystolicArray::kValid | SystolicArray::kSwitch;
    if (phase >= 1 && phase <= n) flags[phase - 1] = SystolicArray::kValid;
    const int64_t shadow_row = phase >= 2 * n && phase < 3 * n ? static_cast<int64_t>(phase - 2 * n) : -1;
    array.step(stream.left(c), flags, shadow_row, stream.shadow_row);
    sink += array.bottom()[c % array.cols()];
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

Figure measure(uint64_t n, uint64_t cycles, int repetitions) {
  SystolicArray array(n, n);
  const Stream stream(n, n, static_cast<uint32_t>(n));
  int64_t sink = 0;
  run_once(array, stream, std::min<uint64_t>(cycles, 4 * n + 64), sink);  // warm-up
  std::vector<double> seconds;
  for (int r = 0; r < repetitions; ++r) seconds.push_back(run_once(array, stream, cycles, sink));
  const double median = tpusim::bench::median(seconds);
  Figure f;
  f.array = std::to_string(n) + "x" + std::to_string(n);
  f.cycles = cycles;
  f.seconds = median;
  f.cell_updates_per_second = static_cast<double>(n * n * cycles) / median;
  std::printf("%-8s %8llu cycles  median %.4f s  %.3e cell updates/s  %.2fx target%s  (checksum %lld)\n",
              f.array.c_str(), static_cast<unsigned long long>(cycles), median, f.cell_updates_per_second,
              f.cell_updates_per_second / kTarget,
              f.cell_updates_per_second < kTarget ? "  BELOW TARGET" : "", static_cast<long long>(sink));
  return f;
}

void write_json(const std::string& path, const std::vector<Figure>& figures) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Figure& f : figures) {
    rows.push_back({{"array", f.array},
                    {"cycles", f.cycles},
                    {"seconds", f.seconds},
                    {"cell_updates_per_second", f.cell_updates_per_second}});
  }
  std::ofstream out(path);
  out << nlohmann::json{{"rows", rows}}.dump(2) << "\n";
  if (!out) std::fprintf(stderr, "stepped_bench: cannot write %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: stepped_bench [--quick] [--json FILE]\n");
    return 2;
  }
  const bool quick = args.quick;
  const std::string& json_path = args.json;
  // About 2^30 cell updates per repetition (2^27 with --quick), whatever the size.
  const uint64_t cell_updates = quick ? (uint64_t{1} << 27) : (uint64_t{1} << 30);
  const int repetitions = quick ? 3 : 7;
  std::vector<Figure> figures;
  for (uint64_t n : {256, 128, 64}) figures.push_back(measure(n, cell_updates / (n * n), repetitions));
  if (!json_path.empty()) write_json(json_path, figures);
  return 0;
}
