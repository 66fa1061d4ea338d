// The ONNX front end (compiler/onnx.h, docs/onnx.md): each operator's import against what the
// ONNX graph means (tests/data/onnx/y_*.npy, computed by make_onnx_tests.py with plain numpy
// loops), the scales quantized ONNX carries, the exact refusal of what the machine cannot run,
// and truncated or corrupt files refused with an InputError.
#include "compiler/onnx.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "compiler/model.h"
#include "compiler/npy.h"
#include "compiler/quantize.h"
#include "compiler/reference.h"
#include "isa/error.h"
#include "tools/source_dir.h"

using namespace tpusim;
using namespace tpusim::compiler;
using Catch::Matchers::Contains;

namespace {

const std::filesystem::path kDir = std::filesystem::path(tpusim::source_dir()) / "tests" / "data" / "onnx";

Model load_case(const std::string& name) {
  LoadOptions o;
  o.input_file = kDir / ("x_" + name + ".npy");
  return load_model(kDir / (name + ".onnx"), o);
}

std::string bytes_of(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The Model's output (NHWC) against the ONNX output (NCHW for maps), within float rounding.
void check_against_onnx(const std::string& name) {
  INFO(name);
  const Model m = load_case(name);
  const std::vector<float> got = run_float(m).back();
  const NpyArray y = read_npy(kDir / ("y_" + name + ".npy"));
  const std::vector<float> want = y.to_float();
  REQUIRE(got.size() == want.size());
  const Shape& s = m.layers.back().out;
  double top = 1;
  for (float v : want) top = std::max(top, double(std::abs(v)));
  for (uint64_t i = 0; i < got.size(); ++i) {
    uint64_t j = i;  // ONNX index of our element i
    if (s.rank == 3) {
      const uint64_t per = s.elements(), n = i / per, e = i % per, c = e % s.c, p = e / s.c;
      j = n * per + c * s.pixels() + p;
    }
    INFO("element " << i);
    REQUIRE(std::abs(double(got[i]) - double(want[j])) <= 1e-4 * top);
  }
}

}  // namespace

TEST_CASE("onnx: every supported operator imports to a Model that computes what the graph means") {
  for (const char* name :
       {"gemm", "matmul_add", "matmul_seq", "conv_pad_stride", "conv_group", "conv_same_bn_clip", "pools",
        "global_avg", "reshape", "add_mul_softmax", "lstm", "qdq", "qlinear", "concat", "lstm_export",
        "reshape_export", "pad_reduce_mean", "lstm_stack", "lstm_last_step", "conv1d", "conv1d_seq", "conv_dilated", "gru", "gru_stack",
        "conv_dilated3", "pools1d", "pools1d_pad", "pools1d_padop", "mean1d", "pools2d_pad", "pools2d_padop",
        "gap_long", "gap_rect", "gap_line", "pools2d_ceil", "pools1d_asym"})
    check_against_onnx(name);
}

TEST_CASE("onnx: graphs as torch.onnx.export writes them by default run at any batch") {
  SECTION("an LSTM's zero initial state Expand-ed to the batch from Shape arithmetic") {
    // The file declares the input [1, 4, 3] (the export's example); x_lstm_export.npy holds 3.
    const Model m = load_case("lstm_export");
    CHECK(m.batch == 3);
    REQUIRE(m.layers.size() == 2);
    CHECK(m.layers[0].type == LayerType::lstm);
    CHECK(m.layers[1].out == vector_shape(2));
  }
  SECTION("x.view(x.size(0), -1) exported at batch 1: a Reshape to [1, -1] is a flatten at batch 3") {
    const Model m = load_case("reshape_export");
    CHECK(m.batch == 3);
    REQUIRE(m.layers.size() == 4);  // conv (+ relu), pool, flatten, dense
    CHECK(m.layers[2].type == LayerType::flatten);
  }
  SECTION("a stacked LSTM's h_n[-1]: the lower layer returns its sequence, the upper its last h") {
    const Model m = load_case("lstm_stack");
    REQUIRE(m.layers.size() == 3);
    CHECK(m.layers[0].return_sequences);
    CHECK(!m.layers[1].return_sequences);
    CHECK(m.layers[2].out == vector_shape(2));
  }
  SECTION("y[:, -1] of an LSTM's sequence read by nothing else: the layer returns its last h") {
    const Model m = load_case("lstm_last_step");
    REQUIRE(m.layers.size() == 2);
    CHECK(!m.layers[0].return_sequences);
    CHECK(m.layers[0].out == vector_shape(5));
  }
  SECTION("Pads fold: zeros into nothing, a Pad into the Conv after it; ReduceMean is a global average pool") {
    const Model m = load_case("pad_reduce_mean");
    REQUIRE(m.layers.size() == 5);  // avg pool, conv (pad 1, relu), global avg pool, flatten, dense
    CHECK(m.layers[0].type == LayerType::avg_pool);
    CHECK(m.layers[1].type == LayerType::conv2d);
    CHECK(m.layers[1].pad == 1);
    CHECK(m.layers[1].activation == Activation::relu);
    CHECK(m.layers[2].type == LayerType::avg_pool);
    CHECK(m.layers[2].kernel_h == 3);
    CHECK(m.layers[3].type == LayerType::flatten);
  }
}

namespace {

// The index of the quantized graph's tensor `name`.
size_t tensor(const QGraph& g, const std::string& name) {
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].name == name) return t;
  FAIL("no tensor " << name);
  return 0;
}

// The golden reference's int8 results of a 2-D pool of window k, stride s, over its input padded by
// `before` rows and columns (those after follow from the output's size) are the padded pool of its
// int8 inputs, computed here with plain loops: the max of the map's pixels in the window (how 0);
// their sum over k^2, zeros counted (1), or over their number (2), rounded half away from zero.
void check_pool2d(const QGraph& g, const std::vector<std::vector<int8_t>>& golden, size_t in, size_t out, uint64_t k,
                  uint64_t s, std::array<int64_t, 2> before, int how) {
  const Shape is = g.tensors[in].shape, os = g.tensors[out].shape;
  CHECK(g.tensors[in].scale == g.tensors[out].scale);
  for (uint64_t n = 0; n < g.batch; ++n)
    for (uint64_t oy = 0; oy < os.h; ++oy)
      for (uint64_t ox = 0; ox < os.w; ++ox)
        for (uint64_t c = 0; c < is.c; ++c) {
          int64_t top = -128, sum = 0, count = 0;
          for (uint64_t r = 0; r < k; ++r)
            for (uint64_t q = 0; q < k; ++q) {
              const int64_t i = int64_t(oy * s + r) - before[0], j = int64_t(ox * s + q) - before[1];
              if (i < 0 || j < 0 || i >= int64_t(is.h) || j >= int64_t(is.w)) continue;
              const int64_t v = golden[in][((n * is.h + uint64_t(i)) * is.w + uint64_t(j)) * is.c + c];
              top = std::max(top, v), sum += v, ++count;
            }
          const int64_t d = how == 1 ? int64_t(k * k) : count;
          const int64_t q = (2 * std::abs(sum) + d) / (2 * d);
          const int64_t want = how == 0 ? top : sum < 0 ? -q : q;
          INFO("pool " << g.tensors[out].name << " sample " << n << " output " << oy << ", " << ox << " channel " << c);
          CHECK(int64_t(golden[out][((n * os.h + oy) * os.w + ox) * os.c + c]) == want);
        }
}

