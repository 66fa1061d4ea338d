// Model descriptions (TOML, docs/model-format.md) to a float Model: every key checked (unknown
// keys are errors, with a suggestion for near misses), layer inputs resolved by name, shapes
// inferred, parameters and inputs loaded from .npy or generated from the seed. Every problem is an
// InputError "FILE:LINE: layer NAME: KEY: VALUE: what was expected". What depends on the
// architecture (sizes that must fit the machine) is the back end's to check.
#include "compiler/model.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include "compiler/compile_memory.h"
#include "compiler/npy.h"
#include "compiler/onnx.h"
#include "compiler/reference.h"
#include "compiler/scalesim.h"
#include "compiler/seeded_draws.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/text.h"
#include "sim/parallel.h"

namespace tpusim::compiler {

namespace {

constexpr uint64_t kMaxDim = 65535;                  // any dimension, size, stride, batch
constexpr uint64_t kMaxStack = 1024;                 // stacked LSTM layers
constexpr uint64_t kMaxTensor = uint64_t{1} << 31;   // elements of one sample of any tensor
constexpr std::string_view kInput = "input";         // the model input's name in `input` keys

// A key of kFileKeys (model.h), checked when compiled: the parser names its file keys only so.
consteval std::string_view file_key(std::string_view table, std::string_view key) {
  for (const FileKey& f : kFileKeys)
    if (f.table == table && f.key == key) return f.key;
  throw "not a key of kFileKeys (compiler/model.h)";
}
constexpr std::string_view kInputFile = file_key("model", "input_file");
constexpr std::string_view kWeightsFile = file_key("layer", "weights_file");
constexpr std::string_view kBiasFile = file_key("layer", "bias_file");

// The keys of kFileKeys that TOML table `table` ("model", "layer") takes, in their order.
std::vector<std::string_view> file_keys(std::string_view table) {
  std::vector<std::string_view> keys;
  for (const FileKey& f : kFileKeys)
    if (f.table == table) keys.push_back(f.key);
  return keys;
}

// " (did you mean X?)" when a candidate is a near miss of `word`, else "".
template <typename Range>
std::string did_you_mean(std::string_view word, const Range& candidates) {
  const auto [best, best_d] = isa::nearest(word, candidates);
  const size_t limit = word.size() >= 4 ? 2 : 1;
  return best_d <= limit ? fmt::format(" (did you mean {}?)", best) : "";
}

std::string join(std::span<const std::string_view> words) {
  std::string out;
  for (std::string_view w : words) out += fmt::format("{}{}", out.empty() ? "" : ", ", w);
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + (s.size() > 80 ? "...\"" : "\"");
}

std::string render(const toml::node& n) {
  if (auto s = n.as_string()) return quote(s->get());
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto f = n.as_floating_point()) {
    std::string text = fmt::format("{}", f->get());
    return text.find_first_of(".ein") == std::string::npos ? text + ".0" : text;
  }
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  if (auto a = n.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size() && out.size() < 80; ++i) out += (i ? ", " : "") + render(*a->get(i));
    return out.size() < 80 ? out + "]" : out.substr(0, 80) + "...]";
  }
  if (n.is_table()) return "a table";
  return "a date or time";
}

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return out + "]";
}

std::string located(const std::string& source, int line, std::string_view where, std::string_view key,
                    std::string_view value, std::string_view what) {
  std::string s = fmt::format("{}:{}: {}", source, line, where);
  if (!key.empty()) s += fmt::format(": {}", key);
  if (!value.empty()) s += fmt::format(": {}", value);
  return s + ": " + std::string(what);
}

int node_line(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

// One TOML table ([model], [quantization] or a [[layer]]) and where its errors point.
class Section {
 public:
  Section(const toml::table& t, const std::string& source, std::string where)
      : t_(&t), source_(&source), where_(std::move(where)), line_(node_line(t)) {}

  int line() const { return line_; }
  int line_of(std::string_view key) const {
    const toml::node* n = t_->get(key);
    return n ? node_line(*n) : line_;
  }
  const toml::node* get(std::string_view key) const { return t_->get(key); }
  const std::string& where() const { return where_; }
  void set_where(std::string where) { where_ = std::move(where); }

  // At the key's line with its value, or at the header when it is absent.
  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    const toml::node* n = get(key);
    throw InputError(located(*source_, line_of(key), where_, key, n ? render(*n) : "", what));
  }
  [[noreturn]] void fail_at(int line, std::string_view key, std::string_view value, std::string_view what) const {
    throw InputError(located(*source_, line, where_, key, value, what));
  }
  [[noreturn]] void expected(std::string_view key, std::string_view form) const {
    if (!get(key)) fail(key, fmt::format("required ({})", form));
    fail(key, fmt::format("expected {}", form));
  }

  void check_keys(std::span<const std::string_view> allowed, std::string_view kind) const {
    for (auto&& [k, v] : *t_) {
      const std::string_view key = k.str();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      const std::string hint = did_you_mean(key, allowed);
      fail(key, fmt::format("unknown key for {}{}", kind,
                            hint.empty() ? fmt::format(" (expected one of: {})", join(allowed)) : hint));
    }
  }

  std::optional<uint64_t> uint(std::string_view key, uint64_t lo, uint64_t hi) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    return uint_of(*n, key, lo, hi, line_of(key));
  }
  uint64_t uint_of(const toml::node& n, std::string_view key, uint64_t lo, uint64_t hi, int line) const {
    const auto v = n.value_exact<int64_t>();
    if (!v || *v < 0 || uint64_t(*v) < lo || uint64_t(*v) > hi)
      fail_at(line, key, render(n), fmt::format("expected an integer {}..{}", lo, hi));
    return uint64_t(*v);
  }
  uint64_t required_uint(std::string_view key, uint64_t lo, uint64_t hi) const {
    if (auto v = uint(key, lo, hi)) return *v;
    expected(key, fmt::format("an integer {}..{}", lo, hi));
  }
  std::optional<std::string> string(std::string_view key, std::string_view form = "a string") const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) expected(key, form);
    return n->as_string()->get();
  }
  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) expected(key, "true or false");
    return n->as_boolean()->get();
  }
  std::optional<double> positive(std::string_view key) const {
    const toml::node* n = get(key);
    if (!n) return std::nullopt;
    const auto v = n->value<double>();  // floats, and integers converted
    if (!(n->is_floating_point() || n->is_integer()) || !v || !std::isfinite(*v) || *v <= 0)
      expected(key, "a number > 0");
    return *v;
  }
  // An enumerated string: its index in `names`.
  template <typename Names>
  size_t choice(std::string_view key, const Names& names) const {
    const std::vector<std::string_view> list(std::begin(names), std::end(names));
    const auto form = fmt::format("one of {}", join(list));
    const auto s = string(key, form);
    if (!s) expected(key, form);
    for (size_t i = 0; i < list.size(); ++i)
      if (*s == list[i]) return i;
    fail(key, fmt::format("expected {}{}", form, did_you_mean(*s, list)));
  }

 private:
  const toml::table* t_;
  const std::string* source_;
  std::string where_;
  int line_;
};

