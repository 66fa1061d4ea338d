// The compile's memory estimate (compile_memory.h): one rule for the TOML, ONNX and SCALE-Sim front ends.
#include "compiler/compile_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/quantize.h"
#include "compiler/reference.h"
#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::compiler {

namespace {
constexpr uint64_t kFloat = sizeof(float), kInt32 = sizeof(int32_t);
}  // namespace

void CompileValues::add_layer(const Layer& layer, std::span<const Shape> inputs, bool file_weights) {
  const Shape& in = inputs[0];
  activations = sat_add(activations, layer.out.elements());
  const uint64_t weights = weight_count(layer, in);
  const uint64_t biases = layer.use_bias || is_recurrent(layer.type) ? bias_count(layer) : 0;
  parameters = sat_add(parameters, sat_add(weights, biases));
  held = sat_add(held, sat_add(biases, file_weights ? weights : 0));
  if (!file_weights) largest_seeded = std::max(largest_seeded, weights);
  may_calibrate = may_calibrate || layer.type == LayerType::add || (file_weights && weights > 0);
  // Quantized: int8 weights (16-bit: a low and a high byte plane), int32 biases; a recurrent
  // layer's gates once per time step (quantize.cpp: each step's MatmulOp holds its weights).
  const uint64_t weight_bytes = sat_mul(weights, layer.weight_bits == 16 ? 2 : 1);
  const uint64_t steps = is_recurrent(layer.type) ? std::max<uint64_t>(in.pixels(), 1) : 1;
  quantized_bytes = sat_add(quantized_bytes, sat_add(sat_mul(weight_bytes, steps), sat_mul(biases, kInt32)));
  image_bytes = sat_add(image_bytes, weight_bytes);
  held_bytes = sat_add(held_bytes, sat_add(sat_mul(biases, kFloat + kInt32),
                                           file_weights ? sat_add(sat_mul(weights, kFloat), weight_bytes) : 0));
  for (int entry : layer.inputs)
    if (!is_model_input(entry) && size_t(entry) < readers.size()) ++readers[size_t(entry)];
  readers.push_back(0);
  in_place.push_back(writes_in_place(layer));
  if (layer.type == LayerType::concat) {
    concat_parts.emplace_back();
    for (size_t i = 0; i < layer.inputs.size() && i < inputs.size(); ++i)
      concat_parts.back().emplace_back(layer.inputs[i], inputs[i].c);
  }
}

uint64_t CompileValues::copy_bytes(bool inplace) const {
  uint64_t bytes = 0;
  for (const auto& parts : concat_parts)
    for (const auto& [entry, c] : parts) {
      const size_t e = size_t(entry);
      // (the last layer has one reader more: the model's output)
      const uint64_t read = is_model_input(entry) || e >= readers.size() ? 0 : readers[e] + (e + 1 == readers.size());
      if (!(inplace && read == 1 && in_place[e])) bytes = sat_add(bytes, sat_mul(c, c));
    }
  return bytes;
}

CompileValues compile_values(const Model& model) {
  CompileValues v;
  std::vector<Shape> in;
  for (const Layer& l : model.layers) {
    in.clear();
    for (int entry : l.inputs) in.push_back(source_shape(model, l, entry));
    v.add_layer(l, in, !l.seeded_weights);
  }
  return v;
}

CompileEstimate compile_estimate(const Model& m, const CompileValues& v, const LoadOptions& options) {
  uint64_t input = 0;  // every model input's values, one sample
  for (const ModelInput& in : m.inputs) input = sat_add(input, in.shape.elements());
  // The float run's samples (--calibrate's are counted as a batch: their number is read after this check).
  const uint64_t samples = options.calibration_file || m.calibration_samples == 0
                               ? m.batch
                               : std::min(m.calibration_samples, m.batch);
  const uint64_t inputs = sat_mul(m.batch, input);
  // The float run on the first samples holds the batch's inputs and a copy of those samples'.
  const uint64_t calibration =
      sat_mul(sat_add(sat_mul(samples, v.activations), samples < m.batch ? sat_mul(samples, input) : 0), kFloat);
  const uint64_t copies = v.copy_bytes(concat_inplace(options.mapper));
  CompileEstimate e;
  std::vector<std::pair<std::string, uint64_t>> parts;
  if (!options.timing_only) {
    parts = {{fmt::format("{} float parameters", v.parameters), sat_mul(v.parameters, kFloat)},
             {"their quantized weights and biases", v.quantized_bytes},
             {v.image_laid_out ? "the weight image as laid out" : "the weight image", v.image_bytes},
             {"concat copies", copies},
             // float, int8, and the program's copy in TPU order
             {fmt::format("batch {} x {} input values", m.batch, input), sat_mul(inputs, kFloat + 2)},
             {fmt::format("a calibration run over {} samples x {} layer output values", samples, v.activations),
              calibration}};
    if (options.golden_reference)
      parts.push_back({fmt::format("the golden reference's batch {} x {} layer output values", m.batch, v.activations),
                       sat_mul(m.batch, v.activations)});
  } else {
    const bool generated = v.input_file || v.may_calibrate;
    parts = {{fmt::format("a timing-only compile: {} biases and weights from files", v.held), v.held_bytes},
             {"concat copies", copies}};
    if (generated)  // float, and the quantizer's int8 copy
      parts.push_back({fmt::format("batch {} x {} input values", m.batch, input), sat_mul(inputs, kFloat + 1)});
    if (v.may_calibrate)
      parts.push_back({fmt::format("a calibration run over {} samples x {} layer output values and {} seeded weights "
                                   "of a layer",
                                   samples, v.activations, v.largest_seeded),
                       sat_add(calibration, sat_mul(v.largest_seeded, kFloat))});
  }
  for (const auto& [what, bytes] : parts) {
    if (bytes == 0) continue;
    e.bytes = sat_add(e.bytes, bytes);
    e.what += fmt::format("{}{} for {}", e.what.empty() ? "" : ", ", bytes, what);
  }
  if (e.what.empty()) e.what = options.timing_only ? "a timing-only compile: no values" : "no values";
  return e;
}

void check_compile_memory(const Model& m, const std::string& source, const CompileValues& v,
                          const LoadOptions& options) {
  const CompileEstimate e = compile_estimate(m, v, options);
  const uint64_t usable = io::usable_memory_bytes();
  const uint64_t limit = options.max_memory ? options.max_memory : usable / 4 * 3;
  if (e.bytes <= limit) return;
  throw InputError(fmt::format(
      "{}: compiling model {} needs about {} ({}), more than the {} allowed{}; lower the batch "
      "or the layer sizes{}",
      source, m.name, io::size_text(e.bytes), e.what, io::size_text(limit),
      options.max_memory ? " by --max-memory"
                         : fmt::format(" (3/4 of the {} this process may use)", io::size_text(usable)),
      options.max_memory ? " or raise --max-memory" : ""));
}

}  // namespace tpusim::compiler
