// The reference executors: exact values worked out by hand for the float reference and the
// golden integer reference (through quantize() where the scheme is part of the answer, or on
// QGraphs built directly where only the machine's integer semantics are).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/quantize.h"
#include "compiler/reference.h"
#include "isa/error.h"

using namespace tpusim;
using namespace tpusim::compiler;

namespace {

// Short names for graph.h's shape constructors.
Shape vec(uint64_t c) { return vector_shape(c); }
Shape seq(uint64_t steps, uint64_t c) { return sequence_shape(steps, c); }
Shape map(uint64_t h, uint64_t w, uint64_t c) { return map_shape(h, w, c); }

Layer make_layer(std::string name, LayerType type, std::vector<int> inputs, Shape out) {
  Layer l;
  l.name = std::move(name);
  l.type = type;
  l.inputs = std::move(inputs);
  l.out = out;
  return l;
}

Model one_input(Shape shape, std::vector<float> data, std::optional<double> scale, uint64_t batch = 1) {
  Model m;
  m.name = "test";
  m.batch = batch;
  m.inputs.push_back(ModelInput{"input", shape, std::move(data), scale});
  return m;
}

std::vector<int8_t> output_of(const QGraph& g) { return run_golden(g)[static_cast<size_t>(g.output)]; }

}  // namespace

TEST_CASE("dense 2 -> 2: quantized weights, biases, requantization and output by hand", "[reference]") {
  // x = {1, -0.5} at scale 0.01 -> {100, -50}. w[k][j] = {{0.5, -0.25}, {0.25, 1}}, per channel:
  // S0 = 0.01 x 0.5/127, S1 = 0.01 x 1/127 -> w_q = {{127, -32 (-31.75)}, {64 (63.5), 127}};
  // bias {0.1, -0.2} / S = {2540, -2540}. Output scale 0.02: factors S0/0.02 = 1/508 ->
  // 16513 / 2^23, S1/0.02 = 1/254 -> 16513 / 2^22.
  // col 0: 100 x 127 - 50 x 64 + 2540 = 12040; 12040 x 16513 / 2^23 = 23.70 -> 24 (float 0.475/0.02 = 23.75)
  // col 1: -3200 - 6350 - 2540 = -12090; x 16513 / 2^22 = -47.60 -> -48 (float -0.95/0.02 = -47.5)
  Model m = one_input(vec(2), {1.0f, -0.5f}, 0.01);
  Layer d = make_layer("fc", LayerType::dense, {model_input(0)}, vec(2));
  d.units = 2;
  d.weights = {0.5f, -0.25f, 0.25f, 1.0f};
  d.bias = {0.1f, -0.2f};
  d.scale = 0.02;
  m.layers.push_back(d);

  const auto f = run_float(m);
  REQUIRE(f[0].size() == 2);
  CHECK(f[0][0] == Approx(0.475));
  CHECK(f[0][1] == Approx(-0.95));

  const QGraph g = quantize(m);
  REQUIRE(g.ops.size() == 1);
  const auto& op = std::get<MatmulOp>(g.ops[0]);
  CHECK(g.input_data[0] == std::vector<int8_t>{100, -50});
  CHECK(op.weights == std::vector<int8_t>{127, -32, 64, 127});
  CHECK(op.bias == std::vector<int32_t>{2540, -2540});
  CHECK(op.mult == std::vector<uint16_t>{16513, 16513});
  CHECK(op.shift == std::vector<uint8_t>{23, 22});
  CHECK(output_of(g) == std::vector<int8_t>{24, -48});
}