// ---- [model] and [quantization] -----------------------------------------------------------------

struct InputSpec {
  std::optional<std::string> file;
  int file_line = 0;
  int shape_line = 0;  // of `input`
  bool batch_overridden = false;
};

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Shape read_input_shape(const Section& sec) {
  const toml::node* n = sec.get("input");
  const char* form = "an array of 1 to 3 integers 1..65535: [features], [steps, features] or [height, width, channels]";
  const toml::array* a = n ? n->as_array() : nullptr;
  if (!a || a->empty() || a->size() > 3) sec.expected("input", form);
  std::vector<uint64_t> d;
  for (const toml::node& e : *a) {
    const auto v = e.value_exact<int64_t>();
    if (!v || *v < 1 || uint64_t(*v) > kMaxDim) sec.expected("input", form);
    d.push_back(uint64_t(*v));
  }
  const Shape s = d.size() == 1 ? vector_shape(d[0]) : d.size() == 2 ? sequence_shape(d[0], d[1]) : map_shape(d[0], d[1], d[2]);
  if (s.elements() > kMaxTensor) sec.fail("input", "more than 2^31 elements per sample");
  return s;
}

InputSpec read_model_section(const toml::table& doc, const std::string& source, const LoadOptions& options, Model& m) {
  const toml::node* node = doc.get("model");
  if (!node) throw InputError(located(source, 1, "[model]", "", "", "missing: a description needs a [model] table (name, batch, input)"));
  if (!node->is_table()) throw InputError(located(source, node_line(*node), "[model]", "", "", "expected a table: [model]"));
  const Section sec(*node->as_table(), source, "[model]");
  std::vector<std::string_view> keys = {"name", "batch", "seed", "input"};
  for (std::string_view k : file_keys("model")) keys.push_back(k);
  keys.push_back("input_scale");
  sec.check_keys(keys, "[model]");
  const auto name = sec.string("name", "a name of letters, digits, _, - and .");
  if (!name || !valid_name(*name)) sec.expected("name", "a name of letters, digits, _, - and .");
  m.name = *name;
  // A batch given (--batch, a sweep's) replaces the description's, and only the batch that runs is
  // held to kMaxBatch: a description written for a larger batch still runs at a smaller one.
  m.batch = sec.required_uint("batch", 1, options.batch ? uint64_t(INT64_MAX) : kMaxBatch);
  m.seed = sec.uint("seed", 0, uint64_t(INT64_MAX)).value_or(1);
  ModelInput in;
  in.name = std::string(kInput);
  in.shape = read_input_shape(sec);
  in.scale = sec.positive("input_scale");
  m.inputs = {in};
  InputSpec spec;
  spec.file = sec.string(kInputFile);
  spec.file_line = sec.line_of(kInputFile);
  spec.shape_line = sec.line_of("input");
  if (options.batch) {
    if (*options.batch < 1 || *options.batch > kMaxBatch)
      throw InputError(fmt::format("--batch: {}: expected an integer 1..{}", *options.batch, kMaxBatch));
    spec.batch_overridden = *options.batch != m.batch;
    m.batch = *options.batch;
  }
  if (options.input_file) {  // --input: its samples, whatever the description says
    const std::filesystem::path file = std::filesystem::absolute(*options.input_file);
    const NpyArray a = read_npy(file);
    if (a.shape.empty() || a.shape[0] < 1 || a.shape[0] > kMaxDim)
      throw InputError(fmt::format("{}: shape {}: expected [batch, ...input] with batch 1..{}", file.string(),
                                   dims_text(a.shape), kMaxDim));
    if (options.batch && *options.batch != a.shape[0])
      throw InputError(fmt::format("--batch {}: {} holds {} samples", *options.batch, file.string(), a.shape[0]));
    spec.file = file.string();
    spec.batch_overridden = false;
    m.batch = a.shape[0];
  }
  return spec;
}

void read_quantization(const toml::table& doc, const std::string& source, Model& m) {
  const toml::node* node = doc.get("quantization");
  if (!node) return;
  if (!node->is_table()) throw InputError(located(source, node_line(*node), "[quantization]", "", "", "expected a table: [quantization]"));
  const Section sec(*node->as_table(), source, "[quantization]");
  static constexpr std::string_view kKeys[] = {"weights", "calibration_samples", "elements", "precision",
                                               "wide_error", "output_bits"};
  sec.check_keys(kKeys, "[quantization]");
  static constexpr std::string_view kModes[] = {"per_channel", "per_tensor"};
  if (sec.get("weights")) m.per_channel = sec.choice("weights", kModes) == 0;
  if (sec.get("precision")) m.precision = static_cast<Precision>(sec.choice("precision", kPrecisionNames));
  // elements: the earlier spelling; "int8" is precision = "int8" (every weight and tensor int8),
  // "mixed" the default (16-bit where the precision's rules put them).
  static constexpr std::string_view kElements[] = {"mixed", "int8"};
  if (sec.get("elements") && sec.choice("elements", kElements) == 1) {
    if (sec.get("precision") && m.precision != Precision::int8)
      sec.fail("elements", fmt::format("\"int8\" is precision = \"int8\", and precision is \"{}\"",
                                       kPrecisionNames[static_cast<size_t>(m.precision)]));
    m.precision = Precision::int8;
  }
  m.wide_error = sec.positive("wide_error").value_or(m.wide_error);
  if (sec.get("output_bits")) {
    const uint64_t bits = sec.required_uint("output_bits", 8, 16);
    if (bits != 8 && bits != 16) sec.expected("output_bits", "8 or 16");
    m.output_bits = static_cast<uint8_t>(bits);
  }
  m.calibration_samples = sec.uint("calibration_samples", 0, kMaxDim).value_or(m.calibration_samples);
}

