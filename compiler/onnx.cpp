// ONNX (onnx.ModelProto through the ONNX project's generated classes, libonnx-dev) to a float
// Model. Nodes are taken in the graph's order (ONNX requires a topological one). Each ONNX value
// is either a constant (initializers, Constant nodes, DequantizeLinear of a constant) or a
// tensor of the Model (a layer's output or a model input) in one of a few forms that say how
// its ONNX dimensions map onto the Model's NHWC shapes. What a node needs that the machine
// cannot do is refused with the node's name, op type and what, never approximated.
#include "compiler/onnx.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "compiler/compile.h"
#include "compiler/compile_memory.h"
#include "compiler/npy.h"
#include "isa/error.h"
#include "isa/table.h"

namespace tpusim::compiler {

namespace {

constexpr uint64_t kMaxDim = 65535;
constexpr uint64_t kMaxTensor = uint64_t{1} << 31;
// The most weights a global average computed on the matrix unit may take (global_avg): 2^24, 64 MiB
// of floats (e.g. 512 channels over 8 x 8, 64 over 64 x 64).
constexpr uint64_t kMaxAverageWeights = uint64_t{1} << 24;

// A constant: dimensions and values (any ONNX numeric type, held as double: exact for the int8,
// int32 and shape values it holds, and for every float).
struct Const {
  std::vector<int64_t> dims;
  std::vector<double> v;
  int type = onnx::TensorProto::FLOAT;
};

// How a Model tensor's per-sample shape stands for ONNX dimensions (N = batch):
//   vector    [N, c]
//   map       [N, c, h, w]
//   line      [N, c, w]: a 1-D map (Conv1d's), the Model's map of height 1 (h = 1)
//   flat      [N, h*w*c]: a flatten layer's output; chw: ONNX order (c, h, w) over the map
//             [h, w, c] (a dense layer reading it permutes its weight rows), else (h, w, c)
//   seq       [N, T, c], or [T, N, c] when time_major
//   lstm_y    [T, 1, N, c] (an LSTM's Y)      lstm_yh  [1, N, c] (an LSTM's Y_h)
//   lstm_hn   [L, N, c]: the Y_h of L stacked LSTM layers joined on axis 0 (PyTorch's h_n of an
//             LSTM with num_layers = L), Value::stack; only gathered
enum class Form { vector, map, line, flat, seq, lstm_y, lstm_yh, lstm_hn };

struct Value {
  int entry = 0;  // layer index or model_input(i)
  Form form = Form::vector;
  Shape shape;  // the Model tensor's per-sample shape (for flat: the map it flattens)
  bool time_major = false;
  bool chw = false;
  bool quantized = false;  // the int8 side of QuantizeLinear / QLinear* (same tensor)
  // A map's zero padding still to apply (a Pad node's, folded into the Conv or AveragePool that reads it): rows
  // above, columns left, rows below, columns right. The Model tensor is the unpadded map.
  std::array<int64_t, 4> pad{};
  bool padded() const { return pad != std::array<int64_t, 4>{}; }
  // The Y_h of an LSTM layer whose Y is read too (a lower layer of a stack, its sequence read by
  // the next): the machine's layer gives its sequence, not its last h, so this is not computed;
  // it may only be stacked into h_n and not gathered.
  bool no_h = false;
  std::vector<Value> stack;  // lstm_hn: each layer's Y_h, lowest first
};

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", d[i]);
  return s + "]";
}

const char* type_name(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float";
    case onnx::TensorProto::DOUBLE: return "double";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT64: return "int64";
    default: return "an unsupported element type";
  }
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const std::string& source, const LoadOptions& options)
      : g_(model.graph()), source_(source), options_(options) {}
  Model run() &&;

 private:
  const onnx::GraphProto& g_;
  const std::string source_;
  const LoadOptions& options_;
  Model m_;
  std::map<std::string, Const> consts_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> uses_;  // node inputs and graph outputs naming each value
  std::set<std::string> names_;
  const onnx::NodeProto* node_ = nullptr;
  int node_index_ = -1;  // node_'s position in the graph (0-based), for messages about unnamed nodes
  uint64_t parameters_ = 0;
  // The batch dimension the graph input declares (the batch it was exported with, e.g. 1 from
  // torch.onnx.export without dynamic_axes), 0 when symbolic: a Reshape to [that batch, -1] is the
  // exporter's folded x.view(x.size(0), -1) and flattens at whatever batch runs.
  int64_t export_batch_ = 0;
  // The batch as messages name it: the batch that runs where it is given (--batch, --input) or
  // the file declares a number, else the file's symbol for it (dim_param, "N" when unnamed): the
  // import then runs at batch 1, which is not the model's.
  std::string batch_text_ = "N";
  std::optional<std::string> softmax_output_;  // a final Softmax left to the host

  // ---- messages ----
  std::string where() const {
    if (!node_) return source_ + ": ";
    // A node is named by its name, else its first output, else its position in the graph (a
    // malformed node may have neither).
    std::string name = node_->name();
    if (name.empty() && node_->output_size() > 0) name = node_->output(0);
    if (name.empty()) name = fmt::format("#{}", node_index_);
    return fmt::format("{}: node {} ({}): ", source_, name, node_->op_type());
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(where() + what); }

  // ---- attributes ----
  const onnx::AttributeProto* attr(std::string_view name) const {
    for (const auto& a : node_->attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  void allow_attributes(std::initializer_list<std::string_view> names) const {
    for (const auto& a : node_->attribute())
      if (std::find(names.begin(), names.end(), a.name()) == names.end())
        fail(fmt::format("attribute {} is not supported", a.name()));
  }
  int64_t attr_int(std::string_view name, int64_t fallback) const {
    const auto* a = attr(name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::INT) fail(fmt::format("attribute {}: expected an integer", name));
    return a->i();
  }
  float attr_float(std::string_view name, float fallback) const {
    const auto* a = attr(name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::FLOAT) fail(fmt::format("attribute {}: expected a float", name));
    return a->f();
  }
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback = {}) const {
    const auto* a = attr(name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::INTS)
      fail(fmt::format("attribute {}: expected a list of integers", name));
    return {a->ints().begin(), a->ints().end()};
  }
  std::string attr_string(std::string_view name, std::string fallback = "") const {
    const auto* a = attr(name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::STRING) fail(fmt::format("attribute {}: expected a string", name));
    return a->s();
  }
  // A flag ONNX defines as 0 or 1 (ceil_mode, count_include_pad, transA, keepdims, layout, ...): any other value is refused, not
  // read as its truth value.
  bool attr_flag(std::string_view name, bool fallback) const {
    const int64_t v = attr_int(name, fallback ? 1 : 0);
    if (v != 0 && v != 1) fail(fmt::format("attribute {} = {}: expected 0 or 1", name, v));
    return v == 1;
  }
  // An attribute ONNX requires of this operator (a pool's kernel_shape): missing, refused by name.
  std::vector<int64_t> required_ints(std::string_view name, std::string_view what) const {
    if (!attr(name))
      fail(fmt::format("attribute {} is missing: ONNX requires it of {} ({})", name, node_->op_type(), what));
    return attr_ints(name);
  }
  // auto_pad of a Conv or a pool: NOTSET (the default: pads, or none), VALID, SAME_UPPER or
  // SAME_LOWER. ONNX's pads "cannot be used simultaneously" with any but NOTSET: refused beside it
  // (the node's pads were replaced by auto_pad's silently).
  std::string auto_pad() const {
    const std::string ap = attr_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
      fail(fmt::format("auto_pad {} is not supported", ap));
    if (ap != "NOTSET" && attr("pads"))
      fail(fmt::format("pads {} with auto_pad {}: ONNX's pads cannot be used with an auto_pad other than NOTSET; "
                       "give the node pads or auto_pad, not both",
                       dims_text(attr_ints("pads")), ap));
    return ap;
  }

  // ---- values ----
  std::string input_name(int i) const { return i < node_->input_size() ? node_->input(i) : std::string(); }
  bool has_input(int i) const { return !input_name(i).empty(); }
  bool is_const(int i) const { return consts_.count(input_name(i)) > 0; }
  const Const& constant(int i, std::string_view what) const {
    const std::string name = input_name(i);
    if (name.empty()) fail(fmt::format("input {} ({}) is missing", i, what));
    auto it = consts_.find(name);
    if (it == consts_.end())
      fail(fmt::format("input {} ({}, {}) must be a constant (an initializer); it is computed", i, what,
                       name));
    return it->second;
  }
  // A constant's elements as integers (shapes, axes, pads, indices): each must be a whole number
  // of at most 2^53 in size (what a double holds exactly), else the node is refused (a fuzzed 1e19
  // was converted to int64_t: undefined behaviour).
  std::vector<int64_t> int_values(const Const& c, std::string_view what) const {
    std::vector<int64_t> out;
    out.reserve(c.v.size());
    for (size_t i = 0; i < c.v.size(); ++i) {
      const double d = c.v[i];
      if (!(std::fabs(d) <= 9007199254740992.0) || d != std::floor(d))
        fail(fmt::format("{}: element {} ({}) is not an integer of at most 2^53", what, i, d));
      out.push_back(static_cast<int64_t>(d));
    }
    return out;
  }
  const Value& value(int i) const {
    const std::string name = input_name(i);
    if (name.empty()) fail(fmt::format("input {} is missing", i));
    auto it = values_.find(name);
    if (it != values_.end()) {
      if (it->second.padded() && node_->op_type() != "Conv" && node_->op_type() != "AveragePool")
        fail(fmt::format(
            "input {} ({}) is a Pad's output: a Pad of zeros must be read by Conv or AveragePool nodes (it is "
            "folded into their padding, zeros that count in an average){}",
            i, name,
            node_->op_type() == "MaxPool" ? "; a MaxPool pads by its own pads, which are never the maximum, and zeros "
                                            "would be"
                                          : ""));
      if (it->second.no_h && node_->op_type() != "Concat")
        fail(fmt::format(
            "input {} ({}) is the Y_h of an LSTM whose Y is read too: the machine's LSTM layer gives its sequence "
            "or its last h, not both (of a stack's h_n, only the last layer's, h_n[-1], can be read)",
            i, name));
      return it->second;
    }
    if (consts_.count(name))
      fail(fmt::format(
          "input {} ({}) is a constant; the machine computes on tensors that flow from the model's "
          "input (fold constant subgraphs before export)",
          i, name));
    fail(fmt::format("input {} ({}) is not produced by an earlier node or a graph input", i, name));
  }
  void expect_quantized(const Value& v, bool q, int i) const {
    if (v.quantized != q)
      fail(fmt::format("input {} ({}) is {}; expected {}", i, input_name(i),
                       v.quantized ? "quantized (int8)" : "float",
                       q ? "the output of QuantizeLinear or a QLinear operator" : "a float tensor"));
  }
  void set_output(int i, Value v) {
    if (i >= node_->output_size() || node_->output(i).empty()) return;
    values_[node_->output(i)] = v;
  }
  bool output_used(int i) const {
    return i < node_->output_size() && !node_->output(i).empty() && uses_.count(node_->output(i));
  }
  Layer& layer_of(const Value& v) { return m_.layers[static_cast<size_t>(v.entry)]; }
  // The layer a node may fold into (BatchNormalization, activations, a constant Add or Mul): the
  // producer of input 0, when only this node reads it and it has no activation yet.
  Layer* foldable(std::initializer_list<LayerType> types) {
    const Value& v = value(0);
    if (is_model_input(v.entry) || v.quantized || uses_[input_name(0)] != 1) return nullptr;
    Layer& l = layer_of(v);
    if (l.activation != Activation::none || std::find(types.begin(), types.end(), l.type) == types.end())
      return nullptr;
    return &l;
  }

  // ---- building the Model ----
  std::string layer_name() {
    std::string base = node_->name().empty() ? node_->output(0) : node_->name();
    for (char& c : base)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
    if (base.empty()) base = node_->op_type();
    if (base.size() > 120) base.resize(120);
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = fmt::format("{}_{}", base, i);
    names_.insert(name);
    return name;
  }
  int add_layer(Layer l) {
    parameters_ += l.weights.size() + l.bias.size();
    if (parameters_ > options_.max_values)
      fail(fmt::format("the model has more than {} parameters (weights and biases) up to this node",
                       options_.max_values));
    if (l.out.h > kMaxDim || l.out.w > kMaxDim || l.out.elements() > kMaxTensor || l.out.elements() == 0)
      fail(fmt::format(
          "the output {} is empty or too large (each dimension at most {}, at most 2^31 elements)",
          l.out.str(), kMaxDim));
    m_.layers.push_back(std::move(l));
    return static_cast<int>(m_.layers.size()) - 1;
  }
  Layer new_layer(LayerType type, const Value& in) {
    Layer l;
    l.name = layer_name();
    l.type = type;
    l.inputs = {in.entry};
    return l;
  }
  static uint64_t features(const Value& v) { return v.form == Form::flat ? v.shape.elements() : v.shape.c; }

  // ---- constants ----
  Const read_tensor(const onnx::TensorProto& t, const std::string& what) const;
  void add_const(const std::string& name, Const c) { consts_[name] = std::move(c); }

  // ---- graph inputs ----
  void read_inputs();
  bool feeds_time_major_lstm(const std::string& name) const;
  bool feeds_line_op(const std::string& name) const;

  // ---- operators ----
  void dispatch();
  void gemm();
  void matmul();
  void dense(const Value& in, const std::vector<float>& w_kn, uint64_t k, uint64_t n, std::vector<float> bias,
             std::optional<double> scale);
  void conv(bool qlinear);
  void pool(bool max);
  void pool_line(bool max);
  void global_avg_pool();
  Value global_avg(const Value& x);
  void reduce_mean();
  void pad();
  Value flatten_value(const Value& x);
  void activation(Activation a);
  void clip();
  void binary(bool mul);
  void concat();
  void stack_h();
  void fold_constant(bool mul);
  void batch_norm();
  void flatten(int64_t axis);
  void reshape();
  void transpose();
  void squeeze(bool squeeze);
  void gather();
  void lstm();
  void gru();
  struct RecurrentWeights {
    uint64_t h = 0, in = 0;  // hidden_size and the input's features
    const Const *w, *r, *b;  // W, R and (null when not given) B
  };
  RecurrentWeights recurrent_weights(const Value& x, uint64_t gates, bool with_cell);
  Layer recurrent_layer(LayerType type, const Value& x, const RecurrentWeights& rw, const uint64_t* onnx_gate,
                        uint64_t gates);
  void recurrent_outputs(Layer l, const Value& x, bool sequences);
  void softmax();
  void quantize_linear();
  void dequantize_linear();
  void qlinear_matmul();
  double activation_scale(int scale_input, int zero_point_input, const std::string& what);
  void pass_through();
  std::vector<int64_t> onnx_dims(const Value& v, std::optional<int64_t> batch = {}) const;
  std::string dims_of(const Value& v) const;
  bool fold();
};