TEST_CASE("conv2d 3x3 with padding 1, two filters, batch 2: golden equals float exactly", "[reference]") {
  // Input 3x3x1 = 1..9 at scale 1 (sample 2: negated). Filter 0: all 1.0 (w_q 127, S = 1/127);
  // filter 1: 2.0 at the centre (w_q 127, S = 2/127). Output scale 1: factor S/1 is 1/127 and
  // 2/127, so y = sum exactly: filter 0 = sum of the 3x3 neighbourhood (zero outside),
  // filter 1 = 2 x centre.
  std::vector<float> x;
  for (int s : {1, -1})
    for (int v = 1; v <= 9; ++v) x.push_back(static_cast<float>(s * v));
  Model m = one_input(map(3, 3, 1), x, 1.0, 2);
  Layer c = make_layer("conv", LayerType::conv2d, {model_input(0)}, map(3, 3, 2));
  c.units = 2;
  c.kernel_h = c.kernel_w = 3;
  c.pad = 1;
  c.use_bias = false;
  c.scale = 1.0;
  for (int r = 0; r < 9; ++r) c.weights.insert(c.weights.end(), {1.0f, r == 4 ? 2.0f : 0.0f});
  m.layers.push_back(c);

  const std::vector<int> sums = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  std::vector<int8_t> expect;
  for (int s : {1, -1})
    for (int p = 0; p < 9; ++p) expect.insert(expect.end(), {int8_t(s * sums[p]), int8_t(s * 2 * (p + 1))});
  const QGraph g = quantize(m);
  CHECK(output_of(g) == expect);
  const auto f = run_float(m)[0];
  for (size_t i = 0; i < expect.size(); ++i) CHECK(f[i] == float(expect[i]));
}

TEST_CASE("max and avg pooling, avg rounding half away from zero", "[reference]") {
  // 4x4x1 map at scale 1, windows 2x2 stride 2:
  //   [ 1  2 | -1 -2 ]   max: 4, -1, 2, 0      avg: 10/4 = 2.5 -> 3, -10/4 = -2.5 -> -3,
  //   [ 3  4 | -3 -4 ]                              5/4 = 1.25 -> 1, -2/4 = -0.5 -> -1
  //   [ 1  1 |  0 -1 ]
  //   [ 1  2 |  0 -1 ]
  const std::vector<float> x = {1, 2, -1, -2, 3, 4, -3, -4, 1, 1, 0, -1, 1, 2, 0, -1};
  for (bool avg : {false, true}) {
    Model m = one_input(map(4, 4, 1), x, 1.0);
    Layer p = make_layer("pool", avg ? LayerType::avg_pool : LayerType::max_pool, {model_input(0)}, map(2, 2, 1));
    p.kernel_h = p.kernel_w = 2;
    p.stride = 2;
    m.layers.push_back(p);
    const QGraph g = quantize(m);
    REQUIRE(g.ops.size() == 1);
    CHECK(std::holds_alternative<PoolOp>(g.ops[0]));
    CHECK(g.tensors[static_cast<size_t>(g.output)].scale == 1.0);
    CHECK(output_of(g) == (avg ? std::vector<int8_t>{3, -3, 1, -1} : std::vector<int8_t>{4, -1, 2, 0}));
    const auto f = run_float(m)[0];
    CHECK(f == (avg ? std::vector<float>{2.5f, -2.5f, 1.25f, -0.5f} : std::vector<float>{4, -1, 2, 0}));
  }
}

TEST_CASE("add of operands at different scales: rescale pass, then add", "[reference]") {
  // a at 0.1: {1, -2, 0.3} -> {10, -20, 3}; b at 0.05: {0.25, 0.35, -0.05} -> {5, 7, -1}.
  // b is finer: pass x 0.05/0.1 = 1/2 (mult 1, shift 1) -> {2.5 -> 3, 3.5 -> 4, -0.5 -> -1};
  // add at 0.1 with output scale 0.1 (mult 1, shift 0): {13, -16, 2}.
  Model m = one_input(vec(3), {1.0f, -2.0f, 0.3f}, 0.1);
  m.inputs.push_back(ModelInput{"b", vec(3), {0.25f, 0.35f, -0.05f}, 0.05});
  Layer a = make_layer("sum", LayerType::add, {model_input(0), model_input(1)}, vec(3));
  a.scale = 0.1;
  m.layers.push_back(a);
  const QGraph g = quantize(m);
  REQUIRE(g.ops.size() == 2);
  const auto& pass = std::get<VectorOp>(g.ops[0]);
  CHECK(pass.op == isa::VecOp::pass);
  CHECK(pass.a.tensor == g.inputs[1]);
  CHECK((pass.mult == 1 && pass.shift == 1));
  const auto& add = std::get<VectorOp>(g.ops[1]);
  CHECK(add.op == isa::VecOp::add);
  CHECK((add.mult == 1 && add.shift == 0));
  CHECK(output_of(g) == std::vector<int8_t>{13, -16, 2});
}

