// Model -> QGraph: the quantization scheme.
//
// Tensors. Every tensor is int8 (but see "Element width"), symmetric (real = scale x integer, no
// zero point), one scale per tensor. A scale given in the description (Layer::scale, ModelInput::scale) is used as
// given; otherwise it is calibrated on the model's own inputs with the float reference
// (run_float): max |x| / 127, or 1/127 when the tensor is all zeros. Inputs are quantized as
// round_half_away(x / scale) saturated to [-128, 127].
//
// dense, conv2d -> one MatmulOp. The accumulator of column j has scale S[j]; each weight row r
// reading an input of scale s_r is quantized as round_half_away(w x s_r / S[j]), so that rows
// from inputs of different scales (an LSTM gate's x_t and h_{t-1}) add up in one accumulator:
//   S[j] = max over rows of |w[r][j]| x s_r / 127   (per channel, Model::per_channel)
//   S    = the same maximum over all j              (per tensor)
// (a column of zeros takes the largest column's S; all-zero weights take max s_r / 127). With one input this is the usual
// s_in x s_w[j], s_w[j] = max |w[.][j]| / 127. Biases: round_half_away(b[j] / S[j]) in int32
// (InputError when one does not fit). Requantization: requant_for(S[j] / target). Without a
// bias and with per-tensor scales the op has one mult/shift and an empty bias (act's per-tensor
// mode); otherwise N of each (act's per-column table).
// - A dense layer on a flatten layer reads the flattened map itself: a MatmulOp whose kernel is
//   the whole map (kernel_h x kernel_w = the map's h x w, K = its channels, output 1 x 1); the
//   weights [h*w*c][units] are already [kh][kw][c][units]. A flatten layer makes no tensor and
//   no op, and must feed dense layers only (InputError otherwise, also when it is the output).
// - A dense layer on a sequence (or a map) is a 1 x 1 kernel over every pixel (time step).
//
// Output stages (the requantization target and the function every op ends with):
//   none, relu   target = scale = given, else calibrated; func identity / relu
//   relu6        MatmulOp: scale = given, else calibrated; relux with clip = min(127,
//                round(6 / scale)). VectorOp (vec has no clip field: its relux clips at 127):
//                target = scale = 6/127, clip 127.
//   sigmoid,     the machine's curves read the requantized accumulator as Q7.8 (unsaturated,
//   tanh         clamped to +-8 where they are flat) and write Q0.7, so target = 1/256 and the
//                result has scale 1/127.
// When a layer's given scale differs from the scale its stage produces (sigmoid/tanh, or relu6
// in a VectorOp), the stage writes "NAME.act" and a VectorOp pass requantizes it into NAME.
//
// Pooling -> PoolOp, the output keeping the input's scale; a 1-D pool (1 x k over a map of height
// 1) -> k VectorOp passes copying the line into the rows of a k x L map "NAME.rows" (a padded line
// between borders: "NAME.rows" is k x (L + 2 pad)), then a PoolOp of k x k windows over it, and
// for an average that does not count its padding each window that reaches it pooled again from
// the line ("NAME.edgeO", pool_into). activation layers -> one VectorOp
// pass: none and relu keep the input's scale (unless given); relu6, sigmoid, tanh as above.
// add -> VectorOp add: operands of different scales are first aligned by a VectorOp pass that
// requantizes the finer one (the smaller scale) into "NAME.rescale" at the coarser scale (so
// nothing saturates); then the sum is requantized to the output stage. mul -> VectorOp mul:
// the product has scale s_a x s_b, requantized to the output stage.
//
// Element width. A tensor that only the activation unit reads (vec operands) costs no matrix-unit
// precision at 16 bits, only one more UB row per element row for each act or vec that writes or
// reads it (docs/timing.md); its rounding error drops from 1/254 of its range to 1/65534. The
// rule: with Model::wide_elements (the default), a tensor is int16 when vecs are its only
// readers and its error compounds through a recurrence -- an LSTM's gate outputs and cell
// tensors (c_t = f c_{t-1} + i g carries every step's rounding on with gain f, close to 1, so T
// steps add T roundings of the cell and of the gates feeding it). Measured on the digits LSTM
// (float emulation, one part quantized at a time): the cell at int8 alone costs 2.4% of the
// output range, the gates 1.1%, h 0.9%, the weights 1.4%. A 16-bit gate is the curve's 16-bit
// output (scale 1/32767, Q0.15), a 16-bit cell has scale max |c_t| / 32767. Precision::int8
// keeps all of these int8.
// Tensors matmuls read are int8 unless a layer's precision widens them (output_width): an lstm
// of 16-bit precision has a 16-bit h (its x then widened to match: lstm()), a layer's
// output_bits key, the model's output (Model::output_bits; automatic: 16 when the output layer
// reads a 16-bit tensor). Matmuls read them in the machine's 16-bit input mode (setcfg
// mm_in_hi, half speed); a 16-bit tensor's calibrated scale has twice the range as headroom
// (calibrated16), and the accumulator bound covers 16-bit inputs (bounded_scales).
//
// lstm -> unrolled, stacked layer by stacked layer, then step by step. Per stacked layer l with
// input sequence X (scale s_x; for l > 0 the previous layer's h), T steps, U units:
// - gates at step t: a MatmulOp per gate in the order i, f, g, o, inputs [X pixel t, H pixel
//   t-1] (K = in + U) with the gate's bias, requantized to 1/256 and then sigmoid (i, f, o) or
//   tanh (g): tensors "NAME.lL.tT.i" (.f, .g, .o), [U], scale s_g = 1/127 (int8) or 1/32767
//   (int16, "Element width"). At t = 0, h_{-1} = 0: the
//   gates read X only (K = in, the first `in` weight rows), and there is no f gate, since
//   c_{-1} = 0. So 4T - 1 gate MatmulOps per stacked layer.
// - cell: c_t at scale s_t = (max over samples of |c_t|, |f c_{t-1}|, |i g| at step t) / 127
//   (32767 for int16) from the float run, per stacked layer and step (the cell state grows over
//   the steps: one scale for all steps would waste the early steps' precision). VectorOps, t > 0:
//     fc = mul(f, c_{t-1}) x s_g s_{t-1}/s_t -> s_t; ig = mul(i, g) x s_g^2/s_t -> s_t;
//     c = add(fc, ig); tc = pass(c) x 256 s_t, tanh -> s_g; h = mul(o, tc) x 127 s_g^2 -> 1/127;
//   at t = 0: c = mul(i, g) -> s_0, tc, h. So 5T - 2 VectorOps per stacked layer. Per-step
//   tensors "NAME.lL.tT.{c,fc,ig,tc}" (small: the back end can reuse their buffers).
// - h, scale 1/127, goes pixel by pixel into the sequence tensor "NAME.lL.h" [T, U], which the
//   next stacked layer and the next step read through views. The top layer with
//   return_sequences writes NAME [T, U] instead; without it, steps 0..T-2 go to "NAME.lL.h"
//   [T-1, U] (none when T = 1) and the last step's h goes straight into NAME [U]: no copy.
//
// gru -> unrolled as the lstm, its n gate's x and h parts as two matmuls joined by vecs (Quantizer::gru).
//
// A flatten layer has no tensor, so a scale given for it is not used.
//
// concat, as parts (concat_inplace off) -> no op and, as long as no reader needs one, no tensor of its own: the joined tensor
// is the list of its parts (the inputs' tensors, a nested concat's parts in place), all at one
// scale S = the concat's (given, else the larger of the scale calibrated on its float output and
// the scale a concat reading it asks). Every layer a concat reads (or reads through pools and
// none/relu activation layers) takes S as its output scale when it has no given one and its
// stage leaves the scale free (none, relu, relu6 in a MatmulOp); any other part (a sigmoid/tanh output, a pool of another
// scale, a model input) is requantized to S by a VectorOp pass into "NAME.inI". Readers:
// - a dense layer (not on a flatten) or a 1 x 1, stride 1, unpadded conv2d reads the parts as
//   the inputs of one MatmulOp (weight rows in channel order: part 0's first), so the branches'
//   outputs are joined where the array reads them, with no copy (zero-copy);
// - a pool or an activation layer (without a given scale) applies to each part ("NAME.pI") and
//   is itself a list of parts, and so is a flatten of a 1 x 1 map (a global pool's output);
// - any other reader (a convolution with a larger kernel, a flatten, add, mul, lstm) and the
//   model's output need the joined tensor: it is built once, before the first such reader, by a
//   MatmulOp over the parts with identity weights and requantization 1 (x 1 / 2^0: exact), the
//   op recorded under the concat layer's name.
// Written in place instead (the mapper's concat_inplace, on by default; QGraph::concat_inplace): a concat is one
// tensor, "NAME", at the same scale S, which its branches write: a dense or conv2d layer that only
// the concat reads and whose stage leaves its scale free (none, relu, relu6; no given scale, 8
// bits) writes its MatmulOp's output to channels [offset, offset + N) of it (View::channel0, the
// tensor added when its first writer is quantized), and a nested concat that only the concat
// reads and that has its scale puts its own inputs there the same way. Every other input (a pool,
// an activation layer, a model input, a tensor other layers read too, a sigmoid/tanh branch, a
// layer of a given scale) is copied in at the concat by a MatmulOp with identity weights over its
// own channels, requantized from its scale to S (the pass above and the copy in one). Readers read
// the joined tensor like any other: no parts, no copy for the model's output or a padded reader.
//
// Every op records its layer (QGraph::op_layer); ops are in execution order; tensor names are
// unique (a clash with an input's name gets a ".N" suffix).
#include "compiler/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/reference.h"
#include "isa/error.h"
#include "sim/parallel.h"
#include "sim/target_clones.h"