// The same for a 1-D pool (a 1 x k window over a line, padded by `before` values at its start).
void check_pool1d(const QGraph& g, const std::vector<std::vector<int8_t>>& golden, size_t in, size_t out, uint64_t k,
                  uint64_t s, int64_t before, int how) {
  const Shape is = g.tensors[in].shape, os = g.tensors[out].shape;
  CHECK(g.tensors[in].scale == g.tensors[out].scale);
  for (uint64_t n = 0; n < g.batch; ++n)
    for (uint64_t o = 0; o < os.w; ++o)
      for (uint64_t c = 0; c < is.c; ++c) {
        int64_t top = -128, sum = 0, count = 0;
        for (uint64_t q = 0; q < k; ++q) {
          const int64_t j = int64_t(o * s + q) - before;
          if (j < 0 || j >= int64_t(is.w)) continue;
          const int64_t v = golden[in][(n * is.w + uint64_t(j)) * is.c + c];
          top = std::max(top, v), sum += v, ++count;
        }
        const int64_t d = how == 1 ? int64_t(k) : count;
        const int64_t q = (2 * std::abs(sum) + d) / (2 * d);
        const int64_t want = how == 0 ? top : sum < 0 ? -q : q;
        INFO("pool " << g.tensors[out].name << " sample " << n << " output " << o << " channel " << c);
        CHECK(int64_t(golden[out][(n * os.w + o) * os.c + c]) == want);
      }
}

}  // namespace

