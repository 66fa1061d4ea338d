// fuzz_onnx: the input is the bytes of an .onnx file. import_onnx must either return a model that
// keeps graph.h's promises (as fuzz_model checks them) or reject the bytes with an InputError
// (truncated or corrupt protobuf, unsupported operators, bad shapes); nothing else. Parameter
// and input counts are capped low so that a file may not ask for gigabytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compiler/onnx.h"
#include "compiler/reference.h"
#include "isa/error.h"
#include "tests/fuzz/fuzz_common.h"

using namespace tpusim;
using namespace tpusim::compiler;
using tpusim::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_onnx", [&] {
    LoadOptions options;
    options.max_values = uint64_t{1} << 20;
    Model m;
    try {
      m = import_onnx(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx", options);
    } catch (const InputError&) {
      return;
    }
    if (m.inputs.empty() || m.layers.empty()) finding("accepted a model without inputs or layers");
    for (const ModelInput& in : m.inputs)
      if (in.data.size() != m.batch * in.shape.elements())
        finding("input %s: data size does not match its shape", in.name.c_str());
    for (size_t i = 0; i < m.layers.size(); ++i)
      for (int e : m.layers[i].inputs)
        if (!(is_model_input(e) ? size_t(model_input_index(e)) < m.inputs.size() : e >= 0 && size_t(e) < i))
          finding("layer %s reads input entry %d", m.layers[i].name.c_str(), e);
    // The float reference checks every layer's parameter sizes and shapes; an imported model must
    // pass (it is what calibration runs).
    try {
      if (m.batch * m.inputs[0].shape.elements() <= (uint64_t{1} << 16)) run_float(m);
    } catch (const InputError& e) {
      finding("imported a model the float reference refuses: %s", e.what());
    }
  });
}
