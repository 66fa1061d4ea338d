#include "compiler/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "compiler/compile_memory.h"
#include "compiler/layout.h"
#include "compiler/lower.h"
#include "compiler/quantize.h"
#include "isa/error.h"

namespace tpusim::compiler {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t lanes(const sim::Arch& arch) { return slice_width(arch); }

// The samples per piece of the batch the program was lowered in (layout.h), 0 for one piece.
uint64_t piece(const isa::Program& p) { return p.meta.contains("batch_piece") ? p.meta["batch_piece"].get<uint64_t>() : 0; }

// Runs `f` on `model` cut down to its first `samples` samples (all when 0 or more than the batch),
// then restores it: the model's parameters are not copied.
template <class F>
auto on_first_samples(Model& model, uint64_t samples, F f) {
  if (samples == 0 || samples >= model.batch) return f(model);
  const uint64_t batch = model.batch;
  std::vector<std::vector<float>> full;
  for (ModelInput& in : model.inputs) {  // (moved aside, not copied: the batch's inputs are held once)
    full.push_back(std::move(in.data));
    const uint64_t n = std::min<uint64_t>(full.back().size(), samples * in.shape.elements());
    in.data.assign(full.back().begin(), full.back().begin() + static_cast<std::ptrdiff_t>(n));
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

FloatRun calibration_run(Model& model, const std::function<void(size_t, bool)>& around = {}) {
  if (model.calibration.empty())
    return on_first_samples(model, model.calibration_samples,
                            [&](const Model& m) { return run_float_detailed(m, around); });
  // Separate calibration samples (--calibrate): they set the inputs' scales too (max |x| / 127,
  // as the quantizer calibrates), then stand in for the inputs during the float run.
  if (model.calibration.size() != model.inputs.size())
    throw InputError(fmt::format("{}: calibration samples for {} of {} inputs", model.source, model.calibration.size(),
                                 model.inputs.size()));
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    ModelInput& in = model.inputs[i];
    if (model.calibration[i].size() != model.calibration_batch * in.shape.elements())
      throw InputError(fmt::format("{}: input {}: {} calibration values, expected {} x {}", model.source, in.name,
                                   model.calibration[i].size(), model.calibration_batch, in.shape.elements()));
    double top = 0;
    for (float v : model.calibration[i]) top = std::max(top, double(std::abs(v)));
    if (!in.scale) in.scale = top > 0 ? top / 127 : 1.0 / 127;
  }
  struct Swap {  // the calibration samples in place of the inputs, and back (also when throwing)
    Model& m;
    uint64_t batch;
    void swap() {
      std::swap(m.batch, batch);
      for (size_t i = 0; i < m.inputs.size(); ++i) std::swap(m.inputs[i].data, m.calibration[i]);
    }
    ~Swap() { swap(); }
  } swap{model, model.calibration_batch};
  swap.swap();
  return run_float_detailed(model, around);
}

// In place of the float reference for a timing-only compile (LoadOptions::timing_only): every
// layer's output, and every LSTM cell term, as if its largest magnitude were a number near 1 of
// its own (1 + (i + 1) / 1024 for layer i), so that two layers' calibrated scales differ as a
// full compile's do: an add's operands of different scales take a rescaling instruction, a
// concat's parts of a scale other than the concat's a pass (quantize.cpp), in both compiles.
FloatRun placeholder_calibration(const Model& model) {
  FloatRun r;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& l = model.layers[i];
    r.outputs.push_back({float(1.0 + double(i + 1) / 1024.0)});
    const uint64_t steps = is_recurrent(l.type) ? source_shape(model, l, l.inputs.at(0)).pixels() : 0;
    r.lstm_cell_max.emplace_back(l.stack * steps * (l.type == LayerType::gru ? 2 : 1), 1.0);  // per stacked layer and step
  }
  return r;
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> compiled_bytes(const Compiled& c) {
  const auto held = [](const auto& v) { return uint64_t(v.capacity()) * sizeof(v[0]); };
  uint64_t model = held(c.float_output);
  for (const Layer& l : c.model.layers) model += held(l.weights) + held(l.bias);
  for (const ModelInput& in : c.model.inputs) model += held(in.data);
  for (const std::vector<float>& v : c.model.calibration) model += held(v);
  const QGraph& g = c.graph;
  uint64_t graph = held(g.ops) + held(g.tensors) + held(g.op_layer) + held(g.loop_steps);
  for (const QOp& op : g.ops)
    if (const auto* m = std::get_if<MatmulOp>(&op))
      graph += held(m->inputs) + held(m->taps) + held(m->weights) + held(m->weights_hi) + held(m->bias) +
               held(m->mult) + held(m->shift);
  for (const QTensor& t : g.tensors) graph += t.name.capacity() > 15 ? t.name.capacity() + 1 : 0;
  for (const std::vector<int8_t>& d : g.input_data) graph += held(d);
  return {{"the float model", model}, {"the quantized graph", graph}};
}

bool timing_needs_data(const Model& model) {
  // An add whose operands have different scales requantizes the finer one (the smaller scale) to
  // the coarser: which operand that is, and so which tensor the extra instruction reads, only the
  // calibrated scales tell.
  const bool adds = std::any_of(model.layers.begin(), model.layers.end(),
                                [](const Layer& l) { return l.type == LayerType::add; });
  return adds || precision_needs_calibration(model);
}

QGraph uncalibrated_graph(Model model, const LowerOptions& mapper) {
  for (Layer& l : model.layers)
    if (l.seeded_weights) std::vector<float>().swap(l.weights);
  return quantize(model, placeholder_calibration(model), concat_inplace(mapper), mapper.concats_as_parts);
}

namespace {

// The calibration prepare_model quantizes `model` with, leaving the model as quantize() reads it:
// a full compile's seeded weights generated, a timing-only compile's gone.
FloatRun calibrate(Model& model, bool timing_only) {
  // A timing-only compile (LoadOptions::timing_only) calibrates nothing, unless its program
  // depends on calibrated scales (timing_needs_data): then the seeded weights it left out are
  // generated and the float reference runs.
  const bool data = !timing_only || timing_needs_data(model);
  if (!timing_only) generate_seeded_weights(model);
  // A timing-only load generated no input values (ModelInput::seeded): the calibration needs them.
  for (size_t i = 0; data && i < model.inputs.size(); ++i)
    if (ModelInput& in = model.inputs[i]; in.seeded && in.data.empty())
      in.data = generate_input(in.shape, model.batch, model.seed, i);
  // Timing-only, calibrated: each seeded layer's weights are generated just before the float run
  // reaches the layer and dropped after it, into one buffer: a layer's weights at a time (LSTM0:
  // 42 MB, not 208 MB, and the same pages for every layer rather than fresh ones). (A full
  // compile generated them all above.)
  std::vector<float> scratch;
  const auto around = [&](size_t i, bool done) {
    Layer& l = model.layers[i];
    if (!timing_only || !l.seeded_weights) return;
    if (!done && l.weights.empty()) {
      generate_weights(l, source_shape(model, l, l.inputs.at(0)), model.seed, i + 1, scratch);
      l.weights.swap(scratch);
    } else if (done) {
      l.weights.swap(scratch);  // the buffer back for the next layer; the layer's is the empty one
    }
  };
  FloatRun calibration = data ? calibration_run(model, around) : placeholder_calibration(model);
  // Calibrated or not, a timing-only compile quantizes no seeded weight and builds no weight
  // image: they go once the float run has set the scales.
  if (timing_only)
    for (Layer& l : model.layers)
      if (l.seeded_weights) std::vector<float>().swap(l.weights);
  return calibration;
}

// Every seeded layer's weights moved out of `model`, and back when it goes (also when throwing).
struct SeededWeightsAside {
  Model& model;
  std::vector<std::vector<float>> kept;
  explicit SeededWeightsAside(Model& m) : model(m), kept(m.layers.size()) {
    for (size_t i = 0; i < kept.size(); ++i)
      if (model.layers[i].seeded_weights) kept[i].swap(model.layers[i].weights);
  }
  ~SeededWeightsAside() {
    for (size_t i = 0; i < kept.size(); ++i)
      if (model.layers[i].seeded_weights) kept[i].swap(model.layers[i].weights);
  }
  SeededWeightsAside(const SeededWeightsAside&) = delete;
  SeededWeightsAside& operator=(const SeededWeightsAside&) = delete;
};

// c.graph: c.model quantized on `calibration` with `mapper`'s concat placement.
void quantize_into(Compiled& c, const FloatRun& calibration, const LowerOptions& mapper) {
  c.graph = quantize(c.model, calibration, concat_inplace(mapper), mapper.concats_as_parts);
  // Nor does a timing-only program hold the input's values (the timing engine reads none): each
  // lowering would reorder them into the program's input region.
  if (c.timing_only)
    for (std::vector<int8_t>& d : c.graph.input_data) std::vector<int8_t>().swap(d);
}

}  // namespace

Compiled prepare_model(Model model, bool timing_only, const LowerOptions& mapper) {
  Compiled c;
  const auto t0 = std::chrono::steady_clock::now();
  FloatRun calibration = calibrate(model, timing_only);
  c.model = std::move(model);
  c.timing_only = timing_only;
  quantize_into(c, calibration, mapper);
  // The float output on the calibration samples, for check_output's quantization error.
  if (!timing_only && c.model.calibration.empty() && !calibration.outputs.empty())
    c.float_output = std::move(calibration.outputs.back());
  c.quantize_seconds = since(t0);
  return c;
}

Compiled prepare_file(const std::filesystem::path& path, const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.phase) *options.phase = "parsing and generating parameters";
  Model m = load_model(path, options);
  if (options.phase) *options.phase = "calibrating and quantizing";
  const double parse = since(t0);
  Compiled c = prepare_model(std::move(m), options.timing_only, options.mapper);
  c.parse_seconds = parse;
  return c;
}

void lower_for(Compiled& c, const sim::Arch& arch, const LowerOptions& options,
               const std::function<void(uint64_t, uint64_t)>& before_program) {
  const auto t0 = std::chrono::steady_clock::now();
  LowerMemory memory;
  bool refused = false;  // (the check's message names the model's source already)
  if (before_program)
    memory.before_program = [&](uint64_t image, uint64_t instructions) {
      refused = true;
      before_program(image, instructions);
      refused = false;
    };
  try {
    c.program = lower(c.graph, arch, options, memory);
  } catch (const ConcatInHost& e) {
    throw ConcatInHost(c.model.source.empty() ? e.what() : fmt::format("{}: {}", c.model.source, e.what()), e.concat);
  } catch (const InputError& e) {
    if (c.model.source.empty() || refused) throw;
    throw InputError(fmt::format("{}: {}", c.model.source, e.what()));
  }
  c.lowering_bytes = memory.working_bytes;
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
  LowerOptions mapper;
  place_concats(c, arch, mapper);
  lower_for(c, arch, mapper);
  return c;
}

std::optional<std::string> concat_to_keep_as_parts(const QGraph& g, const sim::Arch& arch, const LowerOptions& mapper) {
  // (A graph without a tensor written in part, a concat's joined tensor, has nothing to keep.)
  const bool joined = std::any_of(g.ops.begin(), g.ops.end(), [&](const QOp& op) {
    const auto* m = std::get_if<MatmulOp>(&op);
    return m && (m->output.channel0 || g.tensors.at(m->output.tensor).shape.c != m->n);
  });
  if (mapper.concat_inplace || !g.concat_inplace || !joined) return std::nullopt;
  try {
    return concat_in_host(g, arch, mapper);
  } catch (const InputError&) {
    return std::nullopt;  // (lower_for meets it again and reports it, naming the model's source)
  }
}

namespace {

// The concats to keep as parts on `arch`, `first` the first of them (concat_to_keep_as_parts),
// each try on a graph quantized from `calibration` without the seeded weights' values
// (MatmulOp::no_values, as a timing-only compile quantizes: the same graph but for the weights'
// bytes), so that no try quantizes the weights (CNN1 at 1 MiB, its 10 concats one by one: 19.0 s
// for the compile when every try quantized its 100M weights; its quantize phase 3.2 s this way,
// docs/compiler.md).
std::vector<std::string> search_concats(Model& model, const FloatRun& calibration, const sim::Arch& arch,
                                        LowerOptions mapper, std::string first) {
  SeededWeightsAside aside(model);
  std::vector<std::string>& parts = mapper.concats_as_parts;
  for (std::optional<std::string> concat = std::move(first); concat;) {
    if (std::find(parts.begin(), parts.end(), *concat) != parts.end())
      throw std::logic_error(fmt::format("place_concats: concat {} kept as parts is in place again", *concat));
    parts.push_back(*concat);
    concat = concat_to_keep_as_parts(quantize(model, calibration, concat_inplace(mapper), parts), arch, mapper);
  }
  return parts;
}

void check_kept(const Compiled& c) {
  if (c.float_parameters_released)
    throw std::logic_error("place_concats: the compile released the float parameters before placing its concats");
}

}  // namespace

void place_concats(Compiled& c, const sim::Arch& arch, LowerOptions& mapper) {
  const std::optional<std::string> concat = concat_to_keep_as_parts(c.graph, arch, mapper);
  if (!concat) return;
  check_kept(c);
  c.graph = QGraph{};  // (the in-place graph and its weights: not held while the next is built)
  const auto t0 = std::chrono::steady_clock::now();
  const FloatRun calibration = calibrate(c.model, c.timing_only);  // (prepare_model's is gone: once more)
  mapper.concats_as_parts = search_concats(c.model, calibration, arch, mapper, *concat);
  quantize_into(c, calibration, mapper);
  c.quantize_seconds += since(t0);
}

std::vector<std::string> concats_kept_as_parts(Compiled& c, const sim::Arch& arch, const LowerOptions& mapper,
                                               const ConcatInHost& refused) {
  if (mapper.concat_inplace) throw refused;
  check_kept(c);
  return search_concats(c.model, calibrate(c.model, c.timing_only), arch, mapper, refused.concat);
}

void compile_file_into(Compiled& c, const std::filesystem::path& path, const sim::Arch& arch,
                       const LoadOptions& options, const std::function<void(const Compiled&)>& quantized) {
  LoadOptions o = options;
  // A batch larger than a piece (half the accumulators: max_piece) runs in pieces (lower()); the
  // memory a batch needs is checked before any input is generated (LoadOptions::max_memory).
  if (max_piece(arch) == 0)
    throw InputError(
        fmt::format("{}: acc_entries = {} on '{}': the compiler needs at least 2 accumulator rows (a batch "
                    "of 1 fills half of them)",
                    path.string(), arch.acc_entries, arch.name));
  c = prepare_file(path, o);
  place_concats(c, arch, o.mapper);  // (before the graph is handed on and the float parameters go)
  if (o.release_float_parameters && !c.float_output.empty()) {  // the quantized graph has them now
    for (Layer& l : c.model.layers) {
      std::vector<float>().swap(l.weights);
      std::vector<float>().swap(l.bias);
    }
    c.float_parameters_released = true;
  }
  if (quantized) quantized(c);
  if (o.phase) *o.phase = "lowering to instructions";
  // A full compile's estimate counted the weight image at a byte a weight (its tiles unknown before
  // lowering): checked again once the image is laid out, before its bytes are built, with the bytes
  // its tiles' stored boxes take on this machine (compile_memory.h).
  std::function<void(uint64_t, uint64_t)> check;
  if (!o.timing_only)
    check = [&](uint64_t image, uint64_t) {
      CompileValues v = compile_values(c.model);
      v.image_bytes = image;
      v.image_laid_out = true;
      check_compile_memory(c.model, path.string(), v, o);
    };
  lower_for(c, arch, o.mapper, check);
}

Compiled compile_file(const std::filesystem::path& path, const sim::Arch& arch, const LoadOptions& options) {
  Compiled c;
  compile_file_into(c, path, arch, options, {});
  return c;
}

std::vector<int8_t> golden_output(const Compiled& c) {
  GoldenOptions o;
  o.output_only = true;
  std::vector<std::vector<int8_t>> all = run_golden(c.graph, o);
  return std::move(all.at(static_cast<size_t>(c.graph.output)));
}

std::vector<uint8_t> golden_output_bytes(const Compiled& c, const sim::Arch& arch) {
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  return to_tpu_order(golden_output(c), out.shape, c.graph.batch, lanes(arch), piece(c.program));
}

OutputCheck check_output(Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch,
                         const std::vector<int8_t>* golden) {
  OutputCheck r;
  std::vector<int8_t> computed;
  if (!golden) computed = golden_output(c), golden = &computed;
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  const std::vector<int8_t>& want = *golden;
  const std::vector<int8_t> got = from_tpu_order(output_region, out.shape, c.graph.batch, lanes(arch), piece(c.program));
  r.elements = want.size() / (out.bits == 16 ? 2 : 1);
  r.matches = got == want;
  if (!r.matches) {
    const auto [a, b] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
    // (a 16-bit output: the element of the first differing byte, both values whole)
    const uint64_t byte = static_cast<uint64_t>(a - got.begin()), ch = out.shape.c, px = out.shape.pixels();
    const uint64_t all = c.graph.batch * out.shape.elements(), i = byte % all;
    const uint64_t n = i / (px * ch), p = i / ch % px;
    const std::vector<int32_t> gv = tensor_values(got, out.bits), wv = tensor_values(want, out.bits);
    r.first_difference = fmt::format("sample {}, pixel ({}, {}), channel {}: simulated {}, golden {}", n,
                                     p / out.shape.w, p % out.shape.w, i % ch, i < gv.size() ? gv[i] : 0,
                                     i < wv.size() ? wv[i] : 0);
  }
  // The float reference on the calibration samples (a prefix of the batch: NHWC is batch-major).
  // (The calibration run's, when it ran on those samples: the same loops on the same data.)
  std::vector<float> computed_ref;
  if (c.float_output.empty() && c.float_parameters_released)
    throw std::logic_error("check_output: the compile released the float parameters and kept no float output");
  if (c.float_output.empty())
    computed_ref = on_first_samples(c.model, c.model.calibration_samples, [](const Model& m) { return run_float(m); }).back();
  const std::vector<float>& ref = c.float_output.empty() ? computed_ref : c.float_output;
  if (ref.size() > want.size() / (out.bits == 16 ? 2 : 1))
    throw std::logic_error("the float reference has more output values than the golden reference");
  std::vector<int32_t> values = tensor_values(want, out.bits);  // (a 16-bit output: its two planes joined)
  values.resize(std::min(values.size(), ref.size()));
  r.error = quant_error(ref, values, out.scale);
  return r;
}

std::vector<LayerError> layer_errors(Compiled& c) {
  if (c.float_parameters_released)
    throw std::logic_error("layer_errors: the compile released the float parameters (LoadOptions::release_float_parameters)");
  const std::vector<std::vector<float>> ref =
      on_first_samples(c.model, c.model.calibration_samples, [](const Model& m) { return run_float(m); });
  const std::vector<std::vector<int8_t>> golden = run_golden(c.graph);
  std::vector<LayerError> out;
  for (size_t li = 0; li < c.model.layers.size(); ++li) {
    const Layer& L = c.model.layers[li];
    if (L.type == LayerType::flatten) continue;
    const auto t = std::find_if(c.graph.tensors.begin(), c.graph.tensors.end(),
                                [&](const QTensor& q) { return q.name == L.name && q.layer == L.name; });
    if (t == c.graph.tensors.end()) continue;  // written in place into a concat's tensor
    const std::vector<float>& f = ref.at(li);
    std::vector<int32_t> q = tensor_values(golden.at(size_t(t - c.graph.tensors.begin())), t->bits);
    if (f.size() > q.size() || f.size() % L.out.elements() || t->shape.elements() != L.out.elements())
      throw std::logic_error(fmt::format("layer_errors: layer {}'s float and quantized outputs differ in size", L.name));
    q.resize(f.size());  // the first samples (NHWC is batch-major)
    const QuantError e = quant_error(f, q, t->scale);
    LayerError r{L.name, t->bits, t->scale, f.size(), e.max_abs, e.max_float, e.rms};
    r.rms_relative = e.max_float > 0 ? e.rms / e.max_float : 0.0;
    double signal = 0, noise = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const double d = double(q[i]) * t->scale - double(f[i]);
      signal += double(f[i]) * double(f[i]);
      noise += d * d;
    }
    r.sqnr_db = signal == 0 ? 0.0 : noise == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(signal / noise);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<float> simulated_output(const Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch) {
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  const std::vector<int32_t> v = tensor_values(
      from_tpu_order(output_region, out.shape, c.graph.batch, lanes(arch), piece(c.program)), out.bits);
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = float(double(v[i]) * out.scale);
  return f;
}

void check_labels(const Compiled& c, std::span<const int64_t> labels, const std::string& what) {
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  if (out.shape.rank != 1)
    throw InputError(fmt::format("{}: top-1 accuracy needs a model whose output is a vector of class scores; its "
                                 "output is {}",
                                 c.model.source, out.shape.str()));
  const uint64_t classes = out.shape.c, n = c.graph.batch;
  if (labels.size() != n)
    throw InputError(fmt::format("{}: {} labels for {} samples (one class per input sample)", what, labels.size(), n));
  for (uint64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || uint64_t(labels[i]) >= classes)
      throw InputError(fmt::format("{}: sample {}: class {}; the model has classes 0..{}", what, i, labels[i], classes - 1));
}

NpyArray output_npy(const Compiled& c, const std::vector<float>& v) {
  const Shape& s = c.graph.tensors.at(c.graph.output).shape;
  const uint64_t n = c.graph.batch;
  if (s.rank == 1) return npy_float32({n, s.c}, v);
  if (s.rank == 2) return npy_float32({n, s.h, s.c}, v);
  if (!c.model.source.ends_with(".onnx")) return npy_float32({n, s.h, s.w, s.c}, v);
  std::vector<float> chw(v.size());  // NHWC -> NCHW, ONNX's layout
  for (uint64_t i = 0; i < v.size(); ++i) {
    const uint64_t b = i / s.elements(), e = i % s.elements(), p = e / s.c, ch = e % s.c;
    chw[b * s.elements() + ch * s.pixels() + p] = v[i];
  }
  return npy_float32({n, s.c, s.h, s.w}, chw);
}

NpyArray simulated_output_npy(const Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch) {
  return output_npy(c, simulated_output(c, output_region, arch));
}

Accuracy top1_accuracy(Compiled& c, std::span<const uint8_t> output_region, const sim::Arch& arch,
                       std::span<const int64_t> labels) {
  check_labels(c, labels);
  const QTensor& out = c.graph.tensors.at(c.graph.output);
  const uint64_t classes = out.shape.c, n = c.graph.batch;
  const std::vector<int32_t> got =
      tensor_values(from_tpu_order(output_region, out.shape, n, lanes(arch), piece(c.program)), out.bits);
  if (c.float_parameters_released)
    throw std::logic_error("top1_accuracy: the compile released the float parameters (LoadOptions::release_float_parameters)");
  const std::vector<float> ref = run_float(c.model).back();
  Accuracy a;
  a.samples = n;
  for (uint64_t i = 0; i < n; ++i) {
    const auto label = uint64_t(labels[i]);
    const auto argmax = [&](const auto* v) { return uint64_t(std::max_element(v, v + classes) - v); };
    a.correct_int8 += argmax(&got[i * classes]) == label;
    a.correct_float += argmax(&ref[i * classes]) == label;
  }
  return a;
}

}  // namespace tpusim::compiler