TEST_CASE("onnx: layers, shapes and folding") {
  SECTION("Gemm + Relu fuse; the batch comes from the input file") {
    const Model m = load_case("gemm");
    REQUIRE(m.layers.size() == 2);
    CHECK(m.batch == 3);
    CHECK(m.inputs[0].shape == vector_shape(12));
    CHECK(m.layers[0].activation == Activation::relu);
    CHECK(m.layers[1].out == vector_shape(5));
  }
  SECTION("Conv + BatchNormalization + Clip(0, 6) fold into one conv2d layer with SAME padding resolved") {
    const Model m = load_case("conv_same_bn_clip");
    REQUIRE(m.layers.size() == 1);
    CHECK(m.layers[0].type == LayerType::conv2d);
    CHECK(m.layers[0].pad == 1);
    CHECK(m.layers[0].activation == Activation::relu6);
    CHECK(m.layers[0].use_bias);
  }
  SECTION("a grouped convolution is a full one with zero weights across groups") {
    const Model m = load_case("conv_group");
    const Layer& l = m.layers.at(0);
    // weights [3][3][4][6]: output channel 0 (group 0) reads input channels 0, 1 only
    CHECK(l.weights[(0 * 4 + 2) * 6 + 0] == 0.0f);
    CHECK(l.weights[(0 * 4 + 3) * 6 + 0] == 0.0f);
    CHECK(l.weights[(0 * 4 + 0) * 6 + 0] != 0.0f);
    CHECK(l.weights[(0 * 4 + 0) * 6 + 5] == 0.0f);  // channel 5 is group 1's
  }
  SECTION("a final Softmax is the host's; a constant Mul folds into the dense layer before it") {
    const Model m = load_case("add_mul_softmax");
    CHECK(m.layers.back().name == "logits");
    CHECK(m.layers.back().out == vector_shape(4));
  }
  SECTION("two LSTM nodes, the first returning its sequence") {
    const Model m = load_case("lstm");
    REQUIRE(m.layers.size() == 3);
    CHECK(m.layers[0].type == LayerType::lstm);
    CHECK(m.layers[0].return_sequences);
    CHECK(m.layers[0].out == sequence_shape(5, 6));
    CHECK(!m.layers[1].return_sequences);
    CHECK(m.layers[1].out == vector_shape(3));
  }
  SECTION("Conv1d is a conv2d of height 1: its rows unpadded, so padding 1 reads a 3-row kernel of zero rows") {
    const Model m = load_case("conv1d");
    REQUIRE(m.layers.size() == 4);  // c1 (Relu fused), c2, flatten, fc
    const Layer& c1 = m.layers[0];
    CHECK(m.inputs[0].shape == map_shape(1, 11, 3));
    CHECK((c1.kernel_h == 3 && c1.kernel_w == 3 && c1.pad == 1 && c1.stride == 2));
    CHECK(c1.out == map_shape(1, 6, 6));  // (11 + 2 - 3) / 2 + 1 = 6
    for (uint64_t s = 0; s < 3; ++s)      // rows 0 and 2 of the kernel are zero, row 1 is W
      for (uint64_t k = 0; k < 3 * 6; ++k) {
        CHECK(c1.weights[(0 * 3 + s) * 18 + k] == 0.0f);
        CHECK(c1.weights[(2 * 3 + s) * 18 + k] == 0.0f);
      }
    // dilation 2, padding 2: taps at columns 0, 2, 4 of a 5-wide kernel, 5 rows (2 x 2 zero rows)
    const Layer& c2 = m.layers[1];
    CHECK((c2.kernel_h == 5 && c2.kernel_w == 5 && c2.pad == 2 && c2.stride == 1));
    CHECK(c2.out == map_shape(1, 6, 4));
    CHECK(c2.weights[((2 * 5 + 1) * 6 + 0) * 4 + 0] == 0.0f);  // row 2, column 1: between taps
    CHECK(c2.weights[((2 * 5 + 2) * 6 + 0) * 4 + 0] != 0.0f);
  }
  SECTION("MaxPool1d and AvgPool1d are pools of a 1 x k window over a map of height 1") {
    const Model m = load_case("pools1d");
    REQUIRE(m.layers.size() == 6);  // p0, c1 (Relu fused), p1, p2, flatten, fc
    CHECK(m.inputs[0].shape == map_shape(1, 13, 3));
    const auto pool = [&](size_t i, LayerType type, uint64_t k, uint64_t s, Shape out) {
      INFO("layer " << i);
      const Layer& l = m.layers[i];
      CHECK((l.type == type && l.kernel_h == 1 && l.kernel_w == k && l.stride == s && l.out == out));
    };
    pool(0, LayerType::max_pool, 3, 1, map_shape(1, 11, 3));  // (13 - 3) / 1 + 1
    CHECK(m.layers[1].out == map_shape(1, 11, 4));
    pool(2, LayerType::max_pool, 2, 2, map_shape(1, 5, 4));  // (11 - 2) / 2 + 1
    pool(3, LayerType::avg_pool, 3, 1, map_shape(1, 3, 4));
    // Quantized: each 1-D pool copies its line k times into the rows of a k x L map (k vec
    // passes, scale kept) and pools that map's k x k windows.
    const QGraph g = quantize(m);
    uint64_t copies = 0;
    std::vector<std::pair<uint64_t, uint64_t>> pools;  // (window, stride)
    for (const QOp& op : g.ops) {
      if (const auto* v = std::get_if<VectorOp>(&op)) {
        CHECK((v->op == isa::VecOp::pass && v->func == isa::Func::identity));
        CHECK(g.tensors[size_t(v->a.tensor)].scale == g.tensors[size_t(v->output.tensor)].scale);
        ++copies;
      }
      if (const auto* p = std::get_if<PoolOp>(&op)) {
        pools.emplace_back(p->window, p->stride);
        const QTensor& in = g.tensors[size_t(p->input.tensor)];
        CHECK(in.shape.h == p->window);  // the k copies of the line
      }
    }
    CHECK(copies == 3 + 2 + 3);
    CHECK(pools == std::vector<std::pair<uint64_t, uint64_t>>{{3, 1}, {2, 2}, {3, 1}});
  }
  SECTION("padded MaxPool1d and AvgPool1d: the line between borders; windows of fewer values pooled again") {
    const Model m = load_case("pools1d_pad");
    REQUIRE(m.layers.size() == 6);  // p0, c1 (Relu fused), p1, p2, flatten, fc
    const auto pool = [&](size_t i, LayerType type, uint64_t k, uint64_t s, uint64_t pad, bool counts, Shape out) {
      INFO("layer " << i);
      const Layer& l = m.layers[i];
      CHECK((l.type == type && l.kernel_h == 1 && l.kernel_w == k && l.stride == s &&
             l.pool_pads == std::array<uint64_t, 4>{0, pad, 0, pad} &&
             l.count_pad == counts && l.out == out));
    };
    pool(0, LayerType::max_pool, 3, 2, 1, false, map_shape(1, 7, 3));  // (13 + 2 - 3) / 2 + 1
    pool(2, LayerType::avg_pool, 5, 2, 2, false, map_shape(1, 4, 4));  // (7 + 4 - 5) / 2 + 1
    pool(3, LayerType::avg_pool, 2, 1, 1, true, map_shape(1, 5, 4));   // (4 + 2 - 2) / 1 + 1
    const QGraph g = quantize(m);
    std::map<std::string, std::pair<int, int>> ops;  // layer: (vec passes or subs, pools)
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (std::holds_alternative<VectorOp>(g.ops[i])) ++ops[g.op_layer[i]].first;
      if (std::holds_alternative<PoolOp>(g.ops[i])) ++ops[g.op_layer[i]].second;
    }
    // p0 (max, k 3, p 1): row 0 = the line and its first and last values once at each end (3
    // vecs), copied into rows 1 and 2 (2): 5 vecs, 1 pool. p1 (average of the values, k 5, p 2):
    // the line and 2 zeros at each end (3), 4 copies (7 vecs, 1 pool); windows 0 and 3 hold 3 values
    // of the line each: 3 copies, a 3 x 3 pool and a pass into the output each (8 vecs, 2 pools).
    // p2 (k 2, p 1, zeros counted): 3 + 1 vecs, 1 pool.
    CHECK(ops[m.layers[0].name] == std::pair{5, 1});
    CHECK(ops[m.layers[2].name] == std::pair{15, 3});
    CHECK(ops[m.layers[3].name] == std::pair{4, 1});
    // The golden reference's int8 results are the padded pools of its int8 inputs, computed here
    // with plain loops: the max of the line's values in the window; their sum over k (zeros
    // counted) or over their number, rounded half away from zero.
    const auto golden = run_golden(g);
    check_pool1d(g, golden, size_t(g.inputs[0]), tensor(g, m.layers[0].name), 3, 2, 1, 0);
    check_pool1d(g, golden, tensor(g, m.layers[1].name), tensor(g, m.layers[2].name), 5, 2, 2, 2);
    check_pool1d(g, golden, tensor(g, m.layers[2].name), tensor(g, m.layers[3].name), 2, 1, 1, 1);
  }
  SECTION("padded 2-D MaxPool and AveragePool: the map copied into a padded one; windows of fewer pixels pooled again") {
    const Model m = load_case("pools2d_pad");
    REQUIRE(m.layers.size() == 8);  // p0, c1 (Relu fused), p1, p2, p3, p4, flatten, fc
    const auto pool = [&](size_t i, LayerType type, uint64_t k, uint64_t s, std::array<uint64_t, 4> pads, bool counts,
                          Shape out) {
      INFO("layer " << i);
      const Layer& l = m.layers[i];
      CHECK((l.type == type && l.kernel_h == k && l.kernel_w == k && l.stride == s && l.pad == 0 &&
             l.pool_pads == pads && l.count_pad == counts && l.out == out));
    };
    pool(0, LayerType::max_pool, 3, 2, {1, 1, 1, 1}, false, map_shape(5, 5, 3));  // (9 + 2 - 3) / 2 + 1
    pool(2, LayerType::avg_pool, 3, 1, {1, 1, 1, 1}, false, map_shape(5, 5, 4));
    pool(3, LayerType::avg_pool, 2, 1, {0, 0, 1, 1}, true, map_shape(5, 5, 4));   // (5 + 1 - 2) / 1 + 1
    pool(4, LayerType::max_pool, 3, 2, {1, 2, 0, 2}, false, map_shape(2, 4, 4));  // (6 - 3) / 2 + 1, (9 - 3) / 2 + 1
    pool(5, LayerType::avg_pool, 2, 2, {1, 0, 0, 1}, false, map_shape(1, 2, 4));  // (3 - 2) / 2 + 1, (5 - 2) / 2 + 1
    const QGraph g = quantize(m);
    std::map<std::string, std::pair<int, int>> ops;  // layer: (vec passes or subs, pools)
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (std::holds_alternative<VectorOp>(g.ops[i])) ++ops[g.op_layer[i]].first;
      if (std::holds_alternative<PoolOp>(g.ops[i])) ++ops[g.op_layer[i]].second;
    }
    // p0 (max, 9 x 9, k 3, pads 1): 9 rows, the first left border, 9 runs (8 of a right and the next
    // left border, the last right border), the top and bottom rows: 21 vecs, 1 pool.
    CHECK(ops[m.layers[0].name] == std::pair{21, 1});
    // p1 (average of the pixels, 5 x 5, k 3, pads 1): 5 rows, the zeros of the top row and first left
    // border (1), 4 runs of 2 and the last right border with the bottom row (5): 11 vecs, 1 pool.
    // The 16 windows reaching the padding: 4 corners of 2 x 2 pixels (2 row copies fill a 2 x 2
    // square: 2 vecs, the pool, a pass), 6 of 2 x 3 (top, bottom) and 6 of 3 x 2 (left, right) pixels
    // in a 6 x 6 square (2 or 3 row copies, 6 -> 12 -> 24 -> 36 doubled in 3 vecs, the pool, a
    // pass): 4 x 3 + 6 x 6 + 6 x 7 = 90 vecs, 16 pools.
    CHECK(ops[m.layers[2].name] == std::pair{11 + 90, 1 + 16});
    // p2 (zeros counted, pads 0, 0, 1, 1): 5 rows, 4 runs of 1 zero, the last with the bottom row: 10.
    CHECK(ops[m.layers[3].name] == std::pair{10, 1});
    // p3 (max, pads 1, 2, 0, 2: 2 x 2 > 3, so each border pixel repeats its row's end): 5 rows of
    // 1 + 2 + 2 passes, the top row: 26 vecs.
    CHECK(ops[m.layers[4].name] == std::pair{26, 1});
    // p4 (average of the pixels, 2 x 4, k 2, stride 2, pads 1, 0, 0, 1): 2 rows, 3 zero runs; both
    // windows hold 1 x 2 pixels: a 2 x 2 square each (1 copy, 1 doubling, the pool, a pass).
    CHECK(ops[m.layers[5].name] == std::pair{5 + 6, 1 + 2});
    // The golden reference's int8 results are the padded pools of its int8 inputs, computed here
    // with plain loops: the max of the map's pixels in the window; their sum over k^2 (zeros
    // counted) or over their number, rounded half away from zero.
    const auto golden = run_golden(g);
    check_pool2d(g, golden, size_t(g.inputs[0]), tensor(g, m.layers[0].name), 3, 2, {1, 1}, 0);
    check_pool2d(g, golden, tensor(g, m.layers[1].name), tensor(g, m.layers[2].name), 3, 1, {1, 1}, 2);
    check_pool2d(g, golden, tensor(g, m.layers[2].name), tensor(g, m.layers[3].name), 2, 1, {0, 0}, 1);
    check_pool2d(g, golden, tensor(g, m.layers[3].name), tensor(g, m.layers[4].name), 3, 2, {1, 2}, 0);
    check_pool2d(g, golden, tensor(g, m.layers[4].name), tensor(g, m.layers[5].name), 2, 2, {1, 0}, 2);
  }
  SECTION("global averages beyond the pool's 15 x 15 windows: a convolution of weights 1 / (H W) per channel") {
    // gap_long: 18 x 18 (GlobalAveragePool after a Conv + Relu); gap_rect: 5 x 7 (ReduceMean of the
    // input); gap_line: a line of 24 (x.mean(2) after a window-1 MaxPool).
    struct Case {
      const char* name;
      int at, h, w, c;  // the average's layer, its input's height, width and channels
    };
    for (const Case& k : {Case{"gap_long", 1, 18, 18, 4}, Case{"gap_rect", 0, 5, 7, 2}, Case{"gap_line", 1, 1, 24, 4}}) {
      const char* name = k.name;
      const int at = k.at, h = k.h, w = k.w, c = k.c;
      INFO(name);
      const Model m = load_case(name);
      const Layer& gap = m.layers.at(size_t(at));
      const uint64_t n = uint64_t(h * w);
      CHECK((gap.type == LayerType::conv2d && gap.kernel_h == uint64_t(h) && gap.kernel_w == uint64_t(w) &&
             gap.stride == 1 && gap.pad == 0 && gap.units == uint64_t(c) && gap.groups == uint64_t(c) &&
             !gap.use_bias && gap.activation == Activation::none && gap.out == map_shape(1, 1, uint64_t(c))));
      REQUIRE(gap.weights.size() == n * uint64_t(c * c));
      for (size_t i = 0; i < gap.weights.size(); ++i)  // [position][channel][filter]: 1 / n where they agree
        CHECK(gap.weights[i] == (i / uint64_t(c) % uint64_t(c) == i % uint64_t(c) ? float(1.0 / double(n)) : 0.0f));
      // The int8 mean: the golden reference's output against the mean of its int8 inputs at their
      // scales, within half a step of the output's scale (one rounding) and the requantization's
      // multiplier (16 bits: at most 127 x 2^-14 of a step more).
      const QGraph g = quantize(m);
      const auto golden = run_golden(g);
      const size_t in = at == 0 ? size_t(g.inputs[0]) : [&] {
        for (size_t t = 0; t < g.tensors.size(); ++t)
          if (g.tensors[t].name == m.layers[size_t(at) - 1].name) return t;
        FAIL("no input tensor");
        return size_t{0};
      }();
      size_t out = 0;
      for (size_t t = 0; t < g.tensors.size(); ++t)
        if (g.tensors[t].name == gap.name) out = t;
      REQUIRE(out > 0);
      double worst = 0;
      for (uint64_t s = 0; s < g.batch; ++s)
        for (uint64_t j = 0; j < uint64_t(c); ++j) {
          int64_t sum = 0;
          for (uint64_t p = 0; p < n; ++p) sum += golden[in][(s * n + p) * uint64_t(c) + j];
          const double exact = double(sum) * g.tensors[in].scale / double(n) / g.tensors[out].scale;
          worst = std::max(worst, std::abs(double(golden[out][s * uint64_t(c) + j]) - exact));
        }
      CHECK(worst <= 0.5 + 127.0 / 16384);
      CHECK(g.tensors[out].scale <= g.tensors[in].scale);  // the mean's range is at most the input's
    }
  }
  SECTION("ceil_mode = 1 with partial last windows: the map padded further at the bottom and right") {
    const Model m = load_case("pools2d_ceil");
    REQUIRE(m.layers.size() == 2);
    const Layer &mx = m.layers[0], &avg = m.layers[1];
    // MaxPool 3, stride 2 over 8: ceil((8 - 3) / 2) + 1 = 4 windows, the last at 6 reaching 8: one
    // more row and column. AveragePool 2, stride 2, pads 1, 1, 0, 0 over 4: ceil((5 - 2) / 2) + 1 =
    // 3 windows, the last at 4 reaching 5: one more.
    CHECK((mx.type == LayerType::max_pool && mx.pool_pads == std::array<uint64_t, 4>{0, 0, 1, 1} &&
           mx.out == map_shape(4, 4, 3)));
    CHECK((avg.type == LayerType::avg_pool && !avg.count_pad && avg.pool_pads == std::array<uint64_t, 4>{1, 1, 1, 1} &&
           avg.out == map_shape(3, 3, 3)));
    const QGraph g = quantize(m);
    const auto golden = run_golden(g);
    check_pool2d(g, golden, size_t(g.inputs[0]), tensor(g, mx.name), 3, 2, {0, 0}, 0);
    check_pool2d(g, golden, tensor(g, mx.name), tensor(g, avg.name), 2, 2, {1, 1}, 2);
  }
  SECTION("a Pad before an AveragePool over a map (PyTorch's AvgPool2d), auto_pad SAME on a map") {
    const Model m = load_case("pools2d_padop");
    REQUIRE(m.layers.size() == 3);  // a, m, the global average
    const Layer &a = m.layers[0], &mx = m.layers[1];
    CHECK((a.type == LayerType::avg_pool && a.kernel_h == 3 && a.stride == 2 && a.count_pad &&
           a.pool_pads == std::array<uint64_t, 4>{1, 1, 1, 1} && a.out == map_shape(4, 4, 2)));  // (7 + 2 - 3) / 2 + 1
    // SAME_UPPER, window 2, stride 1: one pixel of padding, after (bottom, right)
    CHECK((mx.type == LayerType::max_pool && mx.kernel_h == 2 && mx.pool_pads == std::array<uint64_t, 4>{0, 0, 1, 1} &&
           mx.out == map_shape(4, 4, 2)));
  }
  SECTION("1-D pools padded unequally at the two ends, and ceil_mode = 1 with a partial last window") {
    const Model m = load_case("pools1d_asym");
    REQUIRE(m.layers.size() == 4);
    const auto pool = [&](size_t i, LayerType type, uint64_t k, uint64_t s, uint64_t start, uint64_t end, Shape out) {
      INFO("layer " << i);
      const Layer& l = m.layers[i];
      CHECK((l.type == type && l.kernel_h == 1 && l.kernel_w == k && l.stride == s &&
             l.pool_pads == std::array<uint64_t, 4>{0, start, 0, end} && l.out == out));
    };
    pool(0, LayerType::max_pool, 3, 1, 0, 1, map_shape(1, 12, 3));  // pads [0, 1]: 13 + 1 - 3 + 1
    pool(1, LayerType::avg_pool, 2, 1, 1, 0, map_shape(1, 12, 3));  // SAME_LOWER of 2: one value before
    pool(2, LayerType::max_pool, 3, 2, 0, 1, map_shape(1, 6, 3));   // ceil((12 - 3) / 2) + 1, the last at 10: 1 more
    pool(3, LayerType::avg_pool, 3, 2, 2, 1, map_shape(1, 4, 3));   // ceil((2 + 6 - 3) / 2) + 1, the last at 6: 1 more
    const QGraph g = quantize(m);
    std::map<std::string, std::pair<int, int>> ops;  // layer: (vec passes or subs, pools)
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (std::holds_alternative<VectorOp>(g.ops[i])) ++ops[g.op_layer[i]].first;
      if (std::holds_alternative<PoolOp>(g.ops[i])) ++ops[g.op_layer[i]].second;
    }
    // a (max, k 3, pads 0, 1): row 0 = the line and its last value (2 vecs), copied into rows 1 and
    // 2: 4 vecs. b (average of the values, k 2, pads 1, 0): the line, 1 zero (2), 1 copy; window 0
    // holds 1 value: 1 copy, a 1 x 1 pool, a pass. c (max, k 3, pads 0, 1): 2 + 2. d (average of the
    // values, k 3, pads 2, 1): the line, 2 zeros, 1 zero (3), 2 copies; windows 0 (1 value) and 3
    // (2 values): 1 + 1 and 2 + 1 vecs, 2 pools.
    CHECK(ops[m.layers[0].name] == std::pair{4, 1});
    CHECK(ops[m.layers[1].name] == std::pair{3 + 2, 1 + 1});
    CHECK(ops[m.layers[2].name] == std::pair{4, 1});
    CHECK(ops[m.layers[3].name] == std::pair{5 + 5, 1 + 2});
    const auto golden = run_golden(g);
    check_pool1d(g, golden, size_t(g.inputs[0]), tensor(g, m.layers[0].name), 3, 1, 0, 0);
    check_pool1d(g, golden, tensor(g, m.layers[0].name), tensor(g, m.layers[1].name), 2, 1, 1, 2);
    check_pool1d(g, golden, tensor(g, m.layers[1].name), tensor(g, m.layers[2].name), 3, 2, 0, 0);
    check_pool1d(g, golden, tensor(g, m.layers[2].name), tensor(g, m.layers[3].name), 3, 2, 2, 2);
  }
  SECTION("a Pad before an AveragePool over a line (PyTorch's AvgPool1d), auto_pad SAME, 1-D global averages") {
    const Model m = load_case("pools1d_padop");
    REQUIRE(m.layers.size() == 3);  // a, m, the global average
    const Layer &a = m.layers[0], &mx = m.layers[1], &gap = m.layers[2];
    CHECK((a.type == LayerType::avg_pool && a.kernel_w == 4 && a.stride == 3 &&
           a.pool_pads == std::array<uint64_t, 4>{0, 2, 0, 2} && a.count_pad));
    CHECK(a.out == map_shape(1, 4, 2));  // (11 + 4 - 4) / 3 + 1
    CHECK((mx.type == LayerType::max_pool && mx.kernel_w == 3 && mx.stride == 1 &&
           mx.pool_pads == std::array<uint64_t, 4>{0, 1, 0, 1}));
    CHECK((gap.type == LayerType::avg_pool && gap.kernel_h == 1 && gap.kernel_w == 4 && gap.stride == 4));
    CHECK(gap.out == map_shape(1, 1, 2));
    const Model mean = load_case("mean1d");  // a window-1 max pool, x.mean(2), flattened, a Gemm
    REQUIRE(mean.layers.size() == 4);
    CHECK((mean.layers[1].type == LayerType::avg_pool && mean.layers[1].kernel_w == 6 && mean.layers[1].stride == 6));
    CHECK(mean.layers[2].type == LayerType::flatten);
  }
  SECTION("two stacked GRUs: the lower returns its sequence, the upper its last step (y[:, -1])") {
    const Model m = load_case("gru_stack");
    REQUIRE(m.layers.size() == 3);
    CHECK((m.layers[0].type == LayerType::gru && m.layers[0].return_sequences));
    CHECK((m.layers[1].type == LayerType::gru && !m.layers[1].return_sequences));
    CHECK(m.layers[0].weights.size() == 3 * (4 + 6) * 6);
    CHECK(m.layers[0].bias.size() == 4 * 6);
  }
}

