// Float Model -> quantized integer graph (QGraph): int8 symmetric scales per tensor, per-channel
// or per-tensor weight scales, int32 biases, requantization multipliers, fused activations, LSTM
// time steps unrolled into gate matmuls and element-wise vector ops, dense-after-flatten as a
// whole-map convolution. Owner: quantizer.
#pragma once

#include <cstdint>

#include "compiler/graph.h"
#include "compiler/reference.h"

namespace tpusim::compiler {

// Requantization by a positive real factor: round_half_away(v x mult / 2^shift) approximates
// v x factor, with mult <= 65535 and shift <= 63 chosen for the most precision. Throws
// InputError when the factor cannot be represented (too large).
struct Requant {
  uint16_t mult = 1;
  uint8_t shift = 0;
};
Requant requant_for(double factor);

// Scales: given in the description, else calibrated from the float reference run on the
// model's inputs (max |x| / 127). Throws InputError naming the layer when a layer cannot be
// quantized.
// `concat_inplace`: concats written in place (the mapper switch, lower_options.h, on by default;
// QGraph::concat_inplace), else kept as lists of their parts.
QGraph quantize(const Model& model, bool concat_inplace = true);

// Whether layer L's output can be written straight into a concat's joined tensor (when the concat
// is its only reader and concats are written in place); anything else is copied in by an identity
// matmul (c x c weights), which the compile's memory estimate counts (compile_memory.h).
bool writes_in_place(const Layer& L);

// Whether quantizing `model` needs a real float run even where its scales do not (a timing-only
// compile, LoadOptions::timing_only): its automatic precision (Model::precision) cannot rule out
// 16-bit weights for some layer from the weights alone (docs/compiler.md, "16-bit layers").
bool precision_needs_calibration(const Model& model);

// The same, calibrated on a float run the caller already has (run_float_detailed(model)), so
// that a pipeline which also reports the quantization error runs the float reference once.
// `as_parts`: concat layers (by name) kept as lists of their parts although concats are written
// in place (the compile's fallback where one's joined tensor would not fit the machine:
// compile.h place_concats; QGraph::concats_as_parts).
QGraph quantize(const Model& model, const FloatRun& calibration, bool concat_inplace = true,
                const std::vector<std::string>& as_parts = {});

}  // namespace tpusim::compiler
