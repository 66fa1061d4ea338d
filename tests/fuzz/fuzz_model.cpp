// fuzz_model: the input is the text of a model description, read both as a TOML description and
// as a SCALE-Sim topology (conv or GEMM CSV). Each reader must either return a model that keeps
// graph.h's promises (layers in topological order, inputs in range, parameter
// and input sizes matching the shapes) or reject the text with an InputError; nothing else.
// Parameter counts are capped low so that a description may not ask for gigabytes, and .npy
// paths resolve under a folder that does not exist.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/model.h"
#include "compiler/scalesim.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using namespace tpusim::compiler;
using tpusim::fuzz::finding;

namespace {

void check(const Model& m) {
  if (m.inputs.empty() || m.layers.empty()) finding("accepted a model without inputs or layers");
  for (const ModelInput& in : m.inputs)
    if (in.data.size() != m.batch * in.shape.elements()) finding("input %s: data size does not match its shape", in.name.c_str());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    if (l.inputs.empty()) finding("layer %s has no inputs", l.name.c_str());
    for (int e : l.inputs) {
      const bool ok = is_model_input(e) ? size_t(model_input_index(e)) < m.inputs.size() : e >= 0 && size_t(e) < i;
      if (!ok) finding("layer %s reads input entry %d", l.name.c_str(), e);
    }
    const int e = l.inputs[0];
    const Shape in = is_model_input(e) ? m.inputs[size_t(model_input_index(e))].shape : m.layers[size_t(e)].out;
    if (l.weights.size() != weight_count(l, in)) finding("layer %s: %zu weights", l.name.c_str(), l.weights.size());
    const uint64_t biases = l.use_bias || l.type == LayerType::lstm ? bias_count(l) : 0;
    if (l.bias.size() != biases) finding("layer %s: %zu biases", l.name.c_str(), l.bias.size());
    if (l.out.elements() == 0) finding("layer %s: empty output %s", l.name.c_str(), l.out.str().c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_model", [&] {
    LoadOptions options;
    options.max_values = uint64_t{1} << 20;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
      check(parse_model(text, "fuzz.toml", "/nonexistent-tpusim-fuzz", options));
    } catch (const InputError&) {
    }
    try {
      check(import_scalesim(text, "fuzz.csv", options));
    } catch (const InputError&) {
    }
  });
}