TEST_CASE("mul: the product's scale s_a x s_b requantized to the output", "[reference]") {
  // a, b at 0.1: {1, -0.3, 0.5} -> {10, -3, 5}; {0.3, 0.5, 0.1} -> {3, 5, 1}. Products at 0.01:
  // {30, -15, 5}; output scale 0.02: x 1/2 -> {15, -7.5 -> -8, 2.5 -> 3}.
  Model m = one_input(vec(3), {1.0f, -0.3f, 0.5f}, 0.1);
  m.inputs.push_back(ModelInput{"b", vec(3), {0.3f, 0.5f, 0.1f}, 0.1});
  Layer p = make_layer("prod", LayerType::mul, {model_input(0), model_input(1)}, vec(3));
  p.scale = 0.02;
  m.layers.push_back(p);
  const QGraph g = quantize(m);
  REQUIRE(g.ops.size() == 1);
  CHECK(output_of(g) == std::vector<int8_t>{15, -8, 3});
}

TEST_CASE("golden matmul: int32 accumulation wraps around", "[reference]") {
  // 140000 x 127 x 127 = 2,258,060,000 wraps to 2,258,060,000 - 2^32 = -2,036,907,296:
  // requantized x 1 / 2^24 = -121.4 -> -121 (without the wrap it would be +134.6 -> 127).
  const uint64_t k = 140000;
  QGraph g;
  g.tensors = {QTensor{"x", vec(k), 1, "x"}, QTensor{"y", vec(1), 1, "y"}};
  g.inputs = {0};
  g.input_data = {std::vector<int8_t>(k, 127)};
  g.output = 1;
  MatmulOp op;
  op.inputs = {View{0}};
  op.output = View{1};
  op.k = k;
  op.n = 1;
  op.weights.assign(k, 127);
  op.mult = {1};
  op.shift = {24};
  g.ops = {op};
  g.op_layer = {"y"};
  CHECK(output_of(g) == std::vector<int8_t>{-121});
}

TEST_CASE("golden matmul: per-column table with biases, relux clip, two inputs concatenated", "[reference]") {
  // inputs a = {2}, b = {3, -1} (K = 3), w[k][j] = {{1, 2}, {4, -1}, {5, 0}}:
  // acc = {2 + 12 - 5, 4 - 3 + 0} = {9, 1}; bias {1, -7}: {10, -6};
  // col 0: x 3 / 2^1 = 15; col 1: x 5 / 2^0 = -30. relux clip 12: {12, 0}.
  QGraph g;
  g.tensors = {QTensor{"a", vec(1), 1, "a"}, QTensor{"b", vec(2), 1, "b"}, QTensor{"y", vec(2), 1, "y"}};
  g.inputs = {0, 1};
  g.input_data = {{2}, {3, -1}};
  g.output = 2;
  MatmulOp op;
  op.inputs = {View{0}, View{1}};
  op.output = View{2};
  op.k = 3;
  op.n = 2;
  op.weights = {1, 2, 4, -1, 5, 0};
  op.bias = {1, -7};
  op.mult = {3, 5};
  op.shift = {1, 0};
  op.func = isa::Func::relux;
  op.clip = 12;
  g.ops = {op};
  g.op_layer = {"y"};
  CHECK(output_of(g) == std::vector<int8_t>{12, 0});
  std::get<MatmulOp>(g.ops[0]).func = isa::Func::identity;
  CHECK(output_of(g) == std::vector<int8_t>{15, -30});
}

