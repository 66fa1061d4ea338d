#include "compiler/packing.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpusim::compiler {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Estimate {
  double cycles;
  uint64_t passes;  // vectors x weight tiles: array_macs / tile_bytes
};

// Cycles of one layer: the matrix unit (vectors streaming, or weight fetches when slower) plus
// the activation unit (its rows and one pipeline fill per activate).
Estimate estimate(const ConvShape& cv, const sim::Arch& a, uint64_t fetches, double stream, uint64_t passes,
                  uint64_t activates) {
  const double bytes_per_cycle = a.weight_mem_gbps * 1000.0 / a.clock_mhz;
  const double fetch = double(fetches) * double(a.tile_bytes()) / bytes_per_cycle;
  const double act = double(cv.oh * cv.ow * cv.batch * div_up(cv.n, a.activation_lanes)) +
                     double(activates * a.activation_latency_cycles);
  return {std::max(stream, fetch) + act, passes};
}

}  // namespace

std::optional<Packing> choose_packing(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  const uint64_t R = a.array_rows, M = a.array_cols, B = cv.batch;
  if (cv.kw * cv.c > R || cv.c == 0 || budget < B) return std::nullopt;
  const uint64_t ntiles = div_up(cv.n, M), pixels = cv.oh * cv.ow;
  // No packing (compiler/lower.cpp): one tile per kernel position, one vector per pixel.
  const uint64_t plain_chunks = div_up(pixels * B, budget);
  const uint64_t plain_tiles = cv.kh * cv.kw * ntiles;
  const Estimate plain = estimate(cv, a, plain_chunks * plain_tiles, double(pixels * B * plain_tiles),
                                  pixels * B * plain_tiles, plain_chunks * ntiles + cv.oh);
  std::optional<Packing> best;
  Estimate best_est = plain;
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
    const uint64_t n_tiles = p == 1 ? ntiles : 1;
    uint64_t per_row = 0;  // cycles of one sample's output row through every row tile
    for (uint64_t r0 = 0; r0 < cv.kh; r0 += rows) {
      const uint64_t kh = std::min(rows, cv.kh - r0);
      per_row += full * div_up(u * kh, a.gather_rows_per_cycle) + (tail ? div_up(u_tail * kh, a.gather_rows_per_cycle) : 0);
    }
    const uint64_t tiles = div_up(cv.kh, rows) * n_tiles;
    const Estimate e = estimate(cv, a, chunks * tiles, double(cv.oh * B * per_row * n_tiles), cv.oh * g * B * tiles,
                                p > 1 ? cv.oh * g : chunks * n_tiles + cv.oh);
    // Within 1% of the best estimate (rougher than that), fewer array passes win.
    const bool close = e.cycles <= best_est.cycles * 1.01 && best_est.cycles <= e.cycles * 1.01;
    if (close ? e.passes < best_est.passes : e.cycles < best_est.cycles) {
      best = Packing{p, u, rows, tail, e.cycles};
      best_est = e;
    }
  }
  return best;
}

std::string describe(const Packing& pk) {
  return fmt::format("{} pixel{} per vector, {} input pixels x {} kernel rows gathered{}", pk.p,
                     pk.p == 1 ? "" : "s", pk.u, pk.rows,
                     pk.tail ? fmt::format(" (each row's last group {} pixel{})", pk.tail, pk.tail == 1 ? "" : "s")
                             : std::string());
}

}  // namespace tpusim::compiler
