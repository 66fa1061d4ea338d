// Speed of the Verilated RTL array (hw/rtl/tpusim_systolic_array.sv at 32x32) against the stepped
// engine's sim::SystolicArray 32x32, both stepping the same random int8 stream: cycles per host
// second and cell updates per second, single-threaded, and the ratio. Both runs' bottom outputs
// are summed into a checksum, which must agree (the same stream gives the same results).
//
// The stream is stepped_bench's: every input valid, a kSwitch wavefront every 4 * rows() cycles,
// the next tile shifting into the shadow during cycles 2 * rows() .. 3 * rows() - 1 of the period.
//
// Usage: rtl_bench [--quick] [--json FILE]. Prints the median over repetitions; exits 0.
#include <Vsa32x32.h>

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
#include "tests/hw/rtl_harness.h"

namespace {

using tpusim::sim::SystolicArray;
constexpr unsigned kN = 32;

struct Figure {
  std::string engine;
  uint64_t cycles = 0;
  double seconds = 0, cycles_per_second = 0, cell_updates_per_second = 0;
  int64_t checksum = 0;
};

// Random inputs generated before timing: a pool of left vectors and one shadow row.
struct Stream {
  static constexpr uint64_t kPool = 61;
  std::vector<int16_t> values = std::vector<int16_t>(kPool * kN), shadow_row = std::vector<int16_t>(kN);
  std::vector<uint8_t> signedness = std::vector<uint8_t>(kN, 1);
  Stream() {
    std::mt19937 rng(32);
    std::uniform_int_distribution<int> int8(-128, 127);
    for (auto& v : values) v = static_cast<int16_t>(int8(rng));
    for (auto& v : shadow_row) v = static_cast<int16_t>(int8(rng));
  }
  std::span<const int16_t> left(uint64_t cycle) const { return {values.data() + (cycle % kPool) * kN, kN}; }
};

// Steps `cycles` cycles of the stream on `array` (SystolicArray or RtlArray); returns seconds.
template <class Array, class StepFn>
double run_once(Array& array, uint64_t cycles, int64_t& sink, StepFn step) {
  const uint64_t period = 4 * kN;
  std::vector<uint8_t> flags(kN, SystolicArray::kValid);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t c = 0; c < cycles; ++c) {
    const uint64_t phase = c % period;
    if (phase < kN) flags[phase] = SystolicArray::kValid | SystolicArray::kSwitch;
    if (phase >= 1 && phase <= kN) flags[phase - 1] = SystolicArray::kValid;
    const int64_t shadow_row = phase >= 2 * kN && phase < 3 * kN ? static_cast<int64_t>(phase - 2 * kN) : -1;
    sink += step(array, c, flags, shadow_row);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class Array, class StepFn>
Figure measure(const char* engine, Array& array, uint64_t cycles, int repetitions, StepFn step) {
  std::vector<double> seconds;
  Figure f;
  f.engine = engine;
  for (int r = 0; r < repetitions; ++r) {
    array.reset_all();
    int64_t sink = 0;
    seconds.push_back(run_once(array, cycles, sink, step));
    f.checksum = sink;
  }
  f.cycles = cycles;
  f.seconds = tpusim::bench::median(seconds);
  f.cycles_per_second = static_cast<double>(cycles) / f.seconds;
  f.cell_updates_per_second = f.cycles_per_second * kN * kN;
  std::printf("%-22s %8llu cycles  median %.4f s  %.3e cycles/s  %.3e cell updates/s  (checksum %lld)\n",
              engine, static_cast<unsigned long long>(cycles), f.seconds, f.cycles_per_second,
              f.cell_updates_per_second, static_cast<long long>(f.checksum));
  return f;
}

// SystolicArray with the reset name RtlArray uses.
struct Model : SystolicArray {
  Model() : SystolicArray(kN, kN) {}
  void reset_all() { reset(); }
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: rtl_bench [--quick] [--json FILE]\n");
    return 2;
  }
  const bool quick = args.quick;
  const std::string& json_path = args.json;
  const uint64_t cycles = quick ? 20'000 : 200'000;
  const int repetitions = quick ? 3 : 5;
  const Stream stream;

  VerilatedContext context;
  tpusim::hw::RtlArray<Vsa32x32> rtl(context, kN, kN);
  const Figure r = measure("verilated RTL 32x32", rtl, cycles, repetitions,
                           [&](auto& a, uint64_t c, const std::vector<uint8_t>& flags, int64_t row) {
                             a.step(stream.left(c), flags, stream.signedness, row, stream.shadow_row, true);
                             return int64_t{a.bottom(c % kN)};
                           });
  Model model;
  const Figure m = measure("SystolicArray 32x32", model, cycles, repetitions,
                           [&](auto& a, uint64_t c, const std::vector<uint8_t>& flags, int64_t row) {
                             a.step(stream.left(c), flags, row, stream.shadow_row);
                             return int64_t{a.bottom()[c % kN]};
                           });
  const double ratio = m.cycles_per_second / r.cycles_per_second;
  std::printf("SystolicArray is %.1fx the Verilated RTL's speed%s\n", ratio,
              r.checksum == m.checksum ? "" : "  CHECKSUM MISMATCH: the two engines disagree");

  if (!json_path.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Figure& f : {r, m})
      rows.push_back({{"engine", f.engine},
                      {"array", "32x32"},
                      {"cycles", f.cycles},
                      {"seconds", f.seconds},
                      {"cycles_per_second", f.cycles_per_second},
                      {"cell_updates_per_second", f.cell_updates_per_second},
                      {"checksum", f.checksum}});
    std::ofstream out(json_path);
    out << nlohmann::json{{"rows", rows},
                          {"model_over_rtl", ratio},
                          {"checksums_agree", r.checksum == m.checksum}}
               .dump(2)
        << "\n";
    if (!out) std::fprintf(stderr, "rtl_bench: cannot write %s\n", json_path.c_str());
  }
  return 0;
}