TEST_CASE("golden matmul: an output view from channel0 > 0 only where concats are written in place", "[reference]") {
  // x = {2} -> y [2 channels], N = 1, w = {3}: acc = 6, x 1 / 2^0 = 6 into channel channel0 of y.
  QGraph g;
  g.tensors = {QTensor{"x", vec(1), 1, "x"}, QTensor{"y", vec(2), 1, "y"}};
  g.inputs = {0};
  g.input_data = {{2}};
  g.output = 1;
  MatmulOp op;
  op.inputs = {View{0}};
  op.output = View{1};
  op.output.channel0 = 1;
  op.k = 1;
  op.n = 1;
  op.weights = {3};
  op.mult = {1};
  op.shift = {0};
  g.ops = {op};
  g.op_layer = {"y"};
  // Not in place: the output must be the whole tensor from channel 0 (out.c == N and channel0 == 0):
  // N = 1 from channel 1 of a 2-channel y is rejected.
  g.concat_inplace = false;
  CHECK_THROWS_AS(run_golden(g), InputError);
  // N = 1 from channel 1 of a 1-channel y (out.c == N, channel0 > 0) would write past y: rejected
  // either way.
  g.tensors[1] = QTensor{"y", vec(1), 1, "y"};
  CHECK_THROWS_AS(run_golden(g), InputError);
  g.concat_inplace = true;
  CHECK_THROWS_AS(run_golden(g), InputError);
  g.tensors[1] = QTensor{"y", vec(2), 1, "y"};
  // In place: channels [1, 2) of y are written, channel 0 is left 0.
  CHECK(output_of(g) == std::vector<int8_t>{0, 6});
  // Channels [1, 3) run past y's 2 channels: rejected either way.
  auto& wide = std::get<MatmulOp>(g.ops[0]);
  wide.n = 2;
  wide.weights = {3, 3};
  wide.mult = {1, 1};
  wide.shift = {0, 0};
  CHECK_THROWS_AS(run_golden(g), InputError);
  g.concat_inplace = false;
  CHECK_THROWS_AS(run_golden(g), InputError);
  // Channel 0, N = 2, not in place: accepted, y = {6, 6}.
  wide.output.channel0 = 0;
  CHECK(output_of(g) == std::vector<int8_t>{6, 6});
}

TEST_CASE("golden vec: sigmoid and tanh read Q7.8 and write Q0.7, views select pixels", "[reference]") {
  // pass x 16 of pixel 0, then pixel 1, of a 2-pixel sequence {{0, 16}, {-16, 100}}: y = 0, 256,
  // -256, 1600 read as y / 256: sigmoid(0) = 0.5 -> 63.5 -> 64, sigmoid(1) -> 127 x 0.731 = 92.8
  // -> 93, tanh(-1) -> -96.7 -> -97, tanh(6.25) -> 127.
  QGraph g;
  g.tensors = {QTensor{"x", seq(2, 2), 1, "x"}, QTensor{"s", vec(2), 1, "s"}, QTensor{"t", vec(2), 1, "t"}};
  g.inputs = {0};
  g.input_data = {{0, 16, -16, 100}};
  g.output = 2;
  VectorOp s;
  s.op = isa::VecOp::pass;
  s.a = s.b = View{0, 0, 1};
  s.output = View{1};
  s.func = isa::Func::sigmoid;
  s.mult = 16;
  VectorOp t = s;
  t.a = t.b = View{0, 1, 1};
  t.output = View{2};
  t.func = isa::Func::tanh;
  g.ops = {s, t};
  g.op_layer = {"s", "t"};
  const auto out = run_golden(g);
  CHECK(out[1] == std::vector<int8_t>{64, 93});
  CHECK(out[2] == std::vector<int8_t>{-97, 127});
}

TEST_CASE("golden rejects a view outside its tensor", "[reference]") {
  QGraph g;
  g.tensors = {QTensor{"x", seq(2, 2), 1, "x"}, QTensor{"y", vec(2), 1, "y"}};
  g.inputs = {0};
  g.input_data = {{0, 0, 0, 0}};
  g.output = 1;
  VectorOp v;
  v.op = isa::VecOp::pass;
  v.a = v.b = View{0, 2, 1};
  v.output = View{1};
  g.ops = {v};
  g.op_layer = {"y"};
  CHECK_THROWS_AS(run_golden(g), InputError);
}

