// The whole compiler: a model description (or a Model) to a program for one architecture, and
// the check of a simulated run against the golden reference (the "driver" side: the model's
// input and output tensors in TPU order, layout.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/graph.h"
#include "compiler/lower.h"
#include "compiler/lower_options.h"
#include "compiler/model.h"
#include "compiler/npy.h"
#include "compiler/reference.h"
#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::compiler {

struct Compiled {
  Model model;
  QGraph graph;
  isa::Program program;
  double parse_seconds = 0, quantize_seconds = 0, lower_seconds = 0;  // wall time of each phase
  // The float reference's output on the calibration samples, kept from the calibration run when
  // those are the inputs' first samples (check_output's quantization error then needs no second
  // float run); empty otherwise.
  std::vector<float> float_output;
  bool float_parameters_released = false;  // LoadOptions::release_float_parameters took effect
  bool timing_only = false;                // prepared without data (prepare_model's `timing_only`)
  // The most the lowering held at once besides the program (LowerMemory::working_bytes): freed
  // once lowered, but part of the process's peak, which the run's and compile's memory checks count.
  uint64_t lowering_bytes = 0;
};

// The memory a compiled model holds besides its program (isa::program_bytes), by part, from the
// capacities of its vectors: the float model's parameters and inputs (what the compile kept of
// them), and the quantized graph (its ops' weights and requantization, tensors, input data).
// `tpusim run` counts it in the run's memory check.
std::vector<std::pair<std::string, uint64_t>> compiled_bytes(const Compiled& c);

// Throws InputError for a bad description or a model the architecture cannot hold.
Compiled compile_file(const std::filesystem::path& path, const sim::Arch& arch, const LoadOptions& options = {});
// compile_file into `c`, calling `quantized(c)` (when given) once the graph is quantized and before
// lowering: c.graph is final from then on (lowering only reads it), so the caller may start work on
// it beside the lowering (tpusim run's golden reference). `c` must stay where it is meanwhile.
void compile_file_into(Compiled& c, const std::filesystem::path& path, const sim::Arch& arch,
                       const LoadOptions& options, const std::function<void(const Compiled&)>& quantized);
Compiled compile_model(Model model, const sim::Arch& arch);

// The two halves, for compiling one model for many architectures (a sweep's points): parsing and
// quantization do not depend on the architecture; lowering does. prepare_* leave `program`
// empty; lower_for (re)fills it for `arch`, and its errors name the model's source as
// compile_file's do.
Compiled prepare_file(const std::filesystem::path& path, const LoadOptions& options = {});
// timing_only: quantized without the float reference's calibration (LoadOptions::timing_only).
// `mapper`: the switches the quantizer reads (concat_inplace); lower_for must be given the same.
Compiled prepare_model(Model model, bool timing_only = false, const LowerOptions& mapper = {});
// Whether a timing-only compile of `model` must still generate its seeded weights and run the float
// reference, because its program depends on calibrated scales: an add layer (which operand is
// rescaled), or a layer with weights from a file whose automatic precision needs the layers'
// inputs (quantize.h precision_needs_calibration).
bool timing_needs_data(const Model& model);
// The quantized graph of a timing-only compile of `model` (loaded with LoadOptions::timing_only), as
// prepare_model(model, true, mapper) quantizes it, but never calibrated: where timing_needs_data
// says the compile runs the float reference, the placeholder scales stand in all the same, so an
// add's rescaled operand and a layer's automatic precision may differ from the compile's. Costs no
// float run: for estimates made before any point runs (the sweep scheduler's, with pieces() and
// packing_for, compiler/lower.h).
QGraph uncalibrated_graph(Model model, const LowerOptions& mapper = {});
// Concats written in place fall back to parts where in place cannot be mapped (docs/compiler.md
// "Concatenation"): while the lowering of c.graph for `arch` would hold a concat's joined tensor in
// host memory (lower.h ConcatInHost, found by lower.h concat_in_host(): the lowering's own search, its fit
// checks alone) and the mapper's concat_inplace is not given, that concat is added to
// `mapper.concats_as_parts` and c is prepared again from c.model (prepare_model: the quantizer
// keeps it as parts; a full compile calibrates again). Nothing changes where every concat fits in
// place, or where concat_inplace is given (lower_for then refuses the model, as asked). Call it
// before lowering, and before anything reads c.graph or the float parameters are released:
// compile_file_into and compile_model do.
void place_concats(Compiled& c, const sim::Arch& arch, LowerOptions& mapper);
// The concat the lowering of `g` for `arch` would hold in host memory, written in place (its
// root's layer name), where the fallback applies (concat_inplace not given and g has a concat
// written in place); nullopt otherwise, or where the lowering fails first for another reason
// (lower_for then reports it).
std::optional<std::string> concat_to_keep_as_parts(const QGraph& g, const sim::Arch& arch, const LowerOptions& mapper);
// For a caller that keeps prepared models and lowers them for many machines (a sweep worker),
// without place_concats' check before each lowering: once lower_for has refused `c` (prepared
// with `mapper`) for `arch` with `refused`, the concats place_concats would keep as parts
// (mapper.concats_as_parts and more), leaving c as it was; `refused` rethrown where the mapper's
// concat_inplace was given. The model prepared with them is the one to lower.
std::vector<std::string> concats_kept_as_parts(Compiled& c, const sim::Arch& arch, const LowerOptions& mapper,
                                               const ConcatInHost& refused);
