// The compile's memory estimate (`--max-memory`, docs/limits.md "Memory"): what compiling a model
// holds at its peak, in bytes, each part counted from the size of the element the code stores
// (sizeof(float), int8 or int16 weights, sizeof(int32_t) biases), checked before the batch's
// inputs, the calibration and the golden reference's values are generated, so that a model within
// the per-tensor limits cannot exhaust memory. One rule for every front end that builds a Model
// layer by layer: TOML descriptions (parse_model, as it infers each layer), ONNX models
// (import_onnx, once the graph is imported; their weights, the file's initializers, are read) and
// SCALE-Sim topologies (parse_scalesim).
//
// A full compile holds, at once: the float parameters (4 bytes each); the quantized graph's
// weights (1 byte, 2 for a 16-bit layer; an LSTM's or GRU's once per time step: each step's
// matmul holds its gates' weights) and biases (int32); the weight image (a byte per 8-bit weight
// here, before lowering; compile_file checks again once the lowering has laid the image out and
// before its bytes are built, with the bytes its tiles' stored boxes take: the zero rows of a K tile
// moved back at a row's end, a packed convolution's kernel columns repeated per pixel, CNN1's 100 MB
// of weights a 136 MB image on a 1024 x 1024 array: lower.h LowerMemory); the batch's inputs (float, int8, and the program's copy in TPU
// order: 6 bytes a value); the float calibration run's every layer output on the calibration
// samples (4 bytes); a concat's identity copies (c x c bytes per part); and, when the golden
// reference follows (LoadOptions::golden_reference: `run` on a data engine), every layer output of
// the whole batch as int8 (an upper bound: it frees a tensor after its last reader).
//
// A timing-only compile (LoadOptions::timing_only) computes no data: it holds the biases (float and
// int32), the weights read from files (float and quantized), an input file's values and a concat's
// copies; only where its program may depend on calibrated scales (an add layer, or weights from
// files, whose automatic precision may need the layers' inputs: compile.h timing_needs_data) does
// it also generate the inputs (the whole batch, float) and the seeded weights (a layer's at a
// time: the largest layer's) and run the float reference on the calibration samples.
//
// Not counted here: the program (its instructions, 96 bytes each, and what a run records of them,
// about 55 more) and the lowering's working state (Compiled::lowering_bytes), checked once lowered
// by `run` (isa::program_bytes, sim::run_record_bytes, compiler::compiled_bytes) and by `compile`
// before it writes; nor the process itself (the executable, its libraries, SystemC: about 16 MB,
// docs/limits.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

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
  uint64_t parameters = 0;       // weights and biases of every layer
  uint64_t held = 0;             // those a timing-only compile holds: biases, file weights
  uint64_t largest_seeded = 0;   // the most seeded weights of one layer
  uint64_t activations = 0;      // every layer's output values, one sample
  uint64_t quantized_bytes = 0;  // the quantized graph's weights (per step for a recurrent layer) and biases
  uint64_t image_bytes = 0;      // the weight image: a byte per 8-bit weight, two per 16-bit
  bool image_laid_out = false;   // image_bytes is the lowered image's (its tiles' stored boxes)
  uint64_t held_bytes = 0;       // a timing-only compile's: biases float + int32, file weights float + quantized
  // For a concat's identity copies (c x c int8 weights for each part not written in place: the
  // quantizer's rule, quantize.h writes_in_place): each layer's readers and whether it can write
  // in place, and each concat's parts (an input entry and its channels).
  std::vector<uint64_t> readers;
  std::vector<bool> in_place;
  std::vector<std::vector<std::pair<int, uint64_t>>> concat_parts;
  bool may_calibrate = false;    // an add layer or file weights (timing-only: the float run may run)
  bool input_file = false;       // the inputs are read from a file (input_file, --input)

  // Counts `layer` (its output shape `out` set) reading `inputs` (the shape of each of
  // layer.inputs, in order; at least the first). file_weights: its weights are read from a file
  // (a description's weights_file, an ONNX initializer), not drawn from the seed.
  void add_layer(const Layer& layer, std::span<const Shape> inputs, bool file_weights);
  // The concats' copies, in bytes (`inplace`: concats are written in place, the mapper's
  // concat_inplace): every part, but a layer read by its concat alone that writes in place.
  uint64_t copy_bytes(bool inplace) const;
};

// The values of a Model whose layers are complete (out shapes set): each layer counted by
// add_layer, its weights from a file unless seeded (Layer::seeded_weights).
CompileValues compile_values(const Model& model);

// The estimate in bytes, and what it counted (for messages and docs/limits.md's table).
struct CompileEstimate {
  uint64_t bytes = 0;
  std::string what;
};
CompileEstimate compile_estimate(const Model& model, const CompileValues& v, const LoadOptions& options);

// Throws InputError naming `source`, the estimate, what it counted and the limit
// (LoadOptions::max_memory; 0: 3/4 of what this process may use) when the estimate is above it.
void check_compile_memory(const Model& model, const std::string& source, const CompileValues& v,
                          const LoadOptions& options);

}  // namespace tpusim::compiler