// ---- [[layer]] tables -----------------------------------------------------------------------------

constexpr std::string_view kTypeNames[] = {"dense", "conv2d", "max_pool",   "avg_pool", "flatten",
                                           "add",   "mul",    "activation", "lstm",     "concat", "gru"};
constexpr std::string_view kActivationNames[] = {"none", "relu", "relu6", "sigmoid", "tanh"};

struct FileRef {
  std::string name;
  int line = 0;
};

struct LayerSpec {
  Layer layer;
  Section sec;
  std::vector<std::string> input_names;  // empty: the previous layer (or the model input)
  std::vector<FileRef> weights_files, bias_files;  // lstm, gru: one per stacked layer
};

std::vector<std::string_view> allowed_keys(LayerType t) {
  std::vector<std::string_view> keys = {"type", "name", "scale"};
  auto add = [&](std::initializer_list<std::string_view> more) { keys.insert(keys.end(), more); };
  auto parameters = [&] {  // a layer with parameters: their files, then the bit widths
    for (std::string_view k : file_keys("layer")) keys.push_back(k);
    add({"weight_bits", "output_bits"});
  };
  if (t != LayerType::add && t != LayerType::mul && t != LayerType::concat) add({"input"});
  switch (t) {
    case LayerType::dense:
      add({"units", "activation", "bias"});
      parameters();
      break;
    case LayerType::conv2d:
      add({"filters", "kernel", "stride", "padding", "groups", "activation", "bias"});
      parameters();
      break;
    case LayerType::max_pool:
    case LayerType::avg_pool: add({"size", "stride"}); break;
    case LayerType::flatten: break;
    case LayerType::add:
    case LayerType::mul: add({"inputs", "activation", "output_bits"}); break;
    case LayerType::activation: add({"activation", "output_bits"}); break;
    case LayerType::lstm:
    case LayerType::gru:
      add({"units", "stack", "return_sequences"});
      parameters();
      break;
    case LayerType::concat: add({"inputs"}); break;
  }
  return keys;
}

void read_inputs_key(LayerSpec& s) {
  const Section& sec = s.sec;
  const bool binary = s.layer.type == LayerType::add || s.layer.type == LayerType::mul;
  const std::string_view type = layer_type_name(s.layer.type);
  if (s.layer.type == LayerType::concat) {
    if (sec.get("input")) sec.fail("input", "concat layers join two or more layers: give inputs = [\"a\", \"b\", ...]");
    const toml::node* n = sec.get("inputs");
    const toml::array* a = n ? n->as_array() : nullptr;
    if (!a || a->size() < 2 || !a->is_homogeneous(toml::node_type::string))
      sec.expected("inputs", "two or more layer names, [\"a\", \"b\", ...]");
    for (const toml::node& e : *a) s.input_names.push_back(e.as_string()->get());
  } else if (binary) {
    if (sec.get("input")) sec.fail("input", fmt::format("{} layers read two layers: give inputs = [\"a\", \"b\"]", type));
    const toml::node* n = sec.get("inputs");
    const toml::array* a = n ? n->as_array() : nullptr;
    const std::string_view form = "two layer names, [\"a\", \"b\"]";
    if (!a || a->size() != 2 || !a->is_homogeneous(toml::node_type::string)) sec.expected("inputs", form);
    for (const toml::node& e : *a) s.input_names.push_back(e.as_string()->get());
  } else {
    if (sec.get("inputs")) sec.fail("inputs", "only add, mul and concat layers take inputs; give input = \"name\"");
    if (auto name = sec.string("input", "a layer name or \"input\"")) s.input_names.push_back(*name);
  }
}

void read_files(LayerSpec& s, std::string_view key, std::vector<FileRef>& out, uint64_t count) {
  const toml::node* n = s.sec.get(key);
  if (!n) return;
  if (!is_recurrent(s.layer.type)) {
    out.push_back({*s.sec.string(key, "a .npy file name"), s.sec.line_of(key)});
    return;
  }
  const auto form = fmt::format("an array of {} .npy file name{} (one per stacked layer)", count, count == 1 ? "" : "s");
  if (n->is_string() && count == 1) {
    out.push_back({n->as_string()->get(), node_line(*n)});
    return;
  }
  const toml::array* a = n->as_array();
  if (!a || a->size() != count || !a->is_homogeneous(toml::node_type::string)) s.sec.expected(key, form);
  for (const toml::node& e : *a) out.push_back({e.as_string()->get(), node_line(e)});
}

