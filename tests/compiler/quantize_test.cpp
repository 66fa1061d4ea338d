// The quantizer: requant_for's exactness and limits, the QGraph's structure (op counts, views,
// kernels, tensors written before they are read), the documented scale choices, errors naming
// the layer, and the golden integer output against the float reference on random small models.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
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

// Random models layer by layer, with shapes inferred as the front end does and parameters drawn
// like its seeded defaults (Glorot-uniform weights, biases in [-0.1, 0.1], inputs in [-1, 1]).
struct Builder {
  Model m;
  std::mt19937_64 rng;

  Builder(Shape in, uint64_t batch, uint64_t seed) : rng(seed) {
    m.name = "random";
    m.batch = batch;
    m.inputs.push_back(ModelInput{"input", in, uniform(batch * in.elements(), 1.0), std::nullopt});
  }
  std::vector<float> uniform(uint64_t n, double a) {
    std::uniform_real_distribution<double> d(-a, a);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(d(rng));
    return v;
  }
  const Shape& shape(int entry) const {
    return is_model_input(entry) ? m.inputs[static_cast<size_t>(model_input_index(entry))].shape
                                 : m.layers[static_cast<size_t>(entry)].out;
  }
  int add(LayerType type, std::vector<int> inputs, Shape out, Activation act = Activation::none) {
    Layer l;
    l.name = std::string(layer_type_name_for_test(type)) + std::to_string(m.layers.size() + 1);
    l.type = type;
    l.inputs = std::move(inputs);
    l.out = out;
    l.activation = act;
    m.layers.push_back(l);
    return static_cast<int>(m.layers.size()) - 1;
  }
  static const char* layer_type_name_for_test(LayerType t) {
    switch (t) {
      case LayerType::dense: return "dense";
      case LayerType::conv2d: return "conv";
      case LayerType::max_pool: return "maxpool";
      case LayerType::avg_pool: return "avgpool";
      case LayerType::flatten: return "flatten";
      case LayerType::add: return "add";
      case LayerType::mul: return "mul";
      case LayerType::activation: return "act";
      case LayerType::lstm: return "lstm";
      case LayerType::concat: return "concat";
      case LayerType::gru: return "gru";
    }
    return "?";
  }
  Layer& last() { return m.layers.back(); }

  int dense(int in, uint64_t units, Activation act = Activation::none) {
    const Shape& s = shape(in);
    const uint64_t k = s.c;
    Shape out = s;
    out.c = units;
    const int i = add(LayerType::dense, {in}, out, act);
    last().units = units;
    last().weights = uniform(k * units, std::sqrt(6.0 / double(k + units)));
    last().bias = uniform(units, 0.1);
    return i;
  }
  int conv(int in, uint64_t filters, uint64_t k, uint64_t stride, uint64_t pad, Activation act = Activation::none) {
    const Shape& s = shape(in);
    const uint64_t c = s.c;
    const int i = add(LayerType::conv2d, {in},
                      map((s.h + 2 * pad - k) / stride + 1, (s.w + 2 * pad - k) / stride + 1, filters), act);
    Layer& l = last();
    l.units = filters;
    l.kernel_h = l.kernel_w = k;
    l.stride = stride;
    l.pad = pad;
    l.weights = uniform(k * k * c * filters, std::sqrt(6.0 / double(k * k * (c + filters))));
    l.bias = uniform(filters, 0.1);
    return i;
  }
  int pool(int in, bool avg, uint64_t win, uint64_t stride) {
    const Shape s = shape(in);
    const int i = add(avg ? LayerType::avg_pool : LayerType::max_pool, {in},
                      map((s.h - win) / stride + 1, (s.w - win) / stride + 1, s.c));
    last().kernel_h = last().kernel_w = win;
    last().stride = stride;
    return i;
  }
  int flatten(int in) { return add(LayerType::flatten, {in}, vec(shape(in).elements())); }
  int binary(LayerType t, int a, int b, Activation act = Activation::none) {
    const Shape s = shape(a);
    return add(t, {a, b}, s, act);
  }
  int concat(std::vector<int> inputs) {
    Shape s = shape(inputs[0]);
    s.c = 0;
    for (int e : inputs) s.c += shape(e).c;
    return add(LayerType::concat, std::move(inputs), s);
  }
  int activation(int in, Activation act) {
    const Shape s = shape(in);
    return add(LayerType::activation, {in}, s, act);
  }
  int lstm(int in, uint64_t units, uint64_t stack, bool sequences) {
    const Shape s = shape(in);
    const int i = add(LayerType::lstm, {in}, sequences ? seq(s.h, units) : vec(units));
    Layer& l = last();
    l.units = units;
    l.stack = stack;
    l.return_sequences = sequences;
    for (uint64_t k = 0; k < stack; ++k) {
      const uint64_t rows = (k == 0 ? s.c : units) + units;
      const auto w = uniform(4 * rows * units, std::sqrt(6.0 / double(rows + units)));
      l.weights.insert(l.weights.end(), w.begin(), w.end());
    }
    l.bias = uniform(stack * 4 * units, 0.1);
    return i;
  }
};

