// Where a tensor's elements live in the unified buffer and in host memory ("TPU order").
//
// A tensor of per-sample shape [h, w, c] with batch B is cut along channels into slices of
// `lanes` = the UB row width max(array_rows, array_cols) channels. Within a slice, the K tiles of
// the matmuls that read it sit side by side (array_rows channels each, read from byte `lane` of
// each row) and so do the N tiles of the activates that write it (array_cols channels each,
// written from byte act_lane): see LaneTile. On a square array a slice is one K and one N tile.
// Each slice holds one UB row per
// (pixel, sample), pixel-major with the batch interleaved, as the machine's pool instruction
// and the paper's convolution mapping expect:
//
//   row(slice s, stored pixel (y, x), sample n) = base + s * slice_rows + (y * stored_w + x) * B + n
//
// where the stored map carries `pad` zero pixels on every side (for convolutions that read
// it with padding): stored_h = h + 2 pad, stored_w = w + 2 pad, slice_rows = stored_h *
// stored_w * B. Sequences ([steps, c]) are maps of steps x 1 pixels.
//
// Host regions hold the model's inputs and output in TPU order (per piece of the batch), unpadded: slice after slice,
// each slice B x pixels rows of its channel count cs = min(lanes, c - s * lanes) bytes, row
// (pixel, sample) at offset (pixel * B + n) * cs from the slice's start, the slice starting at
// byte s * lanes * pixels * B. The driver (compile.h) converts NHWC data to and from it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/graph.h"
#include "sim/arch.h"

namespace tpusim::compiler {

struct Storage {
  Shape shape;
  uint64_t batch = 1, lanes = 256, pad = 0;
  uint64_t base = 0;  // first UB row
  // Byte planes: 1 for an int8 tensor; 2 for an int16 one (QTensor::bits = 16), whose high bytes
  // lie in a second copy of the layout right after the first, high() = rows() rows further (the
  // value of setcfg act_high / vec_high_* for it).
  uint64_t planes = 1;
  uint64_t high() const { return planes > 1 ? rows() : 0; }
  uint64_t ub_rows() const { return rows() * planes; }  // the UB rows it occupies
  // Dense layout ("Dense layouts" below): q samples per UB row (1: one row per (pixel, sample)).
  uint64_t q = 1;
  uint64_t slices() const { return (shape.c + lanes - 1) / lanes; }
  uint64_t slice_channels(uint64_t s) const { return s + 1 < slices() ? lanes : shape.c - s * lanes; }
  uint64_t stored_h() const { return shape.h + 2 * pad; }
  uint64_t stored_w() const { return shape.w + 2 * pad; }
  // UB rows per stored pixel: batch / q (q divides batch).
  uint64_t pixel_rows() const { return batch / q; }
  uint64_t slice_rows() const { return stored_h() * stored_w() * pixel_rows(); }
  uint64_t rows() const { return slices() * slice_rows(); }
  // UB row of (slice, unpadded pixel (y, x), sample 0).
  uint64_t row(uint64_t slice, uint64_t y, uint64_t x) const {
    return base + slice * slice_rows() + ((y + pad) * stored_w() + x + pad) * pixel_rows();
  }
  uint64_t pixel_row(uint64_t slice, uint64_t pixel) const { return row(slice, pixel / shape.w, pixel % shape.w); }
  // UB row of (slice, stored pixel (sy, sx), sample 0): coordinates include the border.
  uint64_t stored_row(uint64_t slice, uint64_t sy, uint64_t sx) const {
    return base + slice * slice_rows() + (sy * stored_w() + sx) * pixel_rows();
  }
};

// Dense layouts (docs/compiler.md "Dense layouts"): a tensor of c channels, c <= lanes / 2, may
// hold q samples of a pixel side by side in one UB row: the logical rows above ((stored pixel,
// sample), pixel-major with the batch interleaved) are unchanged, q consecutive ones share a UB
// row, sample n of stored pixel p being the c-byte field at byte (n mod q) x c of UB row
// base + p x batch / q + n / q (the machine's setcfg dense_rows / act_dense_rows addressing,
// sim/pack.h, with the instruction's `ub` at a pixel's first row). q divides the batch, so every
// pixel starts a UB row and pool and vec, which work on whole rows, see a map of batch / q
// "images" per pixel. Host memory is in TPU order either way: a pixel's samples are q x c
// contiguous bytes per UB row, moved with host_row_bytes = host_stride = q x c.
// The densest q for c channels and a batch of `batch` samples in rows of `width` bytes: the
// largest divisor of the batch with q x c <= width (1 when c > width / 2).
uint64_t dense_q(uint64_t c, uint64_t batch, uint64_t width);

// The UB row width in channels: the slice width of every tensor (see above).
inline uint64_t slice_width(const sim::Arch& arch) { return arch.ub_row_bytes(); }

// One tile's share of a slice: the tile's element i is byte `lane` + i of the slice's rows
// (channel slice * lanes + lane + i); it is the first tile to cover channels [first, first +
// count) of the slice. Tiles of `tile` elements start at multiples of `tile`, except that a tile
// that would pass the row's end is moved back to end at it (lane = width - tile): it then also
// covers channels of the tile before it, which for an N tile means it writes them again with the
// same values, and for a K tile means their weight rows are left zero.
// An N tile of a matmul that writes into a concat's joined tensor (compiler/lower.cpp) is cut at
// the joined tensor's slice boundaries instead: it holds and writes `cols` columns (0: every one
// up to the array's), slice x width + lane being the op's first column, first = lane.
struct LaneTile {
  uint64_t slice = 0, lane = 0, first = 0, count = 0;
  uint64_t cols = 0;
};
// The tiles covering `channels` channels stored in slices of `width`, `tile` elements per tile
// (tile <= width), slice by slice.
std::vector<LaneTile> lane_tiles(uint64_t channels, uint64_t width, uint64_t tile);

// A run of consecutive UB rows holding consecutive pixels [pixel, pixel + pixels) of a slice.
struct Run {
  uint64_t pixel = 0, pixels = 0;  // unpadded pixel index (y * w + x) and count
  uint64_t row = 0;                // UB row of the first pixel's sample 0
};

// The runs covering pixels [first, first + count) of slice `s`: one run when the storage is not
// padded, else at most one per image row.
std::vector<Run> runs(const Storage& st, uint64_t s, uint64_t first, uint64_t count);

// The zero border of a padded storage, as UB row ranges (first, rows) per slice.
std::vector<std::pair<uint64_t, uint64_t>> border_ranges(const Storage& st);

// NHWC (batch-major) int8 data <-> TPU order host bytes (see above). Data of a 16-bit tensor (the
// low byte plane of the whole batch, then the high plane: graph.h QTensor) convert plane by plane:
// the size is a multiple of batch x elements, each multiple a plane.
// A batch lowered in pieces (compiler/lower.cpp) holds the pieces one after the other, each in TPU
// order with its own sample count: `piece` samples each, the last the rest (0: one piece).
std::vector<uint8_t> to_tpu_order(std::span<const int8_t> nhwc, const Shape& shape, uint64_t batch, uint64_t lanes,
                                  uint64_t piece = 0);
std::vector<int8_t> from_tpu_order(std::span<const uint8_t> tpu, const Shape& shape, uint64_t batch, uint64_t lanes,
                                   uint64_t piece = 0);

}  // namespace tpusim::compiler
