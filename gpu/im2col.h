// Where each byte of a MatmulOp's GEMM operand comes from: the im2col matrix X[m][k_pad] the
// runner multiplies by the packed weights (gpu/plan.h). Plain values and constexpr functions, so
// the CUDA gather kernel (gpu/device.cu) and the host model (gpu/host_exec.cpp) index the same way.
//
// Row m = sample x out_pixels + p (p: the output view's pixel). Column col < k:
//   1 x 1, stride 1, no padding (dense layers, LSTM gates): the inputs concatenated along
//   channels, input i filling columns [col0_i, col0_i + c_i) from its view's pixel p;
//   a larger kernel (one input, the whole map): col = (r x kernel_w + s) x c + channel, reading
//   pixel (oy x stride + r - pad, ox x stride + s - pad), zero outside the map.
// Columns k .. k_pad - 1 are zero (padding to a multiple of 4).
#pragma once

#include <cstdint>

namespace tpusim::gpu {

inline constexpr int kMaxGemmInputs = 8;

// One input of a MatmulOp: a view of a tensor (graph.h View).
struct GatherInput {
  uint64_t tensor_pixels = 0;  // pixels per sample in the tensor
  uint64_t c = 0;              // channels
  uint64_t pixel0 = 0;         // the view's first pixel
  uint64_t col0 = 0;           // first GEMM column it fills (1 x 1 only)
};

struct Im2colGeometry {
  uint64_t rows = 0;        // m = batch x out_pixels
  uint64_t out_pixels = 0;  // pixels of the output view, per sample
  uint64_t k = 0;           // real columns: kernel_h x kernel_w x sum of c
  uint64_t k_pad = 0;       // round_up4(k)
  bool conv = false;        // a kernel larger than 1 x 1, a stride or padding
  // conv only:
  uint64_t kernel_w = 1, stride = 1, pad = 0, in_h = 0, in_w = 0, out_w = 0;
  int inputs = 0;
  GatherInput input[kMaxGemmInputs];
};

// The byte X[row][col] reads: input `which` at byte `offset` of its tensor, or zero (which < 0).
struct GatherSource {
  int which = -1;
  uint64_t offset = 0;
};

constexpr GatherSource gather_source(const Im2colGeometry& g, uint64_t row, uint64_t col) {
  GatherSource s;
  if (col >= g.k) return s;
  const uint64_t sample = row / g.out_pixels, p = row % g.out_pixels;
  if (!g.conv) {
    int i = 0;
    while (i + 1 < g.inputs && col >= g.input[i + 1].col0) ++i;
    const GatherInput& in = g.input[i];
    s.which = i;
    s.offset = (sample * in.tensor_pixels + in.pixel0 + p) * in.c + (col - in.col0);
    return s;
  }
  const GatherInput& in = g.input[0];
  const uint64_t pos = col / in.c, ch = col % in.c;
  const uint64_t r = pos / g.kernel_w, q = pos % g.kernel_w;
  const uint64_t iy = (p / g.out_w) * g.stride + r, ix = (p % g.out_w) * g.stride + q;  // padded
  if (iy < g.pad || ix < g.pad || iy - g.pad >= g.in_h || ix - g.pad >= g.in_w) return s;
  s.which = 0;
  s.offset = (sample * in.tensor_pixels + in.pixel0 + (iy - g.pad) * g.in_w + (ix - g.pad)) * in.c + ch;
  return s;
}

// The same gather by runs, as the CUDA kernel walks it (and the host model, so its tests cover
// the indexing the kernel uses): row `row` of X is `gather_parts` runs, one per kernel position
// (r, q) of a convolution (the input's c channels of one pixel) or one per input of a 1 x 1
// gather (that input's c channels at its col0). Run `part` fills X[row][col .. col + length) with
// input `which`'s bytes from `offset` on, or with zeros when which < 0 (a padded position). The
// runs cover columns [0, k) exactly once; k .. k_pad - 1 stay zero. Each per-row division is done
// once per run, not once per byte as gather_source does.
struct GatherRun {
  int which = -1;
  uint64_t offset = 0, col = 0, length = 0;
};

constexpr uint64_t gather_parts(const Im2colGeometry& g) {
  return g.conv ? g.k / g.input[0].c : static_cast<uint64_t>(g.inputs);
}

constexpr GatherRun gather_run(const Im2colGeometry& g, uint64_t row, uint64_t part) {
  GatherRun run;
  const uint64_t sample = row / g.out_pixels, p = row % g.out_pixels;
  if (!g.conv) {
    const GatherInput& in = g.input[part];
    run.which = static_cast<int>(part);
    run.col = in.col0;
    run.length = in.c;
    run.offset = (sample * in.tensor_pixels + in.pixel0 + p) * in.c;
    return run;
  }
  const GatherInput& in = g.input[0];
  run.col = part * in.c;
  run.length = in.c;
  const uint64_t r = part / g.kernel_w, q = part % g.kernel_w;
  const uint64_t iy = (p / g.out_w) * g.stride + r, ix = (p % g.out_w) * g.stride + q;  // padded
  if (iy < g.pad || ix < g.pad || iy - g.pad >= g.in_h || ix - g.pad >= g.in_w) return run;  // zeros
  run.which = 0;
  run.offset = (sample * in.tensor_pixels + in.pixel0 + (iy - g.pad) * g.in_w + (ix - g.pad)) * in.c;
  return run;
}

// Where the requantized C[row][j] goes: the output view's tensor, byte offset.
struct ScatterGeometry {
  uint64_t out_pixels = 0;     // the output view's pixels per sample
  uint64_t tensor_pixels = 0;  // pixels per sample of the output tensor
  uint64_t pixel0 = 0;
  uint64_t n = 0;              // output channels (= the tensor's c)
};
constexpr uint64_t scatter_offset(const ScatterGeometry& g, uint64_t row, uint64_t j) {
  return ((row / g.out_pixels) * g.tensor_pixels + g.pixel0 + row % g.out_pixels) * g.n + j;
}

}  // namespace tpusim::gpu
