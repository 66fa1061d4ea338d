// The compiler's two graphs: the float model a description describes (Model: layers with
// inferred shapes and float parameters) and the quantized integer graph the back end lowers to a
// program (QGraph: operations in the machine's own integer terms). The golden reference executor
// runs the QGraph with plain loops; the program the back end emits must produce exactly its
// output bytes.
//
//   description (.toml, docs/model-format.md) --parse--> Model --quantize--> QGraph --lower--> Program
//
// Tensors are per-sample shapes plus a batch; data are stored batch-major in NHWC order:
// element (n, y, x, k) of a [h, w, c] tensor is at ((n * h + y) * w + x) * c + k. A vector [c] is
// h = w = 1; a sequence [steps, c] is h = steps, w = 1 (time step t = pixel t).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "isa/table.h"

namespace tpusim::compiler {

struct Shape {
  int rank = 1;  // 1: [c], 2: [steps, c] (a sequence), 3: [h, w, c]
  uint64_t h = 1, w = 1, c = 1;
  uint64_t pixels() const { return h * w; }
  uint64_t elements() const { return h * w * c; }
  std::string str() const;  // "[784]", "[20, 512]", "[28, 28, 1]"
  bool operator==(const Shape&) const = default;
};
Shape vector_shape(uint64_t c);
Shape sequence_shape(uint64_t steps, uint64_t c);
Shape map_shape(uint64_t h, uint64_t w, uint64_t c);

// ---- the float model -------------------------------------------------------------------------

enum class LayerType { dense, conv2d, max_pool, avg_pool, flatten, add, mul, activation, lstm, concat, gru };
// lstm and gru: recurrent layers over a sequence (units, stack, return_sequences).
inline bool is_recurrent(LayerType t) { return t == LayerType::lstm || t == LayerType::gru; }
// A recurrent layer's gates, each a weight matrix [in_l + units][units]: 4 (i, f, g, o), gru 3 (r, z, n).
inline uint64_t recurrent_gates(LayerType t) { return t == LayerType::gru ? 3 : 4; }
enum class Activation { none, relu, relu6, sigmoid, tanh };
const char* layer_type_name(LayerType t);    // as written in descriptions: "dense", "max_pool", ...
const char* activation_name(Activation a);   // "none", "relu", "relu6", "sigmoid", "tanh"

// A Layer::inputs entry naming the model's input i (Model::inputs[i]) instead of a layer.
inline constexpr int model_input(int i) { return -1 - i; }
inline constexpr bool is_model_input(int entry) { return entry < 0; }
inline constexpr int model_input_index(int entry) { return -1 - entry; }

struct Layer {
  std::string name;         // unique; given or "<type><index>"
  LayerType type = LayerType::dense;
  int line = 0;             // line of the layer's [[layer]] header in the description
  std::vector<int> inputs;  // indices of earlier layers, or model_input(i)
  Shape out;                // inferred output shape (per sample)
  Activation activation = Activation::none;  // fused after dense/conv2d/lstm gates; the function of `activation` layers

