// The two reference executors of a model: the float reference (what the description means, used
// for calibration and to report quantization error) and the golden integer reference (what the
// machine must compute, bit for bit: plain loops over the QGraph with the machine's integer
// semantics). Owner: quantizer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tpusim::compiler {

// Every layer's output, NHWC batch-major floats, indexed like Model::layers. Checks each
// layer's inputs, parameter sizes and inferred output shape (InputError naming the layer).
std::vector<std::vector<float>> run_float(const Model& model);

// run_float plus what calibration needs beyond the layers' outputs.
struct FloatRun {
  std::vector<std::vector<float>> outputs;         // as run_float
  // [layer][stacked layer x steps + step]: the largest |c_t|, |f_t c_{t-1}| and |i_t g_t| of each
  // step of each stacked layer (empty but for lstm and gru): each step's cell state has its own scale.
  // gru: [layer][(stacked layer x steps + step) x 2 + k]: k = 0 the largest |W_n,x x_t + b_in| and
  // |r_t (W_n,h h_{t-1} + b_hn)|, k = 1 the largest |W_n,h h_{t-1} + b_hn| (the n gate's parts).
  std::vector<std::vector<double>> lstm_cell_max;
};
// `around(i, false)` is called before layer i runs and `around(i, true)` after it (when given):
// a timing-only compile that calibrates generates each layer's seeded weights there and drops
// them after (compile.cpp), so that one layer's weights are held at a time, not the model's.
FloatRun run_float_detailed(const Model& model, const std::function<void(size_t layer, bool done)>& around = {});

// The shape an entry of layer.inputs names (model input i's, or an earlier layer's output).
// Throws InputError naming the layer when the entry names neither.
const Shape& source_shape(const Model& model, const Layer& layer, int entry);

// "SOURCE:LINE: layer NAME: ", the start of every message about a layer.
std::string layer_context(const Model& model, const Layer& layer);

struct GoldenOptions {
  // Every matmul's sums in golden.cpp's own plain loops rather than the int8 GEMM of sim/gemm.h
  // (the same bytes, slower: what tests hold the fast path against).
  bool plain = false;
  // Only the model's output is kept: every other tensor is freed after the last op that uses it
  // (and comes back empty), so the run holds a few layers' activations at a time, not all.
  bool output_only = false;
};

// Every tensor's data, NHWC batch-major int8, indexed like QGraph::tensors; a 16-bit tensor's
// is its low bytes, then its high bytes (graph.h QTensor). Runs on sim::threads() threads
// (sim/parallel.h); the bytes do not depend on how many.
std::vector<std::vector<int8_t>> run_golden(const QGraph& graph, const GoldenOptions& options = {});

// Quantization error of the model's output: the golden output dequantized (x scale) against
// the float output.
struct QuantError {
  double max_abs = 0;       // max |golden x scale - float|
  double max_float = 0;     // max |float|
  double relative = 0;      // max_abs / max_float (0 when max_float is 0)
  double rms = 0;           // root mean square error
};
QuantError quant_error(const std::vector<float>& reference, const std::vector<int8_t>& golden, double scale);
// The same for integer values of any width (a 16-bit output: tensor_values).
QuantError quant_error(const std::vector<float>& reference, const std::vector<int32_t>& golden, double scale);
// A tensor's elements as integers from its run_golden data: int8 bytes as they are, a 16-bit
// tensor's two planes (low bytes, then high bytes) joined.
std::vector<int32_t> tensor_values(const std::vector<int8_t>& data, int bits);

}  // namespace tpusim::compiler