TEST_CASE("float reference: flatten order, activations, fused relu6", "[reference]") {
  // 1x2x2 map {(-1, 8), (3, -4)} -> flatten [4] -> dense identity weights with relu6 -> {0, 6, 3, 0};
  // then a sigmoid layer: {0.5, 0.99753, 0.95257, 0.5}.
  Model m = one_input(map(1, 2, 2), {-1, 8, 3, -4}, std::nullopt);
  m.layers.push_back(make_layer("flat", LayerType::flatten, {model_input(0)}, vec(4)));
  Layer d = make_layer("fc", LayerType::dense, {0}, vec(4));
  d.units = 4;
  d.use_bias = false;
  d.activation = Activation::relu6;
  d.weights.assign(16, 0.0f);
  for (int i = 0; i < 4; ++i) d.weights[static_cast<size_t>(i * 4 + i)] = 1.0f;
  m.layers.push_back(d);
  Layer s = make_layer("sig", LayerType::activation, {1}, vec(4));
  s.activation = Activation::sigmoid;
  m.layers.push_back(s);
  const auto f = run_float(m);
  CHECK(f[0] == std::vector<float>{-1, 8, 3, -4});
  CHECK(f[1] == std::vector<float>{0, 6, 3, 0});
  CHECK(f[2][1] == Approx(1 / (1 + std::exp(-6.0))));
  CHECK(f[2][3] == Approx(0.5));
}

TEST_CASE("float reference: one LSTM step by hand", "[reference]") {
  // 1 unit, 1 input, 1 step, x = 1: gate pre-activations = w_x (h_{-1} = 0) + bias:
  // i = sigmoid(0.5), f unused (c_{-1} = 0), g = tanh(1), o = sigmoid(-1 + 0.5);
  // c = i g, h = o tanh(c).
  Model m = one_input(seq(1, 1), {1.0f}, std::nullopt);
  Layer l = make_layer("lstm", LayerType::lstm, {model_input(0)}, vec(1));
  l.units = 1;
  l.weights = {0.5f, 0.7f, 2.0f, 9.0f, 1.0f, 0.3f, -1.0f, 0.1f};  // per gate: [w_x, w_h]
  l.bias = {0.0f, 0.0f, 0.0f, 0.5f};
  m.layers.push_back(l);
  const double i = 1 / (1 + std::exp(-0.5)), g = std::tanh(1.0), o = 1 / (1 + std::exp(0.5));
  const auto run = run_float_detailed(m);
  CHECK(run.outputs[0][0] == Approx(o * std::tanh(i * g)));
  REQUIRE(run.lstm_cell_max[0].size() == 1);  // 1 stacked layer x 1 step
  CHECK(run.lstm_cell_max[0][0] == Approx(i * g));
}

// The LSTM's definition in plain loops, float sums in the reference's order: per gate the bias,
// then x_t's nonzero inputs, then h_{t-1}'s, each product rounded and then the sum (the reference
// runs the x parts of every step first and continues each over its h: it must give these floats,
// bit for bit). Stacked layers, several steps and samples, some zero inputs, a column count that
// is not a multiple of the vector width.
TEST_CASE("float reference: a stacked LSTM gives the plain loops' floats bit for bit", "[reference]") {
  const uint64_t steps = 3, in_c = 37, u = 150, stack = 2, batch = 2;
  std::mt19937_64 rng(18);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(batch * steps * in_c);
  for (float& v : x) v = rng() % 5 == 0 ? 0.0f : d(rng);
  Model m = one_input(seq(steps, in_c), x, std::nullopt, batch);
  Layer l = make_layer("lstm", LayerType::lstm, {model_input(0)}, seq(steps, u));
  l.units = u;
  l.stack = stack;
  l.return_sequences = true;
  l.weights.resize(4 * (in_c + u) * u + (stack - 1) * 4 * (u + u) * u);
  for (float& v : l.weights) v = d(rng) * 0.2f;
  l.bias.resize(stack * 4 * u);
  for (float& v : l.bias) v = d(rng) * 0.1f;
  m.layers.push_back(l);
  const std::vector<float> got = run_float(m)[0];
  std::vector<float> in = x, out;
  uint64_t c_in = in_c, offset = 0;
  for (uint64_t s = 0; s < stack; ++s) {
    const uint64_t rows = c_in + u;
    out.assign(batch * steps * u, 0.0f);
    for (uint64_t n = 0; n < batch; ++n) {
      std::vector<float> h(u, 0.0f);
      std::vector<double> c(u, 0.0);
      for (uint64_t t = 0; t < steps; ++t) {
        std::vector<float> z[4];
        for (uint64_t g = 0; g < 4; ++g) {
          z[g].assign(u, 0.0f);
          for (uint64_t j = 0; j < u; ++j) {
            float a = l.bias[(s * 4 + g) * u + j];
            for (uint64_t k = 0; k < rows; ++k) {
              const float v = k < c_in ? in[(n * steps + t) * c_in + k] : h[k - c_in];
              if (v == 0.0f) continue;
              const volatile float p = v * l.weights[offset + (g * rows + k) * u + j];  // (no fused multiply-add)
              a = a + p;
            }
            z[g][j] = a;
          }
        }
        for (uint64_t j = 0; j < u; ++j) {
          const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
          // (g: the float tanh of the float sum, as the reference takes it)
          const double i = sig(z[0][j]), f = sig(z[1][j]), g = std::tanh(z[2][j]), o = sig(z[3][j]);
          c[j] = f * c[j] + i * g;
          h[j] = static_cast<float>(o * std::tanh(c[j]));
          out[(n * steps + t) * u + j] = h[j];
        }
      }
    }
    in = out;
    offset += 4 * rows * u;
    c_in = u;
  }
  REQUIRE(got.size() == out.size());
  CHECK(std::memcmp(got.data(), out.data(), out.size() * sizeof(float)) == 0);
}

