// Speed of the Verilated RTL array (hw/rtl/tpusim_systolic_array.sv at 32x32) against the stepped
// engine's sim::SystolicArray 32x32 and the fast engine's int8 GEMM, all on the same random int8
// stream: cycles per host second and cell updates per second, single-threaded, and the ratios.
// The RTL's and SystolicArray's bottom outputs are summed into a checksum, which must agree (the
// same stream gives the same results); the fast engine's results of the stream's whole vectors
// must sum to SystolicArray's results of the same vectors.
//
// The stream is stepped_bench's: every input valid, a kSwitch wavefront every 4 * rows() cycles,
// the next tile shifting into the shadow during cycles 2 * rows() .. 3 * rows() - 1 of the period.
// For the fast engine the same stream is what the machine's fast engine would compute: per period
// one matmul of 4 * rows() vectors with the tile switched in at its first vector (packed once per
// tile, as MatrixUnit does), its results in int32 accumulator rows; cycles per second is the
// stream's cycles over the time to compute all of its vectors.
//
// Usage: rtl_bench [--quick] [--json FILE]. Prints the median over repetitions; exits 0, or 1 when
// the engines disagree on the results.
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
#include "sim/gemm.h"
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

// The stream's vectors unskewed: vector i (entering row 0 at cycle i) has element k = what row k
// takes at cycle i + k. The tile of period p: zeros for p = 0 (the reset shadow), then every row
// the stream's shadow row. These are the UB rows and weight tiles the fast engine reads.
struct Matmuls {
  std::vector<uint8_t> vectors, zero_tile = std::vector<uint8_t>(kN * kN), tile = std::vector<uint8_t>(kN * kN);
  Matmuls(const Stream& stream, uint64_t cycles) : vectors(cycles * kN) {
    for (uint64_t i = 0; i < cycles; ++i)
      for (unsigned k = 0; k < kN; ++k) vectors[i * kN + k] = static_cast<uint8_t>(stream.left(i + k)[k]);
    for (unsigned r = 0; r < kN; ++r)
      for (unsigned j = 0; j < kN; ++j) tile[r * kN + j] = static_cast<uint8_t>(stream.shadow_row[j]);
  }
};

// The vectors the stream holds whole: vector i's element k enters at cycle i + k, so vectors
// 0 .. cycles - kN (the stream's first cycles also carry tails of vectors before 0, its last ones
// heads of vectors after the end).
uint64_t whole_vectors(uint64_t cycles) { return cycles - kN + 1; }

// The fast engine's work for `cycles` cycles of the stream: one GEMM per period (packing its tile
// first); returns seconds, the sum of the whole vectors' results in `sum`.
double fast_once(const Matmuls& mm, uint64_t cycles, std::vector<int32_t>& acc, int64_t& sum) {
  const uint64_t period = 4 * kN;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t first = 0; first < cycles; first += period) {
    const auto& tile = first == 0 ? mm.zero_tile : mm.tile;
    const tpusim::sim::PackedWeights w(tile.data(), kN, kN, kN, false);
    w.multiply(mm.vectors.data() + first * kN, kN, false, std::min(period, cycles - first), acc.data() + first * kN,
               kN, false);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sum = 0;
  for (uint64_t v = 0; v < whole_vectors(cycles) * kN; ++v) sum += acc[v];
  return seconds;
}