  // concat: the inputs (two or more, of one rank and one h and w) joined along channels, in order.
  // dense: units = outputs; on a sequence it applies to every step. conv2d: units = filters.
  // lstm, gru: units = hidden size.
  uint64_t units = 0;
  uint64_t kernel_h = 1, kernel_w = 1;  // conv2d kernel; pools: the window (square: kernel_h = kernel_w;
                                        // a 1-D pool's 1 x k over a map of height 1)
  uint64_t stride = 1;                  // conv2d and pools, both directions
  uint64_t pad = 0;                     // conv2d zero padding, pixels on every side ("same" resolved)
  // max_pool, avg_pool: the padding at the input's top, left, bottom and right (ONNX's pads, each
  // side its own, less than the window, so every window holds a pixel of the input; a 1-D pool's,
  // 1 x k over a map of height 1, {0, start, 0, end}).
  std::array<uint64_t, 4> pool_pads{};
  // avg_pool over a padded line or map: the padding counts as zeros in each window's average
  // (ONNX's count_include_pad = 1, PyTorch's default), or not (the sum over the values of the
  // input it holds, over their number). A max_pool's padding is never the maximum.
  bool count_pad = true;
  uint64_t groups = 1;                  // conv2d channel groups: filter j reads only input channels of
                                        // group j / (units / groups); 1 = dense, c = depthwise
  // conv2d: which of the kernel's kernel_h x kernel_w positions are the model's taps (row-major, 1
  // a tap); empty: all of them. A kernel the importer widened with zero weights the machine reads
  // but the model does not multiply (an ONNX dilated kernel's gaps, the zero rows of a padded
  // Conv1d's kernel: compiler/onnx.cpp) marks its other positions 0; they count in neither the
  // model's MACs nor the array's useful ones (docs/compiler.md, "Kernel taps").
  std::vector<uint8_t> taps;
  bool use_bias = true;                 // dense, conv2d
  // dense, conv2d: the weights' precision, 8 or 16 bits, as the description gives it (key
  // weight_bits); unset: the quantizer chooses (Model::precision, docs/compiler.md "16-bit layers").
  std::optional<uint8_t> weight_bits;
  // dense, conv2d, lstm, add, mul, activation: the output tensor's element width, 8 or 16 bits
  // (key output_bits); unset: 8, except where the quantizer's rules widen it (an lstm's h when
  // its precision is 16-bit, the model's output: Model::output_bits; docs/compiler.md
  // "16-bit tensors"). A 16-bit tensor feeds matmuls at half speed (setcfg mm_in_hi).
  std::optional<uint8_t> output_bits;
  uint64_t stack = 1;                   // lstm, gru: stacked layers
  bool return_sequences = false;        // lstm, gru: output every step's h ([steps, units]) or the last ([units])