template <typename T>
size_t count_ops(const QGraph& g) {
  return static_cast<size_t>(std::count_if(g.ops.begin(), g.ops.end(), [](const QOp& op) { return std::holds_alternative<T>(op); }));
}

// Every op reads only pixels written before it (all their channels) and writes each pixel's
// channels once (a concat written in place: each branch its channels of the joined tensor); names
// are unique; every op has its layer; the output is written in full.
void check_structure(const QGraph& g) {
  REQUIRE(g.op_layer.size() == g.ops.size());
  std::set<std::string> names;
  for (const QTensor& t : g.tensors) CHECK(names.insert(t.name).second);
  // Channels written per pixel (as ranges: each channel at most once).
  std::vector<std::vector<std::vector<bool>>> written(g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i)
    written[i].assign(g.tensors[i].shape.pixels(), std::vector<bool>(g.tensors[i].shape.c, false));
  for (int t : g.inputs)
    for (auto& px : written[static_cast<size_t>(t)]) px.assign(px.size(), true);
  const auto full = [](const std::vector<bool>& px) { return std::all_of(px.begin(), px.end(), [](bool b) { return b; }); };
  const auto range = [&](const View& v) {
    REQUIRE(v.tensor >= 0);
    REQUIRE(static_cast<size_t>(v.tensor) < g.tensors.size());
    const uint64_t n = v.pixels ? v.pixels : g.tensors[static_cast<size_t>(v.tensor)].shape.pixels();
    return std::pair{v.pixel0, v.pixel0 + n};
  };
  const auto read = [&](const View& v) {
    const auto [a, b] = range(v);
    for (uint64_t p = a; p < b; ++p) CHECK(full(written[static_cast<size_t>(v.tensor)].at(p)));
  };
  // Channels [c0, c0 + n) of the view's pixels (n = 0: all of them).
  const auto write = [&](const View& v, uint64_t n) {
    const auto [a, b] = range(v);
    for (uint64_t p = a; p < b; ++p) {
      std::vector<bool>& px = written[static_cast<size_t>(v.tensor)].at(p);
      const uint64_t c1 = n ? v.channel0 + n : px.size();
      REQUIRE(c1 <= px.size());
      for (uint64_t c = v.channel0; c < c1; ++c) {
        CHECK_FALSE(px[c]);
        px[c] = true;
      }
    }
  };
  for (const QOp& op : g.ops) {
    if (const auto* m = std::get_if<MatmulOp>(&op)) {
      for (const View& v : m->inputs) read(v);
      write(m->output, m->n);
    } else if (const auto* p = std::get_if<PoolOp>(&op)) {
      read(p->input);
      write(p->output, 0);
    } else if (const auto* v = std::get_if<VectorOp>(&op)) {
      read(v->a);
      if (v->op != isa::VecOp::pass) read(v->b);
      write(v->output, 0);
    }
  }
  for (const auto& px : written.at(static_cast<size_t>(g.output))) CHECK(full(px));
}

QuantError error_of(const Model& m) {
  const QGraph g = quantize(m);
  check_structure(g);
  const auto golden = run_golden(g);
  const auto f = run_float(m);
  const QTensor& out = g.tensors[static_cast<size_t>(g.output)];  // (8 or 16 bits)
  return quant_error(f.back(), tensor_values(golden[static_cast<size_t>(g.output)], out.bits), out.scale);
}

// The two concat tests' model: input 5x5x3 -> conv 1x1 (4, relu) = a, conv 3x3 pad 1 (6, relu) = b,
// conv 1x1 (2, relu) = c; concat [a, b, c] (12); then max pool 2 (part by part: 4 x 4 x 12), conv
// 1x1 (5) reading the pool; then a concat of that conv and the pool (4 x 4 x 17), read by a 3x3
// conv (2 x 2 x 3, which needs the joined tensor: materialized).
struct TwoConcats {
  Builder b{map(5, 5, 3), 2, 11};
  int cat = 0, cat2 = 0;
  TwoConcats() {
    const int a = b.conv(model_input(0), 4, 1, 1, 0, Activation::relu);
    const int br = b.conv(model_input(0), 6, 3, 1, 1, Activation::relu);
    const int c = b.conv(model_input(0), 2, 1, 1, 0, Activation::relu);
    cat = b.concat({a, br, c});
    const int p = b.pool(cat, false, 2, 1);
    const int d = b.conv(p, 5, 1, 1, 0, Activation::relu);
    cat2 = b.concat({d, p});
    b.conv(cat2, 3, 3, 1, 0);
  }
};

}  // namespace