namespace tpusim::compiler {

Requant requant_for(double factor) {
  if (!std::isfinite(factor) || factor <= 0)
    throw InputError(fmt::format("requantization factor {} is not a positive number", factor));
  if (std::round(factor) > 65535)
    throw InputError(fmt::format("requantization factor {:g} is too large (at most 65535: a 16-bit multiplier)",
                                 factor));
  int shift = 0;  // the largest shift (most precision) whose multiplier fits 16 bits
  while (shift < 63 && std::round(std::ldexp(factor, shift + 1)) <= 65535) ++shift;
  auto mult = static_cast<uint64_t>(std::round(std::ldexp(factor, shift)));
  if (mult == 0) return {0, 0};  // below 2^-64: every product rounds to 0
  while (mult % 2 == 0 && shift > 0) mult /= 2, --shift;  // the same value, smallest terms
  return {static_cast<uint16_t>(mult), static_cast<uint8_t>(shift)};
}

// (quantize.h) Whether layer L's output can be written straight into a concat's joined tensor: a concat (its
// inputs then go there), or a dense or conv2d layer whose only op is its MatmulOp and whose stage
// leaves the scale free (no given scale, none/relu/relu6, 8 bits). Anything else is copied in.
bool writes_in_place(const Layer& L) {
  if (L.scale || (L.output_bits && *L.output_bits != 8)) return false;
  if (L.type == LayerType::concat) return true;
  return (L.type == LayerType::dense || L.type == LayerType::conv2d) &&
         (L.activation == Activation::none || L.activation == Activation::relu || L.activation == Activation::relu6);
}

namespace {

constexpr double kQ07 = 1.0 / 127;  // sigmoid and tanh outputs, LSTM h
constexpr double kQ015 = 1.0 / double(isa::kCurve16One);  // 16-bit sigmoid and tanh outputs
// sigmoid and tanh inputs: y read as Q7.8 (isa::kCurveFractionBits; docs/isa.md, func)
constexpr double kCurveIn = 1.0 / double(int64_t{1} << isa::kCurveFractionBits);
constexpr double kRelu6 = 6.0 / 127;

double calibrated(double max_abs) { return max_abs > 0 && std::isfinite(max_abs) ? max_abs / 127 : 1.0 / 127; }
// A 16-bit tensor's calibrated scale: twice the calibrated range as headroom (values beyond the
// calibration samples' largest do not saturate), still 2^14 steps for that range.
constexpr double kHeadroom16 = 2.0;
double calibrated16(double max_abs) {
  return max_abs > 0 && std::isfinite(max_abs) ? kHeadroom16 * max_abs / 32767 : 1.0 / 32767;
}
// The largest magnitude of an element of `bits` bits: what the accumulator bound assumes of a
// matmul input (quantize.cpp bounded_scales).
double input_max(int bits) { return bits == 16 ? 32768.0 : 128.0; }

// f(r0, r1) over row ranges [r0, r1) covering [0, rows), on sim::parallel_for's threads. The
// ranges do not depend on the thread count, and every use below writes each row's results alone
// or combines the ranges' results with max, which is exact: the same bytes on any thread count.
constexpr uint64_t kRowsPerRange = 64;
uint64_t row_ranges(uint64_t rows) { return (rows + kRowsPerRange - 1) / kRowsPerRange; }
template <typename F>
void for_row_ranges(uint64_t rows, F f) {
  sim::parallel_for(row_ranges(rows), [&](uint64_t r) {
    f(r * kRowsPerRange, std::min(rows, (r + 1) * kRowsPerRange));
  });
}

// q[j] = clamp(round(w[j] x scale / acc[j]), -qmax, qmax) for j < n, round half away from zero
// as std::round: trunc(x), one further from zero when |x - trunc(x)| (exact) is half or more.
// (std::round is a library call on baseline x86-64; trunc is one instruction from x86-64-v2 on,
// so the clones vectorise.) The same doubles and the same operations as the plain expression.
TPUSIM_CLONES __attribute__((optimize("fp-contract=off"))) void quantize_row(const float* w, double scale,
                                                                            const double* acc, uint64_t n,
                                                                            double qmax, int32_t* q) {
  for (uint64_t j = 0; j < n; ++j) {
    const double x = w[j] * scale / acc[j], t = std::trunc(x);
    const double away = std::fabs(x - t) >= 0.5 ? 1.0 : 0.0;  // (a select, not a branch: weights are random)
    const double r = t + std::copysign(away, x);                // (adding a zero of t's sign keeps t)
    q[j] = static_cast<int32_t>(std::min(std::max(r, -qmax), qmax));
  }
}

// What an op ends with: requantization to `target`, then func; the result has scale `scale`.
struct Stage {
  isa::Func func = isa::Func::identity;
  uint8_t clip = 127;
  double target = 1, scale = 1;
};

Shape vec_of(uint64_t c) { return Shape{1, 1, 1, c}; }
Shape seq_of(uint64_t steps, uint64_t c) { return Shape{2, steps, 1, c}; }

class Quantizer {
 public:
  Quantizer(const Model& m, const FloatRun& run, bool inplace, const std::vector<std::string>& as_parts = {})
      : m_(m), run_(run), inplace_(inplace), as_parts_(as_parts.begin(), as_parts.end()),
        tensor_of_(m.layers.size(), -1) {
    if (run.outputs.size() != m.layers.size() || run.lstm_cell_max.size() != m.layers.size())
      throw std::invalid_argument("quantize: the float run is not of this model");
  }
  QGraph run() &&;

 private:
  const Model& m_;
  const FloatRun& run_;
  const bool inplace_;  // concats written in place (QGraph::concat_inplace)
  const std::set<std::string> as_parts_;  // concats kept as parts all the same (QGraph::concats_as_parts)
  // Whether concat layer i is written in place: concats are, and it is not one kept as parts.
  bool in_place(size_t i) const { return inplace_ && !as_parts_.count(m_.layers[i].name); }
  QGraph g_;
  std::vector<int> tensor_of_;  // each layer's output tensor; a flatten layer's: its input's
  // Concats written in place: the layer's output goes to channels [offset, ...) of the joined
  // tensor of concat layer `root` (planned by plan_concats; `placed` once the layer wrote there).
  struct Dest {
    size_t root = 0;
    uint64_t offset = 0;
  };
  std::vector<std::optional<Dest>> dest_;
  std::vector<bool> placed_;
  std::vector<int> joined_;  // a root concat's joined tensor (-1 until its first writer)
  int joined(size_t root);
  // A concat layer's parts (and those of a pool or activation applied part by part): the layer's
  // tensor is these, joined along channels, until materialize() builds it (tensor_of_ then >= 0).
  std::vector<std::vector<int>> parts_;
  std::vector<double> concat_scale_;  // a concat layer's scale S
  std::vector<double> wanted_;        // the scale a concat reading the layer asks of it (0: none)
  std::set<std::string> names_;
  int weight_ids_ = 0;          // MatmulOp::weight_id of the next seeded layer's weights
  uint64_t placeholders_ = 0;   // placeholder_scales calls so far
  size_t li_ = 0;              // the layer being quantized
  int out_bits_ = 8;           // the width of the layer's output tensor (output_width)
  std::optional<int> final_;   // set by begin_output when a pass must follow: NAME's tensor

  const Layer& layer() const { return m_.layers[li_]; }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(layer_context(m_, layer()) + what); }
  int add_tensor(std::string name, const Shape& shape, double scale, const std::string& owner, int bits = 8);
  void emit(QOp op) {
    g_.ops.push_back(std::move(op));
    g_.op_layer.push_back(layer().name);
  }
  double scale_of(int t) const { return g_.tensors[static_cast<size_t>(t)].scale; }
  const Shape& shape_of(int t) const { return g_.tensors[static_cast<size_t>(t)].shape; }
  bool is_flatten(int entry) const {
    return !is_model_input(entry) && m_.layers[static_cast<size_t>(entry)].type == LayerType::flatten;
  }
  int source(int entry);
  const std::vector<int>* parts(int entry) const {
    if (is_model_input(entry)) return nullptr;
    const auto i = static_cast<size_t>(entry);
    return tensor_of_[i] < 0 && !parts_[i].empty() ? &parts_[i] : nullptr;
  }
  int materialize(size_t layer);
  void plan_concats();
  Requant requant(double factor) const;
  VectorOp vector(isa::VecOp op, int a, int b, View out, double factor, isa::Func func = isa::Func::identity) const;

  double out_scale() const;
  Stage stage(bool vec, double plain) const;
  int bits_of(int t) const { return g_.tensors[static_cast<size_t>(t)].bits; }
  bool last_layer() const { return li_ + 1 == m_.layers.size(); }
  bool readers_take_wide() const;
  int output_width(int natural, bool can16);
  int begin_output(const Shape& shape, const Stage& st);
  void end_output(int t, const Stage& st);

  std::vector<double> accumulator_scales(const float* w, uint64_t positions, const std::vector<double>& rs,
                                         uint64_t n) const;
  bool no_values() const { return layer().seeded_weights && layer().weights.empty(); }
  std::vector<double> placeholder_scales(uint64_t n);
  bool wide_without_values() const;
  MatmulOp matmul(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n, const float* b,
                  const std::vector<double>& acc, const Stage& st, bool wide = false) const;
  std::vector<double> row_energy(int entry, uint64_t positions, uint64_t k) const;
  double int8_weight_error(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                           const std::vector<double>& acc, const std::vector<double>& energy) const;
  bool wants_wide(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                  const std::vector<double>& acc, const std::vector<double>& energy) const;
  bool gate_weights_wide() const;
  double lstm_error(bool wide) const;
  std::vector<double> bounded_scales(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                                     const std::vector<double>& acc, const std::vector<double>& in_max,
                                     bool wide) const;