TEST_CASE("float reference: bad parameters name the layer", "[reference]") {
  Model m = one_input(vec(2), {1, 2}, std::nullopt);
  Layer d = make_layer("fc1", LayerType::dense, {model_input(0)}, vec(3));
  d.units = 3;
  d.weights.assign(5, 0.0f);
  d.bias.assign(3, 0.0f);
  m.layers.push_back(d);
  CHECK_THROWS_WITH(run_float(m), Catch::Contains("layer fc1") && Catch::Contains("weights have 5 values, expected 6"));
  m.layers[0].weights.assign(6, 0.0f);
  m.layers[0].out = vec(4);
  CHECK_THROWS_WITH(run_float(m), Catch::Contains("layer fc1") && Catch::Contains("output shape"));
  m.layers[0].out = vec(3);
  m.layers[0].inputs = {0};
  CHECK_THROWS_WITH(run_float(m), Catch::Contains("layer fc1") && Catch::Contains("no model input or earlier layer"));
}

TEST_CASE("quant_error by hand", "[reference]") {
  // golden {10, -20} x 0.1 = {1, -2} against {1.05, -2.2}: errors 0.05, 0.2; max |float| 2.2.
  const QuantError e = quant_error({1.05f, -2.2f}, std::vector<int8_t>{10, -20}, 0.1);
  CHECK(e.max_abs == Approx(0.2));
  CHECK(e.max_float == Approx(2.2));
  CHECK(e.relative == Approx(0.2 / 2.2));
  CHECK(e.rms == Approx(std::sqrt((0.05 * 0.05 + 0.2 * 0.2) / 2)));
  CHECK_THROWS_AS(quant_error({1.0f}, std::vector<int8_t>{1, 2}, 1.0), InputError);
}

TEST_CASE("a 16-bit tensor's planes join into its values, and quant_error of 16-bit values by hand", "[reference]") {
  // Elements 300 = 0x012C, -2 = 0xFFFE, -32768 = 0x8000: low bytes 0x2C, 0xFE, 0x00, then high
  // bytes 0x01, 0xFF, 0x80 (graph.h QTensor).
  const std::vector<int8_t> planes = {0x2C, int8_t(0xFE), 0x00, 0x01, int8_t(0xFF), int8_t(0x80)};
  CHECK(tensor_values(planes, 16) == std::vector<int32_t>{300, -2, -32768});
  CHECK(tensor_values(planes, 8) == std::vector<int32_t>{0x2C, -2, 0, 1, -1, -128});
  // {300, -2} x 0.01 = {3, -0.02} against {3.004, -0.02}: max error 0.004 of 3.004.
  const QuantError e = quant_error({3.004f, -0.02f}, std::vector<int32_t>{300, -2}, 0.01);
  CHECK(e.max_abs == Approx(0.004).epsilon(1e-4));
  CHECK(e.relative == Approx(0.004 / 3.004).epsilon(1e-4));
}