TEST_CASE("requant_for: exact powers of two and integers, best 16-bit precision, limits", "[quantize]") {
  const auto is = [](Requant r, uint16_t mult, uint8_t shift) { return r.mult == mult && r.shift == shift; };
  CHECK(is(requant_for(1.0), 1, 0));
  CHECK(is(requant_for(0.5), 1, 1));
  CHECK(is(requant_for(0.25), 1, 2));
  CHECK(is(requant_for(std::ldexp(1.0, -40)), 1, 40));
  CHECK(is(requant_for(2.0), 2, 0));
  CHECK(is(requant_for(1.5), 3, 1));         // 49152 / 2^15 in smallest terms
  CHECK(is(requant_for(65535.0), 65535, 0));
  CHECK(is(requant_for(1.0 / 3), 43691, 17));  // 2^17 / 3 = 43690.67; 2^18 / 3 would not fit
  CHECK(is(requant_for(1.0 / 127), 16513, 21));  // 2^22 / 127 = 33026.0 -> 33026 / 2^22
  CHECK(is(requant_for(1e-30), 0, 0));       // below 2^-64: every product rounds to 0
  for (double f : {0.001, 0.3, 0.7, 3.3, 100.1, 12345.6}) {
    const Requant r = requant_for(f);
    CHECK(std::abs(std::ldexp(double(r.mult), -r.shift) / f - 1) < 1.0 / 32768);
    CHECK(r.shift <= 63);
  }
  CHECK_THROWS_WITH(requant_for(65536.0), Catch::Contains("too large"));
  CHECK_THROWS_AS(requant_for(0.0), InputError);
  CHECK_THROWS_AS(requant_for(-1.0), InputError);
  CHECK_THROWS_AS(requant_for(NAN), InputError);
}

TEST_CASE("LSTM: 4T-1 gate matmuls and 5T-2 vector ops per stacked layer, views of the h sequence", "[quantize]") {
  for (bool sequences : {false, true}) {
    Builder b(seq(3, 5), 2, 7);
    b.lstm(model_input(0), 4, 2, sequences);
    b.m.layers.back().weight_bits = 8;  // (int8 gates and h; automatic measures: wide_inputs_test.cpp)
    const QGraph g = quantize(b.m);
    check_structure(g);
    // 2 stacked layers x (4 x 3 - 1) gates; 2 x (3 + 5 x 2) vector ops.
    CHECK(count_ops<MatmulOp>(g) == 22);
    CHECK(count_ops<VectorOp>(g) == 26);
    CHECK(g.ops.size() == 48);
    const QTensor& out = g.tensors[static_cast<size_t>(g.output)];
    CHECK(out.name == "lstm1");
    CHECK(out.scale == 1.0 / 127);
    CHECK(out.shape.pixels() == (sequences ? 3u : 1u));
    CHECK(out.shape.c == 4);
    // Step 0 reads x alone (K = in), later steps [x_t, h_{t-1}]; stacked layer 1 reads layer 0's h.
    const auto& first = std::get<MatmulOp>(g.ops[0]);
    CHECK(first.inputs.size() == 1);
    CHECK(first.k == 5);
    CHECK(g.tensors[static_cast<size_t>(first.output.tensor)].name == "lstm1.l0.t0.i");
    CHECK(first.func == isa::Func::sigmoid);
    size_t two_input = 0;
    for (const QOp& op : g.ops)
      if (const auto* m = std::get_if<MatmulOp>(&op); m && m->inputs.size() == 2) {
        ++two_input;
        CHECK(m->inputs[0].pixels == 1);
        CHECK(m->inputs[1].pixel0 + 1 == m->inputs[0].pixel0);
        CHECK(m->k == g.tensors[static_cast<size_t>(m->inputs[0].tensor)].shape.c + 4);
      }
    CHECK(two_input == 2 * 4 * 2);
    std::set<std::string> names;
    for (const QTensor& t : g.tensors) names.insert(t.name);
    CHECK(names.count("lstm1.l0.t0.f") == 0);
    CHECK(names.count("lstm1.l1.t2.f") == 1);
    CHECK(names.count("lstm1.l0.h") == 1);
    for (const std::string& op_layer : g.op_layer) CHECK(op_layer == "lstm1");
    // Each step's cell state has its own scale: the float run's largest |c_t|, |f c_{t-1}|, |i g| at that
    // step / 32767 (the cell grows over the steps), and fc, ig, c of a step share it. With
    // elements = "int8", / 127. The element width (quantize.cpp): gates, c, fc, ig, tc 16-bit (vecs
    // read them only), h and the output 8-bit (matmuls read h).
    const FloatRun run = run_float_detailed(b.m);
    REQUIRE(run.lstm_cell_max[0].size() == 2 * 3);
    for (const bool wide : {true, false}) {
      compiler::Model m = b.m;
      m.wide_elements = wide;
      const QGraph q = quantize(m);
      int cells = 0, gates = 0, narrow = 0;
      for (const QTensor& t : q.tensors) {
        for (uint64_t l = 0; l < 2; ++l)
          for (uint64_t step = 0; step < 3; ++step) {
            const std::string s = "lstm1.l" + std::to_string(l) + ".t" + std::to_string(step);
            for (const char* part : {".c", ".fc", ".ig"})
              if (t.name == s + part) {
                CHECK(t.scale == run.lstm_cell_max[0][l * 3 + step] / (wide ? 32767 : 127));
                CHECK(t.bits == (wide ? 16 : 8));
                ++cells;
              }
            for (const char* part : {".i", ".f", ".g", ".o", ".tc"})
              if (t.name == s + part) {
                CHECK(t.scale == 1.0 / (wide ? 32767 : 127));
                CHECK(t.bits == (wide ? 16 : 8));
                ++gates;
              }
          }
        narrow += t.bits == 8;
      }
      CHECK(cells == 2 * (3 + 2 + 2));  // per stacked layer: c at each step, fc and ig from step 1
      CHECK(gates == 2 * (4 * 3 - 1 + 3));  // 11 gates and 3 tc per stacked layer
      // the input, lstm1.l0.h, lstm1.l1.h (steps 0..1, unless every step goes to lstm1) and lstm1
      CHECK(narrow == (wide ? (sequences ? 3 : 4) : int(q.tensors.size())));
    }
  }
}