Const Importer::read_tensor(const onnx::TensorProto& t, const std::string& what) const {
  Const c;
  c.type = t.data_type();
  uint64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) fail(fmt::format("{}: dimension {} is negative", what, d));
    c.dims.push_back(d);
    count = sat_mul(count, static_cast<uint64_t>(d));
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail(fmt::format(
        "{}: data stored in an external file is not supported (save the model with its data inside)", what));
  if (count > options_.max_values)
    fail(fmt::format("{}: {} values; at most {}", what, count, options_.max_values));
  size_t width = 0;
  switch (c.type) {
    case onnx::TensorProto::FLOAT: width = 4; break;
    case onnx::TensorProto::DOUBLE: width = 8; break;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: width = 1; break;
    case onnx::TensorProto::INT32: width = 4; break;
    case onnx::TensorProto::INT64: width = 8; break;
    default:
      fail(fmt::format("{}: element type {} is not supported (float, double, int8, uint8, int32, int64)",
                       what, c.type));
  }
  const std::string& raw = t.raw_data();
  const auto mismatch = [&](uint64_t have) {
    fail(fmt::format("{}: {} values for dimensions {} ({} expected)", what, have, dims_text(c.dims), count));
  };
  c.v.resize(count);
  if (t.has_raw_data()) {
    if (raw.size() != count * width) mismatch(raw.size() / width);
    for (uint64_t i = 0; i < count; ++i) {
      const char* p = raw.data() + i * width;
      switch (c.type) {
        case onnx::TensorProto::FLOAT: {
          float f;
          std::memcpy(&f, p, 4);
          c.v[i] = f;
          break;
        }
        case onnx::TensorProto::DOUBLE: {
          double d;
          std::memcpy(&d, p, 8);
          c.v[i] = d;
          break;
        }
        case onnx::TensorProto::INT8: c.v[i] = static_cast<int8_t>(*p); break;
        case onnx::TensorProto::UINT8: c.v[i] = static_cast<uint8_t>(*p); break;
        case onnx::TensorProto::INT32: {
          int32_t x;
          std::memcpy(&x, p, 4);
          c.v[i] = x;
          break;
        }
        case onnx::TensorProto::INT64: {
          int64_t x;
          std::memcpy(&x, p, 8);
          c.v[i] = static_cast<double>(x);
          break;
        }
      }
    }
  } else {
    switch (c.type) {
      case onnx::TensorProto::FLOAT:
        if (uint64_t(t.float_data_size()) != count) mismatch(t.float_data_size());
        std::copy(t.float_data().begin(), t.float_data().end(), c.v.begin());
        break;
      case onnx::TensorProto::DOUBLE:
        if (uint64_t(t.double_data_size()) != count) mismatch(t.double_data_size());
        std::copy(t.double_data().begin(), t.double_data().end(), c.v.begin());
        break;
      case onnx::TensorProto::INT64:
        if (uint64_t(t.int64_data_size()) != count) mismatch(t.int64_data_size());
        for (uint64_t i = 0; i < count; ++i) c.v[i] = static_cast<double>(t.int64_data(static_cast<int>(i)));
        break;
      default:  // int8, uint8, int32: int32_data
        if (uint64_t(t.int32_data_size()) != count) mismatch(t.int32_data_size());
        for (uint64_t i = 0; i < count; ++i) {
          const int32_t x = t.int32_data(static_cast<int>(i));
          c.v[i] = c.type == onnx::TensorProto::INT8    ? double(static_cast<int8_t>(x))
                   : c.type == onnx::TensorProto::UINT8 ? double(static_cast<uint8_t>(x))
                                                        : double(x);
        }
    }
  }
  for (uint64_t i = 0; i < count; ++i)
    if (!std::isfinite(c.v[i])) fail(fmt::format("{}: element {} is not a finite number", what, i));
  return c;
}

bool Importer::feeds_time_major_lstm(const std::string& name) const {
  bool any = false;
  for (const auto& n : g_.node())
    for (int i = 0; i < n.input_size(); ++i)
      if (n.input(i) == name) {
        if ((n.op_type() != "LSTM" && n.op_type() != "GRU") || i != 0) return false;
        for (const auto& a : n.attribute())
          if (a.name() == "layout" && a.i() != 0) return false;
        any = true;
      }
  return any;
}

// Whether a Conv or a pool (GlobalAveragePool too) reads graph input `name`, directly or through
// Pad nodes (PyTorch exports AvgPool1d's padding as a Pad): 3-D, it is then [N, C, L], a 1-D
// convolution's or pool's input, not a sequence [N, T, F].
bool Importer::feeds_line_op(const std::string& name) const {
  static const std::set<std::string> kLineOps = {"Conv", "QLinearConv", "MaxPool", "AveragePool", "GlobalAveragePool"};
  std::vector<std::string> todo = {name};
  std::set<std::string> seen = {name};  // (a malformed graph may loop)
  while (!todo.empty()) {
    const std::string t = todo.back();
    todo.pop_back();
    for (const auto& n : g_.node()) {
      if (n.input_size() == 0 || n.input(0) != t) continue;
      if (kLineOps.count(n.op_type())) return true;
      if (n.op_type() == "Pad" && n.output_size() > 0 && seen.insert(n.output(0)).second) todo.push_back(n.output(0));
    }
  }
  return false;
}

// A .npy of samples in the ONNX input's layout (batch first) as NHWC floats.
std::vector<float> samples(const NpyArray& a, const std::filesystem::path& path,
                           const std::vector<int64_t>& sample, const Value& v, const Shape& shape,
                           const std::string& input) {
  std::vector<int64_t> want = {a.shape.empty() ? 0 : int64_t(a.shape[0])};
  want.insert(want.end(), sample.begin(), sample.end());
  const std::vector<int64_t> have(a.shape.begin(), a.shape.end());
  if (have != want || a.shape[0] == 0)
    throw InputError(fmt::format("{}: shape {}; expected {} (the ONNX input {}, batch first)", path.string(),
                                 dims_text(have), dims_text(want), input));
  const std::vector<float> x = a.to_float();
  std::vector<float> out(x.size());
  const uint64_t per = shape.elements();
  for (uint64_t i = 0; i < x.size(); ++i) {
    const uint64_t n = i / per, e = i % per;
    uint64_t to = e;  // NCHW (NCL) -> NHWC for maps (lines); vectors and sequences keep their order
    if (v.form == Form::map || v.form == Form::line)
      to = (e / shape.w % shape.h * shape.w + e % shape.w) * shape.c + e / shape.pixels();
    if (!std::isfinite(x[i]))
      throw InputError(fmt::format("{}: element {} is not a finite number", path.string(), i));
    out[n * per + to] = x[i];
  }
  return out;
}

// Graph inputs that are not initializers: the model's inputs. Their dimensions after the batch
// must be numbers; the batch dimension may be symbolic.
void Importer::read_inputs() {
  std::optional<NpyArray> file;
  if (options_.input_file) file = read_npy(*options_.input_file);
  for (const auto& in : g_.input()) {
    if (consts_.count(in.name())) continue;
    const std::string what = fmt::format("graph input {}", in.name());
    if (!in.type().has_tensor_type()) fail(what + ": not a tensor");
    const auto& tt = in.type().tensor_type();
    if (tt.elem_type() != onnx::TensorProto::FLOAT)
      fail(fmt::format("{}: element type {}; the machine's inputs are float tensors it quantizes", what,
                       type_name(tt.elem_type())));
    std::vector<int64_t> d;  // -1: symbolic
    std::string d_text;      // as the file gives them: a symbolic one by its name
    for (const auto& dim : tt.shape().dim()) {
      d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      d_text += fmt::format("{}{}", d_text.empty() ? "[" : ", ",
                            dim.has_dim_value() ? std::to_string(dim.dim_value())
                            : dim.dim_param().empty() ? std::string("?") : dim.dim_param());
    }
    d_text += d_text.empty() ? "[]" : "]";
    ModelInput mi;
    mi.name = in.name();
    Value v;
    v.entry = model_input(static_cast<int>(m_.inputs.size()));
    // The batch axis (0, or 1 for a time-major sequence) and the per-sample dimensions.
    size_t batch_axis = 0;
    if (d.size() == 3 && feeds_time_major_lstm(in.name())) batch_axis = 1, v.time_major = true;
    const bool line = d.size() == 3 && !v.time_major && feeds_line_op(in.name());  // [N, C, L]
    std::vector<int64_t> sample;
    for (size_t i = 0; i < d.size(); ++i)
      if (i != batch_axis) sample.push_back(d[i]);
    for (int64_t x : sample)
      if (x < 1 || uint64_t(x) > kMaxDim)
        fail(fmt::format("{}: dimensions {}: every dimension but the batch must be a number 1..{}", what,
                         d_text, kMaxDim));
    if (d.size() == 2) v.form = Form::vector, mi.shape = vector_shape(uint64_t(sample[0]));
    else if (line) v.form = Form::line, mi.shape = map_shape(1, uint64_t(sample[1]), uint64_t(sample[0]));
    else if (d.size() == 3)
      v.form = Form::seq, mi.shape = sequence_shape(uint64_t(sample[0]), uint64_t(sample[1]));
    else if (d.size() == 4)
      v.form = Form::map, mi.shape = map_shape(uint64_t(sample[1]), uint64_t(sample[2]), uint64_t(sample[0]));
    else
      fail(fmt::format("{}: dimensions {}: expected [N, features], [N, steps, features], [N, C, L] (read by a Conv or a pool) or "
                       "[N, C, H, W]",
                       what, d_text));
    if (mi.shape.elements() > kMaxTensor) fail(what + ": more than 2^31 elements per sample");
    v.shape = mi.shape;
    if (!m_.inputs.empty()) {
      if (file) fail(what + ": --input gives one input, and the model has several");
    } else {
      uint64_t batch = d[batch_axis] > 0 ? uint64_t(d[batch_axis]) : 1;
      export_batch_ = std::max<int64_t>(d[batch_axis], 0);
      if (file) {
        if (file->shape.empty())
          fail(fmt::format("{}: {} holds a scalar, expected [N, ...]", what, options_.input_file->string()));
        batch = file->shape[0];
      }
      if (options_.batch) {
        if (file && *options_.batch != batch)
          throw InputError(fmt::format("--batch {}: {} holds {} samples", *options_.batch,
                                       options_.input_file->string(), batch));
        batch = *options_.batch;
      }
      if (batch < 1 || batch > kMaxBatch)
        throw InputError(fmt::format("batch {}: expected 1..{}", batch, kMaxBatch));
      m_.batch = batch;
      const auto& bd = tt.shape().dim_size() > int(batch_axis) ? &tt.shape().dim(int(batch_axis)) : nullptr;
      if (file || options_.batch || d[batch_axis] > 0) batch_text_ = std::to_string(batch);
      else if (bd && !bd->dim_param().empty()) batch_text_ = bd->dim_param();
    }
    if (sat_mul(m_.batch, mi.shape.elements()) > options_.max_values)
      fail(fmt::format("{}: batch {} x {} input values; at most {}", what, m_.batch, mi.shape.elements(),
                       options_.max_values));
    if (file && m_.inputs.empty()) {
      mi.data = samples(*file, *options_.input_file, sample, v, mi.shape, in.name());
    } else {
      mi.seeded = true;  // generated once the compile's memory is checked (run())
    }
    if (options_.calibration_file) {
      if (!m_.inputs.empty()) fail(what + ": --calibrate gives one input, and the model has several");
      const NpyArray cal = read_npy(*options_.calibration_file);
      if (cal.shape.empty() || cal.shape[0] < 1 || cal.shape[0] > kMaxDim ||
          sat_mul(cal.shape[0], mi.shape.elements()) > options_.max_values)
        throw InputError(fmt::format("{}: expected [samples, ...] with 1..{} samples",
                                     options_.calibration_file->string(), kMaxDim));
      m_.calibration = {samples(cal, *options_.calibration_file, sample, v, mi.shape, in.name())};
      m_.calibration_batch = cal.shape[0];
      m_.calibration_samples =
          0;  // not needed to calibrate: the quantization error is then measured on every input
    }
    values_[in.name()] = v;
    m_.inputs.push_back(std::move(mi));
  }
  if (m_.inputs.empty()) fail("the graph has no input tensor (every graph input is an initializer)");
}

// ---- dense layers: Gemm, MatMul, QLinearMatMul -------------------------------------------------