// The float reference's convolution kernel (a position's nonzero inputs per tap, its columns in
// register blocks of 128, 64 and 16 floats, the last ones with multiply_add) against the plainest
// loops in the same order: the bias, then each tap (r, q) and channel k in turn, a product and a
// sum each rounded to float, an input of zero skipped (so -0 accumulators and zero inputs behave
// as in the plain loops). Odd shapes: units around the block widths, padding, stride 2, batches.
TEST_CASE("float reference: convolutions equal the plainest loops bit for bit", "[reference]") {
  struct Case {
    uint64_t h, w, c, kh, stride, pad, units, batch;
  };
  const Case cases[] = {{5, 7, 3, 3, 1, 1, 16, 3},  {6, 6, 5, 3, 2, 1, 37, 2}, {4, 4, 17, 1, 1, 0, 33, 5},
                        {3, 5, 1, 2, 1, 0, 15, 1},  {8, 8, 32, 3, 1, 1, 64, 1}, {2, 2, 8, 2, 1, 1, 1, 9},
                        {4, 4, 6, 3, 1, 1, 200, 2}, {3, 3, 4, 1, 1, 0, 264, 3}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Case& cs : cases) {
    const uint64_t oh = (cs.h + 2 * cs.pad - cs.kh) / cs.stride + 1, ow = (cs.w + 2 * cs.pad - cs.kh) / cs.stride + 1;
    std::vector<float> x(cs.batch * cs.h * cs.w * cs.c);
    for (float& v : x) {
      const uint32_t pick = rng() % 8;
      v = pick == 0 ? 0.0f : pick == 1 ? -0.0f : u(rng);  // zeros of both signs, as after a ReLU
    }
    Model m = one_input(map(cs.h, cs.w, cs.c), x, std::nullopt, cs.batch);
    Layer l = make_layer("conv", LayerType::conv2d, {model_input(0)}, map(oh, ow, cs.units));
    l.units = cs.units, l.kernel_h = l.kernel_w = cs.kh, l.stride = cs.stride, l.pad = cs.pad;
    l.weights.resize(cs.kh * cs.kh * cs.c * cs.units);
    for (float& v : l.weights) v = u(rng);
    l.bias.resize(cs.units);
    for (float& v : l.bias) v = rng() % 4 == 0 ? -0.0f : u(rng);  // a -0 accumulator stays -0 over zero inputs
    l.use_bias = true;
    m.layers.push_back(l);
    const std::vector<float> got = run_float(m).at(0);
    std::vector<float> want;
    for (uint64_t img = 0; img < cs.batch; ++img)
      for (uint64_t oy = 0; oy < oh; ++oy)
        for (uint64_t ox = 0; ox < ow; ++ox)
          for (uint64_t j = 0; j < cs.units; ++j) {
            volatile float acc = l.bias[j];  // (volatile: each product and sum rounded alone)
            for (uint64_t r = 0; r < cs.kh; ++r)
              for (uint64_t q = 0; q < cs.kh; ++q)
                for (uint64_t k = 0; k < cs.c; ++k) {
                  const uint64_t iy = oy * cs.stride + r, ix = ox * cs.stride + q;
                  if (iy < cs.pad || ix < cs.pad || iy - cs.pad >= cs.h || ix - cs.pad >= cs.w) continue;
                  const float v = x[((img * cs.h + iy - cs.pad) * cs.w + ix - cs.pad) * cs.c + k];
                  if (v == 0.0f) continue;
                  volatile float product = v * l.weights[((r * cs.kh + q) * cs.c + k) * cs.units + j];
                  acc = acc + product;
                }
            want.push_back(float(acc));
          }
    INFO("input " << cs.h << " x " << cs.w << " x " << cs.c << ", kernel " << cs.kh << ", stride " << cs.stride
                  << ", pad " << cs.pad << ", units " << cs.units << ", batch " << cs.batch);
    REQUIRE(got.size() == want.size());
    bool same = true;
    for (size_t i = 0; i < got.size(); ++i) same = same && std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    CHECK(same);
  }
}