  // Float parameters (generated from the seed or loaded from .npy):
  //   dense   weights [in_c][units], bias [units]
  //   conv2d  weights [kernel_h][kernel_w][in_c][units], bias [units]; with groups > 1 the weights
//           are held dense and are zero where input channel k and filter j are in different
//           groups (k / (in_c / groups) != j / (units / groups)): every consumer then computes a
//           grouped convolution without knowing about groups (expand_groups, compiler/model.h)
  //   lstm    for stacked layer l (input size in_l: the input's c for l = 0, else units), for gate
  //           g in i, f, g, o: weights [in_l + units][units] (rows 0..in_l-1 multiply x_t, the
  //           rest h_{t-1}), concatenated in the order (l, gate); bias [stack][4][units]
  //   gru     the same for gates r, z, n (PyTorch's and ONNX's linear_before_reset = 1 GRU):
  //           r = sigmoid(W_r [x, h] + b_r), z = sigmoid(W_z [x, h] + b_z),
  //           n = tanh(W_n,x x + b_in + r (W_n,h h + b_hn)), h_t = (1 - z) n + z h_{t-1}, h_{-1} = 0;
  //           bias [stack][4][units]: b_r, b_z (each the input's and the recurrence's summed), b_in, b_hn
  std::vector<float> weights;
  std::vector<float> bias;
  std::optional<double> scale;  // output quantization scale given in the description
  // The weights are the seeded generator's (generate_weights, compiler/model.h), not a file's.
  // The automatic precision keeps such a layer int8 without measuring it (docs/compiler.md,
  // "16-bit layers"), and a timing-only compile (LoadOptions::timing_only) leaves `weights`
  // empty: no value of them is computed.
  bool seeded_weights = false;
};

// The side n of the smallest square whose n^2 pixels hold each of `values` pixels equally often
// (n^2 a multiple of values), n <= `max_side`; 0 if there is none. The machine's average over
// that square is then the average of the values, rounded once: how a padded average that does
// not count its padding pools a window of fewer values than its k^2 (quantize.cpp, pool_into).
inline uint64_t average_square(uint64_t values, uint64_t max_side) {
  for (uint64_t n = 1; n <= max_side; ++n)
    if (values && (n * n) % values == 0) return n;
  return 0;
}

// A model input: a description has one ([model] input); a SCALE-Sim topology gets one for each
// layer whose input map does not follow from the layer before it.
struct ModelInput {
  std::string name = "input";
  Shape shape;                   // per sample
  std::vector<float> data;       // batch x shape.elements(), NHWC (given or seeded)
  std::optional<double> scale;   // quantization scale given in the description
  // Generated from the model's seed (no input file). A timing-only load (LoadOptions::timing_only)
  // leaves `data` empty; prepare_model generates it only where a calibration runs.
  bool seeded = false;
};

// Which layers get 16-bit weights (and tensors) where their description does not say
// (Layer::weight_bits, Layer::output_bits): `automatic` the dense and conv2d layers whose int8
// weights lose more than Model::wide_error, the lstm layers whose measured int8 error is more
// than twice their 16-bit one, an LSTM's gates and cell (docs/compiler.md, "16-bit layers",
// "Element width"); `int8` none: every weight and tensor int8 ([quantization] elements = "int8"
// and --int8-elements are its earlier spellings); `wide` every layer's weights. Chosen by the
// user (--precision) it also sets the layers' keys aside (model.h apply_precision).
enum class Precision { automatic, int8, wide };

struct Model {
  std::string name;
  std::string source;  // the description's path, for messages
  uint64_t batch = 1;
  uint64_t seed = 1;
  std::vector<ModelInput> inputs;  // at least one
  bool per_channel = true;         // weight scales per output channel (else per tensor)
  Precision precision = Precision::automatic;  // [quantization] precision, or --precision
  // The automatic choice's threshold: a layer whose int8 weights' relative RMS rounding error
  // (||W - dequantized int8 W|| / ||W||) exceeds it gets 16-bit weights.
  double wide_error = 0.02;
  uint64_t calibration_samples = 4;  // samples the float reference calibrates scales on (0: all)
  // Calibration samples apart from the inputs (--calibrate, e.g. training images while the inputs
  // are a test split): calibration_batch x inputs[i].shape.elements() values per input, NHWC.
  // When given, they (all of them) calibrate the scales, the inputs' scales included, and the
  // front ends set calibration_samples to 0: the quantization error is measured on every input.
  std::vector<std::vector<float>> calibration;
  uint64_t calibration_batch = 0;
  // 16-bit tensors allowed (quantize.cpp, "Element width"); false: every tensor int8 (a user's
  // precision int8, apply_precision, which also sets the layers' keys aside: --precision int8, the
  // GPU and CPU runners). A description's own precision int8 keeps the automatic choices int8
  // but lets a layer's keys widen.
  bool wide_elements = true;
  // The model output's element width: 8 or 16 ([quantization] output_bits, --output-bits); 0
  // (automatic): 16 when the layer that writes it reads a 16-bit tensor, else 8 (quantize.cpp,
  // "Element width"). A 16-bit output is calibrated with headroom (twice the calibrated range:
  // values the calibration samples did not reach do not saturate).
  uint8_t output_bits = 0;
  std::vector<Layer> layers;       // topological order; the last one is the model's output
};

// ---- the quantized integer graph ---------------------------------------------------------------

// An int8 (or int16) tensor: real value = scale x stored integer (symmetric, no zero point).
// A 16-bit tensor (bits = 16, the quantizer's rules in quantize.cpp, "Element width") is written
// by act (setcfg act_high) or vec (vec_high_out) and read by vec (vec_high_a / vec_high_b) or by
// a matmul (setcfg mm_in_hi: two byte-plane passes, half speed); never a pool's input or output
// nor a model input; it may be the model's output. In run_golden's result it is 2 x elements
// bytes: the low bytes (bits 0..7) of every element, then the high bytes (bits 8..15), as the
// two byte planes in the UB and in host memory (an output region holds the low plane of the
// whole batch, then the high plane).
struct QTensor {
  std::string name;  // unique: the producing layer's name, with a suffix for LSTM internals
  Shape shape;
  double scale = 1.0;
  std::string layer;  // the description layer it belongs to (messages, traces)
  int bits = 8;       // 8 or 16
};

// A contiguous range of a tensor's pixels (all of them when pixels == 0): an LSTM step reads
// pixel t of its input sequence and writes pixel t of its output sequence.
// A MatmulOp's output view may also start at a channel: its N output channels are channels
// [channel0, channel0 + N) of the tensor, the tensor's other channels written by other ops (a
// concat written in place: each branch writes its channels at their offset in the joined tensor,
// docs/compiler.md "Concatenation"). Every other view has channel0 = 0 and covers all channels.
struct View {
  int tensor = -1;
  uint64_t pixel0 = 0, pixels = 0;
  uint64_t channel0 = 0;
};

// dense, conv2d, an LSTM gate: out[n][y][x][j] = func(requant(sum + bias[j])) where
//   sum = sum over kernel positions (r, s) and k < K of in[n][y*stride + r - pad][x*stride + s - pad][k] x w[r][s][k][j]
// (an input element int8, or int16 where its tensor is 16-bit)
// (zero outside the map), accumulated in int32 with wrap-around; the inputs are concatenated
// along channels (weight rows 0..c0-1 read inputs[0], the next c1 rows inputs[1], ...), and a
// kernel larger than 1 x 1 needs exactly one input. requant(v) = round_half_away(v x mult[j] /
// 2^shift[j]) computed in 64 bits (sim::round_half_away_shift), then sim::apply_func(func, y,
// clip, false): saturated to int8 (sim::apply_func16, int16, when the output is a 16-bit tensor).
// mult and shift have 1 entry (per tensor) or N (per channel);
// with an empty bias and one entry the machine uses act's per-tensor mode, else its per-column
// table (docs/isa.md, act).
struct MatmulOp {
  std::vector<View> inputs;
  View output;
  uint64_t kernel_h = 1, kernel_w = 1, stride = 1, pad = 0;
  uint64_t k = 0, n = 0;         // K = sum of input channels, N = output channels
  // Channel groups (a grouped or depthwise conv2d): weights[..][k][j] is zero unless input
  // channel k and output channel j are in the same group (k / (K / groups) == j / (N / groups)).
  // The weights are held dense all the same; the back end skips the tiles that are all zero by
  // this structure (not by their values, so a program's timing does not depend on the data).
  uint64_t groups = 1;
  // The kernel positions that are the model's taps (Layer::taps, [kernel_h][kernel_w], 1 a tap);
  // empty: all of them. The others hold zero weights the model does not multiply (a dilated
  // kernel's gaps): not in model_macs, not in the array's useful MACs, and by this structure (not
  // the values) the back end neither fetches nor streams their tiles (docs/compiler.md, "Kernel
  // taps"), keeping one tile of a pass that would compute none (a GRU's b at t = 0: no tap).
  std::vector<uint8_t> taps;
  bool tap(uint64_t r, uint64_t s) const { return taps.empty() || taps[r * kernel_w + s] != 0; }
  // The taps in kernel rows r0, r0 + step, ... (`rows` of them).
  uint64_t taps_in_rows(uint64_t r0, uint64_t rows, uint64_t step = 1) const {
    if (taps.empty()) return rows * kernel_w;
    uint64_t n = 0;
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t s = 0; s < kernel_w; ++s) n += taps[(r0 + r * step) * kernel_w + s] != 0;
    return n;
  }
  std::vector<int8_t> weights;   // [kernel_h][kernel_w][K][N]
  // 16-bit weights (the machine's 16-bit mode, docs/timing.md): empty for int8 weights; else the
  // high byte planes, [kernel_h][kernel_w][K][N] like `weights`, which then holds the low bytes
  // (read as uint8): weight = uint8(weights[i]) + 256 x weights_hi[i]. The sum of every column's
  // |weight| x the largest |input| stays below 2^31 (the quantizer's bound): no wrap-around.
  std::vector<int8_t> weights_hi;
  std::vector<int32_t> bias;     // N, or empty
  std::vector<uint16_t> mult;    // 1 or N
  std::vector<uint8_t> shift;    // same length as mult, each 0..63
  isa::Func func = isa::Func::identity;
  uint8_t clip = 127;            // relux bound
  // Which weights these are, for the back end's weight image: ops with the same weight_id >= 0
  // hold the same seeded weights (an LSTM gate's op at every step; row r of the op's K rows is
  // row r of those weights), so a tile of the same rows and columns is the same tile and is
  // stored once, by this identity, never compared by value; -1 (weights from a file, the
  // identity weights that join a concat's parts): a tile is stored once per distinct contents.
  int weight_id = -1;
  // A timing-only compile's seeded weights (Layer::seeded_weights, LoadOptions::timing_only):
  // `weights` and `weights_hi` are not computed (empty), `wide` says their precision; the
  // back end lays out the weight image's tiles without their bytes.
  bool no_values = false;
  bool wide = false;  // with no_values: 16-bit weights
  // An identity copy the quantizer adds to join a concat (a part copied into a joined tensor
  // written in place, or the joined tensor built from the parts, quantize.cpp): it moves data and
  // does none of the model's arithmetic (work() counts it as GEMM MACs, never as model MACs).
  bool copy = false;
  bool wide_weights() const { return no_values ? wide : !weights_hi.empty(); }
  // Weight i ([kernel_h][kernel_w][K][N] order) as an integer, 8 or 16 bits.
  int32_t weight(uint64_t i) const {
    return wide_weights() ? int32_t{static_cast<uint8_t>(weights[i])} + 256 * int32_t{weights_hi[i]} : weights[i];
  }
};

