// Model descriptions (TOML, docs/model-format.md) and SCALE-Sim topologies (CSV) to a float
// Model with every shape inferred and every parameter present (loaded from .npy or generated
// from the seed). Owner: front end.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/graph.h"
#include "compiler/lower_options.h"

namespace tpusim::compiler {

// The largest batch any front end takes (a description's batch, --batch, a sweep's `batch`): the
// limit of every dimension a description gives (docs/model-format.md).
inline constexpr uint64_t kMaxBatch = 65535;

struct LoadOptions {
  // Overrides the description's batch; an input_file must then hold exactly that many samples.
  std::optional<uint64_t> batch;
  // The most parameters (weights and biases of all layers together) and, separately, the most
  // input values (batch x elements of all inputs) a model may have: a clear error instead of a
  // huge allocation. The fuzzer lowers it.
  uint64_t max_values = uint64_t{1} << 31;
  // The model's input data (a .npy, `--input`): replaces the description's input_file or seeded
  // input, and sets the batch to its first dimension. Its layout is the front end's: NHWC for
  // descriptions, the ONNX input's (e.g. [N, C, H, W]) for .onnx models.
  std::optional<std::filesystem::path> input_file;
  // Samples to calibrate the quantization scales on (a .npy in the same layout, `--calibrate`),
  // instead of the first calibration_samples of the inputs: Model::calibration.
  std::optional<std::filesystem::path> calibration_file;
  // Bytes compiling may take, estimated before any seeded parameter or input is generated
  // (compile_memory.h: TOML descriptions and ONNX models); 0: 3/4 of the memory this process may
  // use (io::usable_memory_bytes).
  uint64_t max_memory = 0;
  // The golden reference runs on the whole batch after the compile (`tpusim run` on the fast,
  // stepped or rtl engine, checking its output): the memory estimate counts its values too.
  bool golden_reference = false;
  // Where the compile is, for a progress display on another thread ("parsing", "quantizing",
  // "lowering"); null: not reported.
  std::atomic<const char*>* phase = nullptr;
  // A compile for the timing engine only (`tpusim run --engine timing`): the program's timing is
  // exact but its data are not computed. A SCALE-Sim topology's seeded inputs are not generated
  // (their host regions have no initial contents, and max_values does not bound them), and the
  // quantization scales are not calibrated with the float reference (every tensor gets the scale
  // of values up to 1) unless the model adds tensors: an add's operands are aligned to one scale
  // by an extra instruction only where their calibrated scales differ. Only requantization
  // fields and table contents then differ from a full compile, none of which changes an
  // instruction's timing (tests/compiler/timing_only_test.cpp holds them equal).
  bool timing_only = false;
  // The mapping techniques the lowering may use (compile_file; `--mapper KEY=off`).
  LowerOptions mapper;
  // `--precision` (run, compile; Python's precision=; compare --int8 and the GPU and CPU runners,
  // whose kernels are int8 only, give int8): the user's choice, which wins over the description's
  // (apply_precision).
  std::optional<Precision> precision;
  // `--output-bits`: replaces the model's [quantization] output_bits (Model::output_bits), 8 or 16.
  std::optional<uint8_t> output_bits;
  // compile_file frees the layers' float weights and biases once quantized, when the check's
  // quantization error needs no second float run (Compiled::float_output): `tpusim run` without
  // --labels. The model's shapes stay; run_float and top1_accuracy then need a fresh load.
  bool release_float_parameters = false;
};

// The names of Precision's values, as descriptions and --precision spell them.
inline constexpr std::string_view kPrecisionNames[] = {"auto", "int8", "wide"};
// The Precision a name of kPrecisionNames spells, nullopt for any other text.
inline std::optional<Precision> precision_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kPrecisionNames); ++i)
    if (name == kPrecisionNames[i]) return static_cast<Precision>(i);
  return std::nullopt;
}

// A precision the user chose (LoadOptions::precision) over the model's own: `int8` makes every
// weight and tensor int8 (the description's [quantization] precision and output_bits and every
// layer's weight_bits and output_bits keys set aside: Model::wide_elements false), `wide` gives
// every layer 16-bit weights (weight_bits keys set aside), `auto` replaces only [quantization]
// precision (a layer's keys still decide that layer). `output_bits`: LoadOptions::output_bits,
// applied after; 16 with int8 is refused (InputError naming `source`). Within a description a
// layer's keys win over its [quantization] precision (docs/compiler.md, "16-bit layers").
void apply_precision(Model& m, std::optional<Precision> precision, std::optional<uint8_t> output_bits,
                     const std::string& source);

