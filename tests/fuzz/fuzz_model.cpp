// fuzz_model: the input is the text of a model description, read both as a TOML description and
// as a SCALE-Sim topology (conv or GEMM CSV). Each reader must either return a model that keeps
// graph.h's promises (layers in topological order, inputs in range, parameter
// and input sizes matching the shapes) or reject the text with an InputError; nothing else.
// Parameter counts are capped low so that a description may not ask for gigabytes, and .npy
// paths resolve under a folder that does not exist. A model that parses is then compiled for a
// small array whose shape the input's first and last bytes pick (4..64 rows and columns, square or
// not, dividing each other or not: compiler/layout.h LaneTile), with a small unified buffer and
// accumulators so that batches run in pieces, partial weight tiles as boxes or whole, its concats written in place or kept as parts (the
// mapper's concat_inplace, from the input's size): the back end must either refuse the model with an
// InputError or produce a program the ISA's static checks accept, in pieces of at most the batch.
// (Models beyond 2^24 MACs are not compiled: see kMaxCompiledMacs.)
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/scalesim.h"
#include "isa/program.h"
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
    const uint64_t biases = l.use_bias || is_recurrent(l.type) ? bias_count(l) : 0;
    if (l.bias.size() != biases) finding("layer %s: %zu biases", l.name.c_str(), l.bias.size());
    if (l.out.elements() == 0) finding("layer %s: empty output %s", l.name.c_str(), l.out.str().c_str());
  }
}

sim::Arch arch_for(const uint8_t* data, size_t size) {
  sim::Arch a;
  a.name = "fuzz";
  a.array_rows = 4 + (size ? data[0] : 0) % 61;
  a.array_cols = 4 + (size ? data[size - 1] : 0) % 61;
  a.ub_bytes = 4096 * a.ub_row_bytes();
  a.acc_entries = 256;
  a.weight_mem_bytes = a.tile_bytes() * 65536;
  a.driver_piece_schedule = size % 2;  // both ways a batch in pieces runs (sim/arch.h)
  a.driver_host_loop = size / 2 % 2;  // both ways a recurrence runs: host-driven or one program
  a.driver_partial_tiles = size / 8 % 2;  // partial weight tiles as their boxes or whole (bit 2: concat_inplace)
  return a;
}

// About the MACs a compile's float calibration run does: each layer's weights once per output
// pixel (or time step) and sample.
double approximate_macs(const Model& m) {
  double macs = 0;
  for (const Layer& l : m.layers) {
    const int e = l.inputs[0];
    const Shape in = is_model_input(e) ? m.inputs[size_t(model_input_index(e))].shape : m.layers[size_t(e)].out;
    macs += double(weight_count(l, in)) * double(l.out.pixels()) * double(m.batch);
  }
  return macs;
}

// Models beyond 2^24 MACs are parsed and checked but not compiled: the compile's float
// calibration run grows with the MACs, and under ASan and coverage a 310M-MAC convolution took
// 8.5 s (a libFuzzer timeout, not a finding; a Release build compiles it in 0.15 s).
constexpr double kMaxCompiledMacs = double(uint64_t{1} << 24);

void check_lowered(Model m, const sim::Arch& arch, const LowerOptions& mapper) {
  if (approximate_macs(m) > kMaxCompiledMacs) return;
  const uint64_t batch = m.batch;
  Compiled c;
  try {
    c = prepare_model(std::move(m), false, mapper);
    lower_for(c, arch, mapper);
  } catch (const InputError&) {
    return;
  }
  if (const std::string why = isa::check_program(c.program); !why.empty())
    finding("compiled for %llux%llu, the program fails the ISA checks: %s", (unsigned long long)arch.array_rows,
            (unsigned long long)arch.array_cols, why.c_str());
  const uint64_t piece = c.program.meta.value("batch_piece", uint64_t{0});
  if (piece == 0 || piece > batch) finding("pieces of %llu samples for a batch of %llu", (unsigned long long)piece,
                                           (unsigned long long)batch);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded("fuzz_model", [&] {
    LoadOptions options;
    options.max_values = uint64_t{1} << 20;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const sim::Arch arch = arch_for(data, size);
    LowerOptions mapper;  // concats written in place or kept as parts, as a third bit of the size picks
    mapper.concat_inplace = (size / 4) % 2 == 1;  // (bits 0, 1 and 3 pick the driver's switches: arch_for)
    try {
      Model m = parse_model(text, "fuzz.toml", "/nonexistent-tpusim-fuzz", options);
      check(m);
      check_lowered(std::move(m), arch, mapper);
    } catch (const InputError&) {
    }
    try {
      Model m = import_scalesim(text, "fuzz.csv", options);
      check(m);
      check_lowered(std::move(m), arch, mapper);
    } catch (const InputError&) {
    }
  });
}