// max/avg pooling over square windows, no padding (docs/isa.md, pool); output scale = input's.
struct PoolOp {
  View input, output;
  isa::PoolKind kind = isa::PoolKind::max;
  uint64_t window = 2, stride = 2;
};

// Element-wise: out = func(round_half_away(op(a, b) x mult / 2^shift)) saturated to int8 (int16
// for a 16-bit output: sim::apply_func16), op on int8 or int16 values (each operand's tensor's
// bits) in 64 bits (docs/isa.md, vec). a, b and out have the same shape; b unused for pass.
struct VectorOp {
  isa::VecOp op = isa::VecOp::pass;
  View a, b, output;
  uint16_t mult = 1;
  uint8_t shift = 0;
  isa::Func func = isa::Func::identity;
};

using QOp = std::variant<MatmulOp, PoolOp, VectorOp>;

struct QGraph {
  std::string name;
  uint64_t batch = 1;
  std::vector<QTensor> tensors;
  std::vector<QOp> ops;               // in execution order: every op's inputs are produced earlier
  std::vector<std::string> op_layer;  // for each op, the description layer it implements
  std::vector<int> inputs;            // tensor index of each model input (Model::inputs order)
  std::vector<std::vector<int8_t>> input_data;  // for each input: batch x shape, NHWC, quantized
  int output = -1;                    // tensor index of the model's output (the last layer's)
  // The ops that begin a step of a loop the host drives (each LSTM layer-step's first gate, in
  // order): with the mapper's host_loop, the lowering starts a program segment at each but the
  // first (docs/compiler.md, "Host-driven loops").
  std::vector<size_t> loop_steps;
  // How the quantizer joined its concats (the mapper's concat_inplace, lower_options.h, on by
  // default): true, each concat is one tensor its branches write in place (MatmulOp outputs at a
  // channel0; parts that cannot be written so are copied in by an identity MatmulOp); false, a
  // concat is the list of its parts, read part by part, joined by an identity MatmulOp for readers
  // that need it. (A graph without concats is the same either way.)
  bool concat_inplace = true;
  // Written in place, the concats kept as parts all the same (quantize()'s `as_parts`: the
  // compile's fallback where a concat's joined tensor would be held in host memory on the machine,
  // compile.h place_concats), in model order; the lowering names them in meta.mapping_warnings.
  std::vector<std::string> concats_as_parts;
};

