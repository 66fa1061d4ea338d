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
Estimate estimate(const ConvShape& cv, const sim::Arch& a, uint64_t chunks, uint64_t tiles_per_chunk,
                  double stream_per_vector_tiles, uint64_t vectors_per_tile, uint64_t activates) {
  const double bytes_per_cycle = a.weight_mem_gbps * 1000.0 / a.clock_mhz;
  const double fetch = double(chunks * tiles_per_chunk) * double(a.tile_bytes()) / bytes_per_cycle;
  const double matrix = double(vectors_per_tile) * stream_per_vector_tiles;
  const double act = double(cv.oh * cv.ow * cv.batch * div_up(cv.n, a.activation_lanes)) +
                     double(activates * a.activation_latency_cycles);
  return {std::max(matrix, fetch) + act, vectors_per_tile * tiles_per_chunk};
}

}  // namespace

std::optional<Packing> choose_packing(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  const uint64_t R = a.array_rows, M = a.array_cols, B = cv.batch;
  if (cv.kw * cv.c > R || cv.c == 0 || budget < B) return std::nullopt;
  const uint64_t ntiles = div_up(cv.n, M), pixels = cv.oh * cv.ow;
  // No packing (compiler/lower.cpp): one tile per kernel position, one vector per pixel.
  const uint64_t plain_chunks = div_up(pixels * B, budget);
  const Estimate plain = estimate(cv, a, plain_chunks, cv.kh * cv.kw * ntiles, double(cv.kh * cv.kw * ntiles),
                                  pixels * B, plain_chunks * ntiles + cv.oh);
  std::optional<Packing> best;
  Estimate best_est = plain;
  for (uint64_t p = 1; p <= cv.ow; ++p) {
    if (cv.ow % p) continue;
    if (p > 1 && p * cv.n > M) break;
    const uint64_t u = (p - 1) * cv.stride + cv.kw;
    if (u * cv.c > R) break;
    const uint64_t rows = std::min(cv.kh, R / (u * cv.c)), g = cv.ow / p;
    const uint64_t rows_per_chunk = budget / (g * B);
    if (rows_per_chunk == 0) continue;
    const uint64_t chunks = div_up(cv.oh, rows_per_chunk), n_tiles = p == 1 ? ntiles : 1;
    uint64_t per_vector = 0;  // cycles of one vector through every row tile
    for (uint64_t r0 = 0; r0 < cv.kh; r0 += rows)
      per_vector += div_up(u * std::min(rows, cv.kh - r0), a.gather_rows_per_cycle);
    const uint64_t tiles = div_up(cv.kh, rows) * n_tiles;
    const Estimate e = estimate(cv, a, chunks, tiles, double(per_vector * n_tiles), cv.oh * g * B,
                                p > 1 ? cv.oh * g : chunks * n_tiles + cv.oh);
    // Within 1% of the best estimate (rougher than that), fewer array passes win.
    const bool close = e.cycles <= best_est.cycles * 1.01 && best_est.cycles <= e.cycles * 1.01;
    if (close ? e.passes < best_est.passes : e.cycles < best_est.cycles) {
      best = Packing{p, u, rows, e.cycles};
      best_est = e;
    }
  }
  return best;
}

std::string describe(const Packing& pk) {
  return fmt::format("{} pixel{} per vector, {} input pixels x {} kernel rows gathered", pk.p,
                     pk.p == 1 ? "" : "s", pk.u, pk.rows);
}

}  // namespace tpusim::compiler
