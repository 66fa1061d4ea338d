// What oneDNN's own int8 inference of a model's layers takes: the reference that
// bench/cpu_runner_bench holds the CPU runner (gpu/cpu_model.h) against.
//
// The same plan (gpu/plan.h: the same layers, int8 weights, biases, inputs and scales), each step
// as a oneDNN user would write it with oneDNN's int8 primitives, every buffer allocated once:
// - a convolution step: one convolution primitive (NHWC, s8 in and out, s32 bias);
// - another matmul step: one matmul primitive (s8 x s8 -> s8, s32 bias) reading its input view in
//   place (oneDNN strides: an LSTM step's x_t is one pixel of the sequence); a matmul over several
//   inputs (an LSTM gate's [x_t, h_{t-1}], a dense layer over a concatenation) first joins them with
//   one concat primitive, shared by the following steps that join the same views (an LSTM step's
//   four gates) as the runner shares its gather;
// - the requantization: per-column output scales mult x 2^-shift, and the output function as an
//   eltwise post-op (relu; relux as a clip; sigmoid and tanh as logistic and tanh on the curve's
//   input scale 2^-8, times 127), rounded by oneDNN (to nearest even, in float);
// - a pool step: a pooling primitive (max, or average);
// - a vector step (an LSTM cell's products and sums, a residual add, a requantizing pass): one
//   binary primitive (add, sub, mul, max, min; pass as an add of a broadcast zero) with input scales
//   mult x 2^-shift and the same eltwise post-ops.
// oneDNN's int8 LSTM primitive is not used: it takes u8 data with a shift, keeps the cell state in
// f32 and computes its gates in f32, so its arithmetic cannot be made to match the machine's (int8
// cell state with a scale per time step, integer curve tables); and it fuses the gate GEMMs our
// plan keeps apart. Its output is therefore close to, not equal to, the golden reference's: oneDNN
// rounds differently (tests/bench holds the difference to a bound).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/plan.h"

namespace tpusim::bench {

class OneDnnNetwork {
 public:
  // Throws std::runtime_error (oneDNN's message) when a primitive cannot be made.
  explicit OneDnnNetwork(const gpu::GpuPlan& plan);
  ~OneDnnNetwork();
  OneDnnNetwork(const OneDnnNetwork&) = delete;
  OneDnnNetwork& operator=(const OneDnnNetwork&) = delete;

  void run();  // one batch
  std::vector<int8_t> output() const;  // the plan's output tensor, batch-major NHWC
  // The primitives per batch, e.g. "4 convolution, 1 matmul, 1 pooling, 2 binary".
  std::string primitives() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How two int8 outputs of the same model differ: the share of equal elements and the largest
// difference (sizes that differ, or none at all: no equal share and 256).
struct OutputDifference {
  double equal_share = 0;
  int max_abs = 0;
};
OutputDifference output_difference(const std::vector<int8_t>& a, const std::vector<int8_t>& b);

}  // namespace tpusim::bench
