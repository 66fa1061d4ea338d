#include "compiler/packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpusim::compiler {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The matrix unit's time through a layer's weight tiles, switched in one after the other in the
// order lowered, as the weight FIFO feeds it (docs/timing.md, "Weight path" and "Matrix unit"), on
// an axis whose 0 is the layer's start (where the work before it ends):
// - tile i's fetch crosses the weight memory after the one before it, taking its stored box's
//   bytes at weight_mem_gbps (xfer_i cycles), and may begin only when a FIFO slot is free: the
//   compiler's read for it runs weight_fifo_tiles (F) switches ahead (docs/compiler.md "Weight
//   prefetch"), so for i >= F it waits for tile i - F to have shifted into the array. The first F
//   fetches are issued during the work before the layer and cross from `ahead` cycles before its
//   start (ConvShape::ahead: the cycles of that work the weight memory is free in; the slots the
//   layer before still holds are not counted): fetch i < F ends at -ahead + xfer_0 + .. + xfer_i.
//   With `ahead` infinite (a long layer before), they are all over by the start, as before;
// - a tile arrives weight_mem_latency_cycles after its fetch ends, and shifts in (array_rows
//   cycles) once it has arrived and Arch::shift_after_switch() cycles after the previous switch
//   (0 when the shift is skewed by column, else array_cols - 1), and is switched in after that
//   shift and after the previous tile has streamed its vectors: so a switch follows the one
//   before it by at least array_rows (+ array_cols - 1 unskewed) cycles, whatever that one
//   streams. The layer's first tile shifts once it has arrived, at the earliest
//   array_rows cycles before the start (behind the layer before), and is switched in at
//   max(0, -ahead + xfer_0 + weight_mem_latency_cycles + array_rows): with nothing before it
//   (ahead 0) its whole fetch, latency and shift are exposed;
// its last streams alone. (A model's first layer: resblock's stem on 256 x 256 at 8.5 GB/s, batch
// 8, P = 8 packs 3 tiles of 160 x 128 = 20,480 bytes, ceil(20,480 x 700 / 8,500) = 1,687 cycles a
// fetch, which the estimate took as fetched for free, P = 1 one of 144 x 16 = 2,304 bytes, 190;
// tests/compiler/lower_test.cpp works it out.)
class TilePipeline {
 public:
  // `held`: when the FIFO slots the layer before still holds free (ConvShape::held).
  TilePipeline(const sim::Arch& a, double ahead, const std::vector<double>& held = {})
      : a_(a), ahead_(ahead), held_(held) {}
  // A tile of `bytes` stored bytes whose matmuls stream `stream` cycles.
  void add(uint64_t bytes, double stream) {
    const double rows = double(a_.array_rows);
    const double xfer = double(sim::transfer_cycles(bytes, a_.weight_mem_gbps, a_.clock_mhz));
    // The slot tile i's fetch waits for: tile i - F's, shifted in, or one the layer before holds.
    const size_t i = shifts_.size(), f = a_.weight_fifo_tiles;
    double slot = -std::numeric_limits<double>::infinity();
    if (i >= f) slot = shifts_[i - f] + rows;
    else if (i + held_.size() >= f) slot = held_[i + held_.size() - f];
    // (-infinity while ahead is infinite)
    fetched_ = std::max(i == 0 ? -ahead_ : fetched_, slot) + xfer;
    const double arrived = fetched_ + double(a_.weight_mem_latency_cycles);
    double shift = std::max(arrived, -rows);  // (the first: behind the layer before, once arrived)
    if (shifts_.empty()) {
      switched_ = shift + rows;
    } else {
      shift = std::max(arrived, switched_ + double(a_.shift_after_switch()));
      switched_ = std::max(switched_ + stream_, shift + rows);
    }
    shifts_.push_back(shift);
    stream_ = stream;
  }
  double cycles() const { return switched_ + stream_; }
  double fetched() const { return fetched_; }
  // When the slots of the layer's last weight_fifo_tiles tiles (or all, if fewer) free: their
  // shifts' ends, in order (the next layer's ConvShape::held, on this layer's axis).
  std::vector<double> freed() const {
    std::vector<double> out;
    for (size_t i = shifts_.size() - std::min<size_t>(shifts_.size(), a_.weight_fifo_tiles); i < shifts_.size(); ++i)
      out.push_back(shifts_[i] + double(a_.array_rows));
    return out;
  }

 private:
  const sim::Arch& a_;
  double ahead_;
  std::vector<double> held_;
  std::vector<double> shifts_;  // each tile's shift start
  double fetched_ = -std::numeric_limits<double>::infinity();  // the last fetch's end
  double switched_ = 0, stream_ = 0;  // the last switch, and what its tile streams
};