void read_conv(LayerSpec& s) {
  Layer& l = s.layer;
  const Section& sec = s.sec;
  l.units = sec.required_uint("filters", 1, kMaxDim);
  const toml::node* k = sec.get("kernel");
  const auto form = fmt::format("an integer 1..{0} or [kh, kw] of integers 1..{0}", kMaxDim);
  if (!k) sec.expected("kernel", form);
  if (const toml::array* a = k->as_array()) {
    if (a->size() != 2) sec.expected("kernel", form);
    l.kernel_h = sec.uint_of(*a->get(0), "kernel", 1, kMaxDim, sec.line_of("kernel"));
    l.kernel_w = sec.uint_of(*a->get(1), "kernel", 1, kMaxDim, sec.line_of("kernel"));
  } else {
    if (!k->is_integer()) sec.expected("kernel", form);
    l.kernel_h = l.kernel_w = sec.required_uint("kernel", 1, kMaxDim);
  }
  l.stride = sec.uint("stride", 1, kMaxDim).value_or(1);
  l.groups = sec.uint("groups", 1, kMaxDim).value_or(1);
  if (l.units % l.groups)
    sec.fail("groups", fmt::format("filters = {} is not a multiple of it", l.units));
  if (const toml::node* p = sec.get("padding")) {
    const auto pform = fmt::format("\"valid\", \"same\" or an integer 0..{}", kMaxDim);
    if (p->is_integer()) {
      l.pad = *sec.uint("padding", 0, kMaxDim);
    } else if (const auto v = p->value<std::string>(); v == "valid") {
      l.pad = 0;
    } else if (v == "same") {
      if (l.kernel_h != l.kernel_w || l.kernel_h % 2 == 0)
        sec.fail("padding", fmt::format("\"same\" needs an odd square kernel (this one is {} x {}); give the padding in pixels",
                                        l.kernel_h, l.kernel_w));
      l.pad = (l.kernel_h - 1) / 2;
    } else {
      sec.expected("padding", pform);
    }
  }
}

void read_type_keys(LayerSpec& s) {
  Layer& l = s.layer;
  const Section& sec = s.sec;
  const bool has_activation = l.type == LayerType::dense || l.type == LayerType::conv2d || l.type == LayerType::add ||
                              l.type == LayerType::mul || l.type == LayerType::activation;
  if (has_activation && (sec.get("activation") || l.type == LayerType::activation))
    l.activation = static_cast<Activation>(sec.choice("activation", kActivationNames));
  switch (l.type) {
    case LayerType::dense: l.units = sec.required_uint("units", 1, kMaxDim); break;
    case LayerType::conv2d: read_conv(s); break;
    case LayerType::max_pool:
    case LayerType::avg_pool:
      l.kernel_h = l.kernel_w = sec.required_uint("size", 1, kMaxDim);
      l.stride = sec.uint("stride", 1, kMaxDim).value_or(l.kernel_h);
      break;
    case LayerType::lstm:
    case LayerType::gru:
      l.units = sec.required_uint("units", 1, kMaxDim);
      l.stack = sec.uint("stack", 1, kMaxStack).value_or(1);
      l.return_sequences = sec.boolean("return_sequences").value_or(false);
      break;
    default: break;
  }
  if ((l.type == LayerType::dense || l.type == LayerType::conv2d || is_recurrent(l.type)) &&
      sec.get("weight_bits")) {
    const uint64_t bits = sec.required_uint("weight_bits", 8, 16);
    if (bits != 8 && bits != 16) sec.expected("weight_bits", "8 or 16");
    l.weight_bits = static_cast<uint8_t>(bits);
  }
  if (sec.get("output_bits")) {  // (allowed_keys says which types take it)
    const uint64_t bits = sec.required_uint("output_bits", 8, 16);
    if (bits != 8 && bits != 16) sec.expected("output_bits", "8 or 16");
    l.output_bits = static_cast<uint8_t>(bits);
  }
  if (l.type == LayerType::dense || l.type == LayerType::conv2d) {
    l.use_bias = sec.boolean("bias").value_or(true);
    if (!l.use_bias && sec.get(kBiasFile)) sec.fail(kBiasFile, "given, but bias = false");
  }
  if (l.type == LayerType::dense || l.type == LayerType::conv2d || is_recurrent(l.type)) {
    read_files(s, kWeightsFile, s.weights_files, l.stack);
    read_files(s, kBiasFile, s.bias_files, l.stack);
  } else {
    l.use_bias = false;
  }
  l.scale = sec.positive("scale");
}

LayerSpec read_layer(const toml::node& node, size_t position, const std::string& source) {
  const std::string where = fmt::format("layer #{}", position);
  if (!node.is_table())
    throw InputError(located(source, node_line(node), where, "", "", "expected a table: [[layer]]"));
  LayerSpec s{Layer{}, Section(*node.as_table(), source, where), {}, {}, {}};
  const toml::node* name = s.sec.get("name");
  if (name && name->is_string()) s.sec.set_where("layer " + name->as_string()->get());
  s.layer.type = static_cast<LayerType>(s.sec.choice("type", kTypeNames));
  s.layer.name = fmt::format("{}{}", layer_type_name(s.layer.type), position);
  if (name) {
    const auto given = s.sec.string("name", "a name of letters, digits, _, - and .");
    if (!valid_name(*given)) s.sec.expected("name", "a name of letters, digits, _, - and .");
    if (*given == kInput) s.sec.fail("name", "reserved for the model's input; choose another name");
    s.layer.name = *given;
  }
  s.sec.set_where("layer " + s.layer.name);
  s.layer.line = s.sec.line();
  const std::vector<std::string_view> keys = allowed_keys(s.layer.type);
  read_inputs_key(s);  // first: input on add/mul and inputs elsewhere get their own messages
  const std::string_view type = layer_type_name(s.layer.type);
  s.sec.check_keys(keys, fmt::format("{} {} layer", type[0] == 'a' ? "an" : "a", type));
  read_type_keys(s);
  return s;
}

std::vector<LayerSpec> read_layers(const toml::table& doc, const std::string& source) {
  const toml::node* node = doc.get("layer");
  if (!node) throw InputError(located(source, 1, "[[layer]]", "", "", "missing: a description needs at least one [[layer]] table"));
  const toml::array* a = node->as_array();
  if (!a) throw InputError(located(source, node_line(*node), "layer", "", "", "expected [[layer]] tables (an array of tables), not [layer]"));
  if (a->empty()) throw InputError(located(source, node_line(*node), "layer", "", "", "expected at least one layer"));
  std::vector<LayerSpec> specs;
  for (size_t i = 0; i < a->size(); ++i) specs.push_back(read_layer(*a->get(i), i + 1, source));
  return specs;
}

