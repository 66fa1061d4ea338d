#include "compiler/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "compiler/layout.h"
#include "compiler/lower.h"
#include "compiler/quantize.h"
#include "isa/error.h"

namespace tpusim::compiler {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t lanes(const sim::Arch& arch) { return std::min(arch.array_rows, arch.array_cols); }

// Runs `f` on `model` cut down to its first `samples` samples (all when 0 or more than the batch),
// then restores it: the model's parameters are not copied.
template <class F>
auto on_first_samples(Model& model, uint64_t samples, F f) {
  if (samples == 0 || samples >= model.batch) return f(model);
  const uint64_t batch = model.batch;
  std::vector<std::vector<float>> full;
  for (ModelInput& in : model.inputs) {
    full.push_back(in.data);
    in.data.resize(samples * in.shape.elements());
  }
  model.batch = samples;
  struct Restore {  // also when f throws: a sweep worker keeps the model for its next point
    Model& m;
    uint64_t batch;
    std::vector<std::vector<float>>& full;
    ~Restore() {
      m.batch = batch;
      for (size_t i = 0; i < full.size(); ++i) m.inputs[i].data = std::move(full[i]);
    }
  } restore{model, batch, full};
  return f(model);
}

FloatRun calibration_run(Model& model) {
  return on_first_samples(model, model.calibration_samples, [](const Model& m) { return run_float_detailed(m); });
}

}  // namespace

Compiled prepare_model(Model model) {
  Compiled c;
  const auto t0 = std::chrono::steady_clock::now();
  c.graph = quantize(model, calibration_run(model));
  c.quantize_seconds = since(t0);
  c.model = std::move(model);
  return c;
}

Compiled prepare_file(const std::filesystem::path& path, const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Model m = load_model(path, options);
  const double parse = since(t0);
  Compiled c = prepare_model(std::move(m));
  c.parse_seconds = parse;
  return c;
}

void lower_for(Compiled& c, const sim::Arch& arch) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.program = lower(c.graph, arch);
  } catch (const InputError& e) {
    if (c.model.source.empty()) throw;
    throw InputError(fmt::format("{}: {}", c.model.source, e.what()));
  }
  c.lower_seconds = since(t0);
  // The architecture compiled for: its name, and every parameter that differs from the preset
  // of that name (so `tpusim run PROG.tpu` picks the same machine).
  const nlohmann::json full = sim::arch_to_json(arch);
  nlohmann::json base;
  try {
    base = sim::arch_to_json(sim::arch_preset(arch.name));
  } catch (const InputError&) {
    base = sim::arch_to_json(sim::Arch{});  // not a preset: every parameter that differs from tpu-v1
  }
  c.program.arch = {{"name", arch.name}};
  for (const auto& [key, value] : full.items())
    if (key != "name" && (!base.contains(key) || base[key] != value)) c.program.arch[key] = value;
}

Compiled compile_model(Model model, const sim::Arch& arch) {
  Compiled c = prepare_model(std::move(model));
  lower_for(c, arch);
  return c;
}

Compiled compile_file(const std::filesystem::path& path, const sim::Arch& arch, const LoadOptions& options) {
  Compiled c = prepare_file(path, options);
  lower_for(c, arch);
  return c;
}

std::vector<uint8_t> golden_output_bytes(const Compiled& c, const sim::Arch& arch) {
  const std::vector<std::vector<int8_t>> golden = run_golden(c.graph);
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  return to_tpu_order(golden.at(c.graph.output), out.shape, c.graph.batch, lanes(arch));
}

OutputCheck check_output(Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch) {
  OutputCheck r;
  const std::vector<std::vector<int8_t>> golden = run_golden(c.graph);
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  const std::vector<int8_t>& want = golden.at(c.graph.output);
  const std::vector<int8_t> got = from_tpu_order(output_region, out.shape, c.graph.batch, lanes(arch));
  r.elements = want.size();
  r.matches = got == want;
  if (!r.matches) {
    const auto [a, b] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
    const uint64_t i = static_cast<uint64_t>(a - got.begin()), ch = out.shape.c, px = out.shape.pixels();
    const uint64_t n = i / (px * ch), p = i / ch % px;
    r.first_difference = fmt::format("sample {}, pixel ({}, {}), channel {}: simulated {}, golden {}", n,
                                     p / out.shape.w, p % out.shape.w, i % ch, a == got.end() ? 0 : *a,
                                     b == want.end() ? 0 : *b);
  }
  // The float reference on the calibration samples (a prefix of the batch: NHWC is batch-major).
  const std::vector<std::vector<float>> ref =
      on_first_samples(c.model, c.model.calibration_samples, [](const Model& m) { return run_float(m); });
  r.error = quant_error(ref.back(), std::vector<int8_t>(want.begin(), want.begin() + ref.back().size()), out.scale);
  return r;
}

}  // namespace tpusim::compiler
