// The two reference executors of a model: the float reference (what the description means, used
// for calibration and to report quantization error) and the golden integer reference (what the
// machine must compute, bit for bit: plain loops over the QGraph with the machine's integer
// semantics). Owner: quantizer.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/graph.h"

namespace tpusim::compiler {

// Every layer's output, NHWC batch-major floats, indexed like Model::layers.
std::vector<std::vector<float>> run_float(const Model& model);

// Every tensor's data, NHWC batch-major int8, indexed like QGraph::tensors.
std::vector<std::vector<int8_t>> run_golden(const QGraph& graph);

// Quantization error of the model's output: the golden output dequantized (x scale) against
// the float output.
struct QuantError {
  double max_abs = 0;       // max |golden x scale - float|
  double max_float = 0;     // max |float|
  double relative = 0;      // max_abs / max_float (0 when max_float is 0)
  double rms = 0;           // root mean square error
};
QuantError quant_error(const std::vector<float>& reference, const std::vector<int8_t>& golden, double scale);

}  // namespace tpusim::compiler