TEST_CASE("dense after flatten: one MatmulOp whose kernel is the whole map", "[quantize]") {
  Builder b(map(6, 6, 2), 2, 3);
  const int c = b.conv(model_input(0), 3, 3, 1, 0, Activation::relu);  // 4 x 4 x 3
  const int p = b.pool(c, false, 2, 2);                                 // 2 x 2 x 3
  b.dense(b.flatten(p), 5);
  const QGraph g = quantize(b.m);
  check_structure(g);
  REQUIRE(g.ops.size() == 3);
  const auto& d = std::get<MatmulOp>(g.ops[2]);
  const auto& pool = std::get<PoolOp>(g.ops[1]);
  CHECK(d.inputs.size() == 1);
  CHECK(d.inputs[0].tensor == pool.output.tensor);
  CHECK((d.kernel_h == 2 && d.kernel_w == 2 && d.k == 3 && d.n == 5));
  CHECK(d.weights.size() == 2 * 2 * 3 * 5);
  CHECK(g.tensors[static_cast<size_t>(g.output)].shape.elements() == 5);
  CHECK(g.tensors.size() == 4);  // input, conv, pool, dense: no flatten tensor
  CHECK(error_of(b.m).relative < 0.03);
}

TEST_CASE("concat: branches at one scale, read as the parts of a 1 x 1 matmul, pooled part by part", "[quantize]") {
  const TwoConcats t;
  const Builder& b = t.b;
  const QGraph g = quantize(b.m, false);  // (as parts: the mapper's concat_inplace off)
  check_structure(g);
  // 3 branch convs, 3 pools (one per part), conv d, the identity matmul joining cat2, the 3x3 conv.
  REQUIRE(g.ops.size() == 9);
  const auto& pool0 = std::get<PoolOp>(g.ops[3]);
  CHECK(g.tensors[pool0.output.tensor].name == "maxpool5.p0");
  CHECK(g.tensors[pool0.output.tensor].shape == map(4, 4, 4));
  // The branches write at the concat's scale, calibrated on its float output.
  const auto f = run_float(b.m);
  const auto top = [&](int layer) {
    double t = 0;
    for (float x : f[static_cast<size_t>(layer)]) t = std::max(t, std::abs(double{x}));
    return t / 127;
  };
  for (int i = 0; i < 3; ++i)
    CHECK(g.tensors[std::get<MatmulOp>(g.ops[i]).output.tensor].scale == std::max(top(t.cat), top(t.cat2)));
  // conv d reads the three pooled parts as its inputs: K = 4 + 6 + 2, no copy.
  const auto& md = std::get<MatmulOp>(g.ops[6]);
  REQUIRE(md.inputs.size() == 3);
  CHECK(md.k == 12);
  CHECK(md.inputs[1].tensor == std::get<PoolOp>(g.ops[4]).output.tensor);
  // cat2 asks d, and through the pool cat, for its scale: cat takes the larger of its own and cat2's (here
  // equal: cat is non-negative and every pixel is in a window, so its largest value survives the max pool),
  // and the pooled parts join cat2 without a requantizing pass.
  const double s2 = g.tensors[std::get<MatmulOp>(g.ops[7]).output.tensor].scale;
  CHECK(g.tensors[md.output.tensor].scale == s2);
  CHECK(g.tensors[pool0.output.tensor].scale == s2);
  const auto& join = std::get<MatmulOp>(g.ops[7]);
  CHECK(g.op_layer[7] == "concat7");
  CHECK(g.tensors[join.output.tensor].name == "concat7");
  CHECK(join.inputs.size() == 4);
  CHECK(join.k == 17);
  CHECK(join.n == 17);
  CHECK(join.mult == std::vector<uint16_t>{1});
  CHECK(join.shift == std::vector<uint8_t>{0});
  CHECK(join.bias.empty());
  for (uint64_t i = 0; i < 17; ++i)
    for (uint64_t j = 0; j < 17; ++j) CHECK(join.weights[i * 17 + j] == (i == j ? 1 : 0));
  const auto& last = std::get<MatmulOp>(g.ops[8]);
  REQUIRE(last.inputs.size() == 1);
  CHECK(last.inputs[0].tensor == join.output.tensor);
  const auto golden = run_golden(g);
  CHECK(quant_error(f.back(), golden[g.output], g.tensors[g.output].scale).relative < 0.05);
}