// SystolicArray's results of the whole vectors (drained out of the array), summed: what the fast
// engine's results of those vectors must sum to. After the step of cycle c, bottom()[j] is the
// result of the vector that entered row 0 at c - (kN - 1) - j.
int64_t stepped_result_sum(const Stream& stream, uint64_t cycles) {
  SystolicArray a(kN, kN);
  int64_t sum = 0;
  auto add = [&](uint64_t c) {
    for (unsigned j = 0; j < kN; ++j) {
      const uint64_t i = c - (kN - 1) - j;  // wraps for c < kN - 1 + j: no vector
      if (c >= kN - 1 + j && i < whole_vectors(cycles) && a.bottom_valid()[j]) sum += a.bottom()[j];
    }
  };
  int64_t unused = 0;
  run_once(a, cycles, unused, [&](SystolicArray& s, uint64_t c, const std::vector<uint8_t>& flags, int64_t row) {
    s.step(stream.left(c), flags, row, stream.shadow_row);
    add(c);
    return int64_t{0};
  });
  const std::vector<int16_t> idle(kN, 0);
  const std::vector<uint8_t> no_flags(kN, 0);
  for (uint64_t c = cycles; !a.empty(); ++c) {
    a.step(idle, no_flags, -1, {});
    add(c);
  }
  return sum;
}

Figure measure_fast(const Stream& stream, uint64_t cycles, int repetitions) {
  const Matmuls mm(stream, cycles);
  std::vector<int32_t> acc(cycles * kN);
  std::vector<double> seconds;
  Figure f;
  f.engine = "fast engine GEMM 32x32";
  // Milliseconds per run: ten times the repetitions for a steady median.
  for (int r = 0; r < 10 * repetitions; ++r) seconds.push_back(fast_once(mm, cycles, acc, f.checksum));
  f.cycles = cycles;
  f.seconds = tpusim::bench::median(seconds);
  f.cycles_per_second = static_cast<double>(cycles) / f.seconds;
  f.cell_updates_per_second = f.cycles_per_second * kN * kN;
  std::printf("%-22s %8llu cycles  median %.4f s  %.3e cycles/s  %.3e cell updates/s  (sum of results %lld, kernel %s)\n",
              f.engine.c_str(), static_cast<unsigned long long>(cycles), f.seconds, f.cycles_per_second,
              f.cell_updates_per_second, static_cast<long long>(f.checksum), tpusim::sim::gemm_kernel_name().data());
  return f;
}

// SystolicArray (a final class) with the reset name RtlArray uses.
struct Model {
  SystolicArray array{kN, kN};
  void reset_all() { array.reset(); }
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
                             a.array.step(stream.left(c), flags, row, stream.shadow_row);
                             return int64_t{a.array.bottom()[c % kN]};
                           });
  const Figure f = measure_fast(stream, cycles, repetitions);
  const bool fast_agrees = f.checksum == stepped_result_sum(stream, cycles);
  const double ratio = m.cycles_per_second / r.cycles_per_second;
  const double fast_ratio = f.cycles_per_second / r.cycles_per_second;
  std::printf("SystolicArray is %.1fx the Verilated RTL's speed%s\n", ratio,
              r.checksum == m.checksum ? "" : "  CHECKSUM MISMATCH: the two engines disagree");
  std::printf("the fast engine is %.0fx the Verilated RTL's speed (%.1fx SystolicArray's)%s\n", fast_ratio,
              f.cycles_per_second / m.cycles_per_second,
              fast_agrees ? "" : "  CHECKSUM MISMATCH: the fast engine disagrees with SystolicArray");

  if (!json_path.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Figure& e : {r, m, f})
      rows.push_back({{"engine", e.engine},
                      {"array", "32x32"},
                      {"cycles", e.cycles},
                      {"seconds", e.seconds},
                      {"cycles_per_second", e.cycles_per_second},
                      {"cell_updates_per_second", e.cell_updates_per_second},
                      {"checksum", e.checksum}});
    std::ofstream out(json_path);
    out << nlohmann::json{{"rows", rows},
                          {"model_over_rtl", ratio},
                          {"fast_over_rtl", fast_ratio},
                          {"checksums_agree", r.checksum == m.checksum && fast_agrees}}
               .dump(2)
        << "\n";
    if (!out) std::fprintf(stderr, "rtl_bench: cannot write %s\n", json_path.c_str());
  }
  return r.checksum == m.checksum && fast_agrees ? 0 : 1;
}