// The work of a MatmulOp per batch, from the graph alone (docs/report.md, "The model's MACs"):
// - model_macs: the model's multiply-accumulates, each once: batch x output pixels x taps x K /
//   groups x N, taps the kernel's (kernel_h x kernel_w, or those MatmulOp::taps marks: a dilated
//   kernel's 9, not the 25 positions the machine reads; a convolution's taps over its zero
//   padding included, as the usual count does; a 16-bit operand's product once); 0 for an
//   identity copy (MatmulOp::copy). The same for every mapping of the model: concats in place or
//   as parts, int8 or 16-bit elements.
// - gemm_macs: what a dense GEMM of the op computes: batch x output pixels x kernel_h x kernel_w x
//   K x N (a grouped convolution's zero blocks and the identity copies included): mapping-dependent.
// - model_weights: taps x K / groups x N, 0 for a copy (an LSTM gate's op at every
//   step counts its weights again: docs/workloads.md, "MACs per weight byte").
// - gemm_weights: kernel_h x kernel_w x K x N, as the GEMM holds them (copies included).
struct MatmulWork {
  uint64_t model_macs = 0, gemm_macs = 0, model_weights = 0, gemm_weights = 0;
  MatmulWork& operator+=(const MatmulWork& o);
};
MatmulWork matmul_work(const QGraph& graph, const MatmulOp& op);
// The sum over the graph's MatmulOps.
MatmulWork graph_matmul_work(const QGraph& graph);
// THE model's MACs per batch: graph_matmul_work(graph).model_macs. compare's TOPS and its check of
// reference data, the GPU and CPU runners' `model_macs` and `tops` all count this.
uint64_t model_macs(const QGraph& graph);

}  // namespace tpusim::compiler