void check_top_level(const toml::table& doc, const std::string& source) {
  static constexpr std::string_view kKeys[] = {"model", "quantization", "layer"};
  for (auto&& [k, v] : doc) {
    const std::string_view key = k.str();
    if (std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys)) continue;
    throw InputError(located(source, node_line(v), key, "", "",
                             fmt::format("unknown table or key{}; a description has [model], [quantization] and [[layer]]",
                                         did_you_mean(key, kKeys))));
  }
}

// ---- names, shapes ------------------------------------------------------------------------------

void resolve_inputs(std::vector<LayerSpec>& specs) {
  std::map<std::string, int, std::less<>> index;  // earlier layers
  std::map<std::string, int, std::less<>> all;
  for (size_t i = 0; i < specs.size(); ++i)
    if (auto [it, fresh] = all.emplace(specs[i].layer.name, int(i)); !fresh)
      specs[i].sec.fail_at(specs[i].sec.line_of("name"), "name", quote(specs[i].layer.name),
                           fmt::format("another layer has this name (line {})", specs[it->second].layer.line));
  for (size_t i = 0; i < specs.size(); ++i) {
    LayerSpec& s = specs[i];
    const LayerType t = s.layer.type;
    const char* key = t == LayerType::add || t == LayerType::mul || t == LayerType::concat ? "inputs" : "input";
    if (s.input_names.empty()) s.layer.inputs = {i == 0 ? model_input(0) : int(i - 1)};
    for (const std::string& name : s.input_names) {
      if (name == kInput) {
        s.layer.inputs.push_back(model_input(0));
      } else if (auto it = index.find(name); it != index.end()) {
        s.layer.inputs.push_back(it->second);
      } else if (auto later = all.find(name); later != all.end()) {
        s.sec.fail_at(s.sec.line_of(key), key, quote(name),
                      later->second == int(i) ? "a layer cannot read itself"
                                              : fmt::format("names a later layer (line {}); a layer reads only layers above it",
                                                            specs[later->second].layer.line));
      } else {
        std::vector<std::string_view> names = {kInput};
        for (auto& [n, j] : index) names.push_back(n);
        s.sec.fail_at(s.sec.line_of(key), key, quote(name),
                      fmt::format("no such layer{}; expected the name of a layer above or \"input\"", did_you_mean(name, names)));
      }
    }
    index.emplace(s.layer.name, int(i));
  }
}

class ShapeInference {
 public:
  ShapeInference(const std::vector<LayerSpec>& specs, const Model& m) : specs_(specs), m_(m) {}

  Shape input_shape(int entry) const {
    return is_model_input(entry) ? m_.inputs[size_t(model_input_index(entry))].shape : specs_[size_t(entry)].layer.out;
  }
  std::string input_name(int entry) const {
    return is_model_input(entry) ? std::string(kInput) : specs_[size_t(entry)].layer.name;
  }

  Shape infer(const LayerSpec& s) const {
    const Layer& l = s.layer;
    const Shape in = input_shape(l.inputs[0]);
    switch (l.type) {
      case LayerType::dense:
        if (in.rank == 3) fail_input(s, "dense reads a vector [c] or a sequence [steps, c], not a map; put a flatten layer before it");
        return in.rank == 1 ? vector_shape(l.units) : sequence_shape(in.h, l.units);
      case LayerType::conv2d: return conv(s, in);
      case LayerType::max_pool:
      case LayerType::avg_pool: return pool(s, in);
      case LayerType::flatten:
        if (in.rank == 1) fail_input(s, "flatten reads a map [h, w, c] or a sequence [steps, c]; this input is already a vector");
        return vector_shape(in.elements());
      case LayerType::add:
      case LayerType::mul: {
        const Shape b = input_shape(l.inputs[1]);
        if (!(in == b))
          s.sec.fail("inputs", fmt::format("{} needs two equal shapes; {} is {} and {} is {}", layer_type_name(l.type),
                                           input_name(l.inputs[0]), in.str(), input_name(l.inputs[1]), b.str()));
        return in;
      }
      case LayerType::activation: return in;
      case LayerType::lstm:
      case LayerType::gru:
        if (in.rank != 2) fail_input(s, fmt::format("{} reads a sequence [steps, c]", layer_type_name(l.type)));
        return l.return_sequences ? sequence_shape(in.h, l.units) : vector_shape(l.units);
      case LayerType::concat: return concat(s, in);
    }
    return in;
  }

 private:
  [[noreturn]] void fail_input(const LayerSpec& s, std::string_view what) const {
    const int entry = s.layer.inputs[0];
    s.sec.fail_at(s.sec.line_of("input"), "input", fmt::format("{} {}", quote(input_name(entry)), input_shape(entry).str()), what);
  }
  Shape conv(const LayerSpec& s, const Shape& in) const {
    const Layer& l = s.layer;
    if (in.rank != 3) fail_input(s, "conv2d reads a map [h, w, c]");
    if (in.c % l.groups)
      s.sec.fail("groups", fmt::format("the input's {} channels ({}) are not a multiple of it", in.c, in.str()));
    const uint64_t ph = in.h + 2 * l.pad, pw = in.w + 2 * l.pad;
    if (l.kernel_h > ph || l.kernel_w > pw)
      s.sec.fail("kernel", fmt::format("{} x {} is larger than the input map {} padded by {} ({} x {})", l.kernel_h,
                                       l.kernel_w, in.str(), l.pad, ph, pw));
    return map_shape((ph - l.kernel_h) / l.stride + 1, (pw - l.kernel_w) / l.stride + 1, l.units);
  }
  // Along channels: every input of the first one's rank, height and width.
  Shape concat(const LayerSpec& s, Shape out) const {
    const Layer& l = s.layer;
    for (size_t i = 1; i < l.inputs.size(); ++i) {
      const Shape b = input_shape(l.inputs[i]);
      if (b.rank != out.rank || b.h != out.h || b.w != out.w)
        s.sec.fail("inputs", fmt::format("concat joins tensors along channels, so all but the channels must agree; {} is "
                                         "{} and {} is {}",
                                         input_name(l.inputs[0]), input_shape(l.inputs[0]).str(),
                                         input_name(l.inputs[i]), b.str()));
      out.c += b.c;
    }
    return out;
  }
  Shape pool(const LayerSpec& s, const Shape& in) const {
    const Layer& l = s.layer;
    if (in.rank != 3) fail_input(s, fmt::format("{} reads a map [h, w, c]", layer_type_name(l.type)));
    if (l.kernel_h > in.h || l.kernel_w > in.w)
      s.sec.fail("size", fmt::format("the window is larger than the input map {}", in.str()));
    return map_shape((in.h - l.kernel_h) / l.stride + 1, (in.w - l.kernel_w) / l.stride + 1, in.c);
  }