// By extension: .toml a description, .csv a SCALE-Sim topology, .onnx an ONNX model (onnx.h). Throws InputError with
// "FILE:LINE: layer NAME: field: value: what was expected".
Model load_model(const std::filesystem::path& path, const LoadOptions& options = {});

// A description's text; .npy paths in it are relative to `base_dir`.
Model parse_model(std::string_view text, const std::string& source, const std::filesystem::path& base_dir,
                  const LoadOptions& options = {});

// True when `path` names a model (a .toml description, a .csv topology or an .onnx model) rather
// than a program.
bool is_model_path(const std::filesystem::path& path);

// A description's keys whose values name .npy files, relative to the description's folder
// (docs/model-format.md): the one list that parse_model takes these keys from (the keys it allows
// in each table) and model_files lists the files of. `table` is the TOML table that holds the key:
// "model" ([model]) or "layer" (each [[layer]] with parameters: dense, conv2d, lstm, gru; there a
// string, or for lstm and gru an array of strings, one per stacked layer). Every file key is named
// `..._file` (tests/compiler/model_test.cpp holds the parser's keys of that form to this list).
struct FileKey {
  std::string_view table;
  std::string_view key;
};
inline constexpr FileKey kFileKeys[] = {{"model", "input_file"}, {"layer", "weights_file"}, {"layer", "bias_file"}};

// The files a model at `path` reads: `path` itself and, for a .toml description, every .npy it
// names under a key of kFileKeys (in [model], then each layer's in turn; resolved as parse_model
// resolves them), so that no output of a command is written over one of them
// (io::refuse_input_as_output). Best effort: a description that cannot be read or parsed names
// only itself (its load then reports the error).
std::vector<std::string> model_files(const std::filesystem::path& path);
// Every file of each model in `models` (model_files), appended to `files`.
void append_model_files(std::vector<std::string>& files, const std::vector<std::string>& models);

// ---- generated parameters and inputs (docs/model-format.md, "Generated parameters and inputs") --

// Stream `stream` of `seed`: std::mt19937_64 seeded with seed + stream x 0x9E3779B97F4A7C15
// (mod 2^64); each draw's top 53 bits make a double u in [0, 1).
class SeededUniform {
 public:
  SeededUniform(uint64_t seed, uint64_t stream);
  double next() { return double(engine_() >> 11) * 0x1.0p-53; }
  float uniform(double bound) { return float(bound * (2.0 * next() - 1.0)); }  // in [-bound, bound)

 private:
  std::mt19937_64 engine_;
};
// The layer at 1-based position p draws its weights from stream 2p and its bias from 2p + 1;
// model input i (0-based) from stream 2^32 + i.
inline constexpr uint64_t weight_stream(size_t position) { return 2 * uint64_t(position); }
inline constexpr uint64_t bias_stream(size_t position) { return 2 * uint64_t(position) + 1; }
inline constexpr uint64_t input_stream(size_t index) { return (uint64_t{1} << 32) + index; }

// Number of weights and of biases a dense, conv2d or lstm layer reading `in` has (graph.h
// layouts; bias counts whether or not use_bias is set); saturates at UINT64_MAX.
uint64_t weight_count(const Layer& layer, const Shape& in);
uint64_t bias_count(const Layer& layer);
// Glorot-uniform weights for `layer` reading `in` (lstm: per stacked layer, fan_in = in_l +
// units, fan_out = units), drawn in the layout order of graph.h.
std::vector<float> generate_weights(const Layer& layer, const Shape& in, uint64_t seed, size_t position);
// The same into `w` (its contents replaced; its memory reused where large enough).
void generate_weights(const Layer& layer, const Shape& in, uint64_t seed, size_t position, std::vector<float>& w);
// A grouped conv2d's weights [kh][kw][in_c / groups][units] (ONNX/PyTorch's grouped layout, as
// .npy weights files and the seeded generator give them) spread into the dense block-diagonal
// layout of graph.h: zeros where input channel and filter are in different groups.
std::vector<float> expand_groups(const std::vector<float>& grouped, uint64_t kh, uint64_t kw, uint64_t in_c,
                                 uint64_t units, uint64_t groups);
std::vector<float> generate_bias(const Layer& layer, uint64_t seed, size_t position);  // uniform in [-0.1, 0.1]
// The seeded weights a timing-only compile left out (Layer::seeded_weights with `weights` empty),
// generated as a full compile does (the layer at index i draws from weight_stream(i + 1)).
void generate_seeded_weights(Model& model);
std::vector<float> generate_input(const Shape& shape, uint64_t batch, uint64_t seed, size_t index);  // [-1, 1]

}  // namespace tpusim::compiler