  void dense_or_conv();
  void pool();
  void pool_into(int in, int out, const std::string& suffix);
  void pool_padded(int in, int out, const std::string& suffix);
  // One vec pass of view `a` into `o` at the same scale (exact): the padded pools' copies and fills.
  void copy_view(View a, View o, isa::VecOp op = isa::VecOp::pass);
  void elementwise(bool mul);
  void activation();
  // What an lstm and a gru share (the rules at the top of the file, "Element width" and "16-bit
  // tensors"): the widths and scales of the gates, h and the output, then per stacked layer its
  // input x at h's width, the scales of [x_t, h_{t-1}]'s rows and the h sequence it writes.
  struct Recurrence {
    int x = -1;                     // the next stacked layer's input sequence
    uint64_t steps = 0, units = 0;  // its steps; the hidden size
    bool wide = false;              // 16-bit gates (and the lstm's cell): wide elements, not int8
    int bits = 8;                   // the gates' tensors' width
    double sg = 0;                  // the gates' scale: Q0.15 (16-bit) or Q0.7
    bool wide_w = false;            // 16-bit gate weights (the layer's precision)
    bool h16 = false;               // 16-bit h
    int out_bits = 8;               // the layer's output's width
    Stage out_stage;
    bool return_sequences = false;  // the layer's output: the top layer's h sequence
    int output = -1;                // the layer's output tensor, once begun
    int h_bits(bool top) const;
  };
  struct RecurrentLayer {
    uint64_t l = 0;                  // its place in the stack (0: the lowest)
    uint64_t offset = 0;             // its gates' first weight in Layer::weights
    uint64_t in_c = 0, rows = 0;     // x's channels; rows of [x_t, h_{t-1}]
    bool top = false;                // the top stacked layer
    int hb = 8;                      // h's width
    double sh = 0;                   // h's scale
    std::vector<double> rs, in_max;  // per row of [x_t, h_{t-1}]: its scale, its largest |value|
    int h = -1;                      // the h sequence later steps (and the next stacked layer) read
  };
  Recurrence recurrence();
  RecurrentLayer recurrent_layer(Recurrence& rc, uint64_t l);
  template <typename F>
  void recurrent(F&& steps);
  std::pair<MatmulOp, std::vector<double>> gate_matmul(const Recurrence& rc, const RecurrentLayer& rl, uint64_t g,
                                                       uint64_t r0, uint64_t n, const float* b, const Stage& st);
  std::pair<MatmulOp, MatmulOp> gate_matmuls(const Recurrence& rc, const RecurrentLayer& rl, uint64_t g,
                                             const float* b, const Stage& st);
  View step_h(Recurrence& rc, const RecurrentLayer& rl, uint64_t t);
  void lstm();
  void gru();
  void concat();
};

int Quantizer::add_tensor(std::string name, const Shape& shape, double scale, const std::string& owner, int bits) {
  const std::string base = name;
  for (int i = 1; names_.count(name); ++i) name = fmt::format("{}.{}", base, i);
  names_.insert(name);
  g_.tensors.push_back(QTensor{name, shape, scale, owner, bits});
  return static_cast<int>(g_.tensors.size()) - 1;
}

int Quantizer::source(int entry) {
  if (is_model_input(entry)) return g_.inputs[static_cast<size_t>(model_input_index(entry))];
  if (is_flatten(entry) && layer().type != LayerType::dense)
    fail(fmt::format("reads flatten layer {}: a flatten layer must feed dense layers only",
                     m_.layers[static_cast<size_t>(entry)].name));
  if (parts(entry)) return materialize(static_cast<size_t>(entry));
  return tensor_of_[static_cast<size_t>(entry)];
}

// The joined tensor of a layer held as parts: an identity MatmulOp over the parts (one scale, so
// requantization 1: every value is copied exactly).
int Quantizer::materialize(size_t layer) {
  const Layer& L = m_.layers[layer];
  const std::vector<int>& ps = parts_[layer];
  MatmulOp op;
  op.k = op.n = L.out.c;
  op.copy = true;
  op.weights.assign(op.k * op.n, 0);
  for (uint64_t j = 0; j < op.n; ++j) op.weights[j * op.n + j] = 1;
  op.mult = {1};
  op.shift = {0};
  for (int t : ps) op.inputs.push_back(View{t});
  const int out = add_tensor(L.name, L.out, scale_of(ps.front()), L.name);
  op.output = View{out};
  g_.ops.push_back(std::move(op));
  g_.op_layer.push_back(L.name);
  return tensor_of_[layer] = out;
}

// Each concat's scale, and the scale it asks of the layers it reads: from the last layer back, so
// that a concat read by another concat (directly, or through pools and relu/none activations,
// which keep their input's scale) takes the outer one's scale unless its own values need more.
void Quantizer::plan_concats() {
  const size_t n = m_.layers.size();
  parts_.assign(n, {});
  concat_scale_.assign(n, 0.0);
  wanted_.assign(n, 0.0);
  dest_.assign(n, std::nullopt);
  placed_.assign(n, false);
  joined_.assign(n, -1);
  // Each layer's readers (an input slot each; the last layer's: the model's output as well).
  std::vector<size_t> readers(n, 0);
  for (const Layer& L : m_.layers)
    for (int e : L.inputs)
      if (!is_model_input(e)) ++readers[static_cast<size_t>(e)];
  if (n) ++readers[n - 1];
  for (size_t i = n; i-- > 0;) {
    const Layer& L = m_.layers[i];
    const bool given = L.scale && *L.scale > 0 && std::isfinite(*L.scale);
    const bool keeps = L.type == LayerType::max_pool || L.type == LayerType::avg_pool ||
                       (L.type == LayerType::activation &&
                        (L.activation == Activation::none || L.activation == Activation::relu));
    if (keeps && !given && wanted_[i] > 0 && !is_model_input(L.inputs[0]) &&
        wanted_[static_cast<size_t>(L.inputs[0])] == 0)
      wanted_[static_cast<size_t>(L.inputs[0])] = wanted_[i];  // its output keeps its input's scale
    if (L.type != LayerType::concat) continue;
    double top = 0;
    for (float x : run_.outputs[i]) top = std::max(top, std::abs(double{x}));
    concat_scale_[i] = given ? *L.scale : std::max(calibrated(top), wanted_[i]);
    for (int e : L.inputs)
      if (!is_model_input(e) && wanted_[static_cast<size_t>(e)] == 0)
        wanted_[static_cast<size_t>(e)] = concat_scale_[i];
    // (A concat kept as parts writes nowhere: one nested in it is a root of its own.)
    if (!in_place(i)) {
      dest_[i].reset();
      continue;
    }
    // Written in place: a nested concat at its outer one's scale goes into the outer's joined
    // tensor (its root's); each input read by this concat alone that can write there does so.
    // The rule must not depend on the calibration data (a timing-only compile calibrates on
    // placeholders and must map as the full compile does). With neither scale given the two are
    // equal by construction (the nested concat's outputs are among its root's, and it takes the
    // root's scale as its wanted one); with a given scale on either, calibration decides whether
    // the calibrated one lands on the given value, so only two equal given scales keep it in place.
    if (dest_[i]) {
      const Layer& root = m_.layers[dest_[i]->root];
      const bool root_given = root.scale && *root.scale > 0 && std::isfinite(*root.scale);
      if ((given || root_given) && !(given && root_given && *L.scale == *root.scale)) dest_[i].reset();
      else if (concat_scale_[i] != concat_scale_[dest_[i]->root]) dest_[i].reset();
    }
    const Dest at = dest_[i] ? *dest_[i] : Dest{i, 0};
    uint64_t off = at.offset;
    for (int e : L.inputs) {
      const uint64_t c = is_model_input(e) ? m_.inputs[static_cast<size_t>(model_input_index(e))].shape.c
                                           : m_.layers[static_cast<size_t>(e)].out.c;
      if (!is_model_input(e) && readers[static_cast<size_t>(e)] == 1 && writes_in_place(m_.layers[static_cast<size_t>(e)]))
        dest_[static_cast<size_t>(e)] = Dest{at.root, off};
      off += c;
    }
  }
}

// The joined tensor of root concat `root`, added when its first writer needs it.
int Quantizer::joined(size_t root) {
  if (joined_[root] < 0) {
    const Layer& R = m_.layers[root];
    joined_[root] = add_tensor(R.name, R.out, concat_scale_[root], R.name);
  }
  return joined_[root];
}

void Quantizer::concat() {
  const Layer& L = layer();
  const double s = concat_scale_[li_];
  if (in_place(li_)) {
    // Every input not written in place already is copied in: an identity MatmulOp from its tensor
    // to its channels of the joined tensor, requantized from its scale to the concat's.
    const Dest at = dest_[li_] ? *dest_[li_] : Dest{li_, 0};
    uint64_t off = at.offset;
    for (int entry : L.inputs) {
      const bool in_place = !is_model_input(entry) && placed_[static_cast<size_t>(entry)];
      const int t = in_place ? -1 : source(entry);
      const uint64_t c = in_place ? m_.layers[static_cast<size_t>(entry)].out.c : shape_of(t).c;
      if (!in_place) {
        MatmulOp op;
        op.k = op.n = c;
        op.copy = true;
        op.weights.assign(c * c, 0);
        for (uint64_t j = 0; j < c; ++j) op.weights[j * c + j] = 1;
        const Requant q = requant(scale_of(t) / concat_scale_[at.root]);
        op.mult = {q.mult};
        op.shift = {q.shift};
        op.inputs.push_back(View{t});
        op.output = View{joined(at.root), 0, 0, off};
        emit(std::move(op));
      }
      off += c;
    }
    if (dest_[li_]) placed_[li_] = true;  // (inside its root's tensor: only the root concat reads it)
    else tensor_of_[li_] = joined(li_);
    return;
  }
  std::vector<int> out;
  for (int entry : L.inputs) {
    std::vector<int> ts = parts(entry) ? *parts(entry) : std::vector<int>{source(entry)};
    for (int t : ts) {
      if (scale_of(t) != s) {
        const int r = add_tensor(fmt::format("{}.in{}", L.name, out.size()), shape_of(t), s, L.name);
        emit(vector(isa::VecOp::pass, t, t, View{r}, scale_of(t) / s));
        t = r;
      }
      out.push_back(t);
    }
  }
  parts_[li_] = std::move(out);
}

Requant Quantizer::requant(double factor) const {
  try {
    return requant_for(factor);
  } catch (const InputError& e) {
    fail(std::string(e.what()) + "; give the layer's or its inputs' scale to avoid it");
  }
}

VectorOp Quantizer::vector(isa::VecOp op, int a, int b, View out, double factor, isa::Func func) const {
  const Requant q = requant(factor);
  VectorOp v;
  v.op = op;
  v.a = View{a};
  v.b = View{op == isa::VecOp::pass ? a : b};
  v.output = out;
  v.mult = q.mult;
  v.shift = q.shift;
  v.func = func;
  return v;
}

// The layer's output scale when its stage leaves it free: given, else calibrated.
double Quantizer::out_scale() const {
  if (layer().scale) return *layer().scale;
  if (wanted_[li_] > 0) return wanted_[li_];
  double top = 0;
  for (float x : run_.outputs[li_]) top = std::max(top, std::abs(double{x}));
  return out_bits_ == 16 ? calibrated16(top) : calibrated(top);
}

// Whether every layer that reads this layer's output takes a 16-bit tensor: dense, conv2d, lstm
// (matmuls: setcfg mm_in_hi), add, mul, activation (vecs); not pools (8-bit), nor a concat's or
// a flatten's reader chains.
bool Quantizer::readers_take_wide() const {
  for (size_t j = li_ + 1; j < m_.layers.size(); ++j) {
    const Layer& r = m_.layers[j];
    if (std::find(r.inputs.begin(), r.inputs.end(), static_cast<int>(li_)) == r.inputs.end()) continue;
    switch (r.type) {
      case LayerType::dense:
      case LayerType::conv2d:
      case LayerType::lstm:
      case LayerType::gru:
      case LayerType::add:
      case LayerType::mul:
      case LayerType::activation: break;
      default: return false;
    }
  }
  return true;
}

// The width of the layer's output tensor (8 or 16), set as out_bits_: the model's output_bits
// for the last layer, else the layer's output_bits key, else `natural` (the layer's own rule:
// 16 for an lstm whose h is 16-bit; for the model's output, 16 when the layer reads a 16-bit
// tensor). `can16`: the layer's last op can write 16 bits (not a pool, not relu6, whose clip is
// an int8 bound). A 16-bit tensor every reader of which must take it: where one cannot, a width
// the model asked for fails, an automatic one is 8. Model::wide_elements false: 8.
int Quantizer::output_width(int natural, bool can16) {
  const bool last = last_layer();
  int want = natural;
  std::string asked;
  if (layer().output_bits) want = *layer().output_bits, asked = "output_bits";
  if (last && m_.output_bits) want = m_.output_bits, asked = "the model's output_bits";
  out_bits_ = 8;
  if (want != 16 || !m_.wide_elements) return out_bits_;
  std::string why;
  if (!can16) why = "its last operation writes 8 bits (a pool, or relu6 whose clip is an 8-bit bound)";
  else if (!last && !readers_take_wide()) why = "a layer that reads it (a pool, concat or flatten) takes 8-bit tensors only";
  if (why.empty()) return out_bits_ = 16;
  if (!asked.empty()) fail(fmt::format("{} = 16: {}", asked, why));
  return out_bits_;
}

// The stage of layer().activation in a MatmulOp (vec false) or a VectorOp; `plain` is the scale
// for none and relu.
Stage Quantizer::stage(bool vec, double plain) const {
  switch (layer().activation) {
    case Activation::none: return {isa::Func::identity, 127, plain, plain};
    case Activation::relu: return {isa::Func::relu, 127, plain, plain};
    case Activation::relu6:
      if (vec) return {isa::Func::relux, 127, kRelu6, kRelu6};
      return {isa::Func::relux, static_cast<uint8_t>(std::min(127.0, std::round(6.0 / plain))), plain, plain};
    case Activation::sigmoid: return {isa::Func::sigmoid, 127, kCurveIn, out_bits_ == 16 ? kQ015 : kQ07};
    case Activation::tanh: return {isa::Func::tanh, 127, kCurveIn, out_bits_ == 16 ? kQ015 : kQ07};
  }
  return {};
}

// The tensor the layer's last op writes: NAME, or NAME.act when a pass to the given scale must
// follow (end_output).
int Quantizer::begin_output(const Shape& shape, const Stage& st) {
  const auto& given = layer().scale;
  const bool pass = given && std::abs(*given - st.scale) > 1e-9 * st.scale;
  final_.reset();
  if (!pass) return add_tensor(layer().name, shape, st.scale, layer().name, out_bits_);
  const int t = add_tensor(layer().name + ".act", shape, st.scale, layer().name, out_bits_);
  final_ = add_tensor(layer().name, shape, *given, layer().name, out_bits_);
  return t;
}

void Quantizer::end_output(int t, const Stage& st) {
  tensor_of_[li_] = t;
  if (!final_) return;
  emit(vector(isa::VecOp::pass, t, t, View{*final_}, st.scale / *layer().scale));
  tensor_of_[li_] = *final_;
}

// S[j] of the scheme above, for weights [positions][K][n] whose row k reads scale rs[k].
std::vector<double> Quantizer::accumulator_scales(const float* w, uint64_t positions, const std::vector<double>& rs,
                                                  uint64_t n) const {
  const uint64_t k = rs.size();
  std::vector<std::vector<double>> part(row_ranges(positions * k));  // each range's column maxima
  for_row_ranges(positions * k, [&](uint64_t r0, uint64_t r1) {
    std::vector<double>& m = part[r0 / kRowsPerRange];
    m.assign(n, 0.0);
    for (uint64_t r = r0; r < r1; ++r)
      for (uint64_t j = 0; j < n; ++j) m[j] = std::max(m[j], std::abs(double{w[r * n + j]}) * rs[r % k]);
  });
  std::vector<double> s(n, 0.0);
  for (const std::vector<double>& m : part)
    for (uint64_t j = 0; j < n; ++j) s[j] = std::max(s[j], m[j]);
  const double top = s.empty() ? 0.0 : *std::max_element(s.begin(), s.end());
  const double fallback = top > 0 ? top : *std::max_element(rs.begin(), rs.end());
  for (double& x : s) x = (m_.per_channel && x > 0 ? x : fallback) / 127;
  return s;
}

// The mean square of the float input each weight row (position p, channel i: row p * k + i)
// multiplies, over the calibration run: per element of a flattened map (a dense layer over a whole
// map), else per channel over every pixel. Empty (all rows alike) when the layer reads a concat's
// parts.
std::vector<double> Quantizer::row_energy(int entry, uint64_t positions, uint64_t k) const {
  if (parts(entry)) return {};
  const std::vector<float>& x = is_model_input(entry)
                                    ? m_.inputs[static_cast<size_t>(model_input_index(entry))].data
                                    : run_.outputs[static_cast<size_t>(entry)];
  const bool per_element = layer().type == LayerType::dense && positions > 1;  // the whole map
  const uint64_t rows = per_element ? positions * k : k;
  std::vector<double> e(rows, 0.0);
  if (x.empty() || x.size() % rows) return {};
  for (size_t i = 0; i < x.size(); ++i) e[i % rows] += double{x[i]} * double{x[i]};
  for (double& v : e) v /= double(x.size() / rows);
  if (per_element) return e;
  std::vector<double> all(positions * k);
  for (uint64_t p = 0; p < positions; ++p) std::copy(e.begin(), e.end(), all.begin() + std::ptrdiff_t(p * k));
  return all;
}

// The largest, over weight rows r (position p, channel i), of the int8 rounding error relative to
// the row: sqrt(sum_j d[r][j]^2 / sum_j w[r][j]^2), rows of zeros aside. int8_weight_error is
// an average of these ratios weighted by the rows' input energy, so it is at most this, whatever
// the inputs: when this is within the threshold the choice needs no data. step[j]: column j's int8
// step in weight units (its accumulator scale / the input scale, which all rows share here).
double int8_row_error(const float* w, uint64_t positions, uint64_t k, uint64_t n, const std::vector<double>& steps) {
  std::vector<double> part(row_ranges(positions * k), 0.0);  // each range's worst row
  for_row_ranges(positions * k, [&](uint64_t r0, uint64_t r1) {
    double worst = 0;
    for (uint64_t r = r0; r < r1; ++r) {
      double err = 0, norm = 0;
      for (uint64_t j = 0; j < n; ++j) {
        const double x = w[r * n + j], step = steps[j];
        const double d = step > 0 ? x - std::clamp(std::round(x / step), -127.0, 127.0) * step : x;
        err += d * d;
        norm += x * x;
      }
      if (norm > 0) worst = std::max(worst, std::sqrt(err / norm));
    }
    part[r0 / kRowsPerRange] = worst;
  });
  return part.empty() ? 0.0 : *std::max_element(part.begin(), part.end());
}

// The relative RMS error int8 weights give the layer's output, from the weights' rounding at
// accumulator scales `acc`, each row weighted by the mean square of the input it multiplies
// (`energy`; empty: all alike): sqrt(sum E[x_r^2] d[r][j]^2 / sum E[x_r^2] w[r][j]^2), the output
// error relative to the output when the inputs are independent (0 for weights or inputs all zero).
double Quantizer::int8_weight_error(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                                    const std::vector<double>& acc, const std::vector<double>& energy) const {
  double err = 0, norm = 0;
  const uint64_t k = rs.size();
  for (uint64_t p = 0; p < positions; ++p)
    for (uint64_t i = 0; i < k; ++i) {
      const double e = energy.empty() ? 1.0 : energy[p * k + i];
      for (uint64_t j = 0; j < n; ++j) {
        const double x = w[(p * k + i) * n + j], step = acc[j] / rs[i];
        const double d = x - std::clamp(std::round(x / step), -127.0, 127.0) * step;
        err += e * d * d;
        norm += e * x * x;
      }
    }
  return norm > 0 ? std::sqrt(err / norm) : 0.0;
}

// Whether the layer's weights go 16-bit: its weight_bits key, else the model's precision
// (automatic: int8_weight_error above Model::wide_error, where the weights alone cannot rule it
// out: see int8_row_error).
bool Quantizer::wants_wide(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                           const std::vector<double>& acc, const std::vector<double>& energy) const {
  if (layer().weight_bits) return *layer().weight_bits == 16;
  switch (m_.precision) {
    case Precision::int8: return false;
    case Precision::wide: return true;
    case Precision::automatic: break;
  }
  if (layer().seeded_weights) return false;  // seeded weights: int8 (see wide_without_values)
  if (std::all_of(rs.begin(), rs.end(), [&](double r) { return r == rs[0]; })) {
    std::vector<double> step(n);
    for (uint64_t j = 0; j < n; ++j) step[j] = acc[j] / rs[0];
    if (int8_row_error(w, positions, rs.size(), n, step) <= m_.wide_error) return false;
  }
  return int8_weight_error(w, positions, rs, n, acc, energy) > m_.wide_error;
}

// Whether an lstm layer's precision is 16-bit (its gate weights, and h with wide elements): its
// weight_bits key, else the model's precision; `automatic` measures. The feed-forward estimate
// above (a layer's own output error from its weights' rounding) cannot see the recurrence: every
// step's rounding (weights, h, cell) enters the next step's gates through h_{t-1} and c_{t-1}
// and compounds over the steps. So the layer's output error is measured end to end, on the
// calibration samples, both ways: the model up to this layer runs in the golden reference with
// the layer int8 (e8) and 16-bit (e16), each against the float run (relative RMS, as for the
// feed-forward layers). e16 is what the layer's inputs and the float-to-integer boundary leave;
// e8 - e16 is what the layer's own int8 arithmetic, compounded over its steps, adds. The layer
// goes 16-bit when that part is the larger, e8 > 2 x e16: where int8 at least doubles the
// layer's error, its own precision is what limits the model's. (Trained digits LSTM: e8 1.27%,
// e16 0.44%: 16-bit.) Seeded weights stay int8 without measuring, as for dense layers
// (wide_without_values: a timing-only compile does not generate them).
bool Quantizer::gate_weights_wide() const {
  if (layer().weight_bits) return *layer().weight_bits == 16;
  switch (m_.precision) {
    case Precision::int8: return false;
    case Precision::wide: return true;
    case Precision::automatic: break;
  }
  if (layer().seeded_weights) return false;
  return lstm_error(false) > 2 * lstm_error(true);
}

// The relative RMS error, ||h - h_float|| / ||h_float||, of the lstm layer's output over the
// calibration samples, the layer run int8 or (`wide`) at 16-bit precision, the layers before it
// quantized as they are here.
double Quantizer::lstm_error(bool wide) const {
  Model t;
  t.name = m_.name;
  t.source = m_.source;
  t.seed = m_.seed;
  t.per_channel = m_.per_channel;
  t.precision = m_.precision;
  t.wide_error = m_.wide_error;
  t.wide_elements = m_.wide_elements;
  t.calibration_samples = 0;
  t.layers.assign(m_.layers.begin(), m_.layers.begin() + std::ptrdiff_t(li_ + 1));
  t.layers.back().weight_bits = wide ? 16 : 8;
  t.layers.back().output_bits.reset();
  // The calibration samples (quantize.h: the float run's), at the inputs' scales as quantized here.
  const bool apart = !m_.calibration.empty();
  const uint64_t n = apart ? m_.calibration_batch
                           : m_.calibration_samples == 0 ? m_.batch : std::min(m_.calibration_samples, m_.batch);
  t.batch = n;
  for (size_t i = 0; i < m_.inputs.size(); ++i) {
    ModelInput in = m_.inputs[i];
    const uint64_t e = in.shape.elements();
    const std::vector<float>& from = apart ? m_.calibration[i] : m_.inputs[i].data;
    if (from.size() < n * e) throw std::logic_error("lstm_error: fewer calibration samples than the float run's");
    in.data.assign(from.begin(), from.begin() + std::ptrdiff_t(n * e));
    in.scale = scale_of(g_.inputs[i]);
    t.inputs.push_back(std::move(in));
  }
  FloatRun fr;
  fr.outputs.assign(run_.outputs.begin(), run_.outputs.begin() + std::ptrdiff_t(li_ + 1));
  fr.lstm_cell_max.assign(run_.lstm_cell_max.begin(), run_.lstm_cell_max.begin() + std::ptrdiff_t(li_ + 1));
  const QGraph q = Quantizer(t, fr, inplace_, {as_parts_.begin(), as_parts_.end()}).run();
  GoldenOptions o;
  o.output_only = true;
  const QTensor& out = q.tensors[size_t(q.output)];
  const std::vector<int32_t> got = tensor_values(run_golden(q, o)[size_t(q.output)], out.bits);
  const std::vector<float>& want = run_.outputs[li_];
  if (got.size() != want.size()) throw std::logic_error("lstm_error: the golden and float outputs differ in size");
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = got[i] * out.scale - double{want[i]};
    err += d * d;
    norm += double{want[i]} * double{want[i]};
  }
  return norm > 0 ? std::sqrt(err / norm) : 0.0;
}