  const std::vector<LayerSpec>& specs_;
  const Model& m_;
};

void check_flatten_consumers(const std::vector<LayerSpec>& specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].layer.type != LayerType::flatten) continue;
    if (i + 1 == specs.size())
      specs[i].sec.fail_at(specs[i].layer.line, "type", "\"flatten\"", "flatten must feed a dense layer; here it is the model's output");
    for (const LayerSpec& c : specs)
      if (c.layer.type != LayerType::dense && std::count(c.layer.inputs.begin(), c.layer.inputs.end(), int(i)))
        specs[i].sec.fail_at(specs[i].layer.line, "type", "\"flatten\"",
                             fmt::format("flatten must feed a dense layer, but {} layer {} (line {}) reads it",
                                         layer_type_name(c.layer.type), c.layer.name, c.layer.line));
  }
}

// ---- parameters and inputs ----------------------------------------------------------------------

std::vector<float> load_array(const Section& sec, std::string_view key, const FileRef& f,
                              const std::filesystem::path& base_dir, const std::vector<uint64_t>& expected,
                              std::string_view layout) {
  NpyArray a;
  try {
    a = read_npy(base_dir / f.name);
  } catch (const InputError& e) {
    sec.fail_at(f.line, key, quote(f.name), e.what());
  }
  if (a.shape != expected)
    sec.fail_at(f.line, key, quote(f.name), fmt::format("shape {}; expected {} ({})", dims_text(a.shape), dims_text(expected), layout));
  std::vector<float> v = a.to_float();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) sec.fail_at(f.line, key, quote(f.name), fmt::format("element {} is not a finite number", i));
  return v;
}

void fill_parameters(LayerSpec& s, const Shape& in, const Model& m, size_t position, const std::filesystem::path& base_dir) {
  Layer& l = s.layer;
  const Section& sec = s.sec;
  if (is_recurrent(l.type)) {
    const bool gru = l.type == LayerType::gru;
    const uint64_t gates = recurrent_gates(l.type);
    for (uint64_t k = 0; k < s.weights_files.size(); ++k) {
      const uint64_t in_k = k == 0 ? in.c : l.units;
      auto v = load_array(sec, kWeightsFile, s.weights_files[k], base_dir, {gates, in_k + l.units, l.units},
                          gru ? "[3, in + units, units], gates r, z, n" : "[4, in + units, units], gates i, f, g, o");
      l.weights.insert(l.weights.end(), v.begin(), v.end());
    }
    for (const FileRef& f : s.bias_files) {
      auto v = load_array(sec, kBiasFile, f, base_dir, {4, l.units},
                          gru ? "[4, units]: b_r, b_z, b_in, b_hn" : "[4, units], gates i, f, g, o");
      l.bias.insert(l.bias.end(), v.begin(), v.end());
    }
  } else {
    const bool conv = l.type == LayerType::conv2d;
    if (!s.weights_files.empty()) {
      const uint64_t rows = conv ? in.c / l.groups : in.c;
      l.weights = load_array(sec, kWeightsFile, s.weights_files[0], base_dir,
                             conv ? std::vector<uint64_t>{l.kernel_h, l.kernel_w, rows, l.units} : std::vector<uint64_t>{in.c, l.units},
                             conv ? (l.groups > 1 ? "[kh, kw, c / groups, filters]" : "[kh, kw, c, filters]") : "[in, units]");
      if (conv && l.groups > 1) l.weights = expand_groups(l.weights, l.kernel_h, l.kernel_w, in.c, l.units, l.groups);
    }
    if (!s.bias_files.empty())
      l.bias = load_array(sec, kBiasFile, s.bias_files[0], base_dir, {l.units}, conv ? "[filters]" : "[units]");
  }
  // A timing-only compile does not generate seeded weights (Layer::seeded_weights); biases, one
  // per output channel, it does (whether a layer has them changes its program).
  // (A full compile's are generated once every layer is read: parse_model, in parallel.)
  if (l.weights.empty() && weight_count(l, in) > 0) l.seeded_weights = true;
  if (l.bias.empty() && l.use_bias) l.bias = generate_bias(l, m.seed, position);
}

void fill_input(Model& m, const InputSpec& spec, const std::filesystem::path& base_dir, const std::string& source,
                bool timing_only) {
  ModelInput& in = m.inputs[0];
  if (!spec.file) {
    in.seeded = true;
    if (!timing_only) in.data = generate_input(in.shape, m.batch, m.seed, 0);
    return;
  }
  NpyArray a;
  const std::string value = quote(*spec.file);
  auto fail = [&](std::string_view what) {
    throw InputError(located(source, spec.file_line, "[model]", kInputFile, value, what));
  };
  try {
    a = read_npy(base_dir / *spec.file);
  } catch (const InputError& e) {
    fail(e.what());
  }
  std::vector<uint64_t> expected = {m.batch};
  for (uint64_t d : in.shape.rank == 1 ? std::vector<uint64_t>{in.shape.c}
                    : in.shape.rank == 2 ? std::vector<uint64_t>{in.shape.h, in.shape.c}
                                         : std::vector<uint64_t>{in.shape.h, in.shape.w, in.shape.c})
    expected.push_back(d);
  if (spec.batch_overridden && !a.shape.empty() && a.shape[0] != m.batch && a.shape.size() == expected.size())
    fail(fmt::format("holds {} samples (its first dimension) but --batch asks for {}", a.shape[0], m.batch));
  if (a.shape != expected) fail(fmt::format("shape {}; expected {} ([batch, ...input])", dims_text(a.shape), dims_text(expected)));
  in.data = a.to_float();
  for (size_t i = 0; i < in.data.size(); ++i)
    if (!std::isfinite(in.data[i])) fail(fmt::format("element {} is not a finite number", i));
}