// A dense layer over `in` with weights w_kn[k][n] in ONNX row order (for a flattened map: c, h, w).
void Importer::dense(const Value& in, const std::vector<float>& w_kn, uint64_t k, uint64_t n,
                     std::vector<float> bias, std::optional<double> scale) {
  if (in.form == Form::map || in.form == Form::line)
    fail(fmt::format("its input is a map {}; flatten it first (Flatten, or Reshape to [N, -1])", dims_of(in)));
  if (in.form == Form::lstm_y || in.form == Form::lstm_yh || in.form == Form::lstm_hn)
    fail("its input is an LSTM output with its direction axis; Squeeze it (or take h_n[-1]) first");
  if (features(in) != k)
    fail(fmt::format("the weights have {} rows; the input has {} features", k, features(in)));
  if (n < 1 || n > kMaxDim) fail(fmt::format("{} outputs; expected 1..{}", n, kMaxDim));
  Layer l = new_layer(LayerType::dense, in);
  l.units = n;
  l.weights.resize(k * n);
  const Shape& s = in.shape;
  for (uint64_t r = 0; r < k; ++r) {
    uint64_t to = r;
    if (in.form == Form::flat && in.chw) {  // ONNX row (c, y, x) -> the Model's (y, x, c)
      const uint64_t c = r / (s.h * s.w), y = r / s.w % s.h, x = r % s.w;
      to = (y * s.w + x) * s.c + c;
    }
    std::copy_n(&w_kn[r * n], n, &l.weights[to * n]);
  }
  l.use_bias = !bias.empty();
  l.bias = std::move(bias);
  l.scale = scale;
  Value out;
  if (in.form == Form::seq) {
    l.out = sequence_shape(s.h, n);
    out = in;
  } else {
    l.out = vector_shape(n);
    out.form = Form::vector;
  }
  out.shape = l.out;
  out.quantized = scale.has_value();
  out.entry = add_layer(std::move(l));
  set_output(0, out);
}

// Y = alpha A B' + beta C, B' = B or B transposed; A is the tensor, B and C constants.
void Importer::gemm() {
  allow_attributes({"alpha", "beta", "transA", "transB"});
  if (attr_flag("transA", false))
    fail("transA = 1: the machine multiplies the tensor as [N, K]; transpose the weights instead");
  const float alpha = attr_float("alpha", 1), beta = attr_float("beta", 1);
  const bool tb = attr_flag("transB", false);
  const Value& a = value(0);
  expect_quantized(a, false, 0);
  const Const& b = constant(1, "B");
  if (b.dims.size() != 2) fail(fmt::format("B has dimensions {}; expected 2", dims_text(b.dims)));
  const uint64_t k = uint64_t(tb ? b.dims[1] : b.dims[0]), n = uint64_t(tb ? b.dims[0] : b.dims[1]);
  std::vector<float> w(k * n);
  for (uint64_t r = 0; r < k; ++r)
    for (uint64_t j = 0; j < n; ++j) w[r * n + j] = float(alpha * b.v[tb ? j * k + r : r * n + j]);
  std::vector<float> bias;
  if (has_input(2)) {
    const Const& c = constant(2, "C");
    if (c.v.size() != n && c.v.size() != 1)
      fail(fmt::format("C has dimensions {}; expected [{}] (one bias per output) or a scalar",
                       dims_text(c.dims), n));
    for (uint64_t j = 0; j < n; ++j) bias.push_back(float(beta * c.v[c.v.size() == 1 ? 0 : j]));
  }
  dense(a, w, k, n, std::move(bias), std::nullopt);
}

void Importer::matmul() {
  allow_attributes({});
  const Value& a = value(0);
  expect_quantized(a, false, 0);
  const Const& b = constant(1, "B");
  if (b.dims.size() != 2)
    fail(fmt::format("B has dimensions {}; the machine multiplies by a 2-D constant", dims_text(b.dims)));
  std::vector<float> w(b.v.begin(), b.v.end());
  dense(a, w, uint64_t(b.dims[0]), uint64_t(b.dims[1]), {}, std::nullopt);
}

// ---- convolution and pooling -------------------------------------------------------------------

// Conv and QLinearConv, 2-D over a map [N, C, H, W] or 1-D over a line [N, C, L] (PyTorch's
// Conv1d: a map of height 1). The machine's convolution has one stride and one zero padding for
// both directions and reads adjacent pixels; the rest is exact with zero weights: a dilated kernel
// becomes the (k - 1) d + 1 kernel with zeros between its taps, and a direction padded by less
// than the other (p < P: a 1-D convolution's rows, which have none) gets a kernel 2 (P - p) larger
// in that direction, its taps in the middle (the extra rows or columns read only the border or
// nothing, times zero). Both cost the larger kernel's cycles; Layer::taps marks the model's taps,
// so the MACs counted (model_macs, the array's useful macs) are the model's.
void Importer::conv(bool qlinear) {
  allow_attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const Value& x = value(0);
  expect_quantized(x, qlinear, 0);
  if (x.form == Form::seq)
    fail(fmt::format(
        "its input {} is a sequence ([N, T, F], or [T, N, F]) an earlier node gave; a 1-D convolution reads "
        "[N, C, L]: the graph input itself, or x.transpose(1, 2) of a batch-first sequence",
        dims_of(x)));
  if (x.form != Form::map && x.form != Form::line) fail("its input is not a map [N, C, H, W] or [N, C, L]");
  const bool one_d = x.form == Form::line;
  const size_t rank = one_d ? 1 : 2;  // spatial axes
  // Conv: X, W, B.  QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B (int32).
  const int wi = qlinear ? 3 : 1, bi = qlinear ? 8 : 2;
  const Const& w = constant(wi, "W");
  if (w.dims.size() != rank + 2)
    fail(fmt::format("W has dimensions {}; expected {}", dims_text(w.dims),
                     one_d ? "[M, C/group, k] for an input [N, C, L]" : "[M, C/group, kH, kW]"));
  const uint64_t m = uint64_t(w.dims[0]), cg = uint64_t(w.dims[1]), kh = one_d ? 1 : uint64_t(w.dims[2]),
                 kw = uint64_t(w.dims.back());
  const int64_t group = attr_int("group", 1);
  const uint64_t c = x.shape.c;
  if (group < 1 || uint64_t(group) * cg != c || m % uint64_t(group) != 0)
    fail(fmt::format("group {} with W {} does not fit an input of {} channels", group, dims_text(w.dims), c));
  // The attributes, per spatial axis (one for a 1-D convolution: its rows take 1, 1 and 0).
  const auto per_axis = [&](const char* name, std::vector<int64_t> fallback, size_t count) {
    std::vector<int64_t> v = attr_ints(name, std::move(fallback));
    if (v.size() != count)
      fail(fmt::format("{} {}: expected {} values for {} spatial {}", name, dims_text(v), count, rank,
                       rank == 1 ? "axis" : "axes"));
    return v;
  };
  const std::vector<int64_t> kernel = one_d ? std::vector<int64_t>{int64_t(kw)}
                                            : std::vector<int64_t>{int64_t(kh), int64_t(kw)};
  const auto ks = per_axis("kernel_shape", kernel, rank);
  if (ks != kernel) fail(fmt::format("kernel_shape {} differs from W's", dims_text(ks)));
  std::vector<int64_t> dil = per_axis("dilations", std::vector<int64_t>(rank, 1), rank);
  std::vector<int64_t> st = per_axis("strides", std::vector<int64_t>(rank, 1), rank);
  for (int64_t d : dil)
    if (d < 1 || uint64_t(d) > kMaxDim) fail(fmt::format("dilations {}: expected 1..{}", dims_text(dil), kMaxDim));
  if (one_d) dil.insert(dil.begin(), 1), st.insert(st.begin(), st[0]);  // (rows: height 1, any stride)
  if (st[0] != st[1] || st[0] < 1 || uint64_t(st[0]) > kMaxDim)
    fail(fmt::format("strides {}: the machine strides equally in both directions", dims_text(st)));
  const uint64_t stride = uint64_t(st[0]);
  // The kernel as the machine reads it: dilated taps spread out (zeros between them).
  const uint64_t dh = uint64_t(dil[0]), dw = uint64_t(dil[1]);
  const uint64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
  if (eh > kMaxDim || ew > kMaxDim) fail(fmt::format("the dilated kernel is larger than {}", kMaxDim));
  // Padding [rows above, columns left, rows below, columns right]: explicit pads, or auto_pad.
  const std::string ap = auto_pad();
  std::vector<int64_t> pads = per_axis("pads", std::vector<int64_t>(2 * rank, 0), 2 * rank);
  if (one_d) pads = {0, pads[0], 0, pads[1]};
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    pads.clear();
    for (auto [in, k] : {std::pair{x.shape.h, eh}, std::pair{x.shape.w, ew}}) {
      const uint64_t out = (in + stride - 1) / stride;
      const int64_t total = std::max<int64_t>(0, int64_t((out - 1) * stride + k) - int64_t(in));
      pads.push_back(total);
    }
    if (one_d) pads[0] = 0;
    if (pads[0] % 2 || pads[1] % 2)
      fail(fmt::format("auto_pad {} pads {} x {} pixels in all: not the same on both sides", ap, pads[0],
                       pads[1]));
    pads = {pads[0] / 2, pads[1] / 2, pads[0] / 2, pads[1] / 2};
  } else if (ap == "VALID") {
    pads = {0, 0, 0, 0};
  }
  if (x.padded()) {  // a Pad before this Conv: its zeros join the convolution's own padding
    if (ap != "NOTSET" && ap != "VALID") fail(fmt::format("auto_pad {} after a Pad is not supported", ap));
    for (size_t i = 0; i < 4; ++i) pads[i] += x.pad[i];
  }
  if (pads[0] != pads[2] || pads[1] != pads[3] || pads[0] < 0 || pads[1] < 0 || uint64_t(pads[0]) > kMaxDim ||
      uint64_t(pads[1]) > kMaxDim)
    fail(fmt::format("pads {}: the machine pads both sides of a {} by the same amount", dims_text(pads),
                     one_d ? "line" : "row and of a column"));
  // One padding for both directions: the larger; the other direction's kernel grows by twice the
  // difference, its taps centred (offsets oy, ox).
  const uint64_t ph = uint64_t(pads[0]), pw = uint64_t(pads[1]), pad = std::max(ph, pw);
  const uint64_t oy = pad - ph, ox = pad - pw, gh = eh + 2 * oy, gw = ew + 2 * ox;
  if (eh > x.shape.h + 2 * ph || ew > x.shape.w + 2 * pw)
    fail(fmt::format("the {} x {} kernel{} is larger than the input {} padded by {} x {}", eh, ew,
                     dh > 1 || dw > 1 ? " (dilated)" : "", dims_of(x), ph, pw));
  if (sat_mul(sat_mul(gh, gw), sat_mul(c, m)) > options_.max_values)
    fail(fmt::format("the {} x {} kernel the machine reads has more than {} weights", gh, gw, options_.max_values));

  std::vector<double> w_scale(m, 1.0);
  std::optional<double> y_scale;
  double x_scale = 1;
  if (qlinear) {
    x_scale = activation_scale(1, 2, "x");
    const Const& ws = constant(4, "w_scale");
    if (ws.v.size() != 1 && ws.v.size() != m)
      fail(fmt::format("w_scale has {} values; expected 1 or {}", ws.v.size(), m));
    for (uint64_t j = 0; j < m; ++j) w_scale[j] = ws.v[ws.v.size() == 1 ? 0 : j];
    if (has_input(5))
      for (double z : constant(5, "w_zero_point").v)
        if (z != 0) fail("w_zero_point is not 0: the machine's weights are symmetric int8");
    y_scale = activation_scale(6, 7, "y");
  }
  // ONNX W[m][ci][r][s] (ci within m's group) -> the Model's [r'][s'][c][m], zero across groups,
  // tap (r, s) at (oy + r dh, ox + s dw) of the kernel the machine reads.
  Layer l = new_layer(LayerType::conv2d, x);
  l.units = m;
  l.kernel_h = gh;
  l.kernel_w = gw;
  l.stride = stride;
  l.pad = pad;
  l.groups = uint64_t(group);  // the weights below are held dense, zero across groups (graph.h)
  l.weights.assign(gh * gw * c * m, 0.0f);
  if (gh * gw != kh * kw) {  // the model's taps among the positions the machine reads (Layer::taps)
    l.taps.assign(gh * gw, 0);
    for (uint64_t r = 0; r < kh; ++r)
      for (uint64_t s = 0; s < kw; ++s) l.taps[(oy + r * dh) * gw + ox + s * dw] = 1;
  }
  const uint64_t per_group = m / uint64_t(group);
  for (uint64_t j = 0; j < m; ++j)
    for (uint64_t ci = 0; ci < cg; ++ci)
      for (uint64_t r = 0; r < kh; ++r)
        for (uint64_t s = 0; s < kw; ++s) {
          const uint64_t ch = j / per_group * cg + ci, y = oy + r * dh, xx = ox + s * dw;
          l.weights[((y * gw + xx) * c + ch) * m + j] = float(w.v[((j * cg + ci) * kh + r) * kw + s] * w_scale[j]);
        }
  l.use_bias = has_input(bi);
  if (l.use_bias) {
    const Const& b = constant(bi, "B");
    if (b.v.size() != m) fail(fmt::format("B has {} values; expected {}", b.v.size(), m));
    for (uint64_t j = 0; j < m; ++j) l.bias.push_back(float(b.v[j] * (qlinear ? x_scale * w_scale[j] : 1.0)));
  }
  l.scale = y_scale;
  l.out = map_shape((x.shape.h + 2 * pad - gh) / stride + 1, (x.shape.w + 2 * pad - gw) / stride + 1, m);
  Value out;
  out.form = x.form;
  out.shape = l.out;
  out.quantized = qlinear;
  out.entry = add_layer(std::move(l));
  set_output(0, out);
}