TEST_CASE("onnx: Concat joins branches along channels, read where they are") {
  const Model m = load_case("concat");
  // branch_a, branch_b (Relu fused), join, mix, join2, gap, flat, head
  REQUIRE(m.layers.size() == 8);
  CHECK(m.layers[2].type == LayerType::concat);
  CHECK(m.layers[2].inputs == std::vector<int>{0, 1});
  CHECK(m.layers[2].out == map_shape(6, 6, 9));
  CHECK(m.layers[4].inputs == std::vector<int>{3, 2});
  CHECK(m.layers[4].out == map_shape(6, 6, 15));
  const QGraph g = quantize(m, false);
  // As parts (the mapper's concat_inplace off), no copy: mix reads the branches as two inputs, the
  // pools run part by part (3: mix, branch_a, branch_b) and the head reads the three pooled parts.
  CHECK(g.ops.size() == 2 + 1 + 3 + 1);
  const auto& head = std::get<MatmulOp>(g.ops.back());
  CHECK(head.inputs.size() == 3);
  CHECK(head.k == 15);
  // Written in place (the default): the branches write join's channels 0..8, mix writes join2's
  // 0..5 and join (read by mix too) is copied to its 6..14; one pool over join2, the head reads it.
  const QGraph p = quantize(m);
  CHECK(p.ops.size() == 2 + 1 + 1 + 1 + 1);
  const auto& copy = std::get<MatmulOp>(p.ops[3]);
  CHECK((copy.output.channel0 == 6 && copy.n == 9));
  const auto& h = std::get<MatmulOp>(p.ops.back());
  CHECK(h.inputs.size() == 1);
  CHECK(h.k == 15);
}