toml::table parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, e.description()));
  }
}

}  // namespace

// ---- generated values -----------------------------------------------------------------------------

SeededUniform::SeededUniform(uint64_t seed, uint64_t stream) : engine_(stream_seed(seed, stream)) {}

uint64_t weight_count(const Layer& l, const Shape& in) {
  switch (l.type) {
    case LayerType::dense: return sat_mul(in.c, l.units);
    case LayerType::conv2d: return sat_mul(sat_mul(sat_mul(l.kernel_h, l.kernel_w), in.c), l.units);
    case LayerType::lstm:
    case LayerType::gru: {
      uint64_t total = 0;
      for (uint64_t k = 0; k < l.stack; ++k)
        total = sat_add(total, sat_mul(recurrent_gates(l.type) * l.units, sat_add(k == 0 ? in.c : l.units, l.units)));
      return total;
    }
    default: return 0;
  }
}

uint64_t bias_count(const Layer& l) {
  switch (l.type) {
    case LayerType::dense:
    case LayerType::conv2d: return l.units;
    case LayerType::lstm:
    case LayerType::gru: return sat_mul(l.stack, 4 * l.units);
    default: return 0;
  }
}

std::vector<float> generate_weights(const Layer& l, const Shape& in, uint64_t seed, size_t position) {
  std::vector<float> w;
  generate_weights(l, in, seed, position, w);
  return w;
}

void generate_weights(const Layer& l, const Shape& in, uint64_t seed, size_t position, std::vector<float>& w) {
  w.clear();
  w.reserve(weight_count(l, in));
  SeededDraws rng(seed, weight_stream(position));  // (one stream for all of a stacked LSTM's layers)
  auto draw = [&](uint64_t count, double fan_in, double fan_out) {
    const double bound = std::sqrt(6.0 / (fan_in + fan_out));
    w.resize(w.size() + count);
    rng.fill(bound, w.data() + w.size() - count, count);
  };
  const double kernel = double(l.kernel_h * l.kernel_w);
  switch (l.type) {
    case LayerType::dense: draw(in.c * l.units, double(in.c), double(l.units)); break;
    case LayerType::conv2d: {
      const uint64_t rows = in.c / l.groups;  // a filter's input channels
      draw(l.kernel_h * l.kernel_w * rows * l.units, kernel * double(rows), kernel * double(l.units / l.groups));
      if (l.groups > 1) w = expand_groups(w, l.kernel_h, l.kernel_w, in.c, l.units, l.groups);
      break;
    }
    case LayerType::lstm:
    case LayerType::gru:
      for (uint64_t k = 0; k < l.stack; ++k) {
        const uint64_t rows = (k == 0 ? in.c : l.units) + l.units;
        draw(recurrent_gates(l.type) * rows * l.units, double(rows), double(l.units));
      }
      break;
    default: break;
  }
}

std::vector<float> expand_groups(const std::vector<float>& grouped, uint64_t kh, uint64_t kw, uint64_t in_c,
                                 uint64_t units, uint64_t groups) {
  const uint64_t cg = in_c / groups, ug = units / groups;
  std::vector<float> dense(kh * kw * in_c * units, 0.0f);
  for (uint64_t p = 0; p < kh * kw; ++p)
    for (uint64_t k = 0; k < in_c; ++k)
      for (uint64_t j = (k / cg) * ug; j < (k / cg + 1) * ug; ++j)
        dense[(p * in_c + k) * units + j] = grouped[(p * cg + k % cg) * units + j];
  return dense;
}

std::vector<float> generate_bias(const Layer& l, uint64_t seed, size_t position) {
  std::vector<float> b(bias_count(l));
  SeededDraws(seed, bias_stream(position)).fill(0.1, b.data(), b.size());
  return b;
}

std::vector<float> generate_input(const Shape& shape, uint64_t batch, uint64_t seed, size_t index) {
  std::vector<float> v(batch * shape.elements());
  SeededDraws(seed, input_stream(index)).fill(1.0, v.data(), v.size());
  return v;
}

void generate_seeded_weights(Model& m) {
  // Each layer draws from its own stream: the layers in parallel give the same values.
  std::vector<size_t> todo;
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].seeded_weights && m.layers[i].weights.empty()) todo.push_back(i);
  sim::parallel_for(todo.size(), [&](uint64_t k) {
    Layer& l = m.layers[todo[k]];
    l.weights = generate_weights(l, source_shape(m, l, l.inputs.at(0)), m.seed, todo[k] + 1);
  });
}

// ---- entry points -----------------------------------------------------------------------------------