TEST_CASE("concat: a part at another scale is requantized, and a concat as the output is joined", "[quantize]") {
  Builder b(vec(6), 3, 5);
  b.m.inputs[0].scale = 1.0 / 64;  // given: the concat's (calibrated, about 1/127) differs
  const int a = b.dense(model_input(0), 4, Activation::sigmoid);  // scale 1/127, fixed by its stage
  const int d = b.dense(model_input(0), 3, Activation::relu);
  b.concat({a, d, model_input(0)});
  const QGraph g = quantize(b.m, false);  // (as parts: the mapper's concat_inplace off)
  check_structure(g);
  // dense a, dense d (at the concat's scale), then the concat: a's pass to its scale, the input's, the join.
  REQUIRE(g.ops.size() == 5);
  CHECK(g.tensors[std::get<VectorOp>(g.ops[2]).output.tensor].name == "concat3.in0");
  CHECK(g.tensors[std::get<VectorOp>(g.ops[3]).output.tensor].name == "concat3.in2");
  const auto& join = std::get<MatmulOp>(g.ops[4]);
  CHECK(join.k == 13);
  const double s = g.tensors[g.output].scale;
  for (const View& v : join.inputs) CHECK(g.tensors[v.tensor].scale == s);
  CHECK(g.tensors[g.output].name == "concat3");
  const auto f = run_float(b.m);
  const auto golden = run_golden(g);
  CHECK(quant_error(f.back(), golden[g.output], s).relative < 0.02);
}

TEST_CASE("concat written in place: branches write their channels of one tensor, other parts are copied in", "[quantize]") {
  // The first case above, in place (the mapper's concat_inplace, the default): a, b, c write
  // channels 0, 4 and 10 of concat4; one pool reads it whole; d writes channels 0..4 of concat7,
  // the pool's output (read by d too) is copied to its channels 5..16; the 3x3 conv reads concat7.
  const TwoConcats t;
  const Builder& b = t.b;
  const QGraph g = quantize(b.m);
  check_structure(g);
  REQUIRE(g.concat_inplace);
  REQUIRE(g.ops.size() == 7);  // 3 branches, the pool, d, the pool's copy, the 3x3 conv
  for (int i = 0; i < 3; ++i) {
    const auto& m = std::get<MatmulOp>(g.ops[i]);
    CHECK(g.tensors[m.output.tensor].name == "concat4");
    CHECK(m.output.channel0 == std::vector<uint64_t>{0, 4, 10}[i]);
  }
  const auto& pool = std::get<PoolOp>(g.ops[3]);
  CHECK(g.tensors[pool.input.tensor].name == "concat4");
  CHECK(g.tensors[pool.input.tensor].shape == map(5, 5, 12));
  const auto& md = std::get<MatmulOp>(g.ops[4]);
  REQUIRE(md.inputs.size() == 1);
  CHECK(md.inputs[0].tensor == pool.output.tensor);
  CHECK(g.tensors[md.output.tensor].name == "concat7");
  CHECK(md.output.channel0 == 0);
  const auto& copy = std::get<MatmulOp>(g.ops[5]);
  CHECK(g.op_layer[5] == "concat7");
  CHECK(copy.inputs[0].tensor == pool.output.tensor);
  CHECK(copy.output.tensor == md.output.tensor);
  CHECK(copy.output.channel0 == 5);
  CHECK((copy.k == 12 && copy.n == 12));
  CHECK(copy.mult == std::vector<uint16_t>{1});  // (the pool keeps the concat's scale: an exact copy)
  CHECK(copy.shift == std::vector<uint8_t>{0});
  for (uint64_t i = 0; i < 12; ++i)
    for (uint64_t j = 0; j < 12; ++j) CHECK(copy.weights[i * 12 + j] == (i == j ? 1 : 0));
  CHECK(std::get<MatmulOp>(g.ops[6]).inputs[0].tensor == md.output.tensor);
  // The same values as the graph of parts.
  const QGraph parts = quantize(b.m, false);
  CHECK(run_golden(g)[g.output] == run_golden(parts)[parts.output]);
}