// The matrix unit's time through `tiles` (each tile's stored bytes and the cycles it streams) for
// a layer run cv.runs times: the first run after cv.ahead cycles of other work, the later ones
// after the run before (TilePipeline with ahead infinite); the estimate is their mean. `fetched`:
// the first run's last fetch's end; `first`: the first run's time.
struct Matrix {
  double cycles = 0, fetched = 0, first = 0;
  std::vector<double> freed;  // the first run's TilePipeline::freed
};
Matrix matrix_time(const ConvShape& cv, const sim::Arch& a, const std::vector<std::pair<uint64_t, double>>& tiles) {
  const auto run = [&](double ahead, const std::vector<double>& held) {
    TilePipeline p(a, ahead, held);
    for (const auto& [bytes, stream] : tiles) p.add(bytes, stream);
    return p;
  };
  const TilePipeline first = run(cv.ahead, cv.held);
  if (cv.runs <= 1 || std::isinf(cv.ahead)) return {first.cycles(), first.fetched(), first.cycles(), first.freed()};
  const double rest = run(std::numeric_limits<double>::infinity(), {}).cycles();
  return {(first.cycles() + double(cv.runs - 1) * rest) / double(cv.runs), first.fetched(), first.cycles(),
          first.freed()};
}

// A layer's estimate: the matrix unit's (TilePipeline), plus the activation unit (its rows and
// one pipeline fill per activate).
PackingOption estimate(const ConvShape& cv, const sim::Arch& a, std::optional<Packing> pk, const Matrix& matrix,
                       uint64_t passes, uint64_t activates) {
  const double act = double(cv.oh * cv.ow * cv.batch * div_up(cv.n, a.activation_lanes)) +
                     double(activates * a.activation_latency_cycles);
  const double cycles = matrix.cycles + act;
  if (pk) pk->cycles = cycles;
  return {pk, cycles, passes, matrix.fetched, matrix.first + act, matrix.freed};
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
  std::vector<std::pair<uint64_t, double>> switches;  // (a TilePipeline's: stored bytes, stream cycles)
  for (uint64_t n = 0; n < ntiles; ++n)
    for (uint64_t c = 0; c < plain_chunks; ++c)
      for (uint64_t t = 0; t < positions; ++t)
        switches.push_back({box(cv.c, n_cols(n)), double(std::min(budget, pixels * B - c * budget))});
  out.push_back(estimate(cv, a, std::nullopt, matrix_time(cv, a, switches), pixels * B * positions * ntiles,
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
    switches.clear();
    for (uint64_t n = 0; n < n_tiles; ++n)
      for (uint64_t y0 = 0; y0 < cv.oh; y0 += std::max<uint64_t>(rows_per_chunk, 1))
        for (uint64_t g0 = 0, per = rows_per_chunk ? g : budget / B; g0 < g; g0 += per) {
          const uint64_t g1 = std::min(g, g0 + per), fulls = std::min(g1, full) - std::min(g0, full);
          const uint64_t chunk_rows = rows_per_chunk ? std::min(rows_per_chunk, cv.oh - y0) : 1;
          for (uint64_t r0 = 0; r0 < cv.kh; r0 += rows) {
            const uint64_t kh = std::min(rows, cv.kh - r0);
            switches.push_back({box(u * kh * cv.c, p > 1 ? p * cv.n : n_cols(n)),
                                double(chunk_rows) * stream(kh, fulls, tail && g1 == g)});
          }
        }
    const uint64_t tiles = div_up(cv.kh, rows) * n_tiles;
    out.push_back(estimate(cv, a, Packing{p, u, rows, cv.first_row, cv.row_step, cv.kh, tail, 0},
                           matrix_time(cv, a, switches), cv.oh * g * B * tiles,
                           p > 1 ? cv.oh * g : chunks * n_tiles + cv.oh));
  }
  return out;
}

const PackingOption& chosen_option(const std::vector<PackingOption>& options) {
  const PackingOption* best = &options.front();
  for (const PackingOption& e : options) {
    // Within 1% of the best estimate (rougher than that), fewer array passes win.
    const bool close = e.cycles <= best->cycles * 1.01 && best->cycles <= e.cycles * 1.01;
    if (close ? e.passes < best->passes : e.cycles < best->cycles) best = &e;
  }
  return *best;
}

std::optional<Packing> choose_packing(const ConvShape& cv, const sim::Arch& a, uint64_t budget) {
  return chosen_option(packing_options(cv, a, budget)).packing;
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