// Accumulator scales that keep every column's sum within int32: from the int8 scales `acc`
// (made finer by 32767 / 127 for 16-bit weights, `wide`), coarser per column (or for all, per
// tensor) until sum over rows of |q[r][j]| x in_max[r] < 2^31 for every column j, where
// in_max[r] is the largest magnitude row r's input can have (128 int8, 32768 int16): no input can
// make an accumulator wrap (docs/timing.md).
std::vector<double> Quantizer::bounded_scales(const float* w, uint64_t positions, const std::vector<double>& rs,
                                              uint64_t n, const std::vector<double>& acc,
                                              const std::vector<double>& in_max, bool wide) const {
  constexpr double kLimit = 2147483647.0;
  const uint64_t k = rs.size();
  const double qmax = wide ? 32767.0 : 127.0;
  std::vector<double> s(n);
  for (uint64_t j = 0; j < n; ++j) s[j] = wide ? acc[j] * 127.0 / 32767.0 : acc[j];
  for (int round = 0; round < 64; ++round) {
    std::vector<double> l1(n, 0.0);
    for (uint64_t p = 0; p < positions; ++p)
      for (uint64_t i = 0; i < k; ++i)
        for (uint64_t j = 0; j < n; ++j)
          l1[j] += std::min(qmax, std::abs(std::round(w[(p * k + i) * n + j] * rs[i] / s[j]))) * in_max[i];
    double worst = 0;
    for (uint64_t j = 0; j < n; ++j) worst = std::max(worst, l1[j] / kLimit);
    if (worst < 1) return s;
    // Coarser by the excess (and a little more: rounding can add up to half a unit per row).
    for (uint64_t j = 0; j < n; ++j) {
      const double over = (m_.per_channel ? l1[j] / kLimit : worst) * 1.001;
      if (over >= 1) s[j] *= over;
    }
  }
  fail("no accumulator scale keeps the sums of the 16-bit weights or inputs below 2^31");
}