Model parse_model(std::string_view text, const std::string& source, const std::filesystem::path& base_dir,
                  const LoadOptions& options) {
  const toml::table doc = parse_toml(text, source);
  check_top_level(doc, source);
  Model m;
  m.source = source;
  const InputSpec input = read_model_section(doc, source, options, m);
  read_quantization(doc, source, m);
  std::vector<LayerSpec> specs = read_layers(doc, source);
  resolve_inputs(specs);
  const ShapeInference shapes(specs, m);
  CompileValues v;
  for (LayerSpec& s : specs) {
    s.layer.out = shapes.infer(s);
    if (s.layer.out.h > kMaxDim || s.layer.out.w > kMaxDim)
      s.sec.fail_at(s.layer.line, "", "", fmt::format("the output {} has a dimension larger than {}", s.layer.out.str(), kMaxDim));
    if (s.layer.out.elements() > kMaxTensor)
      s.sec.fail_at(s.layer.line, "", "", fmt::format("the output {} has more than 2^31 elements per sample", s.layer.out.str()));
    std::vector<Shape> in;
    for (int entry : s.layer.inputs) in.push_back(shapes.input_shape(entry));
    v.add_layer(s.layer, in, !s.weights_files.empty());
    if (v.parameters > options.max_values)
      s.sec.fail_at(s.layer.line, "", "", fmt::format("the model has more than {} parameters (weights and biases) up to this layer",
                                                      options.max_values));
  }
  check_flatten_consumers(specs);
  if (sat_mul(m.batch, m.inputs[0].shape.elements()) > options.max_values)
    throw InputError(located(source, input.shape_line, "[model]", "input", m.inputs[0].shape.str(),
                             fmt::format("batch {} x {} = {} input values; at most {}", m.batch, m.inputs[0].shape.elements(),
                                         m.batch * m.inputs[0].shape.elements(), options.max_values)));
  v.input_file = input.file || options.input_file;
  check_compile_memory(m, source, v, options);
  for (size_t i = 0; i < specs.size(); ++i)
    fill_parameters(specs[i], shapes.input_shape(specs[i].layer.inputs[0]), m, i + 1, base_dir);
  fill_input(m, input, base_dir, source, options.timing_only);
  for (LayerSpec& s : specs) m.layers.push_back(std::move(s.layer));
  if (!options.timing_only) generate_seeded_weights(m);
  return m;
}

bool is_model_path(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".toml" || ext == ".csv" || ext == ".onnx";
}

std::vector<std::string> model_files(const std::filesystem::path& path) {
  std::vector<std::string> files = {path.string()};
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext != ".toml") return files;  // an ONNX model holds its data; a topology names no files
  toml::table doc;
  try {
    doc = toml::parse(io::read_text_file(path, io::kMaxModelBytes, "a model description"), path.string());
  } catch (const std::exception&) {
    return files;
  }
  const std::filesystem::path dir = path.parent_path();
  const auto add = [&](const toml::node* n) {
    if (!n) return;
    if (const auto* s = n->as_string()) files.push_back((dir / s->get()).string());
    if (const auto* a = n->as_array())
      for (const toml::node& e : *a)
        if (const auto* s = e.as_string()) files.push_back((dir / s->get()).string());
  };
  const auto add_keys = [&](const toml::node* n, std::string_view table) {
    if (const toml::table* t = n ? n->as_table() : nullptr)
      for (const FileKey& f : kFileKeys)
        if (f.table == table) add(t->get(f.key));
  };
  add_keys(doc.get("model"), "model");
  if (const toml::array* layers = doc["layer"].as_array())
    for (const toml::node& l : *layers) add_keys(&l, "layer");
  return files;
}

void append_model_files(std::vector<std::string>& files, const std::vector<std::string>& models) {
  for (const std::string& m : models)
    for (std::string& f : model_files(m)) files.push_back(std::move(f));
}

namespace {
Model load_any(const std::filesystem::path& path, const LoadOptions& options);
}  // namespace

Model load_model(const std::filesystem::path& path, const LoadOptions& options) {
  Model m = load_any(path, options);
  apply_precision(m, options.precision, options.output_bits, path.string());
  return m;
}

void apply_precision(Model& m, std::optional<Precision> precision, std::optional<uint8_t> output_bits,
                     const std::string& source) {
  if (precision) {
    m.precision = *precision;
    for (Layer& l : m.layers) {
      if (*precision != Precision::automatic) l.weight_bits.reset();
      if (*precision == Precision::int8) l.output_bits.reset();
    }
    if (*precision == Precision::int8) m.wide_elements = false, m.output_bits = 0;
  }
  if (!output_bits) return;
  if (!m.wide_elements && *output_bits == 16)
    throw InputError(fmt::format("{}: --output-bits 16 and --precision int8 (every weight and tensor int8) contradict "
                                 "each other",
                                 source));
  m.output_bits = *output_bits;
}

namespace {
Model load_any(const std::filesystem::path& path, const LoadOptions& options) {
  if (!is_model_path(path))
    throw InputError(fmt::format("{}: not a model (expected a .toml description, a .csv SCALE-Sim topology or an .onnx model)", path.string()));
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::string text = ext == ".onnx" ? io::read_text_file(path, io::kMaxDataFileBytes, "an ONNX model")
                                          : io::read_text_file(path, io::kMaxModelBytes, "a model description");
  if (ext == ".onnx") return import_onnx(text, path.string(), options);
  if (options.calibration_file && ext == ".toml") {
    Model m = parse_model(text, path.string(), path.parent_path(), options);
    const NpyArray a = read_npy(*options.calibration_file);
    const Shape& s = m.inputs[0].shape;
    std::vector<uint64_t> want = {a.shape.empty() ? 0 : a.shape[0]};
    for (uint64_t d : s.rank == 1 ? std::vector<uint64_t>{s.c} : s.rank == 2 ? std::vector<uint64_t>{s.h, s.c}
                                                                          : std::vector<uint64_t>{s.h, s.w, s.c})
      want.push_back(d);
    if (a.shape != want || want[0] == 0 || want[0] > kMaxDim)
      throw InputError(fmt::format("{}: shape {}; expected {} ([samples, ...input], 1..{} samples)",
                                   options.calibration_file->string(), dims_text(a.shape), dims_text(want), kMaxDim));
    m.calibration = {a.to_float()};
    m.calibration_batch = a.shape[0];
    m.calibration_samples = 0;  // the quantization error is then measured on every input
    for (float v : m.calibration[0])
      if (!std::isfinite(v)) throw InputError(options.calibration_file->string() + ": an element is not a finite number");
    return m;
  }
  if (ext == ".csv") {
    if (options.input_file || options.calibration_file)
      throw InputError(fmt::format("{}: --input, --calibrate: a SCALE-Sim topology's inputs are seeded, one per layer",
                                   path.string()));
    return import_scalesim(text, path.string(), options);
  }
  return parse_model(text, path.string(), path.parent_path(), options);
}
}  // namespace

}  // namespace tpusim::compiler