TEST_CASE("concat written in place: a sigmoid branch and the model's input are copied in, requantized", "[quantize]") {
  Builder b(vec(6), 3, 5);
  b.m.inputs[0].scale = 1.0 / 64;
  const int a = b.dense(model_input(0), 4, Activation::sigmoid);
  const int d = b.dense(model_input(0), 3, Activation::relu);
  b.concat({a, d, model_input(0)});
  const QGraph g = quantize(b.m);
  check_structure(g);
  // dense a (its own tensor), dense d into channels 4..6, then a's copy (channels 0..3) and the
  // input's (7..12), each requantized from its scale to the concat's by its copy.
  REQUIRE(g.ops.size() == 4);
  CHECK(std::get<MatmulOp>(g.ops[1]).output.channel0 == 4);
  const auto& ca = std::get<MatmulOp>(g.ops[2]);
  const auto& ci = std::get<MatmulOp>(g.ops[3]);
  CHECK((ca.output.channel0 == 0 && ca.k == 4));
  CHECK((ci.output.channel0 == 7 && ci.k == 6));
  CHECK(g.tensors[g.output].name == "concat3");
  const double s = g.tensors[g.output].scale;
  const Requant q = requant_for(g.tensors[ci.inputs[0].tensor].scale / s);
  CHECK((ci.mult[0] == q.mult && ci.shift[0] == q.shift));
  const QGraph parts = quantize(b.m, false);
  CHECK(run_golden(g)[g.output] == run_golden(parts)[parts.output]);
}

TEST_CASE("per-tensor without bias: one mult and no bias, otherwise N of each", "[quantize]") {
  for (bool per_channel : {false, true})
    for (bool bias : {false, true}) {
      Builder b(vec(6), 1, 5);
      b.dense(model_input(0), 3);
      b.last().use_bias = bias;
      b.m.per_channel = per_channel;
      const QGraph g = quantize(b.m);
      const auto& op = std::get<MatmulOp>(g.ops[0]);
      const size_t entries = per_channel || bias ? 3 : 1;
      CHECK(op.mult.size() == entries);
      CHECK(op.shift.size() == entries);
      CHECK(op.bias.size() == (bias ? 3u : 0u));
      if (!per_channel) CHECK(std::all_of(op.mult.begin(), op.mult.end(), [&](uint16_t m) { return m == op.mult[0]; }));
      // The largest |w| of each column (per channel) or of the whole tensor quantizes to +-127.
      for (uint64_t j = 0; j < 3; ++j) {
        int top = 0;
        for (uint64_t k = 0; k < 6; ++k) top = std::max(top, std::abs(int{op.weights[k * 3 + j]}));
        if (per_channel) CHECK(top == 127);
      }
      CHECK(*std::max_element(op.weights.begin(), op.weights.end(), [](int8_t a, int8_t b) { return std::abs(a) < std::abs(b); }) != 0);
    }
}