// A MatmulOp's arithmetic (weights, bias, requantization, function); the caller sets its views
// and kernel geometry. `wide`: 16-bit weights (|q| <= 32767, in two byte planes; graph.h).
MatmulOp Quantizer::matmul(const float* w, uint64_t positions, const std::vector<double>& rs, uint64_t n,
                           const float* b, const std::vector<double>& acc, const Stage& st, bool wide) const {
  MatmulOp op;
  op.k = rs.size();
  op.n = n;
  op.func = st.func;
  op.clip = st.clip;
  op.no_values = w == nullptr;
  op.wide = wide && op.no_values;
  op.weights.resize(op.no_values ? 0 : positions * op.k * n);
  if (wide && !op.no_values) op.weights_hi.resize(op.weights.size());
  const double qmax = wide ? 32767.0 : 127.0;
  for_row_ranges(op.no_values ? 0 : positions * op.k, [&](uint64_t r0, uint64_t r1) {
    thread_local std::vector<int32_t> q;
    q.resize(n);
    for (uint64_t r = r0; r < r1; ++r) {
      quantize_row(w + r * n, rs[r % op.k], acc.data(), n, qmax, q.data());
      for (uint64_t j = 0; j < n; ++j) {
        const uint64_t at = r * n + j;
        op.weights[at] = static_cast<int8_t>(static_cast<uint8_t>(q[j] & 255));  // the low byte (all of int8)
        if (wide) op.weights_hi[at] = static_cast<int8_t>(q[j] >> 8);
      }
    }
  });
  if (b) {
    op.bias.resize(n);
    for (uint64_t j = 0; j < n; ++j) {
      const double q = std::round(b[j] / acc[j]);
      if (!(std::abs(q) <= std::numeric_limits<int32_t>::max()) && !op.no_values)
        fail(fmt::format("bias {} of column {} is {:g} accumulator units, beyond int32", b[j], j, q));
      op.bias[j] = static_cast<int32_t>(q);
    }
  }
  const uint64_t entries = b || m_.per_channel ? n : 1;
  for (uint64_t j = 0; j < entries; ++j) {
    const Requant q = requant(acc[j] / st.target);
    op.mult.push_back(q.mult);
    op.shift.push_back(q.shift);
  }
  return op;
}

// In place of accumulator_scales for a timing-only compile's seeded weights, which have no values
// (LoadOptions::timing_only): scales near 1/127^2 that differ from call to call and column to
// column, as calibrated ones do, so that the back end's per-column tables are told apart (or
// shared, by an LSTM gate's steps) as a full compile's are. Only requantization fields and
// table contents depend on them, none of which changes an instruction's timing.
std::vector<double> Quantizer::placeholder_scales(uint64_t n) {
  const uint64_t call = placeholders_++;
  std::vector<double> s(n);
  for (uint64_t j = 0; j < n; ++j)
    s[j] = (1.0 + double((call * 7919 + j * 104729) % 4093) / 8192.0) / (127.0 * 127.0);
  return s;
}

// The precision of seeded weights, decided without their values: 16-bit when the layer's
// weight_bits or the model's precision says so; the automatic choice keeps them int8 (Glorot-
// uniform weights round to int8 with about 0.45% relative error, a quarter of the default
// wide_error: docs/compiler.md, "16-bit layers").
bool Quantizer::wide_without_values() const {
  if (layer().weight_bits) return *layer().weight_bits == 16;
  return m_.precision == Precision::wide;
}

void Quantizer::dense_or_conv() {
  const Layer& L = layer();
  const int entry = L.inputs.at(0);
  // A 1 x 1 kernel over every pixel reads a concat's parts as its inputs (zero-copy).
  const bool linear = L.type == LayerType::dense
                          ? !is_flatten(entry) || parts(entry)  // a flatten of one pixel keeps the parts
                          : L.kernel_h == 1 && L.kernel_w == 1 && L.stride == 1 && L.pad == 0;
  const std::vector<int> ins = linear && parts(entry) ? *parts(entry) : std::vector<int>{source(entry)};
  const Shape& is = shape_of(ins[0]);
  uint64_t kh = L.kernel_h, kw = L.kernel_w;
  if (L.type == LayerType::dense) kh = kw = 1;
  if (L.type == LayerType::dense && is_flatten(entry)) kh = is.h, kw = is.w;  // the whole map
  std::vector<double> rs, in_max;
  for (int t : ins) rs.insert(rs.end(), shape_of(t).c, scale_of(t)), in_max.insert(in_max.end(), shape_of(t).c, input_max(bits_of(t)));
  const bool wide_in = std::any_of(ins.begin(), ins.end(), [&](int t) { return bits_of(t) == 16; });
  const bool absent = no_values();
  std::vector<double> acc = absent ? placeholder_scales(L.units) : accumulator_scales(L.weights.data(), kh * kw, rs, L.units);
  const bool wide = absent ? wide_without_values()
                           : wants_wide(L.weights.data(), kh * kw, rs, L.units, acc,
                                        L.weight_bits || m_.precision != Precision::automatic || L.seeded_weights
                                            ? std::vector<double>{}
                                            : row_energy(entry, kh * kw, rs.size()));
  // (16-bit weights, or 16-bit inputs: the accumulator bound; int8 x int8 sums of up to 2^17
  // rows cannot wrap)
  if ((wide || wide_in) && !absent) acc = bounded_scales(L.weights.data(), kh * kw, rs, L.units, acc, in_max, wide);
  // The model's output reads as many bits as its input has (Model::output_bits).
  output_width(last_layer() && wide_in ? 16 : 8, L.activation != Activation::relu6);
  const Stage st = stage(false, out_scale());
  MatmulOp op = matmul(absent ? nullptr : L.weights.data(), kh * kw, rs, L.units, L.use_bias ? L.bias.data() : nullptr,
                       acc, st, wide);
  if (L.seeded_weights) op.weight_id = weight_ids_++;
  op.kernel_h = kh;
  op.kernel_w = kw;
  if (L.type == LayerType::conv2d) op.stride = L.stride, op.pad = L.pad, op.groups = L.groups, op.taps = L.taps;
  for (int t : ins) op.inputs.push_back(View{t});
  // A branch of a concat written in place, at the concat's scale: its channels of the joined tensor.
  if (const std::optional<Dest>& d = dest_[li_];
      d && !L.scale && out_bits_ == 8 && st.scale == concat_scale_[d->root]) {
    op.output = View{joined(d->root), 0, 0, d->offset};
    emit(std::move(op));
    placed_[li_] = true;
    return;
  }
  const int out = begin_output(L.out, st);
  op.output = View{out};
  emit(std::move(op));
  end_output(out, st);
}