// `before_program`: LowerMemory::before_program (compile_file_into's memory check of the weight
// image as laid out); its InputError passes through as thrown.
void lower_for(Compiled& c, const sim::Arch& arch, const LowerOptions& options = {},
               const std::function<void(uint64_t image_bytes, uint64_t instructions)>& before_program = {});

// The model's output as the program leaves it in host memory (the "output" region, TPU order),
// compared with the golden reference executor, and the quantization error against the float
// reference on the calibration samples (the model is cut down for that run and restored).
struct OutputCheck {
  bool matches = false;
  std::string first_difference;  // "sample 3, pixel (0, 1), channel 17: simulated 12, golden 13"
  QuantError error;
  uint64_t elements = 0;
};
// The quantization error of each layer's output (`tpusim run --layer-errors`): the golden
// reference's tensor (int8 or 16-bit, x its scale) against the float reference's output of that
// layer, on the samples check_output's error covers (the calibration samples: the first
// Model::calibration_samples of the batch, every input when 0 or --calibrate gives separate ones).
// Layers in model order that own a tensor of their name: not a flatten (its output is its input's)
// nor a layer written into a concat's joined tensor in place (the concat's row covers it).
struct LayerError {
  std::string layer;
  int bits = 8;              // the output tensor's element width
  double scale = 0;          // its quantization scale
  uint64_t elements = 0;     // values compared (samples x the layer's output elements)
  double max_abs = 0;        // max |quantized x scale - float|
  double max_float = 0;      // max |float| (the float output's range)
  double rms = 0;            // root mean square error
  double rms_relative = 0;   // rms / max_float (0 when max_float is 0)
  // Signal-to-quantization-noise ratio, 10 log10(sum float^2 / sum error^2) dB; +inf when the
  // error is 0, 0 when the float output is all zeros.
  double sqnr_db = 0;
};
// Needs the float parameters (LoadOptions::release_float_parameters off).
std::vector<LayerError> layer_errors(Compiled& c);

// `golden`: golden_output(c) computed already (tpusim run computes it beside the simulation).
OutputCheck check_output(Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch,
                         const std::vector<int8_t>* golden = nullptr);
// The golden reference's output tensor (run_golden's entry for graph.output), computed holding only
// the activations still to be read.
std::vector<int8_t> golden_output(const Compiled& c);

// Top-1 accuracy on a labelled data set (`tpusim run --labels`): for each sample, the class with
// the largest output (the lowest index among equals) against labels[sample], for the float
// reference run on the whole batch and for the int8 output the machine left in `output_region`.
// Throws InputError when the model's output is not a vector of class scores or a label is not
// one of its classes.
struct Accuracy {
  uint64_t samples = 0, correct_float = 0, correct_int8 = 0;
};
Accuracy top1_accuracy(Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch,
                       std::span<const int64_t> labels);
// top1_accuracy's checks of the labels, made before a run so that a wrong file costs no
// simulation: one per sample, each a class of the model's output vector. `what` names them in the
// message ("--labels y.npy").
void check_labels(const Compiled& c, std::span<const int64_t> labels, const std::string& what = "labels");

// The model's output as the machine left it in `output_region`, dequantized (each integer x the
// output tensor's scale), batch-major in the Model's order ([n][pixel][channel]: NHWC for maps).
std::vector<float> simulated_output(const Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch);
// A model output in the Model's order (simulated_output's, or run_float's last tensor) as float32
// .npy contents, batch first in the front end's layout: [N, C], [N, T, C], a map [N, C, H, W]
// for an ONNX model and [N, H, W, C] for a description (tpusim run --save-output, Python's
// outputs).
NpyArray output_npy(const Compiled& c, const std::vector<float>& values);
// output_npy of simulated_output.
NpyArray simulated_output_npy(const Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch);

// The golden output in TPU order: the bytes the output region must hold.
std::vector<uint8_t> golden_output_bytes(const Compiled& c, const sim::Arch& arch);

}  // namespace tpusim::compiler