TEST_CASE("output stages: relu6 clip, sigmoid through Q7.8, a given scale after sigmoid", "[quantize]") {
  Builder b(vec(4), 1, 11);
  b.m.inputs[0].scale = 1.0 / 64;
  b.dense(model_input(0), 3, Activation::relu6);
  b.last().scale = 0.1;  // relux clip = round(6 / 0.1) = 60
  b.dense(0, 2, Activation::sigmoid);
  b.dense(1, 2, Activation::tanh);
  b.last().scale = 0.01;  // tanh writes 1/127: then a pass to 0.01
  const QGraph g = quantize(b.m);
  check_structure(g);
  REQUIRE(g.ops.size() == 4);
  const auto& r6 = std::get<MatmulOp>(g.ops[0]);
  CHECK((r6.func == isa::Func::relux && r6.clip == 60));
  const auto& sig = std::get<MatmulOp>(g.ops[1]);
  CHECK(sig.func == isa::Func::sigmoid);
  CHECK(g.tensors[static_cast<size_t>(sig.output.tensor)].scale == 1.0 / 127);
  // mult / 2^shift = S[j] x 256 with S[j] = 0.1 x max|w[.][j]| / 127 (sigmoid reads Q7.8).
  for (uint64_t j = 0; j < 2; ++j) {
    double top = 0;
    for (uint64_t k = 0; k < 3; ++k) top = std::max(top, std::abs(double{b.m.layers[1].weights[k * 2 + j]}));
    const Requant q = requant_for(0.1 * top / 127 * 256);
    CHECK((sig.mult[j] == q.mult && sig.shift[j] == q.shift));
  }
  const auto& pass = std::get<VectorOp>(g.ops[3]);
  CHECK(pass.op == isa::VecOp::pass);
  CHECK(g.tensors[static_cast<size_t>(pass.a.tensor)].name == "dense3.act");
  CHECK(g.tensors[static_cast<size_t>(g.output)].name == "dense3");
  CHECK(g.tensors[static_cast<size_t>(g.output)].scale == 0.01);
  const Requant q = requant_for((1.0 / 127) / 0.01);
  CHECK((pass.mult == q.mult && pass.shift == q.shift));
}

TEST_CASE("activation layers: relu keeps the scale, relu6 at 6/127, sigmoid via 1/256", "[quantize]") {
  Builder b(vec(8), 2, 13);
  b.m.inputs[0].scale = 0.02;
  b.activation(model_input(0), Activation::relu);
  b.activation(0, Activation::relu6);
  b.activation(1, Activation::sigmoid);
  const QGraph g = quantize(b.m);
  REQUIRE(g.ops.size() == 3);
  const auto& relu = std::get<VectorOp>(g.ops[0]);
  CHECK((relu.func == isa::Func::relu && relu.mult == 1 && relu.shift == 0));
  CHECK(g.tensors[1].scale == 0.02);
  const auto& r6 = std::get<VectorOp>(g.ops[1]);
  CHECK(r6.func == isa::Func::relux);
  CHECK(g.tensors[2].scale == 6.0 / 127);
  const Requant q6 = requant_for(0.02 * 127 / 6);
  CHECK((r6.mult == q6.mult && r6.shift == q6.shift));
  const auto& sig = std::get<VectorOp>(g.ops[2]);
  const Requant qs = requant_for(6.0 / 127 * 256);
  CHECK((sig.func == isa::Func::sigmoid && sig.mult == qs.mult && sig.shift == qs.shift));
  CHECK(error_of(b.m).max_abs < 0.02);
}

TEST_CASE("quantizer errors name the layer", "[quantize]") {
  {
    Builder b(map(2, 2, 1), 1, 1);
    const int f = b.flatten(model_input(0));
    b.activation(f, Activation::relu);
    CHECK_THROWS_WITH(quantize(b.m), Catch::Contains("layer act2") && Catch::Contains("flatten"));
  }
  {
    Builder b(map(2, 2, 1), 1, 1);
    b.flatten(model_input(0));
    CHECK_THROWS_WITH(quantize(b.m), Catch::Contains("layer flatten1") && Catch::Contains("dense"));
  }
  {
    Builder b(vec(4), 1, 1);
    b.dense(model_input(0), 2);
    b.last().scale = 1e-12;  // the requantization factor S / 1e-12 is far above 65535
    CHECK_THROWS_WITH(quantize(b.m), Catch::Contains("layer dense1") && Catch::Contains("too large"));
  }
  {
    Builder b(vec(4), 1, 1);
    b.dense(model_input(0), 2);
    b.last().scale = -1.0;
    CHECK_THROWS_WITH(quantize(b.m), Catch::Contains("layer dense1") && Catch::Contains("not positive"));
  }
}

TEST_CASE("quantize with the caller's float run gives the same graph", "[quantize]") {
  Builder b(seq(3, 4), 2, 9);
  b.dense(b.lstm(model_input(0), 4, 1, false), 2, Activation::relu);
  const QGraph a = quantize(b.m), c = quantize(b.m, run_float_detailed(b.m));
  REQUIRE(a.ops.size() == c.ops.size());
  REQUIRE(a.tensors.size() == c.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) CHECK(a.tensors[i].scale == c.tensors[i].scale);
  CHECK(run_golden(a) == run_golden(c));
  FloatRun wrong = run_float_detailed(b.m);
  wrong.outputs.pop_back();
  CHECK_THROWS_AS(quantize(b.m, wrong), std::invalid_argument);
}