// MaxPool and AveragePool over a map [N, C, H, W]: square windows, one stride, no dilation. Padded
// (pads, each side its own, or auto_pad SAME) by less than the window on each side, so that every
// window holds a pixel of the map: MaxPool's padding is never the maximum; AveragePool's counts as
// zeros (count_include_pad = 1) or not (0: the window's sum over the pixels of the map it holds,
// over their number); a Pad of zeros before an AveragePool (PyTorch exports AvgPool2d's default
// count_include_pad so) joins its padding as zeros that count. The quantizer copies the map into
// the padded one the machine's unpadded pool reads (quantize.cpp, pool_padded).
void Importer::pool(bool max) {
  if (max)
    allow_attributes(
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  else allow_attributes({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  const Value& x = value(0);
  if (x.form == Form::line) return pool_line(max);
  if (x.form != Form::map) fail("its input is not a 4-D map [N, C, H, W] or a line [N, C, L]");
  if (!max) expect_quantized(x, false, 0);
  if (output_used(1)) fail("the Indices output is not supported");
  const int64_t max_window = int64_t(isa::field_max(isa::Opcode::pool, isa::Field::window));
  const int64_t max_stride = int64_t(isa::field_max(isa::Opcode::pool, isa::Field::pool_stride));
  const auto ks = required_ints("kernel_shape", "the window's size");
  if (ks.size() != 2 || ks[0] != ks[1] || ks[0] < 1)
    fail(fmt::format("kernel_shape {}: the machine pools square windows", dims_text(ks)));
  if (ks[0] > max_window)
    fail(fmt::format("kernel_shape {}: the machine's pool windows are 1..{} on a side", dims_text(ks), max_window));
  const auto st = attr_ints("strides", {1, 1});
  if (st.size() != 2 || st[0] != st[1] || st[0] < 1)
    fail(fmt::format("strides {}: the machine strides equally in both directions", dims_text(st)));
  if (st[0] > max_stride)
    fail(fmt::format("strides {}: the machine's pool strides are 1..{}", dims_text(st), max_stride));
  if (max)
    for (int64_t d : attr_ints("dilations", {1, 1}))
      if (d != 1) fail(fmt::format("dilations {}: only 1 is supported", dims_text(attr_ints("dilations"))));
  const uint64_t k = uint64_t(ks[0]), s = uint64_t(st[0]);
  const std::string ap = auto_pad();
  std::vector<int64_t> pads = attr_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4)
    fail(fmt::format("pads {}: expected 4 values (top, left, bottom, right: ONNX's [y_begin, x_begin, y_end, "
                     "x_end])",
                     dims_text(pads)));
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const uint64_t sizes[2] = {x.shape.h, x.shape.w};
    for (int a = 0; a < 2; ++a) {
      const int64_t total =
          std::max<int64_t>(0, int64_t(((sizes[a] + s - 1) / s - 1) * s + k) - int64_t(sizes[a]));
      pads[size_t(a)] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[size_t(a) + 2] = total - pads[size_t(a)];
    }
  } else if (ap == "VALID") {
    pads = {0, 0, 0, 0};
  }
  bool counted = !max && attr_flag("count_include_pad", false);
  const bool own_pads = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; });
  if (x.padded()) {  // a Pad's zeros (value() lets a padded map through to an AveragePool only)
    // SAME would pad the Pad's output, whose size the padding above did not use (as conv()).
    if (ap != "NOTSET" && ap != "VALID") fail(fmt::format("auto_pad {} after a Pad is not supported", ap));
    if (!counted && own_pads)
      fail(fmt::format("pads {} with count_include_pad = 0 after a Pad: the Pad's zeros count in the average and "
                       "these would not; the machine's pool has one padding",
                       dims_text(pads)));
    for (size_t i = 0; i < 4; ++i) pads[i] += x.pad[i];
    counted = true;
  }
  const auto pads_text = [&] {
    if (x.padded())  // the node's own pads and the Pad's before it, added
      return fmt::format("pads {} (with the Pad before it: {})", dims_text(pads),
                         dims_text({x.pad[0], x.pad[1], x.pad[2], x.pad[3]}));
    return ap == "NOTSET" || ap == "VALID" ? std::string("pads ") + dims_text(pads)
                                           : fmt::format("auto_pad {} (pads {})", ap, dims_text(pads));
  };
  for (int64_t p : pads)
    if (p < 0 || uint64_t(p) >= k)
      fail(fmt::format("{}: expected 0..{} on each side for a {} x {} window (every window must hold a pixel of "
                       "the map)",
                       pads_text(), k - 1, k, k));
  const uint64_t t = uint64_t(pads[0]), l = uint64_t(pads[1]);
  uint64_t b = uint64_t(pads[2]), r = uint64_t(pads[3]);
  uint64_t ph = x.shape.h + t + b, pw = x.shape.w + l + r;
  if (k > ph || k > pw)
    fail(fmt::format("the {} x {} window is larger than the input {}{}", k, k, dims_of(x),
                     t + l + b + r ? fmt::format(" padded by {}", dims_text(pads)) : std::string()));
  // ceil_mode with a partial last window (GoogLeNet's MaxPool2d(3, 2, ceil_mode=True)): that window
  // is the part of it within the padded map, i.e. the map padded further at the bottom or right, by
  // padding that counts nowhere: right for a max (never the maximum) and for an average of the
  // pixels it holds, not for an average that counts its padding (PyTorch's divisor then counts the
  // padding but not the rest). A last window starting beyond the map (in the end padding) PyTorch
  // drops and ONNX's older references keep: refused.
  const uint64_t given_b = b, given_r = r;  // before ceil_mode's extension (for messages)
  if (attr_flag("ceil_mode", false) && ((ph - k) % s || (pw - k) % s)) {
    const auto where = [&] {
      return fmt::format("the {} x {} window at stride {} over {}{} ({} x {})", k, k, s, dims_of(x),
                         t + l + b + r ? fmt::format(" padded by {}", dims_text(pads)) : "", ph, pw);
    };
    if (!max && counted)
      fail(fmt::format("ceil_mode = 1 with a partial last window of an average that counts its padding is not "
                       "supported: {} leaves one; supported: ceil_mode = 1 for MaxPool and for AveragePool with "
                       "count_include_pad = 0, or windows that fit exactly",
                       where()));
    const uint64_t oh = (ph - k + s - 1) / s + 1, ow = (pw - k + s - 1) / s + 1;
    if ((oh - 1) * s >= t + x.shape.h || (ow - 1) * s >= l + x.shape.w)
      fail(fmt::format("ceil_mode = 1: {} leaves a last window that starts in the end padding (PyTorch drops it, "
                       "ONNX's older references keep it); supported: ceil_mode = 1 where the last window starts "
                       "within the map",
                       where()));
    b += (oh - 1) * s + k - ph, r += (ow - 1) * s + k - pw;
    ph = x.shape.h + t + b, pw = x.shape.w + l + r;
  }
  const uint64_t oh = (ph - k) / s + 1, ow = (pw - k) / s + 1;
  if (!max && !counted && t + l + b + r) {  // each window reaching the padding: an average of its pixels
    const auto held = [&](uint64_t o, uint64_t before, uint64_t size) {  // a window's pixels along an axis
      const int64_t a = int64_t(o * s) - int64_t(before);
      return std::min(a + int64_t(k), int64_t(size)) - std::max<int64_t>(a, 0);
    };
    for (uint64_t oy = 0; oy < oh; ++oy)
      for (uint64_t ox = 0; ox < ow; ++ox) {
        const uint64_t c = uint64_t(held(oy, t, x.shape.h) * held(ox, l, x.shape.w));
        if (c < k * k && average_square(c, uint64_t(max_window)) == 0)
          fail(fmt::format("{}{} with count_include_pad = 0: output pixel ({}, {})'s window holds {} pixels of the map, "
                           "and the machine averages them as an n x n square (n^2 a multiple of {}) of at most "
                           "{} x {}: there is none; supported: {}pads whose windows hold a "
                           "number of pixels such a square holds (a 3 x 3 window padded by 1)",
                           pads_text(),
                           b != given_b || r != given_r
                               ? fmt::format(" and ceil_mode = 1 (its partial last window: {} more at the bottom, {} at "
                                             "the right)", b - given_b, r - given_r)
                               : std::string(),
                           oy, ox, c, c, max_window, max_window,
                           b != given_b || r != given_r ? "ceil_mode = 0, " : "count_include_pad = 1, or "));
      }
  }
  Layer lay = new_layer(max ? LayerType::max_pool : LayerType::avg_pool, x);
  lay.kernel_h = lay.kernel_w = k;
  lay.stride = s;
  lay.pool_pads = {t, l, b, r};
  lay.count_pad = counted;
  lay.out = map_shape(oh, ow, x.shape.c);
  Value out = x;
  out.pad = {};
  out.shape = lay.out;
  out.entry = add_layer(std::move(lay));
  set_output(0, out);
}

// MaxPool and AveragePool over a line [N, C, L] (PyTorch's MaxPool1d, AvgPool1d): a pool of a 1 x k
// window over the map of height 1 (as a Conv1d's), which the quantizer runs on the machine's square
// windows (quantize.cpp, "1-D pools"). No dilation; k and the stride at most the pool instruction's.
// Padded by less than k columns at each end (each its own: pads, auto_pad SAME, and ceil_mode's
// partial last window as more at the end), so that every window holds a value of the line: MaxPool's padding is never the maximum;
// AveragePool's counts as zeros (count_include_pad = 1), or not (0: the window's sum over the values
// of the line it holds). A Pad of zeros before an AveragePool (PyTorch exports AvgPool1d with
// count_include_pad so) joins its padding as zeros that count.
void Importer::pool_line(bool max) {
  const Value& x = value(0);
  if (!max) expect_quantized(x, false, 0);
  if (output_used(1)) fail("the Indices output is not supported");
  const uint64_t len = x.shape.w;
  const auto ks = required_ints("kernel_shape", "the window's size");
  const int64_t max_window = int64_t(isa::field_max(isa::Opcode::pool, isa::Field::window));
  const int64_t max_stride = int64_t(isa::field_max(isa::Opcode::pool, isa::Field::pool_stride));
  if (ks.size() != 1 || ks[0] < 1 || ks[0] > max_window)
    fail(fmt::format("kernel_shape {}: expected one window length 1..{} for a line {}", dims_text(ks), max_window,
                     dims_of(x)));
  const uint64_t k = uint64_t(ks[0]);
  const auto st = attr_ints("strides", {1});
  if (st.size() != 1 || st[0] < 1 || st[0] > max_stride)
    fail(fmt::format("strides {}: expected one stride 1..{} for a line", dims_text(st), max_stride));
  const uint64_t s = uint64_t(st[0]);
  if (max)
    for (int64_t d : attr_ints("dilations", {1}))
      if (d != 1) fail(fmt::format("dilations {}: only 1 is supported", dims_text(attr_ints("dilations"))));
  const std::string ap = auto_pad();
  std::vector<int64_t> pads = attr_ints("pads", {0, 0});
  if (pads.size() != 2) fail(fmt::format("pads {}: expected 2 values (the line's two ends)", dims_text(pads)));
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t total = std::max<int64_t>(0, int64_t(((len + s - 1) / s - 1) * s + k) - int64_t(len));
    pads = ap == "SAME_UPPER" ? std::vector<int64_t>{total / 2, total - total / 2}
                              : std::vector<int64_t>{total - total / 2, total / 2};
  } else if (ap == "VALID") {
    pads = {0, 0};
  }
  bool counted = !max && attr_flag("count_include_pad", false);
  if (x.padded()) {  // a Pad's zeros (value() lets a padded line through to an AveragePool only)
    // SAME would pad the Pad's output, whose length the padding above did not use (as conv()).
    if (ap != "NOTSET" && ap != "VALID") fail(fmt::format("auto_pad {} after a Pad is not supported", ap));
    if (!counted && (pads[0] || pads[1]))
      fail(fmt::format("pads {} with count_include_pad = 0 after a Pad: the Pad's zeros count in the average and "
                       "these would not; the machine's pool has one padding",
                       dims_text(pads)));
    pads[0] += x.pad[1], pads[1] += x.pad[3];
    counted = true;
  }
  const auto pads_text = [&] {
    if (x.padded())  // the node's own pads and the Pad's before it, added
      return fmt::format("pads {} (with the Pad before it: {} at the start, {} at the end)", dims_text(pads), x.pad[1],
                         x.pad[3]);
    return ap == "NOTSET" || ap == "VALID" ? std::string("pads ") + dims_text(pads)
                                           : fmt::format("auto_pad {} (pads {})", ap, dims_text(pads));
  };
  for (int64_t p : pads)
    if (p < 0 || uint64_t(p) >= k)
      fail(fmt::format("{}: expected 0..{} at each end for a window of {} (a window must hold a value of the line)",
                       pads_text(), k - 1, k));
  const uint64_t pl = uint64_t(pads[0]);
  uint64_t pr = uint64_t(pads[1]), padded = len + pl + pr;
  const auto padding = [&] {
    return pl || pr ? pl == pr ? fmt::format(" padded by {} at each end", pl)
                               : fmt::format(" padded by {} at the start and {} at the end", pl, pr)
                    : std::string();
  };
  if (k > padded) fail(fmt::format("the window of {} is longer than the line {}{}", k, dims_of(x), padding()));
  // ceil_mode with a partial last window: the line padded further at its end, as pool() does a map's.
  if (attr_flag("ceil_mode", false) && (padded - k) % s) {
    const std::string where = fmt::format("the window of {} at stride {} over {}{} ({} values)", k, s, dims_of(x),
                                          padding(), padded);
    if (!max && counted)
      fail(fmt::format("ceil_mode = 1 with a partial last window of an average that counts its padding is not "
                       "supported: {} leaves one; supported: ceil_mode = 1 for MaxPool and for AveragePool with "
                       "count_include_pad = 0, or windows that fit exactly",
                       where));
    const uint64_t outputs = (padded - k + s - 1) / s + 1;
    if ((outputs - 1) * s >= pl + len)
      fail(fmt::format("ceil_mode = 1: {} leaves a last window that starts in the end padding (PyTorch drops it, "
                       "ONNX's older references keep it); supported: ceil_mode = 1 where the last window starts "
                       "within the line",
                       where));
    pr += (outputs - 1) * s + k - padded;
    padded = len + pl + pr;
  }
  Layer l = new_layer(max ? LayerType::max_pool : LayerType::avg_pool, x);
  l.kernel_h = 1;
  l.kernel_w = k;
  l.stride = s;
  l.pool_pads = {0, pl, 0, pr};
  l.count_pad = counted;
  l.out = map_shape(1, (padded - k) / s + 1, x.shape.c);
  Value out = x;
  out.pad = {};
  out.shape = l.out;
  out.entry = add_layer(std::move(l));
  set_output(0, out);
}