// A pool of tensor `in` into `out`. A 1-D pool (a 1 x k window over a map of height 1, ONNX's
// over a line [N, C, L]) runs on the machine's square windows: the line is first copied k times,
// one copy under the other (k vec passes, exact), into a k x L map `NAME.rows` whose k x k window
// at column x holds the line's window at x once per row: the same maximum, and the same average
// (k times the window's sum over k^2, rounded alike). `suffix` names a part's copy. A line padded
// by l and r columns at its start and end (Layer::pool_pads, each < k) is copied between borders
// of l and r columns, in the first row (then copied whole into the others): the line's first and last values repeated for a
// max (every window that reaches a border holds that value: the same maximum), zeros (x - x) for
// an average. An average that does not count its padding (Layer::count_pad false) then has each
// window that reaches a border, of c < k values of the line, written again: the pool of a c x c
// window over c copies of those c values (the machine's average of them, rounded once), passed
// into its output pixel.
void Quantizer::pool_into(int in, int out, const std::string& suffix) {
  const Layer& L = layer();
  const auto kind = L.type == LayerType::avg_pool ? isa::PoolKind::avg : isa::PoolKind::max;
  if (L.kernel_h == L.kernel_w) {
    if (L.pool_pads != std::array<uint64_t, 4>{}) return pool_padded(in, out, suffix);
    emit(PoolOp{View{in}, View{out}, kind, L.kernel_h, L.stride});
    return;
  }
  const Shape line = shape_of(in);  // a copy: add_tensor below may move the tensors
  const uint64_t k = L.kernel_w, pl = L.pool_pads[1], pr = L.pool_pads[3], w = line.w + pl + pr;
  const double scale = scale_of(in);
  const int rows = add_tensor(L.name + ".rows" + suffix, map_shape(k, w, line.c), scale, L.name);
  for (uint64_t r = 0; r < k; ++r) {
    if (r > 0 && pl + pr > 0) {  // row 0 with its borders
      copy_view(View{rows, 0, w}, View{rows, r * w, w});
      continue;
    }
    copy_view(View{in}, View{rows, r * w + pl, line.w});
    // the borders of row 0, the start's and the end's side by side: the line's first or last value
    // (max), or zeros in runs of at most the line's length (average)
    for (uint64_t j = 0; j < std::max(pl, pr);) {
      if (kind == isa::PoolKind::max) {
        if (j < pl) copy_view(View{in, 0, 1}, View{rows, j, 1});
        if (j < pr) copy_view(View{in, line.w - 1, 1}, View{rows, pl + line.w + j, 1});
        ++j;
      } else {
        const uint64_t nl = j < pl ? std::min(pl - j, line.w) : 0, nr = j < pr ? std::min(pr - j, line.w) : 0;
        if (nl) copy_view(View{in, 0, nl}, View{rows, j, nl}, isa::VecOp::sub);
        if (nr) copy_view(View{in, 0, nr}, View{rows, pl + line.w + j, nr}, isa::VecOp::sub);
        j += std::max(nl, nr);
      }
    }
  }
  emit(PoolOp{View{rows}, View{out}, kind, k, L.stride});
  if (kind == isa::PoolKind::max || L.count_pad || pl + pr == 0) return;
  const uint64_t outputs = shape_of(out).w;
  for (uint64_t o = 0; o < outputs; ++o) {
    const int64_t a = int64_t(o * L.stride) - int64_t(pl);  // the window's first column in the line
    const uint64_t first = uint64_t(std::max<int64_t>(a, 0)),
                   c = std::min(uint64_t(a + int64_t(k)), line.w) - first;  // its values of the line
    if (c == k) continue;
    const std::string edge = fmt::format("{}.edge{}{}", L.name, o, suffix);
    const int square = add_tensor(edge, map_shape(c, c, line.c), scale, L.name);
    for (uint64_t r = 0; r < c; ++r) copy_view(View{in, first, c}, View{square, r * c, c});
    const int mean = add_tensor(edge + ".avg", map_shape(1, 1, line.c), scale, L.name);
    emit(PoolOp{View{square}, View{mean}, kind, c, 1});
    copy_view(View{mean}, View{out, o, 1});
  }
}

// A 2-D pool over a map padded by pool_pads (t, l, b, r; each less than the window k) runs on
// the machine's unpadded pool: the map is copied into the (t + H + b) x (l + W + r) map
// "NAME.padded" by `vec` passes, one per row, and the borders filled around it; a `pool` then reads
// that. An average's borders are zeros (x - x): the run of a row's right border and the next row's
// left border is contiguous (one pass of r + l zeros), and so are the top rows with the first left
// border, and the last right border with the bottom rows. A max's borders are pixels of the map that
// every window reaching them holds, so that the maximum is the map's: with 2l <= k and 2r <= k (and
// l, r <= W) the run between rows y and y + 1 is the r last pixels of row y and the l first of row
// y + 1 (one pass: contiguous in the map): left border column j holds the row's pixel j, which
// every window reaching it holds (it holds the row's columns 0 .. k - 1 - l), right border column j
// the pixel W - r + j (every window reaching it holds columns W + r - k .. W - 1); else each border
// pixel repeats its row's first or last pixel (one pass each). The top
// rows then repeat the first padded row, the bottom rows the last (whole-row passes). An average
// that does not count its padding (count_pad false) has each window that reaches a border, of
// ch x cw < k^2 pixels of the map, written again: those pixels laid out in a row-major n x n
// square ("NAME.edgeY_X") as many times as fill it (n the smallest side with n^2 a multiple of
// ch x cw, average_square; the importer refuses a pool where there is none up to 15), which the
// machine's n x n average makes their sum over ch x cw, rounded once; a pass puts it into its
// output pixel.
void Quantizer::copy_view(View a, View o, isa::VecOp op) {
  VectorOp v = vector(op, a.tensor, a.tensor, o, 1.0);
  v.a = v.b = a;
  emit(std::move(v));
}

void Quantizer::pool_padded(int in, int out, const std::string& suffix) {
  const Layer& L = layer();
  const bool max = L.type == LayerType::max_pool;
  const auto kind = max ? isa::PoolKind::max : isa::PoolKind::avg;
  const Shape map = shape_of(in);  // a copy: add_tensor below may move the tensors
  const auto [t, l, b, r] = L.pool_pads;
  const uint64_t k = L.kernel_h, h = map.h, w = map.w, pw = l + w + r, ph = t + h + b, pixels = h * w;
  const double scale = scale_of(in);
  const int padded = add_tensor(L.name + ".padded" + suffix, map_shape(ph, pw, map.c), scale, L.name);
  // zeros into `count` pixels of the padded map from pixel `at`, in passes of at most the map's pixels
  const auto zeros = [&](uint64_t at, uint64_t count) {
    for (uint64_t n; count > 0; at += n, count -= n) {
      n = std::min(count, pixels);
      copy_view(View{in, 0, n}, View{padded, at, n}, isa::VecOp::sub);
    }
  };
  const bool runs = 2 * l <= k && 2 * r <= k && l <= w && r <= w;
  for (uint64_t y = 0; y < h; ++y) {
    const uint64_t row = (t + y) * pw;  // the padded row's first pixel
    copy_view(View{in, y * w, w}, View{padded, row + l, w});
    if (!max) {  // zeros: this row's left border (with the top rows before the first), its right one at the last
      if (y == 0) zeros(0, t * pw + l);
      zeros(row + l + w, y + 1 < h ? r + l : r + b * pw);
    } else if (runs) {
      if (y == 0 && l) copy_view(View{in, 0, l}, View{padded, row, l});
      const uint64_t n = y + 1 < h ? r + l : r;  // the last r of row y, the first l of row y + 1
      if (n) copy_view(View{in, y * w + w - r, n}, View{padded, row + l + w, n});
    } else {
      for (uint64_t j = 0; j < l; ++j) copy_view(View{in, y * w, 1}, View{padded, row + j, 1});
      for (uint64_t j = 0; j < r; ++j) copy_view(View{in, y * w + w - 1, 1}, View{padded, row + l + w + j, 1});
    }
  }
  if (max) {
    for (uint64_t y = 0; y < t; ++y) copy_view(View{padded, t * pw, pw}, View{padded, y * pw, pw});
    for (uint64_t y = t + h; y < ph; ++y) copy_view(View{padded, (t + h - 1) * pw, pw}, View{padded, y * pw, pw});
  }
  emit(PoolOp{View{padded}, View{out}, kind, k, L.stride});
  if (max || L.count_pad) return;
  const Shape os = shape_of(out);
  // a window's pixels of the map along one axis: its first and their number
  const auto span = [&](uint64_t o, uint64_t before, uint64_t size) {
    const int64_t a = int64_t(o * L.stride) - int64_t(before);
    const uint64_t first = uint64_t(std::max<int64_t>(a, 0));
    return std::pair{first, std::min(uint64_t(a + int64_t(k)), size) - first};
  };
  for (uint64_t oy = 0; oy < os.h; ++oy)
    for (uint64_t ox = 0; ox < os.w; ++ox) {
      const auto [y0, ch] = span(oy, t, h);
      const auto [x0, cw] = span(ox, l, w);
      if (ch * cw == k * k) continue;
      const uint64_t c = ch * cw, n = average_square(c, isa::field_max(isa::Opcode::pool, isa::Field::window));
      if (n == 0) fail(fmt::format("no square of at most 15 pixels holds {} pixels equally often", c));
      const std::string edge = fmt::format("{}.edge{}_{}{}", L.name, oy, ox, suffix);
      const int square = add_tensor(edge, map_shape(n, n, map.c), scale, L.name);
      for (uint64_t i = 0; i < ch; ++i) copy_view(View{in, (y0 + i) * w + x0, cw}, View{square, i * cw, cw});
      for (uint64_t filled = c; filled < n * n;) {  // double the pattern until the square is full
        const uint64_t m = std::min(filled, n * n - filled);
        copy_view(View{square, 0, m}, View{square, filled, m});
        filled += m;
      }
      const int mean = add_tensor(edge + ".avg", map_shape(1, 1, map.c), scale, L.name);
      emit(PoolOp{View{square}, View{mean}, kind, n, 1});
      copy_view(View{mean}, View{out, oy * os.w + ox, 1});
    }
}

void Quantizer::pool() {
  const Layer& L = layer();
  if (const std::vector<int>* ps = parts(L.inputs.at(0)); ps && !L.scale) {  // part by part
    for (int t : *ps) {
      const Shape s{L.out.rank, L.out.h, L.out.w, shape_of(t).c};
      const std::string suffix = fmt::format(".p{}", parts_[li_].size());
      const int o = add_tensor(L.name + suffix, s, scale_of(t), L.name);
      pool_into(t, o, suffix);
      parts_[li_].push_back(o);
    }
    return;
  }
  const int in = source(L.inputs.at(0));
  const Stage st{isa::Func::identity, 127, scale_of(in), scale_of(in)};
  output_width(8, false);
  const int out = begin_output(L.out, st);
  pool_into(in, out, "");
  end_output(out, st);
}

void Quantizer::elementwise(bool mul) {
  const Layer& L = layer();
  int a = source(L.inputs.at(0)), b = source(L.inputs.at(1));
  if (!mul && scale_of(a) != scale_of(b)) {  // align: the finer operand to the coarser scale
    if (scale_of(a) > scale_of(b)) std::swap(a, b);
    // int8 where a's whole range fits at b's scale, else int16: a 16-bit b's scale (2 x its
    // range / 32767) holds in int8 only 1/258 of b's range, and would saturate a.
    const double a_top = (bits_of(a) == 16 ? 32767.0 : 127.0) * scale_of(a);
    const int r = add_tensor(L.name + ".rescale", shape_of(a), scale_of(b), L.name,
                             a_top <= 127.0 * scale_of(b) ? 8 : 16);
    emit(vector(isa::VecOp::pass, a, a, View{r}, scale_of(a) / scale_of(b)));
    a = r;
  }
  output_width(last_layer() && (bits_of(a) == 16 || bits_of(b) == 16) ? 16 : 8, L.activation != Activation::relu6);
  const Stage st = stage(true, out_scale());
  const int out = begin_output(L.out, st);
  const double in_scale = mul ? scale_of(a) * scale_of(b) : scale_of(a);
  emit(vector(mul ? isa::VecOp::mul : isa::VecOp::add, a, b, View{out}, in_scale / st.target, st.func));
  end_output(out, st);
}

void Quantizer::activation() {
  const Layer& L = layer();
  if (const std::vector<int>* ps = parts(L.inputs.at(0)); ps && !L.scale) {  // part by part
    output_width(8, false);  // (parts are 8-bit)
    for (int t : *ps) {
      const Stage st = stage(true, scale_of(t));
      const int o = add_tensor(fmt::format("{}.p{}", L.name, parts_[li_].size()), shape_of(t), st.scale, L.name);
      emit(vector(isa::VecOp::pass, t, t, View{o}, scale_of(t) / st.target, st.func));
      parts_[li_].push_back(o);
    }
    return;
  }
  const int in = source(L.inputs.at(0));
  // none and relu keep the input's scale, unless the width changes (or a scale is given).
  output_width(last_layer() && bits_of(in) == 16 ? 16 : 8, L.activation != Activation::relu6);
  const double plain = L.scale ? *L.scale : bits_of(in) == out_bits_ ? scale_of(in) : out_scale();
  const Stage st = stage(true, plain);
  const int out = begin_output(L.out, st);
  emit(vector(isa::VecOp::pass, in, in, View{out}, scale_of(in) / st.target, st.func));
  end_output(out, st);
}

