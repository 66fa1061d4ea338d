#include "compiler/packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace tpusim::compiler {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The matrix unit's time through a layer's weight tiles, switched in one after the other in the
// order lowered, as the weight FIFO feeds it (docs/timing.md, "Weight path" and "Matrix unit"):
// - tile i's fetch crosses the weight memory after the one before it, taking its stored box's
//   bytes at weight_mem_gbps, and may begin only when a FIFO slot is free: the compiler's read for
//   it runs weight_fifo_tiles switches ahead (docs/compiler.md "Weight prefetch"), so it waits for
//   tile i - weight_fifo_tiles to have shifted into the array. The layer's first weight_fifo_tiles
//   tiles are fetched during the layer before;
// - tile i shifts in (array_rows cycles) once it has arrived (weight_mem_latency_cycles after its
//   fetch) and array_cols - 1 cycles after the previous switch, and is switched in after that
//   shift and after the previous tile has streamed its vectors: so a switch follows the one before
//   it by at least array_rows + array_cols - 1 cycles, whatever that one streams.
// The layer's first tile shifts behind the layer before it (its matmuls, activates and pools);
// its last streams alone.
class TilePipeline {
 public:
  explicit TilePipeline(const sim::Arch& a) : a_(a) {}
  // A tile of `bytes` stored bytes whose matmuls stream `stream` cycles.
  void add(uint64_t bytes, double stream) {
    const double rows = double(a_.array_rows), cols = double(a_.array_cols);
    double shift = -rows;  // (the first: during the layer before)
    if (!shifts_.empty()) {
      double arrived = -std::numeric_limits<double>::infinity();
      if (shifts_.size() >= a_.weight_fifo_tiles) {
        const double slot = shifts_[shifts_.size() - a_.weight_fifo_tiles] + rows;
        fetched_ = std::max(fetched_, slot) + double(sim::transfer_cycles(bytes, a_.weight_mem_gbps, a_.clock_mhz));
        arrived = fetched_ + double(a_.weight_mem_latency_cycles);
      }
      shift = std::max(arrived, switched_ + cols - 1);
      switched_ = std::max(switched_ + stream_, shift + rows);
    }
    shifts_.push_back(shift);
    stream_ = stream;
  }
  double cycles() const { return switched_ + stream_; }

 private:
  const sim::Arch& a_;
  std::vector<double> shifts_;  // each tile's shift start
  double fetched_ = -std::numeric_limits<double>::infinity();  // the last fetch's end
  double switched_ = 0, stream_ = 0;  // the last switch, and what its tile streams
};

// A layer's estimate: the matrix unit's (TilePipeline), plus the activation unit (its rows and
// one pipeline fill per activate).
PackingOption estimate(const ConvShape& cv, const sim::Arch& a, std::optional<Packing> pk, const TilePipeline& matrix,
                       uint64_t passes, uint64_t activates) {
  const double act = double(cv.oh * cv.ow * cv.batch * div_up(cv.n, a.activation_lanes)) +
                     double(activates * a.activation_latency_cycles);
  const double cycles = matrix.cycles() + act;
  if (pk) pk->cycles = cycles;
  return {pk, cycles, passes};
}

}  // namespace

std::vector<PackingOption> packing_options(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  const uint64_t R = a.array_rows, M = a.array_cols, B = cv.batch;
  std::vector<PackingOption> out;
  const uint64_t ntiles = div_up(cv.n, M), pixels = cv.oh * cv.ow;
  // A tile's stored bytes: its box of `rows` x `cols` (partial tiles), else the whole array's.
  const auto box = [&](uint64_t rows, uint64_t cols) { return cv.partial_tiles ? rows * cols : a.tile_bytes(); };
  const auto n_cols = [&](uint64_t n) { return std::min(M, cv.n - n * M); };  // N tile n's columns
  // No packing (compiler/lower.cpp): per N tile and chunk, one tile (C rows) per kernel position,
  // one vector per pixel.
  const uint64_t plain_chunks = cv.c == 0 || budget < B ? 0 : div_up(pixels * B, budget);
  const uint64_t positions = cv.positions ? cv.positions : cv.kh * cv.kw;
  TilePipeline plain_matrix(a);
  for (uint64_t n = 0; n < ntiles; ++n)
    for (uint64_t c = 0; c < plain_chunks; ++c)
      for (uint64_t t = 0; t < positions; ++t)
        plain_matrix.add(box(cv.c, n_cols(n)), double(std::min(budget, pixels * B - c * budget)));
  out.push_back(estimate(cv, a, std::nullopt, plain_matrix, pixels * B * positions * ntiles,
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
    // For each N tile and chunk, each row tile (U x kh x C rows by P x N columns, or N tile n's
    // at P = 1) is switched in and streams the chunk's output rows (or groups) on it: a vector
    // every ceil(U x kh / gather_rows_per_cycle) cycles.
    const uint64_t n_tiles = p == 1 ? ntiles : 1;
    const auto stream = [&](uint64_t kh, uint64_t fulls, bool with_tail) {
      return double(B * (fulls * div_up(u * kh, a.gather_rows_per_cycle) +
                         (with_tail ? div_up(u_tail * kh, a.gather_rows_per_cycle) : 0)));
    };
    TilePipeline matrix(a);
    for (uint64_t n = 0; n < n_tiles; ++n)
      for (uint64_t y0 = 0; y0 < cv.oh; y0 += std::max<uint64_t>(rows_per_chunk, 1))
        for (uint64_t g0 = 0, per = rows_per_chunk ? g : budget / B; g0 < g; g0 += per) {
          const uint64_t g1 = std::min(g, g0 + per), fulls = std::min(g1, full) - std::min(g0, full);
          const uint64_t chunk_rows = rows_per_chunk ? std::min(rows_per_chunk, cv.oh - y0) : 1;
          for (uint64_t r0 = 0; r0 < cv.kh; r0 += rows) {
            const uint64_t kh = std::min(rows, cv.kh - r0);
            matrix.add(box(u * kh * cv.c, p > 1 ? p * cv.n : n_cols(n)),
                       double(chunk_rows) * stream(kh, fulls, tail && g1 == g));
          }
        }
    const uint64_t tiles = div_up(cv.kh, rows) * n_tiles;
    out.push_back(estimate(cv, a, Packing{p, u, rows, cv.first_row, cv.row_step, cv.kh, tail, 0}, matrix,
                           cv.oh * g * B * tiles, p > 1 ? cv.oh * g : chunks * n_tiles + cv.oh));
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