void Importer::global_avg_pool() {
  allow_attributes({});
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  if (x.form != Form::map && x.form != Form::line) fail("its input is not a map [N, C, H, W] or a line [N, C, L]");
  set_output(0, global_avg(x));
}

// The average over a map or a line (GlobalAveragePool; ReduceMean over its spatial axes; PyTorch's
// AdaptiveAvgPool1d(1), x.mean(2)): one window of the whole square map, or 1 x L of the line, where
// the pool instruction's windows (1..15) hold it; else (a longer line, a larger or a non-square
// map) on the matrix unit: a convolution whose kernel is the whole map, one filter per channel
// (groups = C) of weights 1 / (H W) (int8 127 at the filter's scale 1 / (127 H W): exact), so its
// output is the mean rounded once, at the output's calibrated scale; two stacked pools would round
// twice, at the input's scale (docs/onnx.md, "Global averages"). It costs C x C x H x W MACs a sample
// (the zero weights across channels included) and as many weights, at most kMaxAverageWeights.
Value Importer::global_avg(const Value& x) {
  const uint64_t max_window = isa::field_max(isa::Opcode::pool, isa::Field::window);
  const uint64_t h = x.shape.h, w = x.shape.w, c = x.shape.c;
  const bool pooled = x.form == Form::line ? w <= max_window : h == w && h <= max_window;
  Layer l = new_layer(pooled ? LayerType::avg_pool : LayerType::conv2d, x);
  l.kernel_h = h;  // (a line's: 1)
  l.kernel_w = l.stride = w;
  if (!pooled) {
    const uint64_t n = h * w, weights = sat_mul(n, sat_mul(c, c));
    if (weights > kMaxAverageWeights)
      fail(fmt::format("the average over {} is beyond the pool instruction's windows (1..{}, square) and would take "
                       "{} weights on the matrix unit ({} x C x C); at most {}",
                       x.form == Form::line ? fmt::format("the {} values of the line {}", w, dims_of(x))
                                            : fmt::format("the {} x {} pixels of {}", h, w, dims_of(x)),
                       max_window, weights, x.form == Form::line ? "L" : "H x W", kMaxAverageWeights));
    l.units = c;
    l.stride = 1;
    l.groups = c;  // (held dense: zero across channels, graph.h)
    l.use_bias = false;
    l.weights.assign(n * c * c, 0.0f);
    for (uint64_t p = 0; p < n; ++p)
      for (uint64_t j = 0; j < c; ++j) l.weights[(p * c + j) * c + j] = float(1.0 / double(n));
  }
  l.out = map_shape(1, 1, c);
  Value out = x;
  out.pad = {};
  out.shape = l.out;
  out.entry = add_layer(std::move(l));
  return out;
}

// ReduceMean over a map's rows and columns (PyTorch's x.mean((2, 3)), as MobileNet-style heads
// write a global average pool) or over a line (x.mean(2)): an avg_pool over the whole map or line,
// flattened when keepdims = 0.
void Importer::reduce_mean() {
  allow_attributes({"axes", "keepdims", "noop_with_empty_axes"});
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  std::vector<int64_t> axes = attr_ints("axes");
  if (has_input(1)) {  // opset 18: the axes as an input
    axes = int_values(constant(1, "axes"), "axes");
  }
  const std::vector<int64_t> dims = onnx_dims(x);
  const std::vector<int64_t> given = axes;
  for (int64_t& a : axes) a = a < 0 ? a + int64_t(dims.size()) : a;
  std::sort(axes.begin(), axes.end());
  if ((x.form != Form::map || axes != std::vector<int64_t>{2, 3}) &&
      (x.form != Form::line || axes != std::vector<int64_t>{2}))
    fail(fmt::format(
        "axes {} of an input {}: only the mean over a map's rows and columns (axes 2 and 3 of [N, C, H, W]) or "
        "over a line (axis 2 of [N, C, L]), a global average pool, is supported",
        given.empty() ? std::string("(all)") : dims_text(given), dims_of(x)));
  const Value pooled = global_avg(x);
  set_output(0, attr_flag("keepdims", true) ? pooled : flatten_value(pooled));
}

