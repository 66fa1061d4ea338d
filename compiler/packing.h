// Kernel-position and output-pixel packing of a convolution (im2col by the systolic data setup).
//
// Without packing, a convolution with C input channels runs one weight tile per kernel position
// (r, s) and K tile: C of the array's rows do work. With packing, a matmul gathers each input
// vector from several UB rows (setcfg gather_*, sim/pack.h): for P neighbouring output pixels
// (x .. x+P-1 of one output row) and kh kernel rows r0 .. r0+kh-1, the vector holds the C
// channels of the U = (P-1)*stride + KW input pixels the P windows cover, in each of the kh input
// rows: element (u*kh + rr)*C + c is channel c of input pixel (y*stride + r0 + rr, x*stride + u).
// The weight tile is block Toeplitz: row (u, rr, c), column p*N + n holds W[r0+rr][u - p*stride][c][n]
// when 0 <= u - p*stride < KW, else 0. The accumulator row then holds P pixels x N channels, which
// activate scatters to the P pixels' UB rows (setcfg act_groups = P, act_group_cols = N).
// A kernel taller than the rows allow is cut into row tiles of kh rows (accumulating). When P does
// not divide the output width, each output row's last group has fewer pixels: it gathers fewer
// input pixels (elements are ordered u-major, so the same tile serves it with the rest zero) and
// its act scatters fewer groups.
// A kernel widened with zero weights (MatmulOp::taps: a dilated kernel, a padded Conv1d's) gathers
// only the kernel rows that hold a tap: rows first_row, first_row + row_step, ... (gather_row_step
// = row_step image rows), so its zero rows are neither in a tile nor streamed.
//
// The choice per layer: the cheapest of no packing and every P up to the output width (P*N within
// array_cols, U*C within array_rows) by estimated cycles (the matrix unit through the layer's
// weight tiles as the weight FIFO feeds it: each tile's fetch of its stored box, up to
// weight_fifo_tiles fetches ahead of the array, the first of them behind only what the work before
// the layer hides (ConvShape::ahead), a vector every ceil(U*kh / gather_rows_per_cycle)
// cycles, each tile switch at least array_rows (+ array_cols - 1 unskewed) cycles after the one
// before it, its shift into the array; plus the activation unit), estimates within 1% of each
// other to the fewest array passes.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/arch.h"

namespace tpusim::compiler {

struct ConvShape {
  uint64_t c = 0, n = 0;  // input and output channels
  uint64_t kh = 1, kw = 1, stride = 1;  // kh: the kernel rows packing gathers (those with a tap)
  uint64_t oh = 1, ow = 1;  // output map
  uint64_t batch = 1;       // samples interleaved per pixel
  uint64_t positions = 0;   // kernel positions the unpacked lowering computes (its taps; 0: kh x kw)
  uint64_t first_row = 0, row_step = 1;  // the kernel rows gathered: first_row + i x row_step, i < kh
  // Partial tiles stored and fetched as their box (the `partial` mapper switch, docs/compiler.md
  // "Partial tiles"): a tile's fetch moves its used rows x columns; false: every tile whole.
  bool partial_tiles = true;
  // What the work before the layer hides of its first weight_fifo_tiles fetches (TilePipeline in
  // packing.cpp): the cycles before the layer's first tile may switch in during which the weight
  // memory is free to fetch them. Infinity: all of them (a layer after a long one: the estimate as
  // it was); 0: none. `runs`: times the layer runs (the batch's pieces); only the first run has
  // just `ahead` before it, each later one the previous run's layers, taken as long enough, so the
  // estimate counts 1 / runs of the first run's exposed fetches.
  double ahead = std::numeric_limits<double>::infinity();
  uint64_t runs = 1;
  // The FIFO slots the layer before still holds at its end, as at most weight_fifo_tiles times on
  // this layer's axis (its start 0) at which each frees, in the order its tiles were fetched (its
  // PackingOption::freed less its first run's estimate): the weight FIFO runs weight_fifo_tiles
  // tiles ahead across the layer boundary too, so this layer's fetch i < weight_fifo_tiles waits
  // for the layer before's tile weight_fifo_tiles - i from its end to have shifted in (held[i +
  // held.size() - weight_fifo_tiles], where that is an index). Empty: every slot free (the model's
  // first layer, or `ahead` infinite). Only the first run has it.
  std::vector<double> held = {};
};

struct Packing {
  uint64_t p = 1;     // output pixels per vector
  uint64_t u = 1;     // input pixels gathered per kernel row: (p - 1) * stride + kw
  uint64_t rows = 1;  // kernel rows per weight tile (the last tile may have fewer)
  uint64_t first_row = 0, row_step = 1, kernel_rows = 1;  // the kernel rows gathered (ConvShape)
  uint64_t tail = 0;  // pixels of each output row's last group when p does not divide ow (else 0)
  double cycles = 0;  // the estimate it was chosen by
};

// One way to lower a convolution and its estimate: `packing` nullopt is no packing.
struct PackingOption {
  std::optional<Packing> packing;
  double cycles = 0;    // the estimate
  uint64_t passes = 0;  // vectors x weight tiles (array passes), the tie-break
  // When the weight memory is free again on the estimate's axis (the layer's work spans 0 ..
  // cycles, of its first run): its last fetch's end; -infinity where every fetch was ahead.
  double fetched = -std::numeric_limits<double>::infinity();
  // The first run's estimate (`cycles` is the mean over ConvShape::runs): the axis `fetched` is on.
  double first = 0;
  // When the first run's last weight_fifo_tiles tiles' FIFO slots free (their shifts' ends), on
  // the `fetched` axis, in order: the next layer's ConvShape::held (less `first`).
  std::vector<double> freed = {};
};

// Every way choose_packing weighs, in its order: no packing first, then P = 1, 2, ... as far as
// the array allows (none but no packing when a kernel row's kw x C channels are wider than
// array_rows). `budget`: accumulator rows one pass may use.
std::vector<PackingOption> packing_options(const ConvShape& conv, const sim::Arch& arch, uint64_t budget);

// The option choose_packing takes of `options` (packing_options', not empty): the smallest
// estimate, estimates within 1% of each other to the fewest array passes.
const PackingOption& chosen_option(const std::vector<PackingOption>& options);

// The packing for a convolution on `arch`, or nullopt when packing does not pay (or cannot
// apply). `budget`: accumulator rows one pass may use.
std::optional<Packing> choose_packing(const ConvShape& conv, const sim::Arch& arch, uint64_t budget);

// "P=7 pixels x 5 kernel rows of 11 input pixels" for the mapping report.
std::string describe(const Packing& pk);

}  // namespace tpusim::compiler