// h's scale at `bits`: |h| < 1 by construction, Q0.15 or Q0.7 (as the gates).
double h_scale(int bits) { return bits == 16 ? kQ015 : kQ07; }

// The top layer's h sequence is its output with return_sequences: then of the output's width.
int Quantizer::Recurrence::h_bits(bool top) const { return top && return_sequences ? out_bits : h16 ? 16 : 8; }

Quantizer::Recurrence Quantizer::recurrence() {
  const Layer& L = layer();
  Recurrence rc;
  rc.x = source(L.inputs.at(0));
  rc.steps = shape_of(rc.x).pixels();
  rc.units = L.units;
  // Element width (see the top of the file): the gates (and an lstm's cell) are read by vecs only,
  // so with wide_elements they are int16: the curves' 16-bit outputs (scale 1/32767).
  // (precision int8: every tensor int8 where the rules choose; a layer's own keys still win)
  rc.wide = m_.wide_elements && m_.precision != Precision::int8;
  rc.bits = rc.wide ? 16 : 8;
  rc.sg = rc.wide ? kQ015 : kQ07;
  // The layer's precision (16-bit gate weights, gate_weights_wide) gives h 16 bits too, with
  // wide elements: the gate matmuls then read h_{t-1} at 16 bits (setcfg mm_in_hi, half speed),
  // and so does the next layer, unless a reader of the layer's output takes 8-bit tensors only
  // (output_width). h's width: the layer's output_bits key, else 16 with 16-bit weights.
  rc.wide_w = gate_weights_wide();
  rc.h16 = m_.wide_elements && (L.output_bits ? *L.output_bits == 16 : rc.wide_w);
  rc.out_bits = output_width(rc.h16 ? 16 : 8, true);
  rc.out_stage = Stage{isa::Func::identity, 127, h_scale(rc.out_bits), h_scale(rc.out_bits)};
  rc.return_sequences = L.return_sequences;
  return rc;
}

// Stacked layer l: x at h's width, the scales and bounds of [x_t, h_{t-1}]'s rows, the h sequence
// (its tensor, or the layer's output: before the gates' matmuls, which add no tensor).
Quantizer::RecurrentLayer Quantizer::recurrent_layer(Recurrence& rc, uint64_t l) {
  const Layer& L = layer();
  RecurrentLayer rl;
  rl.in_c = shape_of(rc.x).c;
  rl.rows = rl.in_c + rc.units;
  rl.top = l + 1 == L.stack;
  rl.hb = rc.h_bits(rl.top);
  rl.sh = h_scale(rl.hb);
  // A gate's accumulator adds x_t's and h_{t-1}'s rows at one scale per column: rows of inputs
  // of different widths would give the finer input's weights steps 256 times coarser. So x
  // takes h's width first, one vec pass over the whole sequence: x 256 into 16 bits (exact),
  // or / 256 into 8.
  if (bits_of(rc.x) != rl.hb) {
    const double sx = rl.hb == 16 ? scale_of(rc.x) / 256 : scale_of(rc.x) * 256;
    const int wx = add_tensor(fmt::format("{}.l{}.x", L.name, l), shape_of(rc.x), sx, L.name, rl.hb);
    emit(vector(isa::VecOp::pass, rc.x, rc.x, View{wx}, scale_of(rc.x) / sx));
    rc.x = wx;
  }
  rl.rs.assign(rl.rows, rl.sh);
  rl.in_max.assign(rl.rows, input_max(rl.hb));
  std::fill_n(rl.rs.begin(), rl.in_c, scale_of(rc.x));
  std::fill_n(rl.in_max.begin(), rl.in_c, input_max(bits_of(rc.x)));
  if (rl.top && L.return_sequences) rl.h = rc.output = begin_output(L.out, rc.out_stage);  // [T, U]
  else if (!rl.top || rc.steps > 1)
    rl.h = add_tensor(fmt::format("{}.l{}.h", L.name, l), seq_of(rl.top ? rc.steps - 1 : rc.steps, rc.units), rl.sh,
                      L.name, rl.hb);
  return rl;
}

// The frame an lstm and a gru share: stacked layer by stacked layer (recurrent_layer), `steps`
// emits the layer's steps, whose h sequence is the next layer's input; then the output is ended.
template <typename F>
void Quantizer::recurrent(F&& steps) {
  const Layer& L = layer();
  Recurrence rc = recurrence();
  uint64_t offset = 0;
  for (uint64_t l = 0; l < L.stack; ++l) {
    RecurrentLayer rl = recurrent_layer(rc, l);
    rl.l = l;
    rl.offset = offset;
    steps(rc, rl);
    rc.x = rl.h;
    offset += recurrent_gates(L.type) * rl.rows * L.units;
  }
  end_output(rc.output, rc.out_stage);
}

// Gate g's matmul over rows [r0, r0 + n) of [x_t, h_{t-1}] (bias b, stage st) and its accumulator
// scales (bounded where 16-bit weights or inputs could overflow them); no weights in a
// timing-only compile of seeded ones.
std::pair<MatmulOp, std::vector<double>> Quantizer::gate_matmul(const Recurrence& rc, const RecurrentLayer& rl,
                                                                uint64_t g, uint64_t r0, uint64_t n, const float* b,
                                                                const Stage& st) {
  const Layer& L = layer();
  const uint64_t u = L.units;
  const float* w = no_values() ? nullptr : L.weights.data() + rl.offset + (g * rl.rows + r0) * u;
  const auto rows = [&](const std::vector<double>& v) {
    return std::vector<double>(v.begin() + std::ptrdiff_t(r0), v.begin() + std::ptrdiff_t(r0 + n));
  };
  const std::vector<double> rs = rows(rl.rs);
  std::vector<double> acc = w ? accumulator_scales(w, 1, rs, u) : placeholder_scales(u);
  const bool wide_x = rl.hb == 16 || bits_of(rc.x) == 16;
  if ((rc.wide_w || wide_x) && w) acc = bounded_scales(w, 1, rs, u, acc, rows(rl.in_max), rc.wide_w);
  return {matmul(w, 1, rs, u, b, acc, st, rc.wide_w), acc};
}

// Gate g's matmuls over [x_t, h_{t-1}] (every step but the first) and over x_0 alone (the first:
// h_{-1} = 0), at the same accumulator scales. The first step's rows are the others' first rows:
// the same tiles (MatmulOp::weight_id).
std::pair<MatmulOp, MatmulOp> Quantizer::gate_matmuls(const Recurrence& rc, const RecurrentLayer& rl, uint64_t g,
                                                      const float* b, const Stage& st) {
  const Layer& L = layer();
  auto [full, acc] = gate_matmul(rc, rl, g, 0, rl.rows, b, st);
  const float* w = no_values() ? nullptr : L.weights.data() + rl.offset + g * rl.rows * L.units;
  const std::vector<double> rs_x(rl.rs.begin(), rl.rs.begin() + std::ptrdiff_t(rl.in_c));
  MatmulOp first = matmul(w, 1, rs_x, L.units, b, acc, st, rc.wide_w);
  if (L.seeded_weights) full.weight_id = first.weight_id = weight_ids_++;
  return {std::move(full), std::move(first)};
}

// Where step t writes its h: row t of the layer's h sequence, or, for the top layer's last step
// when the layer returns that step only, the layer's output (begun here).
View Quantizer::step_h(Recurrence& rc, const RecurrentLayer& rl, uint64_t t) {
  if (rl.top && !rc.return_sequences && t + 1 == rc.steps)
    return View{rc.output = begin_output(layer().out, rc.out_stage)};
  return View{rl.h, t, 1};
}

void Quantizer::lstm() {
  const Layer& L = layer();
  const uint64_t u = L.units;
  recurrent([&](Recurrence& rc, const RecurrentLayer& rl) {
    const int bits = rc.bits, x = rc.x, h = rl.h;
    const double sg = rc.sg;
    // The cell at max |c_t| / 32767 (16-bit elements) or / 127 per step.
    const double cell_top = rc.wide ? double(isa::kCurve16One) : 127.0;
    const Stage gate_stage[4] = {{isa::Func::sigmoid, 127, kCurveIn, sg},
                                 {isa::Func::sigmoid, 127, kCurveIn, sg},
                                 {isa::Func::tanh, 127, kCurveIn, sg},
                                 {isa::Func::sigmoid, 127, kCurveIn, sg}};
    const char* gate_name = "ifgo";
    MatmulOp full[4], first[4];
    for (int g = 0; g < 4; ++g) {
      const float* b = L.bias.empty() ? nullptr : L.bias.data() + (rl.l * 4 + uint64_t(g)) * u;
      std::tie(full[g], first[g]) = gate_matmuls(rc, rl, uint64_t(g), b, gate_stage[g]);
    }
    const std::string pre = fmt::format("{}.l{}", L.name, rl.l);
    int c_prev = -1;
    for (uint64_t t = 0; t < rc.steps; ++t) {
      const std::string step = fmt::format("{}.t{}", pre, t);
      int gate[4] = {-1, -1, -1, -1};
      for (int g = 0; g < 4; ++g) {
        if (t == 0 && g == 1) continue;  // f multiplies c_{-1} = 0
        if (g == 0) g_.loop_steps.push_back(g_.ops.size());  // (the layer-step's first gate)
        gate[g] = add_tensor(fmt::format("{}.{}", step, gate_name[g]), vec_of(u), sg, L.name, bits);
        MatmulOp op = t == 0 ? first[g] : full[g];
        op.inputs = {View{x, t, 1}};
        if (t > 0) op.inputs.push_back(View{h, t - 1, 1});
        op.output = View{gate[g]};
        emit(std::move(op));
      }
      // this step's cell scale
      const double cell_max = run_.lstm_cell_max[li_].at(rl.l * rc.steps + t);
      const double sc = cell_max > 0 && std::isfinite(cell_max) ? cell_max / cell_top : 1.0 / cell_top;
      const int c = add_tensor(step + ".c", vec_of(u), sc, L.name, bits);
      if (t == 0) {
        emit(vector(isa::VecOp::mul, gate[0], gate[2], View{c}, sg * sg / sc));
      } else {
        const int fc = add_tensor(step + ".fc", vec_of(u), sc, L.name, bits);
        const int ig = add_tensor(step + ".ig", vec_of(u), sc, L.name, bits);
        emit(vector(isa::VecOp::mul, gate[1], c_prev, View{fc}, sg * scale_of(c_prev) / sc));
        emit(vector(isa::VecOp::mul, gate[0], gate[2], View{ig}, sg * sg / sc));
        emit(vector(isa::VecOp::add, fc, ig, View{c}, 1.0));
      }
      const int tc = add_tensor(step + ".tc", vec_of(u), sg, L.name, bits);
      emit(vector(isa::VecOp::pass, c, c, View{tc}, sc / kCurveIn, isa::Func::tanh));
      const View hv = step_h(rc, rl, t);
      emit(vector(isa::VecOp::mul, gate[3], tc, hv, sg * sg / scale_of(hv.tensor)));
      c_prev = c;
    }
  });
}