TEST_CASE("onnx: quantized graphs keep their scales") {
  // The scales make_onnx_tests.py wrote (float32): the conv's output, the model's output.
  struct Case {
    const char* name;
    double s_c, s_out;
  };
  for (const auto& [name, s_c, s_out] : {Case{"qdq", 0.054772257804870605, 0.058300089091062546},
                                         Case{"qlinear", 0.06657971441745758, 0.16485202312469482}}) {
    INFO(name);
    const Model m = load_case(name);
    REQUIRE(m.inputs[0].scale);
    CHECK(*m.inputs[0].scale == Approx(1.0 / 127).epsilon(1e-6));
    const QGraph g = quantize(m);
    CHECK(g.tensors[size_t(g.inputs[0])].scale == Approx(1.0 / 127).epsilon(1e-6));
    CHECK(g.tensors[size_t(g.output)].scale == Approx(s_out).epsilon(1e-6));
    const std::string conv = std::string(name) == "qdq" ? "conv" : "qconv";
    for (const QTensor& t : g.tensors)
      if (t.name == conv) CHECK(t.scale == Approx(s_c).epsilon(1e-6));
  }
}

TEST_CASE("onnx: what the machine cannot run is refused with the node, its op type and what") {
  const auto refused = [](const std::string& name, const std::string& what) {
    const std::string path = (kDir / (name + ".onnx")).string();
    CHECK_THROWS_WITH(load_model(path), path + ": " + what);
  };
  refused("bad_op",
          "node erf1 (Erf): the operator is not supported; the importer takes Add, AveragePool, BatchNormalization, "
          "Clip, Concat, Constant, Conv, DequantizeLinear, Dropout, Flatten, GRU, Gather, Gemm, GlobalAveragePool, "
          "Identity, LSTM, LogSoftmax, MatMul, MaxPool, Mul, Pad, QLinearConv, QLinearMatMul, QuantizeLinear, "
          "ReduceMean, Relu, Reshape, Sigmoid, Softmax, Squeeze, Tanh, Transpose, Unsqueeze (and Cast, "
          "ConstantOfShape, Expand, Shape on constants); docs/onnx.md gives each one's conditions");
  refused("bad_pads",
          "node asym (Conv): pads [0, 0, 1, 1]: the machine pads both sides of a row and of a column by the same "
          "amount");
  refused("bad_gru_reset",
          "node /gru/GRU (GRU): linear_before_reset = 0 is not supported: the machine's GRU is PyTorch's "
          "(linear_before_reset = 1, r multiplies R_h h + Rb_h)");
  refused("bad_pool1d",
          "node /pool/MaxPool (MaxPool): pads [2, 2]: expected 0..1 at each end for a window of 2 (a window must hold "
          "a value of the line)");
  refused("bad_pool1d_pad_mixed",
          "node /pool/AveragePool (AveragePool): pads [1, 1] with count_include_pad = 0 after a Pad: the Pad's zeros "
          "count in the average and these would not; the machine's pool has one padding");
  refused("bad_pool1d_pad_max",
          "node /pool/MaxPool (MaxPool): input 0 (xp) is a Pad's output: a Pad of zeros must be read by Conv or "
          "AveragePool nodes (it is folded into their padding, zeros that count in an average); a MaxPool pads by its "
          "own pads, which are never the maximum, and zeros would be");
  refused("bad_pool1d_pad_same",
          "node /pool/AveragePool (AveragePool): auto_pad SAME_UPPER after a Pad is not supported");
  refused("bad_pool1d_pad_wide",
          "node /pool/AveragePool (AveragePool): pads [5, 5] (with the Pad before it: 4 at the start, 4 at the end): "
          "expected 0..2 at each end for a window of 3 (a window must hold a value of the line)");
  refused("bad_pool1d_named",
          "node /pool/MaxPool (MaxPool): kernel_shape [16]: expected one window length 1..15 for a line [batch, 3, 13]");
  refused("bad_gap_big",
          "node /GlobalAveragePool (GlobalAveragePool): the average over the 16 x 16 pixels of [N, 512, 16, 16] is "
          "beyond the pool instruction's windows (1..15, square) and would take 67108864 weights on the matrix unit "
          "(H x W x C x C); at most 16777216");
  refused("bad_pool1d_window",
          "node /pool/MaxPool (MaxPool): kernel_shape [16]: expected one window length 1..15 for a line [N, 3, 13]");
  refused("bad_pool1d_dims", "node /pool/AveragePool (AveragePool): kernel_shape [2, 2]: expected one window length "
                             "1..15 for a line [N, 3, 13]");
  refused("bad_pool1d_dilation", "node /pool/MaxPool (MaxPool): dilations [2]: only 1 is supported");
  refused("bad_pool1d_ceil",
          "node /pool/AveragePool (AveragePool): ceil_mode = 1 with a partial last window of an average that counts "
          "its padding is not supported: the window of 2 at stride 2 over [N, 3, 13] (13 values) leaves one; "
          "supported: ceil_mode = 1 for MaxPool and for AveragePool with count_include_pad = 0, or windows that fit "
          "exactly");
  refused("bad_pool1d_ceil_start",
          "node /pool/MaxPool (MaxPool): ceil_mode = 1: the window of 3 at stride 3 over [N, 3, 14] padded by 0 at the "
          "start and 2 at the end (16 values) leaves a last window that starts in the end padding (PyTorch drops it, "
          "ONNX's older references keep it); supported: ceil_mode = 1 where the last window starts within the line");
  refused("bad_transa",
          "node ta (Gemm): transA = 1: the machine multiplies the tensor as [N, K]; transpose the weights "
          "instead");
  refused("bad_clip",
          "node clip3 (Clip): bounds [-1, 3]: the machine clips at [0, 6] (relu6) or [0, inf) (relu) only");
  refused("bad_lstm", "node bi (LSTM): direction bidirectional: only forward LSTMs are supported");
  refused("bad_pad_reflect",
          "node refl (Pad): mode reflect with value 0: only zero padding is supported (the machine's convolution pads "
          "with zeros)");
  refused("bad_pad_pool",
          "node mp (MaxPool): input 0 (p) is a Pad's output: a Pad of zeros must be read by Conv or AveragePool nodes "
          "(it is folded into their padding, zeros that count in an average); a MaxPool pads by its own pads, which "
          "are never the maximum, and zeros would be");
  refused("bad_pool2d_pads", "node /pool/MaxPool (MaxPool): pads [1, 3, 1, 1]: expected 0..2 on each side for a 3 x 3 "
                             "window (every window must hold a pixel of the map)");
  refused("bad_pool2d_count",
          "node /pool/AveragePool (AveragePool): pads [3, 3, 3, 3] with count_include_pad = 0: output pixel (1, 2)'s "
          "window holds 30 pixels of the map, and the machine averages them as an n x n square (n^2 a multiple of "
          "30) of at most 15 x 15: there is none; supported: count_include_pad = 1, or pads whose windows hold a "
          "number of pixels such a square holds (a 3 x 3 window padded by 1)");
  refused("bad_pool2d_count_ceil",
          "node /pool/AveragePool (AveragePool): pads [0, 0, 0, 0] and ceil_mode = 1 (its partial last window: 1 more "
          "at the bottom, 1 at the right) with count_include_pad = 0: output pixel (0, 2)'s window holds 42 pixels of "
          "the map, and the machine averages them as an n x n square (n^2 a multiple of 42) of at most 15 x 15: there "
          "is none; supported: ceil_mode = 0, pads whose windows hold a number of pixels such a square holds (a 3 x 3 "
          "window padded by 1)");
  refused("bad_pool2d_window",
          "node /pool/MaxPool (MaxPool): kernel_shape [16, 16]: the machine's pool windows are 1..15 on a side");
  refused("bad_pool2d_ceil",
          "node /pool/AveragePool (AveragePool): ceil_mode = 1 with a partial last window of an average that counts "
          "its padding is not supported: the 3 x 3 window at stride 2 over [N, 2, 8, 8] padded by [1, 1, 1, 1] (10 x "
          "10) leaves one; supported: ceil_mode = 1 for MaxPool and for AveragePool with count_include_pad = 0, or "
          "windows that fit exactly");
  refused("bad_pool2d_ceil_start",
          "node /pool/MaxPool (MaxPool): ceil_mode = 1: the 3 x 3 window at stride 3 over [N, 2, 5, 5] padded by [0, "
          "0, 2, 2] (7 x 7) leaves a last window that starts in the end padding (PyTorch drops it, ONNX's older "
          "references keep it); supported: ceil_mode = 1 where the last window starts within the map");
  // What ONNX itself rules out (the importer read a flag's any nonzero value as 1 and let pads and
  // auto_pad stand together, auto_pad's padding replacing the node's pads silently; a pool without
  // kernel_shape was refused as "kernel_shape []").
  refused("bad_pool_ceil_flag", "node /pool/MaxPool (MaxPool): attribute ceil_mode = 2: expected 0 or 1");
  refused("bad_pool_count_flag",
          "node /pool/AveragePool (AveragePool): attribute count_include_pad = 5: expected 0 or 1");
  refused("bad_pool1d_ceil_flag", "node /pool/AveragePool (AveragePool): attribute ceil_mode = -1: expected 0 or 1");
  // The other flags (each compiled before, read as its truth value: transB 2 as 1, layout 2 as 1, keepdims 3
  // as 1; linear_before_reset 7 was refused as "= 0").
  refused("bad_gemm_transb_flag", "node tb (Gemm): attribute transB = 2: expected 0 or 1");
  refused("bad_reduce_keepdims_flag", "node rm (ReduceMean): attribute keepdims = 3: expected 0 or 1");
  refused("bad_lstm_layout_flag", "node lt (LSTM): attribute layout = 2: expected 0 or 1");
  refused("bad_gru_reset_flag", "node gr (GRU): attribute linear_before_reset = 7: expected 0 or 1");
  refused("bad_reshape_allowzero_flag", "node rs (Reshape): attribute allowzero = 2: expected 0 or 1");
  // With allowzero = 1 the shape's 0 is a dimension of size 0, not the batch copied (was imported
  // as a flatten).
  refused("bad_reshape_allowzero",
          "node rs (Reshape): shape [0, -1] with allowzero = 1: only a Reshape that flattens every dimension but "
          "the batch ([N, -1], [0, -1] with allowzero = 0, or [N, 18]) is supported; the input is [N, 2, 3, 3]");
  refused("bad_pool_pads_auto",
          "node /pool/MaxPool (MaxPool): pads [1, 1, 1, 1] with auto_pad SAME_UPPER: ONNX's pads cannot be used with "
          "an auto_pad other than NOTSET; give the node pads or auto_pad, not both");
  refused("bad_pool1d_pads_auto",
          "node /pool/AveragePool (AveragePool): pads [0, 0] with auto_pad VALID: ONNX's pads cannot be used with an "
          "auto_pad other than NOTSET; give the node pads or auto_pad, not both");
  refused("bad_conv_pads_auto",
          "node /c/Conv (Conv): pads [1, 1, 1, 1] with auto_pad SAME_LOWER: ONNX's pads cannot be used with an "
          "auto_pad other than NOTSET; give the node pads or auto_pad, not both");
  refused("bad_pool_kernel",
          "node /pool/MaxPool (MaxPool): attribute kernel_shape is missing: ONNX requires it of MaxPool (the "
          "window's size)");
  refused("bad_pool1d_kernel",
          "node /pool/AveragePool (AveragePool): attribute kernel_shape is missing: ONNX requires it of AveragePool "
          "(the window's size)");
  refused("bad_reduce_channels",
          "node rm (ReduceMean): axes [1] of an input [N, 2, 6, 6]: only the mean over a map's rows and columns "
          "(axes 2 and 3 of [N, C, H, W]) or over a line (axis 2 of [N, C, L]), a global average pool, is supported");
  refused("bad_lstm_stack_first",
          "node /Gather (Gather): h_n[0] is the last h of LSTM layer 0 of 2, whose sequence the next layer reads: "
          "the machine's LSTM layer gives its sequence or its last h, not both; only the last layer's (h_n[-1]) can "
          "be read");
  refused("bad_concat",
          "node rows (Concat): axis 2 of a [N, C, H, W] input [N, 2, 6, 6]: the machine joins tensors along channels "
          "only (axis 1)");
}

