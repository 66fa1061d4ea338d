// The compile's memory estimate (`--max-memory`, docs/limits.md "Memory"): what compiling a model
// holds, at about 5 bytes a value (the float value, then its int8 or int16 one), checked before the
// batch's inputs, the calibration and the golden reference's values are generated, so that a model
// within the per-tensor limits cannot exhaust memory. One rule for every front end that builds a
// Model layer by layer: TOML descriptions (parse_model, as it infers each layer) and ONNX models
// (import_onnx, once the graph is imported; their weights, the file's initializers, are read).
//
// A full compile: every parameter and, for the calibration and golden runs, every layer's output
// for the whole batch. A timing-only compile (LoadOptions::timing_only) computes no data: it holds
// the biases, the weights read from files and an input file; only where its program may depend on
// calibrated scales (an add layer, or weights from files, whose automatic precision may need the
// layers' inputs: compile.h timing_needs_data) does it also generate the inputs (the whole batch,
// and a copy of its calibration samples) and the seeded weights (a layer's at a time: the largest
// layer's) and run the float reference on the calibration samples. Not counted: the program (its
// instructions and the run's timeline, 120 bytes each, checked by `run` once lowered).
#pragma once

#include <cstdint>
#include <string>

#include "compiler/graph.h"
#include "compiler/model.h"

namespace tpusim::compiler {

// Products and sums of counts that saturate at UINT64_MAX instead of wrapping (a hostile model's
// sizes then exceed every limit rather than pass it).
inline uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t p;
  return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}
inline uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t s;
  return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

struct CompileValues {
  uint64_t parameters = 0;      // weights and biases of every layer
  uint64_t held = 0;            // those a timing-only compile holds: biases, file weights
  uint64_t largest_seeded = 0;  // the most seeded weights of one layer
  uint64_t activations = 0;     // every layer's output values, one sample
  bool may_calibrate = false;   // an add layer or file weights (timing-only: the float run may run)
  bool input_file = false;      // the inputs are read from a file (input_file, --input)

  // Counts `layer` (its output shape `out` set) reading `in`. file_weights: its weights are read
  // from a file (a description's weights_file, an ONNX initializer), not drawn from the seed.
  void add_layer(const Layer& layer, const Shape& in, bool file_weights);
};

// The values of a Model whose layers are complete (out shapes set): each layer counted by
// add_layer, its weights from a file unless seeded (Layer::seeded_weights).
CompileValues compile_values(const Model& model);

// Throws InputError naming `source`, the estimate, what it counted and the limit
// (LoadOptions::max_memory; 0: 3/4 of what this process may use) when the estimate is above it.
void check_compile_memory(const Model& model, const std::string& source, const CompileValues& v,
                          const LoadOptions& options);

}  // namespace tpusim::compiler