TEST_CASE("calibrated scales: max |x| / 127, all-zero tensors get 1/127", "[quantize]") {
  Builder b(vec(3), 1, 1);
  b.m.inputs[0].data = {0.5f, -2.54f, 1.0f};
  b.activation(model_input(0), Activation::relu);
  b.dense(0, 2);
  b.last().weights = {0, 0, 0, 0, 0, 0};
  b.last().bias = {0, 0};
  const QGraph g = quantize(b.m);
  CHECK(g.tensors[0].scale == Approx(2.54 / 127));
  CHECK(g.input_data[0] == std::vector<int8_t>{25, -127, 50});
  CHECK(g.tensors[2].scale == 1.0 / 127);
  CHECK(run_golden(g)[2] == std::vector<int8_t>{0, 0});
}

// Relative error (max |golden - float| / max |float|) for models of dense, conv, pooling, add and
// relu/relu6; an absolute bound where sigmoid or tanh decide the output (their Q0.7 outputs and
// the roundings before them add up to a few hundredths).
TEST_CASE("random small models: golden output within a few percent of the float reference", "[quantize]") {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    for (bool per_channel : {true, false}) {
      INFO("seed " << seed << ", per_channel " << per_channel);
      {  // MLP
        Builder b(vec(20), 3, seed);
        b.m.per_channel = per_channel;
        b.dense(b.dense(b.dense(model_input(0), 16, Activation::relu), 12, Activation::relu6), 5);
        const QuantError e = error_of(b.m);
        INFO("mlp: " << e.relative);
        CHECK(e.relative < 0.03);
      }
      {  // CNN with a residual add, avg and max pools, a strided conv, flatten + dense
        Builder b(map(8, 8, 3), 2, seed);
        b.m.per_channel = per_channel;
        const int c1 = b.conv(model_input(0), 4, 3, 1, 1, Activation::relu);
        const int c2 = b.conv(c1, 4, 3, 1, 1);
        const int r = b.binary(LayerType::add, c1, c2, Activation::relu);
        const int p = b.pool(r, true, 2, 2);
        const int c3 = b.conv(p, 6, 3, 2, 1, Activation::relu6);
        const int p2 = b.pool(c3, false, 2, 1);
        b.dense(b.flatten(p2), 4);
        const QuantError e = error_of(b.m);
        INFO("cnn: " << e.relative);
        CHECK(e.relative < 0.05);
      }
      {  // gating: mul of a sigmoid and a tanh branch
        Builder b(vec(10), 4, seed);
        b.m.per_channel = per_channel;
        const int s = b.dense(model_input(0), 8, Activation::sigmoid);
        const int t = b.dense(model_input(0), 8, Activation::tanh);
        b.binary(LayerType::mul, s, t);
        const QuantError e = error_of(b.m);
        INFO("gate: " << e.max_abs);
        CHECK(e.max_abs < 0.04);
      }
      {  // stacked LSTM with return_sequences
        Builder b(seq(5, 6), 2, seed);
        b.m.per_channel = per_channel;
        b.lstm(model_input(0), 8, 2, true);
        const QuantError e = error_of(b.m);
        INFO("lstm: " << e.max_abs);
        CHECK(e.max_abs < 0.06);
      }
      {  // one LSTM layer, last step only, then a dense layer
        Builder b(seq(4, 3), 3, seed);
        b.m.per_channel = per_channel;
        b.dense(b.lstm(model_input(0), 5, 1, false), 3);
        const QuantError e = error_of(b.m);
        INFO("lstm last: " << e.max_abs);
        CHECK(e.max_abs < 0.06);
      }
    }
  }
}

// Weights quantize with round half away from zero (std::round), ties included: the quantizer's
// vectorised rounding (trunc, then one step out when the exact remainder is half or more) on
// weights whose scaled values are exact ties, near-ties and large, against std::round. The
// input's scale 0.5 and the largest |w| 127 make the per-tensor weight scale exactly w / 1.
TEST_CASE("weights round half away from zero, exact ties included", "[quantize]") {
  const std::vector<float> w = {127.0f, 63.5f,  -63.5f, 0.5f,  -0.5f,  2.5f,   -2.5f,  1.5f,   -1.5f,
                                0.49999997f, -0.49999997f, 126.5f, -126.5f, 3.4999998f, 100.25f, -0.0f};
  Builder b(vec(static_cast<uint64_t>(w.size())), 1, 9);
  b.m.inputs[0].scale = 0.5;
  b.dense(model_input(0), 1);
  b.last().use_bias = false;
  b.last().weights = w;
  b.m.per_channel = false;
  const QGraph g = quantize(b.m);
  const auto& op = std::get<MatmulOp>(g.ops[0]);
  REQUIRE(op.weights.size() == w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("w = " << w[i]);
    CHECK(int{op.weights[i]} == static_cast<int>(std::clamp(std::round(double(w[i])), -127.0, 127.0)));
  }
  CHECK(int{op.weights[1]} == 64);  // 63.5
  CHECK(int{op.weights[4]} == -1);  // -0.5
}
