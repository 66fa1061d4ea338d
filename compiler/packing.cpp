#include "compiler/packing.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpusim::compiler {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The matrix unit's time through a layer's weight tiles, switched in one after the other, each
// streaming `stream` cycles of vectors: a tile's shift into the array can begin array_cols - 1
// cycles after the previous switch and takes array_rows, so a switch follows the one before it
// by at least array_rows + array_cols - 1 cycles, whatever that one streams (docs/timing.md,
// "Matrix unit"). The layer's first tile shifts behind the layer before it (its matmuls,
// activates and pools); its last streams alone.
class Switches {
 public:
  explicit Switches(const sim::Arch& a) : span_(double(a.array_rows + a.array_cols - 1)) {}
  void add(double stream) {
    cycles_ += std::max(last_, span_) * (count_ > 0);
    last_ = stream;
    ++count_;
  }
  double cycles() const { return cycles_ + last_; }

 private:
  double span_, cycles_ = 0, last_ = 0;
  uint64_t count_ = 0;
};

// Cycles of one layer: the matrix unit (its tiles' streaming and shifts: Switches), bounded by
// the weight memory (the tiles' fetches), plus the activation unit (its rows and one pipeline fill
// per activate).
PackingOption estimate(const ConvShape& cv, const sim::Arch& a, std::optional<Packing> pk, uint64_t fetches,
                       const Switches& matrix, uint64_t passes, uint64_t activates) {
  const double bytes_per_cycle = a.weight_mem_gbps * 1000.0 / a.clock_mhz;
  const double fetch = double(fetches) * double(a.tile_bytes()) / bytes_per_cycle;
  const double act = double(cv.oh * cv.ow * cv.batch * div_up(cv.n, a.activation_lanes)) +
                     double(activates * a.activation_latency_cycles);
  const double cycles = std::max(matrix.cycles(), fetch) + act;
  if (pk) pk->cycles = cycles;
  return {pk, cycles, passes};
}

}  // namespace

std::vector<PackingOption> packing_options(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  const uint64_t R = a.array_rows, M = a.array_cols, B = cv.batch;
  std::vector<PackingOption> out;
  const uint64_t ntiles = div_up(cv.n, M), pixels = cv.oh * cv.ow;
  // No packing (compiler/lower.cpp): one tile per kernel position, one vector per pixel.
  const uint64_t plain_chunks = cv.c == 0 || budget < B ? 0 : div_up(pixels * B, budget);
  const uint64_t plain_tiles = (cv.positions ? cv.positions : cv.kh * cv.kw) * ntiles;
  // Each chunk switches every tile in and streams its pixels x batch vectors on it.
  Switches plain_matrix(a);
  for (uint64_t c = 0; c < plain_chunks; ++c)
    for (uint64_t t = 0; t < plain_tiles; ++t) plain_matrix.add(double(std::min(budget, pixels * B - c * budget)));
  out.push_back(estimate(cv, a, std::nullopt, plain_chunks * plain_tiles, plain_matrix, pixels * B * plain_tiles,
                         plain_chunks * ntiles + cv.oh));
  if (cv.kw * cv.c > R || cv.c == 0 || budget < B) return out;
  for (uint64_t p = 1; p <= cv.ow; ++p) {
    if (p > 1 && p * cv.n > M) break;
    const uint64_t u = (p - 1) * cv.stride + cv.kw;
    if (u * cv.c > R) break;
    // G groups per output row: ow / p of p pixels and, when p does not divide ow, a last one of
    // the rest (gathering fewer input pixels).
    const uint64_t rows = std::min(cv.kh, R / (u * cv.c)), full = cv.ow / p, tail = cv.ow % p;
    const uint64_t g = full + (tail != 0), u_tail = tail ? (tail - 1) * cv.stride + cv.kw : 0;
    // Chunks of whole output rows, or of groups within a row when one row's do not fit.
    const uint64_t rows_per_chunk = budget / (g * B);
    const uint64_t chunks = rows_per_chunk ? div_up(cv.oh, rows_per_chunk) : cv.oh * div_up(g, budget / B);
    // For each N tile and chunk, each row tile is switched in and streams the chunk's output rows
    // (or groups) on it: a vector every ceil(U x kh / gather_rows_per_cycle) cycles.
    const uint64_t n_tiles = p == 1 ? ntiles : 1;
    const auto stream = [&](uint64_t kh, uint64_t fulls, bool with_tail) {
      return double(B * (fulls * div_up(u * kh, a.gather_rows_per_cycle) +
                         (with_tail ? div_up(u_tail * kh, a.gather_rows_per_cycle) : 0)));
    };
    Switches matrix(a);
    for (uint64_t n = 0; n < n_tiles; ++n)
      for (uint64_t y0 = 0; y0 < cv.oh; y0 += std::max<uint64_t>(rows_per_chunk, 1))
        for (uint64_t g0 = 0, per = rows_per_chunk ? g : budget / B; g0 < g; g0 += per) {
          const uint64_t g1 = std::min(g, g0 + per), fulls = std::min(g1, full) - std::min(g0, full);
          const uint64_t chunk_rows = rows_per_chunk ? std::min(rows_per_chunk, cv.oh - y0) : 1;
          for (uint64_t r0 = 0; r0 < cv.kh; r0 += rows)
            matrix.add(double(chunk_rows) * stream(std::min(rows, cv.kh - r0), fulls, tail && g1 == g));
        }
    const uint64_t tiles = div_up(cv.kh, rows) * n_tiles;
    out.push_back(estimate(cv, a, Packing{p, u, rows, cv.first_row, cv.row_step, cv.kh, tail, 0}, chunks * tiles,
                           matrix, cv.oh * g * B * tiles, p > 1 ? cv.oh * g : chunks * n_tiles + cv.oh));
  }
  return out;
}

std::optional<Packing> choose_packing(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  const std::vector<PackingOption> options = packing_options(cv, a, budget);
  const PackingOption* best = &options.front();
  for (const PackingOption& e : options) {
    // Within 1% of the best estimate (rougher than that), fewer array passes win.
    const bool close = e.cycles <= best->cycles * 1.01 && best->cycles <= e.cycles * 1.01;
    if (close ? e.passes < best->passes : e.cycles < best->cycles) best = &e;
  }
  return best->packing;
}

std::string describe(const Packing& pk) {
  std::string rows;  // the taps' kernel rows, where the kernel has rows without one
  if (pk.first_row > 0 || pk.row_step > 1) {
    rows = " of kernel rows";
    for (uint64_t i = 0; i < pk.kernel_rows; ++i) rows += fmt::format("{}{}", i ? ", " : " ", pk.first_row + i * pk.row_step);
    rows += " (the taps')";
  }
  return fmt::format("{} pixel{} per vector, {} input pixels x {} kernel rows gathered{}{}", pk.p,
                     pk.p == 1 ? "" : "s", pk.u, pk.rows, rows,
                     pk.tail ? fmt::format(" (each row's last group {} pixel{})", pk.tail, pk.tail == 1 ? "" : "s")
                             : std::string());
}

}  // namespace tpusim::compiler
