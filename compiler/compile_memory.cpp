// The compile's memory estimate (compile_memory.h): one rule for the TOML and ONNX front ends.
#include "compiler/compile_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/reference.h"
#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::compiler {

void CompileValues::add_layer(const Layer& layer, const Shape& in, bool file_weights) {
  activations = sat_add(activations, layer.out.elements());
  const uint64_t weights = weight_count(layer, in);
  const uint64_t biases = layer.use_bias || is_recurrent(layer.type) ? bias_count(layer) : 0;
  parameters = sat_add(parameters, sat_add(weights, biases));
  held = sat_add(held, sat_add(biases, file_weights ? weights : 0));
  if (!file_weights) largest_seeded = std::max(largest_seeded, weights);
  may_calibrate = may_calibrate || layer.type == LayerType::add || (file_weights && weights > 0);
}

CompileValues compile_values(const Model& model) {
  CompileValues v;
  for (const Layer& l : model.layers) v.add_layer(l, source_shape(model, l, l.inputs.at(0)), !l.seeded_weights);
  return v;
}

void check_compile_memory(const Model& m, const std::string& source, const CompileValues& v,
                          const LoadOptions& options) {
  uint64_t input = 0;  // every model input's values, one sample
  for (const ModelInput& in : m.inputs) input = sat_add(input, in.shape.elements());
  uint64_t values = 0;
  std::string what;
  if (!options.timing_only) {
    values = sat_add(v.parameters, sat_mul(m.batch, sat_add(v.activations, input)));
    what = fmt::format("{} parameters and batch {} x {} input and layer output values", v.parameters, m.batch,
                       sat_add(v.activations, input));
  } else {
    // (--calibrate's samples are counted as a batch: their number is read after this check)
    const uint64_t samples = options.calibration_file || m.calibration_samples == 0
                                 ? m.batch
                                 : std::min(m.calibration_samples, m.batch);
    const bool inputs = v.input_file || v.may_calibrate;
    values = sat_add(v.held, inputs ? sat_mul(m.batch, input) : 0);
    if (v.may_calibrate)
      values = sat_add(values, sat_add(v.largest_seeded, sat_mul(samples, sat_add(v.activations, input))));
    what = fmt::format("a timing-only compile: {} biases and weights from files{}{}", v.held,
                       inputs ? fmt::format(", batch {} x {} input values", m.batch, input) : "",
                       v.may_calibrate ? fmt::format(", a calibration run over {} samples x {} layer output values "
                                                     "and {} seeded weights of a layer",
                                                     samples, v.activations, v.largest_seeded)
                                       : "");
  }
  const uint64_t bytes = sat_mul(values, 5);
  const uint64_t usable = io::usable_memory_bytes();
  const uint64_t limit = options.max_memory ? options.max_memory : usable / 4 * 3;
  if (bytes <= limit) return;
  throw InputError(fmt::format(
      "{}: compiling model {} needs about {} ({}, about 5 bytes each), more than the {} allowed{}; lower the batch "
      "or the layer sizes{}",
      source, m.name, io::size_text(bytes), what, io::size_text(limit),
      options.max_memory ? " by --max-memory"
                         : fmt::format(" (3/4 of the {} this process may use)", io::size_text(usable)),
      options.max_memory ? " or raise --max-memory" : ""));
}

}  // namespace tpusim::compiler