TEST_CASE("onnx: a message gives the batch that runs, or the file's name for it, never the default 1") {
  // The file declares [N, 3, 13]; without a batch the import runs at 1, which is not the model's.
  const std::filesystem::path path = kDir / "bad_pool1d_window.onnx";
  const std::string what = ": node /pool/MaxPool (MaxPool): kernel_shape [16]: expected one window length 1..15 for a line ";
  CHECK_THROWS_WITH(load_model(path), path.string() + what + "[N, 3, 13]");
  LoadOptions o;
  o.batch = 5;
  CHECK_THROWS_WITH(load_model(path, o), path.string() + what + "[5, 3, 13]");
  o.batch.reset();
  o.input_file = kDir / "x_pools1d.npy";  // 3 samples of [3, 13]
  CHECK_THROWS_WITH(load_model(path, o), path.string() + what + "[3, 3, 13]");
  // (bad_pool1d_named's [batch, 3, 13]: the file's own name for it, in the refusals below)
}

TEST_CASE("onnx: bad input files") {
  SECTION("an --input of the wrong shape") {
    LoadOptions o;
    o.input_file = kDir / "x_gemm.npy";
    CHECK_THROWS_WITH(load_model(kDir / "conv_group.onnx", o),
                      (kDir / "x_gemm.npy").string() +
                          ": shape [3, 12]; expected [3, 4, 6, 6] (the ONNX input x, batch first)");
  }
  SECTION("not protobuf") {
    CHECK_THROWS_WITH(import_onnx("\x0a\xff\xff\xff\xff\xff", "m.onnx"),
                      "m.onnx: not an ONNX model: the protobuf does not parse (truncated or corrupt file)");
    CHECK_THROWS_WITH(import_onnx("", "m.onnx"), "m.onnx: not an ONNX model: no graph or an empty graph");
  }
  SECTION("a node with neither a name nor an output is named by its position") {
    // fuzz_onnx's first finding: a message about such a node read output(0) of an empty list.
    CHECK_THROWS_WITH(import_onnx(bytes_of(kDir / "fuzz_unnamed_node.onnx"), "m.onnx"), Contains("m.onnx: node #"));
  }
  SECTION("a Clip bound given as an empty tensor is refused") {
    // A fuzz_onnx finding (.ci/run of this stop): clip() read value 0 of an empty `max` constant.
    CHECK_THROWS_WITH(import_onnx(bytes_of(kDir / "fuzz_empty_clip_bound.onnx"), "m.onnx"),
                      "m.onnx: node relu6 (Clip): its max input holds 0 values; a bound is one value");
  }
  SECTION("a shape, axes, pads or indices constant that is no int64 is refused") {
    // A fuzz_onnx finding (.ci/run of stop 30): a Reshape's shape holding 9.2e18 was converted to
    // int64_t (undefined behaviour under UBSan); every constant read as integers now goes through
    // one check.
    CHECK_THROWS_WITH(import_onnx(bytes_of(kDir / "fuzz_huge_shape.onnx"), "m.onnx"),
                      "m.onnx: node /Reshape (Reshape): shape: element 1 (9.223372036854776e+18) is not an integer "
                      "of at most 2^53");
  }
  SECTION("every truncation of a model and random corruptions are refused or imported, never a crash") {
    LoadOptions o;
    o.max_values = uint64_t{1} << 20;  // a corrupted dimension may not ask for gigabytes
    for (const char* name : {"gemm", "lstm", "qlinear"}) {
      const std::string bytes = bytes_of(kDir / (std::string(name) + ".onnx"));
      const size_t layers = import_onnx(bytes, "m.onnx", o).layers.size();
      // A cut inside the graph loses a node, an initializer or the output: refused. A cut after
      // the graph (fields that follow it, such as opset_import) may leave the same model.
      for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
        INFO(name << " cut at " << n);
        size_t got = layers;
        try {
          got = import_onnx(bytes.substr(0, n), "m.onnx", o).layers.size();
        } catch (const InputError&) {
        }
        CHECK(got == layers);
      }
      CHECK_THROWS_AS(import_onnx(bytes.substr(0, bytes.size() / 2), "m.onnx", o), InputError);
      std::mt19937 rng(3);
      for (int k = 0; k < 200; ++k) {
        std::string b = bytes;
        for (int f = 0; f < 3; ++f) b[rng() % b.size()] = static_cast<char>(rng());
        size_t got = 1;
        try {
          got = import_onnx(b, "m.onnx", o).layers.size();
        } catch (const InputError&) {
        }
        CHECK(got > 0);
      }
    }
  }
}