// A GRU (graph.h's formula, PyTorch's), unrolled as the lstm above: stacked layer by stacked
// layer, then step by step, on the same matmul and vec operations. Per step t > 0:
//   r, z   MatmulOps over [x_t, h_{t-1}], requantized to 1/256 then sigmoid (as an lstm gate)
//   a      MatmulOp over x_t (the n gate's x rows, bias b_in), identity, scale s_a
//   b      MatmulOp over h_{t-1} (the n gate's h rows, bias b_hn), identity, scale s_b
//   rb = mul(r, b) -> s_a;  n = add(a, rb) x s_a 256, tanh -> s_g
//   zn = mul(z, n) -> s_g;  d = sub(n, zn) = (1 - z) n -> s_g;  zh = mul(z, h_{t-1}) -> s_g
//   h_t = add(d, zh) -> s_h
// At t = 0 (h_{-1} = 0) r and z read x_0 alone; b is b_hn, a MatmulOp over x_0 with zero weights
// and that bias (exact; the recurrence's matmul has no input yet); h_0 = d. s_a = (the largest
// |a| and |r b| over the layer's steps) / 127, s_b = (the largest |b|) / 127 (32767 and twice the
// range as headroom for 16-bit tensors, Element width: a, b, rb, n, zn, d, zh are read by vecs
// only). Every intermediate is in [-1, 1] but a, b and rb, so nothing else saturates.
void Quantizer::gru() {
  const Layer& L = layer();
  const uint64_t u = L.units;
  recurrent([&](Recurrence& rc, const RecurrentLayer& rl) {
    const int bits = rc.bits, x = rc.x, h = rl.h;
    const double sg = rc.sg;
    const auto part_scale = [&](double top) { return rc.wide ? calibrated16(top) : calibrated(top); };
    const Stage sigmoid_stage{isa::Func::sigmoid, 127, kCurveIn, sg};
    double a_top = 0, b_top = 0;
    for (uint64_t t = 0; t < rc.steps; ++t) {
      a_top = std::max(a_top, run_.lstm_cell_max[li_].at((rl.l * rc.steps + t) * 2));
      b_top = std::max(b_top, run_.lstm_cell_max[li_].at((rl.l * rc.steps + t) * 2 + 1));
    }
    const double sa = part_scale(a_top), sb = part_scale(b_top);
    const Stage a_stage{isa::Func::identity, 127, sa, sa}, b_stage{isa::Func::identity, 127, sb, sb};
    const float* bias = L.bias.empty() ? nullptr : L.bias.data() + rl.l * 4 * u;  // b_r, b_z, b_in, b_hn
    MatmulOp full[2], first[2];
    for (int g = 0; g < 2; ++g)
      std::tie(full[g], first[g]) = gate_matmuls(rc, rl, uint64_t(g), bias ? bias + g * u : nullptr, sigmoid_stage);
    MatmulOp a_op = gate_matmul(rc, rl, 2, 0, rl.in_c, bias ? bias + 2 * u : nullptr, a_stage).first;
    MatmulOp b_op = gate_matmul(rc, rl, 2, rl.in_c, u, bias ? bias + 3 * u : nullptr, b_stage).first;
    if (L.seeded_weights) a_op.weight_id = weight_ids_++, b_op.weight_id = weight_ids_++;
    // b at t = 0: zero weights over x_0 and the bias b_hn (its own contents: weight_id -1).
    const std::vector<float> zeros(rl.in_c * u, 0.0f), no_bias(u, 0.0f);
    const std::vector<double> b0_acc(u, sb / 256), rs_x(rl.rs.begin(), rl.rs.begin() + std::ptrdiff_t(rl.in_c));
    MatmulOp b0 = matmul(zeros.data(), 1, rs_x, u, bias ? bias + 3 * u : no_bias.data(), b0_acc, b_stage);
    b0.taps = {0};  // (no tap: it only adds b_hn, none of the model's multiplies, MatmulOp::taps)
    const std::string pre = fmt::format("{}.l{}", L.name, rl.l);
    for (uint64_t t = 0; t < rc.steps; ++t) {
      const std::string step = fmt::format("{}.t{}", pre, t);
      const auto add = [&](const char* what, double scale) {
        return add_tensor(fmt::format("{}.{}", step, what), vec_of(u), scale, L.name, bits);
      };
      const auto run = [&](MatmulOp op, std::vector<View> ins, int out) {
        op.inputs = std::move(ins);
        op.output = View{out};
        emit(std::move(op));
      };
      g_.loop_steps.push_back(g_.ops.size());  // (the layer-step's first op)
      const int r = add("r", sg), z = add("z", sg), a = add("a", sa), b = add("b", sb);
      const View xt{x, t, 1}, hp{h, t - 1, 1};
      run(t == 0 ? first[0] : full[0], t == 0 ? std::vector<View>{xt} : std::vector<View>{xt, hp}, r);
      run(t == 0 ? first[1] : full[1], t == 0 ? std::vector<View>{xt} : std::vector<View>{xt, hp}, z);
      run(a_op, {xt}, a);
      if (t == 0) run(b0, {xt}, b);
      else run(b_op, {hp}, b);
      const int rb = add("rb", sa), n = add("n", sg), zn = add("zn", sg);
      emit(vector(isa::VecOp::mul, r, b, View{rb}, sg * sb / sa));
      emit(vector(isa::VecOp::add, a, rb, View{n}, sa / kCurveIn, isa::Func::tanh));
      emit(vector(isa::VecOp::mul, z, n, View{zn}, sg));
      const View hv = step_h(rc, rl, t);
      if (t == 0) {
        emit(vector(isa::VecOp::sub, n, zn, hv, sg / scale_of(hv.tensor)));
        continue;
      }
      const int d = add("d", sg), zh = add("zh", sg);
      emit(vector(isa::VecOp::sub, n, zn, View{d}, 1.0));
      emit(vector(isa::VecOp::mul, z, h, View{zh}, sg * rl.sh / sg));
      // (zh reads h's pixel t - 1: the vector op's operand is the whole tensor; a view below)
      std::get<VectorOp>(g_.ops.back()).b = hp;
      emit(vector(isa::VecOp::add, d, zh, hv, sg / scale_of(hv.tensor)));
    }
  });
}

QGraph Quantizer::run() && {
  g_.name = m_.name;
  g_.batch = m_.batch;
  for (const ModelInput& in : m_.inputs) {
    double top = 0;
    for (float v : in.data) top = std::max(top, std::abs(double{v}));
    const double s = in.scale ? *in.scale : calibrated(top);
    if (!(s > 0) || !std::isfinite(s)) throw InputError(fmt::format("{}: input {}: scale {} is not positive", m_.source, in.name, s));
    g_.inputs.push_back(add_tensor(in.name, in.shape, s, in.name));
    std::vector<int8_t> q(in.data.size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(std::clamp(std::round(in.data[i] / s), -128.0, 127.0));
    g_.input_data.push_back(std::move(q));
  }
  plan_concats();
  g_.concat_inplace = inplace_;
  for (size_t i = 0; inplace_ && i < m_.layers.size(); ++i)
    if (m_.layers[i].type == LayerType::concat && !in_place(i)) g_.concats_as_parts.push_back(m_.layers[i].name);
  for (li_ = 0; li_ < m_.layers.size(); ++li_) {
    const Layer& L = layer();
    if (L.scale && (!(*L.scale > 0) || !std::isfinite(*L.scale))) fail(fmt::format("scale {} is not positive", *L.scale));
    out_bits_ = 8;
    if (L.type == LayerType::concat && last_layer()) output_width(8, false);  // (its identity copy is 8-bit)
    switch (L.type) {
      case LayerType::dense:
      case LayerType::conv2d: dense_or_conv(); break;
      case LayerType::max_pool:
      case LayerType::avg_pool: pool(); break;
      case LayerType::add: elementwise(false); break;
      case LayerType::mul: elementwise(true); break;
      case LayerType::activation: activation(); break;
      case LayerType::lstm: lstm(); break;
      case LayerType::gru: gru(); break;
      case LayerType::concat: concat(); break;
      case LayerType::flatten:
        if (li_ + 1 == m_.layers.size()) fail("a flatten layer must feed a dense layer, not be the model's output");
        if (const std::vector<int>* ps = parts(L.inputs.at(0)); ps && shape_of(ps->front()).pixels() == 1)
          parts_[li_] = *ps;  // a 1 x 1 map's channels are the vector: the dense reads the parts
        else
          tensor_of_[li_] = source(L.inputs.at(0));
        break;
    }
  }
  if (m_.layers.empty()) throw InputError(m_.source + ": the model has no layers");
  g_.output = parts(static_cast<int>(m_.layers.size() - 1)) ? materialize(m_.layers.size() - 1) : tensor_of_.back();
  return std::move(g_);
}

}  // namespace

bool precision_needs_calibration(const Model& model) {
  if (model.precision != Precision::automatic) return false;
  const bool concat = std::any_of(model.layers.begin(), model.layers.end(),
                                  [](const Layer& l) { return l.type == LayerType::concat; });
  for (const Layer& l : model.layers) {
    // an lstm's automatic precision is measured on the calibration samples (gate_weights_wide)
    if (is_recurrent(l.type) && !l.weight_bits && !l.seeded_weights) return true;
    if ((l.type != LayerType::dense && l.type != LayerType::conv2d) || l.weight_bits || l.seeded_weights) continue;
    if (concat) return true;  // a layer reading a concat's parts has rows of several input scales
    const uint64_t n = l.units, rows = n ? l.weights.size() / n : 0;
    // The quantizer's int8 steps for inputs of scale 1: per channel max |w[.][j]| / 127 (a column
    // of zeros: the largest column's), or per tensor the largest.
    std::vector<double> step(n, 0.0);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t j = 0; j < n; ++j) step[j] = std::max(step[j], std::abs(double{l.weights[r * n + j]}));
    const double top = step.empty() ? 0.0 : *std::max_element(step.begin(), step.end());
    for (double& x : step) x = (model.per_channel && x > 0 ? x : top) / 127;
    if (int8_row_error(l.weights.data(), rows, 1, n, step) > model.wide_error) return true;
  }
  return false;
}

QGraph quantize(const Model& model, bool concat_inplace) {
  return quantize(model, run_float_detailed(model), concat_inplace);
}

QGraph quantize(const Model& model, const FloatRun& calibration, bool concat_inplace,
                const std::vector<std::string>& as_parts) {
  return Quantizer(model, calibration, concat_inplace, as_parts).run();
}

}  // namespace tpusim::compiler