// Pad of a map's rows and columns, or of a line, with zeros: nothing of its own; the Conv (or the
// AveragePool: PyTorch's AvgPool1d and AvgPool2d with count_include_pad) that reads it pads by that
// much more (Value::pad). Pads of zero (PyTorch's avg_pool2d emits one) are nothing at all.
void Importer::pad() {
  allow_attributes({"mode", "pads", "value"});
  const Value& x = value(0);
  const std::string mode = attr_string("mode", "constant");
  std::vector<int64_t> pads = attr_ints("pads");  // opset < 11: attributes
  double fill = attr_float("value", 0);
  if (has_input(1)) {
    pads = int_values(constant(1, "pads"), "pads");
  }
  if (has_input(2)) {
    const Const& v = constant(2, "constant_value");
    if (v.v.size() != 1) fail(fmt::format("constant_value holds {} values; expected one", v.v.size()));
    fill = v.v[0];
  }
  const std::vector<int64_t> dims = onnx_dims(x);
  const int64_t rank = int64_t(dims.size());
  std::vector<int64_t> axes;
  if (has_input(3)) {  // opset 18
    for (double a : constant(3, "axes").v) {
      const int64_t i = int64_t(a) < 0 ? int64_t(a) + rank : int64_t(a);
      if (i < 0 || i >= rank) fail(fmt::format("axis {} out of range for an input {}", a, dims_of(x)));
      axes.push_back(i);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    fail(fmt::format("pads {} has {} values; expected {} (begin and end of each axis of {})", dims_text(pads),
                     pads.size(), 2 * axes.size(), dims_of(x)));
  std::vector<int64_t> before(size_t(rank), 0), after(size_t(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    before[size_t(axes[i])] += pads[i];
    after[size_t(axes[i])] += pads[i + axes.size()];
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return set_output(0, x);
  if (mode != "constant" || fill != 0)
    fail(fmt::format("mode {} with value {}: only zero padding is supported (the machine's convolution pads "
                     "with zeros)",
                     mode, fill));
  if ((x.form != Form::map && x.form != Form::line) || before[0] || after[0] || before[1] || after[1] ||
      std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0 || uint64_t(p) > kMaxDim; }))
    fail(fmt::format(
        "pads {} of an input {}: only zero padding of a map's rows and columns (axes 2 and 3 of [N, C, H, W]) or "
        "of a line (axis 2 of [N, C, L]) is supported, folded into the Conv or AveragePool that reads it",
        dims_text(pads), dims_of(x)));
  Value out = x;
  if (x.form == Form::line) out.pad = {0, before[2], 0, after[2]};  // (a line is a map of height 1)
  else out.pad = {before[2], before[3], after[2], after[3]};
  set_output(0, out);
}

// ---- activations and element-wise operators ---------------------------------------------------------

// Fused into the producing dense, conv or element-wise layer where only this node reads it;
// otherwise an activation layer.
void Importer::activation(Activation a) {
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  if (x.form == Form::flat || x.form == Form::lstm_y || x.form == Form::lstm_yh || x.form == Form::lstm_hn)
    fail(
        "its input is a flattened map or an LSTM output with its direction axis; apply it before the Flatten "
        "or after the Squeeze");
  if (Layer* l = foldable({LayerType::dense, LayerType::conv2d, LayerType::add, LayerType::mul})) {
    l->activation = a;
    set_output(0, x);
    return;
  }
  Layer l = new_layer(LayerType::activation, x);
  l.activation = a;
  l.out = x.shape;
  Value out = x;
  out.entry = add_layer(std::move(l));
  set_output(0, out);
}

// Clip(0, 6) is relu6 and Clip(0, +inf) relu; other bounds are refused.
void Importer::clip() {
  allow_attributes({"min", "max"});
  double lo = attr_float("min", -std::numeric_limits<float>::infinity());
  double hi = attr_float("max", std::numeric_limits<float>::infinity());
  const auto scalar = [&](int input, const char* what) {
    const auto& v = constant(input, what).v;
    if (v.size() != 1) fail(fmt::format("its {} input holds {} values; a bound is one value", what, v.size()));
    return double(v[0]);
  };
  if (has_input(1)) lo = scalar(1, "min");
  if (has_input(2)) hi = scalar(2, "max");
  if (lo == 0 && hi == 6) return activation(Activation::relu6);
  if (lo == 0 && std::isinf(hi) && hi > 0) return activation(Activation::relu);
  fail(fmt::format("bounds [{}, {}]: the machine clips at [0, 6] (relu6) or [0, inf) (relu) only", lo, hi));
}

// Add or Mul of two tensors of one shape; with one constant operand: folded (fold_constant).
void Importer::binary(bool mul) {
  allow_attributes({});
  if (is_const(1) || is_const(0)) return fold_constant(mul);
  const Value& a = value(0);
  const Value& b = value(1);
  expect_quantized(a, false, 0);
  expect_quantized(b, false, 1);
  if (a.form != b.form || !(a.shape == b.shape) || a.time_major != b.time_major || a.form == Form::flat ||
      a.form == Form::lstm_y || a.form == Form::lstm_yh || a.form == Form::lstm_hn)
    fail(fmt::format(
        "operands {} and {} differ in shape or layout; the machine adds and multiplies tensors of one "
        "shape (no broadcasting)",
        a.shape.str(), b.shape.str()));
  Layer l = new_layer(mul ? LayerType::mul : LayerType::add, a);
  l.inputs.push_back(b.entry);
  l.out = a.shape;
  Value out = a;
  out.entry = add_layer(std::move(l));
  set_output(0, out);
}

// Concat of tensors along channels: axis 1 of a map [N, C, H, W] or a vector [N, C], the last axis
// of a sequence; a concat layer (its inputs' parts are joined where they are read: compiler/quantize.cpp).
void Importer::concat() {
  allow_attributes({"axis"});
  if (has_input(0) && values_.count(input_name(0))) {
    const Form f = values_.at(input_name(0)).form;
    if (f == Form::lstm_yh || f == Form::lstm_hn) return stack_h();
  }
  const Value& a = value(0);
  for (int i = 0; i < node_->input_size(); ++i) {
    if (is_const(i))
      fail(fmt::format(
          "input {} ({}) is a constant: the machine joins tensors that flow from the model's input", i,
          input_name(i)));
    expect_quantized(value(i), false, i);
  }
  if (a.form != Form::map && a.form != Form::line && a.form != Form::vector && a.form != Form::seq)
    fail(
        "its input is a flattened map or an LSTM output with its direction axis; concatenate before the "
        "Flatten "
        "or after the Squeeze");
  const int64_t rank = a.form == Form::map ? 4 : a.form == Form::vector ? 2 : 3;  // (a line: 3, channels 1)
  int64_t axis = attr_int("axis", 1);
  if (axis < 0) axis += rank;
  const int64_t channels = a.form == Form::seq ? 2 : 1;
  if (axis != channels)
    fail(fmt::format("axis {} of a {} input {}: the machine joins tensors along channels only (axis {})",
                     attr_int("axis", 1),
                     rank == 4                ? "[N, C, H, W]"
                     : rank == 2              ? "[N, C]"
                     : a.form == Form::line ? "[N, C, L]"
                                              : "sequence",
                     dims_of(a), channels));
  if (node_->input_size() == 1) return set_output(0, a);
  Layer l = new_layer(LayerType::concat, a);
  l.out = a.shape;
  for (int i = 1; i < node_->input_size(); ++i) {
    const Value& b = value(i);
    if (b.form != a.form || b.time_major != a.time_major || b.shape.h != a.shape.h || b.shape.w != a.shape.w)
      fail(fmt::format("inputs {} and {} differ in more than the channels ({} and {})", input_name(0),
                       input_name(i), dims_of(a), dims_of(b)));
    l.inputs.push_back(b.entry);
    l.out.c += b.shape.c;
  }
  Value out = a;
  out.entry = add_layer(std::move(l));
  out.shape = m_.layers.back().out;
  set_output(0, out);
}

// x + c or x x c with a constant c per channel (or a scalar), folded into the dense or conv layer
// that produced x: the bias (add) or the weights and bias (mul) of each output channel.
void Importer::fold_constant(bool mul) {
  const int vi = is_const(0) ? 1 : 0;
  if (vi == 1) {  // constant first: read it as input 1 below
    fail("the constant operand comes first; export it as x + c (the tensor first)");
  }
  Layer* l = foldable({LayerType::dense, LayerType::conv2d});
  if (!l)
    fail(fmt::format(
        "{} by a constant must follow a Conv, Gemm or MatMul that only it reads (the machine folds it into "
        "that layer's {})",
        mul ? "multiplication" : "addition", mul ? "weights and bias" : "bias"));
  const Const& c = constant(1, "B");
  const uint64_t n = l->units;
  const Value& x = value(0);
  // Per channel: ONNX's channel axis is 1 for maps ([C, 1, 1] or [1, C, 1, 1]), the last otherwise.
  const bool ok = c.v.size() == 1 ||
                  (c.v.size() == n &&
                   (x.form == Form::map    ? (c.dims.size() >= 3 && c.dims[c.dims.size() - 3] == int64_t(n))
                    : x.form == Form::line ? (c.dims.size() >= 2 && c.dims[c.dims.size() - 2] == int64_t(n))
                                        : c.dims.back() == int64_t(n)));
  if (!ok)
    fail(fmt::format("the constant has dimensions {}; expected one value or one per channel ({})",
                     dims_text(c.dims), n));
  const auto at = [&](uint64_t j) { return c.v[c.v.size() == 1 ? 0 : j]; };
  if (!mul) {
    if (!l->use_bias) l->bias.assign(n, 0.0f), l->use_bias = true;
    for (uint64_t j = 0; j < n; ++j) l->bias[j] = float(l->bias[j] + at(j));
  } else {
    for (size_t i = 0; i < l->weights.size(); ++i) l->weights[i] = float(l->weights[i] * at(i % n));
    for (uint64_t j = 0; j < l->bias.size(); ++j) l->bias[j] = float(l->bias[j] * at(j));
  }
  set_output(0, x);
}

// y = (x - mean) gamma / sqrt(var + eps) + beta, folded into the producing Conv or Gemm.
void Importer::batch_norm() {
  allow_attributes({"epsilon", "momentum", "training_mode", "spatial"});
  if (attr_flag("training_mode", false))
    fail("training_mode = 1: export the model in inference mode (model.eval())");
  if (output_used(1) || output_used(2)) fail("the running mean and variance outputs are training outputs");
  Layer* l = foldable({LayerType::dense, LayerType::conv2d});
  if (!l)
    fail(
        "BatchNormalization must follow a Conv or Gemm that only it reads (the machine folds it into that "
        "layer)");
  const uint64_t n = l->units;
  const Const &gamma = constant(1, "scale"), &beta = constant(2, "B"), &mean = constant(3, "input_mean"),
              &var = constant(4, "input_var");
  for (const Const* p : {&gamma, &beta, &mean, &var})
    if (p->v.size() != n)
      fail(fmt::format("a parameter has {} values; expected one per channel ({})", p->v.size(), n));
  const double eps = attr_float("epsilon", 1e-5f);
  if (!l->use_bias) l->bias.assign(n, 0.0f), l->use_bias = true;
  for (uint64_t j = 0; j < n; ++j) {
    if (!(var.v[j] + eps > 0))
      fail(fmt::format("variance {} of channel {} plus epsilon is not positive", var.v[j], j));
    const double f = gamma.v[j] / std::sqrt(var.v[j] + eps);
    l->bias[j] = float((l->bias[j] - mean.v[j]) * f + beta.v[j]);
    for (size_t i = j; i < l->weights.size(); i += n) l->weights[i] = float(l->weights[i] * f);
  }
  set_output(0, value(0));
}

// ---- shapes: Flatten, Reshape, Transpose, Squeeze, Gather ---------------------------------------------

void Importer::flatten(int64_t axis) {
  const Value& x = value(0);
  if (axis != 1)
    fail(fmt::format("axis {}: the machine flattens every dimension but the batch (axis 1)", axis));
  set_output(0, flatten_value(x));
}

Value Importer::flatten_value(const Value& x) {
  if (x.form == Form::vector || x.form == Form::flat) return x;
  if ((x.form != Form::map && x.form != Form::line && x.form != Form::seq) || x.time_major)
    fail("only a map [N, C, H, W] or [N, C, L] or a batch-first sequence [N, T, F] can be flattened");
  Layer l = new_layer(LayerType::flatten, x);
  l.out = vector_shape(x.shape.elements());
  Value out = x;
  out.form = Form::flat;
  out.chw = (x.form == Form::map || x.form == Form::line) && x.shape.pixels() > 1 && x.shape.c > 1;
  out.entry = add_layer(std::move(l));
  return out;
}

// A Reshape that is a flatten ([N, -1], [0, -1], [N, F]) or changes nothing.
void Importer::reshape() {
  allow_attributes({"allowzero"});
  const bool allowzero = attr_flag("allowzero", false);  // (then a 0 in the shape is a 0, not a copy)
  const Value& x = value(0);
  const std::vector<int64_t> s = int_values(constant(1, "shape"), "shape");
  const int64_t n = int64_t(m_.batch),
                total = int64_t(x.form == Form::flat ? x.shape.elements() : x.shape.elements());
  // The batch: 0 (copy), -1, the batch that runs, or the graph input's declared batch (an export
  // at batch 1 folds x.view(x.size(0), -1) to [1, -1]).
  const bool batch_ok =
      !s.empty() && ((s[0] == 0 && !allowzero) || s[0] == -1 || s[0] == n || (export_batch_ > 0 && s[0] == export_batch_));
  if (s.size() == 2 && batch_ok && (s[1] == -1 || s[1] == total) && !(s[0] == -1 && s[1] == -1))
    return flatten(1);
  fail(fmt::format(
      "shape {}{}: only a Reshape that flattens every dimension but the batch ([N, -1], [0, -1] with allowzero = 0, "
      "or [N, {}]) is supported; the input is {}",
      dims_text(s), allowzero ? " with allowzero = 1" : "", total, dims_of(x)));
}

// Transpose: the batch and time axes of a sequence (a layout change, no data moves in the Model).
void Importer::transpose() {
  allow_attributes({"perm"});
  const Value& x = value(0);
  const auto perm = attr_ints("perm");
  if (x.form == Form::seq && perm == std::vector<int64_t>{1, 0, 2}) {
    Value out = x;
    out.time_major = !x.time_major;
    return set_output(0, out);
  }
  // The graph input [N, T, F] as [N, F, T]: a batch-first sequence read by a Conv1d (channels F,
  // length T). The Model's input becomes the line [1, T, F]: the same bytes (step t is pixel t).
  if (perm == std::vector<int64_t>{0, 2, 1} && x.form == Form::seq && !x.time_major) {
    if (!is_model_input(x.entry) || uses_[input_name(0)] != 1)
      fail(
          "perm [0, 2, 1] of a sequence is supported only on the graph input, read by nothing else (a sequence "
          "the machine computed is not a map a convolution can read)");
    Value out = x;
    out.form = Form::line;
    out.shape = map_shape(1, x.shape.h, x.shape.c);
    m_.inputs[size_t(model_input_index(x.entry))].shape = out.shape;
    return set_output(0, out);
  }
  fail(fmt::format(
      "perm {}: the machine's only transpositions are swapping the batch and time axes of a sequence ([1, 0, 2]) "
      "and the graph input's time and feature axes ([0, 2, 1], into a 1-D convolution)",
      dims_text(perm)));
}

// Squeeze (Unsqueeze refused) of an LSTM output's direction axis: Y [T, 1, N, H] on axis 1,
// Y_h [1, N, H] on axis 0.
void Importer::squeeze(bool sq) {
  allow_attributes({"axes"});
  const Value& x = value(0);
  if (!sq) fail("Unsqueeze is not supported");
  std::vector<int64_t> axes = attr_ints("axes");
  if (has_input(1)) {
    axes = int_values(constant(1, "axes"), "axes");
  }
  Value out = x;
  if (x.form == Form::lstm_y && axes == std::vector<int64_t>{1}) {
    out.form = Form::seq;
    out.time_major = true;
  } else if (x.form == Form::lstm_yh &&
             (axes == std::vector<int64_t>{0} || axes == std::vector<int64_t>{-3})) {
    out.form = Form::vector;
  } else {
    fail(fmt::format("axes {}: only the direction axis of an LSTM's outputs can be squeezed",
                     dims_text(axes)));
  }
  set_output(0, out);
}

// Gather on axis 0 of an LSTM's Y_h [1, N, H] (h_n[-1] or h_n[0] in PyTorch): the last h; of a
// stacked LSTM's h_n [L, N, H], a layer's; on the time axis of an LSTM's output sequence, its
// last step (PyTorch's y[:, -1]): the layer then returns its last h instead of its sequence.
void Importer::gather() {
  allow_attributes({"axis"});
  const Value& x = value(0);
  const Const& idx = constant(1, "indices");
  const int64_t axis = attr_int("axis", 0);
  const bool scalar = idx.dims.empty() && idx.v.size() == 1;
  if (x.form == Form::lstm_yh && axis == 0 && scalar && (idx.v[0] == 0 || idx.v[0] == -1)) {
    Value out = x;
    out.form = Form::vector;
    return set_output(0, out);
  }
  if (x.form == Form::lstm_hn && axis == 0 && scalar) {
    const int64_t layers = int64_t(x.stack.size()), i0 = int_values(idx, "indices")[0],
                  k = i0 < 0 ? i0 + layers : i0;
    if (k < 0 || k >= layers) fail(fmt::format("index {} out of range for h_n of {} layers", idx.v[0], layers));
    Value out = x.stack[size_t(k)];
    if (out.no_h)
      fail(fmt::format(
          "h_n[{}] is the last h of LSTM layer {} of {}, whose sequence the next layer reads: the machine's LSTM "
          "layer gives its sequence or its last h, not both; only the last layer's (h_n[-1]) can be read",
          idx.v[0], k, layers));
    out.form = Form::vector;
    return set_output(0, out);
  }
  const int64_t time_axis = x.time_major ? 0 : 1;
  if (x.form == Form::seq && !is_model_input(x.entry) && is_recurrent(layer_of(x).type) &&
      layer_of(x).return_sequences && (axis == time_axis || axis == time_axis - 3) && scalar &&
      (idx.v[0] == -1 || idx.v[0] == double(x.shape.h - 1))) {
    // Only when nothing else reads the sequence: each ONNX value that stands for it (Y, its
    // Squeeze, Transpose) is read once, by the next of these nodes.
    for (const auto& [name, v] : values_)
      if (v.entry == x.entry && (uses_[name] != 1 || v.no_h))
        fail(fmt::format(
            "the last step of LSTM {}'s sequence, which {} reads too: the machine's LSTM layer gives its sequence "
            "or its last h, not both",
            layer_of(x).name, name));
    Layer& l = layer_of(x);
    l.return_sequences = false;
    l.out = vector_shape(l.units);
    Value out = x;
    out.form = Form::vector;
    out.time_major = false;
    out.shape = l.out;
    return set_output(0, out);
  }
  fail(
      "only an LSTM's last h is supported: h_n[-1] (Gather of index -1 on axis 0 of its Y_h, or of a stacked "
      "LSTM's h_n) or the last step of its output sequence (y[:, -1])");
}

// ---- LSTM ----------------------------------------------------------------------------------------

// ONNX: W [1, 4H, in], R [1, 4H, H], B [1, 8H] (Wb then Rb), gates in the order i, o, f, c; the
// Model: per gate (i, f, g, o) weights [in + H][H] (x rows, then h rows), bias [4][H].
void Importer::lstm() {
  allow_attributes({"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                    "input_forget", "layout"});
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  const std::string dir = attr_string("direction", "forward");
  if (dir != "forward") fail(fmt::format("direction {}: only forward LSTMs are supported", dir));
  if (attr("clip")) fail("clip is not supported");
  if (attr_flag("input_forget", false)) fail("input_forget = 1 is not supported");
  if (attr("activation_alpha") || attr("activation_beta"))
    fail("activation_alpha and activation_beta are not supported");
  if (const auto* a = attr("activations")) {
    const std::vector<std::string> want = {"Sigmoid", "Tanh", "Tanh"};
    if (std::vector<std::string>(a->strings().begin(), a->strings().end()) != want)
      fail("activations other than Sigmoid, Tanh, Tanh are not supported");
  }
  const RecurrentWeights rw = recurrent_weights(x, 4, true);
  constexpr uint64_t kOnnxGate[4] = {0, 2, 3, 1};  // the Model's i, f, g, o in ONNX's i, o, f, c
  Layer l = recurrent_layer(LayerType::lstm, x, rw, kOnnxGate, 4);
  const uint64_t h = rw.h;
  if (rw.b)
    for (uint64_t g = 0; g < 4; ++g)
      for (uint64_t j = 0; j < h; ++j)
        l.bias[g * h + j] = float(rw.b->v[kOnnxGate[g] * h + j] + rw.b->v[4 * h + kOnnxGate[g] * h + j]);
  const bool sequences = l.return_sequences;
  recurrent_outputs(std::move(l), x, sequences);
}

// What an LSTM's (4 gates, `with_cell`) and a GRU's (3 gates) inputs must be, checked after their
// attributes: the input a sequence in the layout attribute's order, every step of every sequence,
// zero initial states (an LSTM's h and c), no Y_c (an LSTM's), hidden_size in range, W [1, gates
// x H, in], R [1, gates x H, H] and B (optional) [1, 2 x gates x H].
Importer::RecurrentWeights Importer::recurrent_weights(const Value& x, uint64_t gates, bool with_cell) {
  const int64_t layout = attr_flag("layout", false) ? 1 : 0;
  if (x.form != Form::seq || x.time_major != (layout == 0))
    fail(fmt::format("the input must be a sequence {} (layout {})", layout == 0 ? "[T, N, F]" : "[N, T, F]",
                     layout));
  if (has_input(4)) fail("sequence_lens is not supported: every sequence has all its steps");
  for (int i : {5, 6})
    if ((i == 5 || with_cell) && has_input(i))
      for (double v : constant(i, i == 5 ? "initial_h" : "initial_c").v)
        if (v != 0)
          fail(with_cell ? "a non-zero initial_h or initial_c is not supported"
                         : "a non-zero initial_h is not supported");
  if (with_cell && output_used(2)) fail("the Y_c output is not supported");
  RecurrentWeights rw;
  rw.h = uint64_t(attr_int("hidden_size", 0));
  rw.in = x.shape.c;
  const uint64_t h = rw.h, in = rw.in;
  if (h < 1 || h > kMaxDim) fail(fmt::format("hidden_size {}: expected 1..{}", h, kMaxDim));
  rw.w = &constant(1, "W");
  rw.r = &constant(2, "R");
  if (rw.w->dims != std::vector<int64_t>{1, int64_t(gates * h), int64_t(in)})
    fail(fmt::format("W has dimensions {}; expected [1, {}, {}]", dims_text(rw.w->dims), gates * h, in));
  if (rw.r->dims != std::vector<int64_t>{1, int64_t(gates * h), int64_t(h)})
    fail(fmt::format("R has dimensions {}; expected [1, {}, {}]", dims_text(rw.r->dims), gates * h, h));
  rw.b = has_input(3) ? &constant(3, "B") : nullptr;
  if (rw.b && rw.b->v.size() != 2 * gates * h)
    fail(fmt::format("B has {} values; expected {}", rw.b->v.size(), 2 * gates * h));
  return rw;
}

// The layer of an LSTM or GRU over `x` with its weights in the Model's order: per gate g (ONNX's
// gate onnx_gate[g]) [in + H][H], x rows then h rows; bias [4][H] zero (the caller sets it).
Layer Importer::recurrent_layer(LayerType type, const Value& x, const RecurrentWeights& rw,
                                const uint64_t* onnx_gate, uint64_t gates) {
  const uint64_t h = rw.h, in = rw.in, rows = in + h;
  Layer l = new_layer(type, x);
  l.units = h;
  l.return_sequences = output_used(0);
  l.weights.resize(gates * rows * h);
  l.bias.assign(4 * h, 0.0f);
  for (uint64_t g = 0; g < gates; ++g) {
    const uint64_t og = onnx_gate[g];
    for (uint64_t j = 0; j < h; ++j) {
      for (uint64_t k = 0; k < in; ++k)
        l.weights[(g * rows + k) * h + j] = float(rw.w->v[(og * h + j) * in + k]);
      for (uint64_t k = 0; k < h; ++k)
        l.weights[(g * rows + in + k) * h + j] = float(rw.r->v[(og * h + j) * h + k]);
    }
  }
  return l;
}

// ONNX: W [1, 3H, in], R [1, 3H, H], B [1, 6H] (Wb then Rb), gates in the order z, r, h; the
// Model: per gate (r, z, n) weights [in + H][H] (x rows, then h rows), bias [4][H]: b_r and b_z
// (each Wb + Rb), b_in (Wb_h), b_hn (Rb_h). Only linear_before_reset = 1, PyTorch's GRU: its n
// gate multiplies r into R_h h + Rb_h, which the machine computes as a matmul, then a vec.
void Importer::gru() {
  allow_attributes({"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout",
                    "linear_before_reset"});
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  const std::string dir = attr_string("direction", "forward");
  if (dir != "forward") fail(fmt::format("direction {}: only forward GRUs are supported", dir));
  if (attr("clip")) fail("clip is not supported");
  if (attr("activation_alpha") || attr("activation_beta"))
    fail("activation_alpha and activation_beta are not supported");
  if (const auto* a = attr("activations")) {
    const std::vector<std::string> want = {"Sigmoid", "Tanh"};
    if (std::vector<std::string>(a->strings().begin(), a->strings().end()) != want)
      fail("activations other than Sigmoid, Tanh are not supported");
  }
  if (!attr_flag("linear_before_reset", false))
    fail(
        "linear_before_reset = 0 is not supported: the machine's GRU is PyTorch's (linear_before_reset = 1, r "
        "multiplies R_h h + Rb_h)");
  const RecurrentWeights rw = recurrent_weights(x, 3, false);
  constexpr uint64_t kOnnxGate[3] = {1, 0, 2};  // the Model's r, z, n in ONNX's z, r, h
  Layer l = recurrent_layer(LayerType::gru, x, rw, kOnnxGate, 3);
  const uint64_t h = rw.h;
  if (rw.b)
    for (uint64_t g = 0; g < 3; ++g)
      for (uint64_t j = 0; j < h; ++j) {
        const double wb = rw.b->v[kOnnxGate[g] * h + j], rb = rw.b->v[3 * h + kOnnxGate[g] * h + j];
        if (g < 2) l.bias[g * h + j] = float(wb + rb);
        else l.bias[2 * h + j] = float(wb), l.bias[3 * h + j] = float(rb);
      }
  const bool sequences = l.return_sequences;
  recurrent_outputs(std::move(l), x, sequences);
}

// The Y (sequence) or Y_h (last h) of an LSTM or GRU layer `l` over `x`, as lstm() describes.
void Importer::recurrent_outputs(Layer l, const Value& x, bool sequences) {
  const uint64_t h = l.units;
  l.out = sequences ? sequence_shape(x.shape.h, h) : vector_shape(h);
  Value y;
  y.shape = l.out;
  y.form = sequences ? Form::lstm_y : Form::lstm_yh;
  y.entry = add_layer(std::move(l));
  set_output(sequences ? 0 : 1, y);
  if (sequences && output_used(1)) {  // both read: Y_h is not computed (Value::no_h)
    Value yh = y;
    yh.form = Form::lstm_yh;
    yh.shape = vector_shape(h);
    yh.no_h = true;
    set_output(1, yh);
  }
}

// Concat on axis 0 of LSTM layers' Y_h: PyTorch's h_n of a stacked LSTM (num_layers > 1), only
// to be gathered (h_n[-1]).
void Importer::stack_h() {
  allow_attributes({"axis"});
  const int64_t axis = attr_int("axis", 0);
  if (axis != 0 && axis != -3) fail(fmt::format("axis {}: LSTM layers' Y_h stack on axis 0 only", axis));
  Value out;
  out.form = Form::lstm_hn;
  for (int i = 0; i < node_->input_size(); ++i) {
    const Value& v = value(i);
    if (v.form == Form::lstm_yh) out.stack.push_back(v);
    else if (v.form == Form::lstm_hn) out.stack.insert(out.stack.end(), v.stack.begin(), v.stack.end());
    else fail(fmt::format("input {} ({}) is not an LSTM's Y_h; the others are", i, input_name(i)));
  }
  out.shape = out.stack.back().shape;
  out.entry = out.stack.back().entry;
  set_output(0, out);
}

// ---- the host's share, no-ops ------------------------------------------------------------------------

// Softmax (and LogSoftmax) as the graph's last node: left to the host (it does not change the
// top-1 class); the Model's output is the logits.
void Importer::softmax() {
  allow_attributes({"axis"});
  const Value& x = value(0);
  bool is_output = false;
  for (const auto& o : g_.output()) is_output |= o.name() == node_->output(0);
  if (!is_output || uses_[node_->output(0)] != 1 || x.form != Form::vector)
    fail("a Softmax is supported only as the last node, over the classes of a vector; the host applies it");
  softmax_output_ = node_->output(0);
  set_output(0, x);
}

void Importer::pass_through() {  // Identity, Dropout (inference)
  allow_attributes({"seed", "ratio", "training_mode"});
  if (node_->op_type() == "Dropout" && output_used(1)) fail("the mask output is a training output");
  set_output(0, value(0));
}

// ---- quantized ONNX: the scales it carries are kept --------------------------------------------------

// The scale of an activation given by inputs (scale, zero point): one positive number, zero
// point 0 (int8) or 128 (uint8: the same symmetric grid shifted).
double Importer::activation_scale(int si, int zi, const std::string& what) {
  const Const& s = constant(si, what + "_scale");
  if (s.v.size() != 1 || !(s.v[0] > 0))
    fail(fmt::format("{}_scale must be one positive number (per-tensor)", what));
  if (has_input(zi)) {
    const Const& z = constant(zi, what + "_zero_point");
    const bool ok = z.v.size() == 1 && ((z.type == onnx::TensorProto::INT8 && z.v[0] == 0) ||
                                        (z.type == onnx::TensorProto::UINT8 && z.v[0] == 128));
    if (!ok)
      fail(fmt::format(
          "{}_zero_point must be 0 (int8) or 128 (uint8): the machine's activations are symmetric", what));
  }
  return s.v[0];
}

// QuantizeLinear of a tensor: the scale of the tensor it quantizes (its producing layer's, or
// the model input's). Two different scales for one tensor are refused.
void Importer::quantize_linear() {
  allow_attributes({"axis"});
  const Value& x = value(0);
  expect_quantized(x, false, 0);
  const double s = activation_scale(1, 2, "y");
  std::optional<double>& given =
      is_model_input(x.entry) ? m_.inputs[size_t(model_input_index(x.entry))].scale : layer_of(x).scale;
  if (given && std::abs(*given - s) > 1e-9 * s)
    fail(fmt::format("the tensor already has scale {:g}; this QuantizeLinear gives {:g}", *given, s));
  given = s;
  Value out = x;
  out.quantized = true;
  set_output(0, out);
}

// DequantizeLinear of a constant (quantized weights): a float constant (per tensor or per
// axis); of a quantized tensor: the float tensor again.
void Importer::dequantize_linear() {
  allow_attributes({"axis"});
  if (is_const(0)) {
    const Const& q = constant(0, "x");
    const Const& s = constant(1, "x_scale");
    const Const* z = has_input(2) ? &constant(2, "x_zero_point") : nullptr;
    int64_t axis = attr_int("axis", 1);
    const int64_t rank = int64_t(q.dims.size());
    if (axis < 0) axis += rank;
    uint64_t inner = 1, len = 1;
    if (s.v.size() > 1) {
      if (axis < 0 || axis >= rank || uint64_t(q.dims[size_t(axis)]) != s.v.size())
        fail(fmt::format("x_scale has {} values for axis {} of {}", s.v.size(), axis, dims_text(q.dims)));
      len = s.v.size();
      for (int64_t i = axis + 1; i < rank; ++i) inner *= uint64_t(q.dims[size_t(i)]);
    }
    if (z && z->v.size() != s.v.size()) fail("x_zero_point and x_scale differ in length");
    Const out;
    out.dims = q.dims;
    out.v.resize(q.v.size());
    for (size_t i = 0; i < q.v.size(); ++i) {
      const size_t a = s.v.size() > 1 ? i / inner % len : 0;
      out.v[i] = (q.v[i] - (z ? z->v[a] : 0)) * s.v[a];
    }
    add_const(node_->output(0), std::move(out));
    return;
  }
  const Value& x = value(0);
  expect_quantized(x, true, 0);
  const double s = activation_scale(1, 2, "x");
  const std::optional<double>& given =
      is_model_input(x.entry) ? m_.inputs[size_t(model_input_index(x.entry))].scale : layer_of(x).scale;
  if (!given || std::abs(*given - s) > 1e-9 * s)
    fail(fmt::format("x_scale {:g} differs from the scale the tensor was quantized with", s));
  Value out = x;
  out.quantized = false;
  set_output(0, out);
}

// a, a_scale, a_zp, b (int8 constant), b_scale, b_zp, y_scale, y_zp: a dense layer on the
// dequantized weights with output scale y_scale.
void Importer::qlinear_matmul() {
  allow_attributes({});
  const Value& a = value(0);
  expect_quantized(a, true, 0);
  activation_scale(1, 2, "a");
  const Const& b = constant(3, "b");
  if (b.dims.size() != 2) fail(fmt::format("b has dimensions {}; expected 2", dims_text(b.dims)));
  const uint64_t k = uint64_t(b.dims[0]), n = uint64_t(b.dims[1]);
  const Const& bs = constant(4, "b_scale");
  if (bs.v.size() != 1 && bs.v.size() != n)
    fail(fmt::format("b_scale has {} values; expected 1 or {}", bs.v.size(), n));
  if (has_input(5))
    for (double z : constant(5, "b_zero_point").v)
      if (z != 0) fail("b_zero_point is not 0: the machine's weights are symmetric int8");
  const double y = activation_scale(6, 7, "y");
  std::vector<float> w(k * n);
  for (uint64_t i = 0; i < k * n; ++i) w[i] = float(b.v[i] * bs.v[bs.v.size() == 1 ? 0 : i % n]);
  dense(a, w, k, n, {}, y);
}

// The ONNX dimensions a Model tensor stands for (see Form).
std::vector<int64_t> Importer::onnx_dims(const Value& v, std::optional<int64_t> batch) const {
  const auto n = batch ? *batch : int64_t(m_.batch), h = int64_t(v.shape.h), w = int64_t(v.shape.w), c = int64_t(v.shape.c);
  switch (v.form) {
    case Form::vector: return {n, c};
    case Form::map: return {n, c, h, w};
    case Form::line: return {n, c, w};
    case Form::flat: return {n, int64_t(v.shape.elements())};
    case Form::seq: return v.time_major ? std::vector<int64_t>{h, n, c} : std::vector<int64_t>{n, h, c};
    case Form::lstm_y: return {h, 1, n, c};
    case Form::lstm_yh: return {1, n, c};
    case Form::lstm_hn: return {int64_t(v.stack.size()), n, c};
  }
  return {};
}

// onnx_dims as messages give it: the batch as the file names it where no batch was given
// (batch_text_), e.g. [N, 3, 13], not the [1, 3, 13] of the batch the import defaults to.
std::string Importer::dims_of(const Value& v) const {
  std::string s = "[";
  const std::vector<int64_t> d = onnx_dims(v, -1);  // -1: the batch's axis (the others are >= 1)
  for (size_t i = 0; i < d.size(); ++i)
    s += fmt::format("{}{}", i ? ", " : "", d[i] == -1 ? batch_text_ : std::to_string(d[i]));
  return s + "]";
}

// Shape computations exporters emit (PyTorch: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
// or ConstantOfShape for an LSTM's zero initial state), evaluated here: the batch is known. True
// when the node was folded into a constant.
bool Importer::fold() {
  const std::string& op = node_->op_type();
  static const std::set<std::string> kFoldable = {"Shape",  "Gather",          "Unsqueeze", "Squeeze",
                                                  "Concat", "ConstantOfShape", "Cast",      "Expand"};
  if (!kFoldable.count(op)) return false;
  if (op == "Shape") {
    allow_attributes({"start", "end"});
    const std::vector<int64_t> d =
        values_.count(input_name(0)) ? onnx_dims(value(0)) : constant(0, "data").dims;
    int64_t r = int64_t(d.size()), b = attr_int("start", 0), e = attr_int("end", r);
    b = std::clamp(b < 0 ? b + r : b, int64_t{0}, r), e = std::clamp(e < 0 ? e + r : e, int64_t{0}, r);
    Const c;
    c.type = onnx::TensorProto::INT64;
    for (int64_t i = b; i < e; ++i) c.v.push_back(double(d[size_t(i)]));
    c.dims = {int64_t(c.v.size())};
    add_const(node_->output(0), std::move(c));
    return true;
  }
  for (int i = 0; i < node_->input_size(); ++i)
    if (has_input(i) && !is_const(i)) return false;  // a tensor operand: the operator's own handler
  Const out;
  if (op == "Gather") {
    allow_attributes({"axis"});
    const Const &d = constant(0, "data"), &idx = constant(1, "indices");
    if (d.dims.size() != 1 || attr_int("axis", 0) != 0)
      fail("gathering from a constant of rank other than 1 is not supported");
    out.type = d.type;
    out.dims = idx.dims;
    for (const int64_t x : int_values(idx, "indices")) {
      const int64_t i = x < 0 ? x + d.dims[0] : x;
      if (i < 0 || i >= d.dims[0]) fail(fmt::format("index {} out of range for {} values", x, d.dims[0]));
      out.v.push_back(d.v[size_t(i)]);
    }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    allow_attributes({"axes"});
    out = constant(0, "data");
    std::vector<int64_t> axes = attr_ints("axes");
    if (has_input(1)) axes = int_values(constant(1, "axes"), "axes");
    if (op == "Unsqueeze") {
      const int64_t rank = int64_t(out.dims.size() + axes.size());
      std::sort(axes.begin(), axes.end(),
                [&](int64_t a, int64_t b) { return (a < 0 ? a + rank : a) < (b < 0 ? b + rank : b); });
      for (int64_t a : axes) {
        a = a < 0 ? a + rank : a;
        if (a < 0 || a > int64_t(out.dims.size())) fail(fmt::format("axis {} out of range", a));
        out.dims.insert(out.dims.begin() + a, 1);
      }
    } else {
      std::vector<int64_t> d;
      const int64_t rank = int64_t(out.dims.size());
      for (int64_t i = 0; i < rank; ++i) {
        const bool named =
            std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return (a < 0 ? a + rank : a) == i; });
        if (!(named || (axes.empty() && out.dims[size_t(i)] == 1))) d.push_back(out.dims[size_t(i)]);
      }
      out.dims = d;
    }
  } else if (op == "Concat") {
    allow_attributes({"axis"});
    out.type = onnx::TensorProto::INT64;
    for (int i = 0; i < node_->input_size(); ++i) {
      const Const& c = constant(i, "inputs");
      if (c.dims.size() != 1) fail("concatenating constants of rank other than 1 is not supported");
      out.type = c.type;
      out.v.insert(out.v.end(), c.v.begin(), c.v.end());
    }
    out.dims = {int64_t(out.v.size())};
  } else if (op == "ConstantOfShape") {
    allow_attributes({"value"});
    const Const& shape = constant(0, "input");
    double fill = 0;
    if (const auto* a = attr("value")) {
      const Const v = read_tensor(a->t(), "value");
      if (v.v.size() != 1) fail("value must hold one element");
      fill = v.v[0];
      out.type = v.type;
    }
    uint64_t count = 1;
    for (int64_t d : int_values(shape, "input")) {
      if (d < 0) fail(fmt::format("dimension {} is negative", d));
      out.dims.push_back(d);
      count = sat_mul(count, uint64_t(d));
    }
    if (count > options_.max_values) fail(fmt::format("{} values; at most {}", count, options_.max_values));
    out.v.assign(count, fill);
  } else if (op == "Expand") {
    // A constant broadcast to a shape (NumPy's rules): PyTorch's LSTM export expands a zero
    // [1, 1, H] to the initial state [1, N, H] of the batch that runs.
    allow_attributes({});
    const Const& d = constant(0, "input");
    const std::vector<int64_t> shape = int_values(constant(1, "shape"), "shape");
    const size_t r = std::max(d.dims.size(), shape.size());
    std::vector<int64_t> a(r, 1), b(r, 1);
    std::copy(d.dims.begin(), d.dims.end(), a.end() - std::ptrdiff_t(d.dims.size()));
    for (size_t i = 0; i < shape.size(); ++i) b[r - shape.size() + i] = shape[i];
    uint64_t count = 1;
    for (size_t i = 0; i < r; ++i) {
      if (b[i] < 0 || !(a[i] == b[i] || a[i] == 1 || b[i] == 1))
        fail(fmt::format("the input {} does not broadcast to the shape {}", dims_text(d.dims),
                         dims_text(shape)));
      out.dims.push_back(a[i] == 1 ? b[i] : a[i]);
      count = sat_mul(count, uint64_t(out.dims.back()));
    }
    if (count > options_.max_values) fail(fmt::format("{} values; at most {}", count, options_.max_values));
    out.type = d.type;
    out.v.resize(count);
    for (uint64_t i = 0; i < count; ++i) {  // output index -> input index (axes of size 1 repeat)
      uint64_t rest = i, from = 0, stride = 1;
      for (size_t k = r; k-- > 0;) {
        const uint64_t at = rest % uint64_t(out.dims[k]);
        rest /= uint64_t(out.dims[k]);
        if (a[k] != 1) from += at * stride;
        stride *= uint64_t(a[k]);
      }
      out.v[i] = d.v[from];
    }
  } else {  // Cast: values are held as double
    allow_attributes({"to", "saturate"});
    out = constant(0, "input");
    out.type = int(attr_int("to", out.type));
  }
  add_const(node_->output(0), std::move(out));
  return true;
}

void Importer::dispatch() {
  const std::string& op = node_->op_type();
  if (!node_->domain().empty() && node_->domain() != "ai.onnx")
    fail(fmt::format("domain {} is not supported (only the standard ai.onnx operators)", node_->domain()));
  if (node_->output_size() < 1) fail("the node has no output");
  static const std::map<std::string, std::function<void(Importer&)>> kOps = {
      {"Gemm", [](Importer& i) { i.gemm(); }},
      {"MatMul", [](Importer& i) { i.matmul(); }},
      {"Conv", [](Importer& i) { i.conv(false); }},
      {"QLinearConv", [](Importer& i) { i.conv(true); }},
      {"QLinearMatMul", [](Importer& i) { i.qlinear_matmul(); }},
      {"MaxPool", [](Importer& i) { i.pool(true); }},
      {"AveragePool", [](Importer& i) { i.pool(false); }},
      {"GlobalAveragePool", [](Importer& i) { i.global_avg_pool(); }},
      {"ReduceMean", [](Importer& i) { i.reduce_mean(); }},
      {"Pad", [](Importer& i) { i.pad(); }},
      {"Relu",
       [](Importer& i) {
         i.allow_attributes({});
         i.activation(Activation::relu);
       }},
      {"Sigmoid",
       [](Importer& i) {
         i.allow_attributes({});
         i.activation(Activation::sigmoid);
       }},
      {"Tanh",
       [](Importer& i) {
         i.allow_attributes({});
         i.activation(Activation::tanh);
       }},
      {"Clip", [](Importer& i) { i.clip(); }},
      {"Add", [](Importer& i) { i.binary(false); }},
      {"Concat", [](Importer& i) { i.concat(); }},
      {"Mul", [](Importer& i) { i.binary(true); }},
      {"BatchNormalization", [](Importer& i) { i.batch_norm(); }},
      {"Flatten",
       [](Importer& i) {
         i.allow_attributes({"axis"});
         i.flatten(i.attr_int("axis", 1));
       }},
      {"Reshape", [](Importer& i) { i.reshape(); }},
      {"Transpose", [](Importer& i) { i.transpose(); }},
      {"Squeeze", [](Importer& i) { i.squeeze(true); }},
      {"Unsqueeze", [](Importer& i) { i.squeeze(false); }},
      {"Gather", [](Importer& i) { i.gather(); }},
      {"LSTM", [](Importer& i) { i.lstm(); }},
      {"GRU", [](Importer& i) { i.gru(); }},
      {"Softmax", [](Importer& i) { i.softmax(); }},
      {"LogSoftmax", [](Importer& i) { i.softmax(); }},
      {"Identity", [](Importer& i) { i.pass_through(); }},
      {"Dropout", [](Importer& i) { i.pass_through(); }},
      {"QuantizeLinear", [](Importer& i) { i.quantize_linear(); }},
      {"DequantizeLinear", [](Importer& i) { i.dequantize_linear(); }},
  };
  if (op == "Constant") {
    allow_attributes({"value"});
    const auto* a = attr("value");
    if (!a || a->type() != onnx::AttributeProto::TENSOR) fail("only a tensor value is supported");
    add_const(node_->output(0), read_tensor(a->t(), "value"));
    return;
  }
  if (fold()) return;
  auto it = kOps.find(op);
  if (it == kOps.end()) {
    std::set<std::string> known = {"Constant"};  // sorted, as the user looks one up
    for (const auto& [name, handler] : kOps) known.insert(name);
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    fail(fmt::format(
        "the operator is not supported; the importer takes {} (and Cast, ConstantOfShape, Expand, Shape on "
        "constants); docs/onnx.md gives each one's conditions",
        list));
  }
  it->second(*this);
}

Model Importer::run() && {
  m_.source = source_;
  m_.name = std::filesystem::path(source_).stem().string();
  if (m_.name.empty()) m_.name = "onnx";
  for (const auto& t : g_.initializer()) add_const(t.name(), read_tensor(t, "initializer " + t.name()));
  for (const auto& n : g_.node())
    for (const auto& i : n.input())
      if (!i.empty()) ++uses_[i];
  for (const auto& o : g_.output()) ++uses_[o.name()];
  read_inputs();
  node_index_ = -1;
  for (const auto& n : g_.node()) {
    node_ = &n;
    ++node_index_;
    dispatch();
  }
  node_ = nullptr;
  if (g_.output_size() != 1)
    fail(fmt::format("the graph has {} outputs; the machine's models have one", g_.output_size()));
  const std::string& out = g_.output(0).name();
  auto it = values_.find(out);
  if (it == values_.end()) fail(fmt::format("the graph output {} is a constant or not computed", out));
  const Value& v = it->second;
  if (m_.layers.empty() || is_model_input(v.entry))
    fail("the graph computes nothing on the machine (no layer)");
  if (size_t(v.entry) + 1 != m_.layers.size())
    fail(fmt::format(
        "the graph output {} is not the last layer computed ({}); nodes after it would be dropped", out,
        m_.layers.back().name));
  if (v.form == Form::flat)
    fail(fmt::format("the graph output {} is a flattened map; the machine ends with a layer", out));
  if (v.padded()) fail(fmt::format("the graph output {} is a Pad's output; the machine ends with a layer", out));
  if (v.no_h || v.form == Form::lstm_hn)
    fail(fmt::format("the graph output {} is the h of LSTM layers whose sequence is read: not computed", out));
  // The compile's memory, by the rule TOML descriptions follow (compile_memory.h), before the
  // batch's seeded inputs are generated (a timing-only compile generates them only to calibrate:
  // prepare_model).
  CompileValues values = compile_values(m_);
  values.input_file = options_.input_file.has_value();
  // The file's weights are read: whether a timing-only compile calibrates is known, by the rule
  // prepare_model applies (a description's is estimated before its weight files are read).
  if (options_.timing_only) values.may_calibrate = timing_needs_data(m_);
  check_compile_memory(m_, source_, values, options_);
  if (!options_.timing_only)
    for (size_t i = 0; i < m_.inputs.size(); ++i)
      if (ModelInput& in = m_.inputs[i]; in.seeded) in.data = generate_input(in.shape, m_.batch, m_.seed, i);
  return std::move(m_);
}

}  // namespace

Model import_onnx(std::string_view bytes, const std::string& source, const LoadOptions& options) {
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    throw InputError(source + ": not an ONNX model: larger than 2 GB");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw InputError(source + ": not an ONNX model: the protobuf does not parse (truncated or corrupt file)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    throw InputError(source + ": not an ONNX model: no graph or an empty graph");
  for (const auto& o : model.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && (o.version() < 7 || o.version() > 18))
      throw InputError(fmt::format("{}: opset {} is not supported (7 to 18)", source, o.version()));
  return Importer(model, source, options).run();
}

}  // namespace tpusim::compiler
