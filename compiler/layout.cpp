#include "compiler/layout.h"

#include <algorithm>

namespace tpusim::compiler {

std::vector<LaneTile> lane_tiles(uint64_t channels, uint64_t width, uint64_t tile) {
  std::vector<LaneTile> out;
  for (uint64_t s = 0; s * width < channels; ++s) {
    const uint64_t cs = std::min(width, channels - s * width);
    for (uint64_t first = 0; first < cs; first += tile)
      out.push_back({s, std::min(first, width - tile), first, std::min(tile, cs - first)});
  }
  return out;
}

uint64_t dense_q(uint64_t c, uint64_t batch, uint64_t width) {
  if (c == 0 || 2 * c > width) return 1;
  for (uint64_t q = std::min(batch, width / c); q > 1; --q)
    if (batch % q == 0) return q;
  return 1;
}

std::vector<Run> runs(const Storage& st, uint64_t s, uint64_t first, uint64_t count) {
  std::vector<Run> out;
  if (count == 0) return out;
  if (st.pad == 0) return {{first, count, st.pixel_row(s, first)}};
  const uint64_t w = st.shape.w;
  for (uint64_t p = first; p < first + count;) {
    const uint64_t n = std::min(first + count - p, w - p % w);  // to the end of the image row
    out.push_back({p, n, st.pixel_row(s, p)});
    p += n;
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> border_ranges(const Storage& st) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (st.pad == 0) return out;
  const uint64_t b = st.pixel_rows(), p = st.pad, sw = st.stored_w(), h = st.shape.h, w = st.shape.w;
  for (uint64_t s = 0; s < st.slices(); ++s) {
    const uint64_t base = st.base + s * st.slice_rows();
    // The top border and the first row's left border, then between image rows the right border
    // of row y and the left border of row y + 1, then the last row's right border and the bottom.
    out.emplace_back(base, (p * sw + p) * b);
    for (uint64_t y = 0; y + 1 < h; ++y) out.emplace_back(base + ((y + p) * sw + p + w) * b, 2 * p * b);
    const uint64_t tail = base + ((h - 1 + p) * sw + p + w) * b;
    out.emplace_back(tail, base + st.slice_rows() - tail);
  }
  return out;
}

namespace {

// Calls f(nhwc index, tpu index) for every element, piece by piece.
template <class F>
void for_each_element(const Shape& shape, uint64_t total, uint64_t lanes, uint64_t piece, F f) {
  const uint64_t pixels = shape.pixels(), c = shape.c, per = piece ? piece : std::max<uint64_t>(total, 1);
  for (uint64_t n0 = 0; n0 < total; n0 += per) {
    const uint64_t batch = std::min(per, total - n0), base = n0 * shape.elements();
    for (uint64_t s = 0; s * lanes < c; ++s) {
      const uint64_t cs = std::min(lanes, c - s * lanes), slice_base = base + s * lanes * pixels * batch;
      for (uint64_t p = 0; p < pixels; ++p)
        for (uint64_t n = 0; n < batch; ++n)
          for (uint64_t k = 0; k < cs; ++k)
            f(base + (n * pixels + p) * c + s * lanes + k, slice_base + (p * batch + n) * cs + k);
    }
  }
}

}  // namespace

std::vector<uint8_t> to_tpu_order(std::span<const int8_t> nhwc, const Shape& shape, uint64_t batch, uint64_t lanes,
                                  uint64_t piece) {
  std::vector<uint8_t> out(nhwc.size());
  const uint64_t plane = batch * shape.elements();  // (a 16-bit tensor: two planes, each converted alike)
  for (uint64_t p0 = 0; p0 < out.size(); p0 += plane)
    for_each_element(shape, batch, lanes, piece,
                     [&](uint64_t i, uint64_t t) { out[p0 + t] = static_cast<uint8_t>(nhwc[p0 + i]); });
  return out;
}

std::vector<int8_t> from_tpu_order(std::span<const uint8_t> tpu, const Shape& shape, uint64_t batch, uint64_t lanes,
                                   uint64_t piece) {
  std::vector<int8_t> out(tpu.size());
  const uint64_t plane = batch * shape.elements();
  for (uint64_t p0 = 0; p0 < out.size(); p0 += plane)
    for_each_element(shape, batch, lanes, piece,
                     [&](uint64_t i, uint64_t t) { out[p0 + i] = static_cast<int8_t>(tpu[p0 + t]); });
  return out;
}

}  // namespace tpusim::compiler