// An ONNX model's compile memory is estimated by the rule a description's is (compile_memory.h),
// before the batch's inputs are generated: refused with the figures above --max-memory.
TEST_CASE("onnx: the compile memory estimate counts an ONNX model as a description's") {
  // conv_pad_stride: x [N, 3, 9, 9] -> Conv 8 x 3 x 3 x 3 (+ 8 biases), stride 2, pads 1 -> Relu:
  // one conv2d layer, 9 x 9 x 3 = 243 input and 5 x 5 x 8 = 200 output values a sample.
  LoadOptions o;
  o.batch = 1000;
  // Full: 224 float parameters x 4 = 896; quantized 216 + 8 x 4 (int32 biases) = 248; the weight
  // image 216; the inputs 1000 x 243 x 6 (float, int8, TPU order) = 1,458,000; the calibration
  // run over 4 samples x (200 outputs + 243 inputs) x 4 = 7,088: 1,466,448 bytes.
  o.max_memory = 1466447;
  CHECK_THROWS_WITH(load_model(kDir / "conv_pad_stride.onnx", o),
                    (kDir / "conv_pad_stride.onnx").string() +
                        ": compiling model conv_pad_stride needs about 1466448 bytes (1.4 MiB) (896 for 224 float "
                        "parameters, 248 for their quantized weights and biases, 216 for the weight image, 1458000 for "
                        "batch 1000 x 243 input values, 7088 for a calibration run over 4 samples x 200 layer output "
                        "values), more than the 1466447 bytes (1.4 MiB) allowed by --max-memory; lower the batch or "
                        "the layer sizes or raise --max-memory");
  o.max_memory = 1466448;
  const Model m = load_model(kDir / "conv_pad_stride.onnx", o);
  REQUIRE(m.batch == 1000);
  // The seeded input, generated after the check, is the one generate_input gives (as before).
  CHECK(m.inputs.at(0).data == generate_input(m.inputs.at(0).shape, 1000, m.seed, 0));
  // With the golden reference to follow (`run` on a data engine): + 1000 x 200 int8 outputs.
  o.golden_reference = true;
  CHECK_THROWS_WITH(load_model(kDir / "conv_pad_stride.onnx", o),
                    Contains("needs about 1666448 bytes (1.6 MiB) (896 for 224 float parameters, 248 for their "
                             "quantized weights and biases, 216 for the weight image, 1458000 for batch 1000 x 243 input "
                             "values, 7088 for a calibration run over 4 samples x 200 layer output values, 200000 for "
                             "the golden reference's batch 1000 x 200 layer output values)"));
  o.golden_reference = false;
  // Timing-only: the weights are the file's: 8 biases x 8 (float, int32) + 216 weights x 5 (float,
  // int8) = 1,144 held. A Conv and a Relu map the same at any scale (timing_needs_data is false: the
  // file's weights are read before the estimate), so nothing is calibrated, and the batch's inputs
  // are neither generated nor counted: 1,144 bytes at any batch.
  o.timing_only = true;
  o.max_memory = 1143;
  CHECK_THROWS_WITH(load_model(kDir / "conv_pad_stride.onnx", o),
                    Contains("needs about 1144 bytes (1144 for a timing-only compile: 224 biases and weights from "
                             "files), more than the 1143 bytes"));
  o.max_memory = 1144;
  const Model t = load_model(kDir / "conv_pad_stride.onnx", o);
  CHECK(t.inputs.at(0).seeded);
  CHECK(t.inputs.at(0).data.empty());
  // A model whose timing-only compile calibrates (add_mul_softmax: its scales decide the mapping)
  // counts the batch's inputs and the calibration run: 168 weights x 5 = 840, inputs 1000 x 10 x 5
  // (float, int8) = 50,000, a float run over 4 samples x (32 + 10) x 4 = 672: 51,512 bytes.
  o.max_memory = 51511;
  CHECK_THROWS_WITH(load_model(kDir / "add_mul_softmax.onnx", o),
                    Contains("needs about 51512 bytes (840 for a timing-only compile: 168 biases and weights from "
                             "files, 50000 for batch 1000 x 10 input values, 672 for a calibration run over 4 samples "
                             "x 32 layer output values and 0 seeded weights of a layer), more than the 51511 bytes"));
  o.max_memory = 51512;
  CHECK(load_model(kDir / "add_mul_softmax.onnx", o).batch == 1000);
}
