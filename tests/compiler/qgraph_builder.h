// Hand-built quantized graphs with random data and weights (the graph alone: no machine), for the
// back end's tests (graph_builder.h) and the GPU plan's (tests/gpu/plan_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tpusim::test {

struct GraphBuilder {
  compiler::QGraph g;
  std::mt19937 rng;

  explicit GraphBuilder(uint64_t batch, std::string name = "test", uint32_t seed = 7) : rng(seed) {
    g.name = std::move(name);
    g.batch = batch;
  }
  std::vector<int8_t> random(size_t n, int lo = -128, int hi = 127) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int8_t> v(n);
    for (auto& x : v) x = static_cast<int8_t>(d(rng));
    return v;
  }
  // A tensor of scale 0.05 in layer `layer` (default: its own name).
  int tensor(const std::string& name, compiler::Shape shape, const std::string& layer = "") {
    g.tensors.push_back({name, shape, 0.05, layer.empty() ? name : layer});
    return static_cast<int>(g.tensors.size() - 1);
  }
  // Tensor `t` made an input of the graph, with random data.
  int input_tensor(int t) {
    g.inputs.push_back(t);
    g.input_data.push_back(random(g.batch * g.tensors[static_cast<size_t>(t)].shape.elements()));
    return t;
  }
  int input(compiler::Shape shape) { return input_tensor(tensor("input" + std::to_string(g.inputs.size()), shape)); }
  // A matmul reading `inputs` (whole tensors unless views are given) into `out`, with random
  // weights; per-column requantization with random bias when `perchan`.
  compiler::MatmulOp matmul(std::vector<compiler::View> inputs, compiler::View out, uint64_t kh = 1, uint64_t kw = 1,
                            bool perchan = false) {
    compiler::MatmulOp m;
    m.inputs = std::move(inputs);
    m.output = out;
    m.kernel_h = kh;
    m.kernel_w = kw;
    for (const auto& v : m.inputs) m.k += g.tensors[v.tensor].shape.c;
    m.n = g.tensors[out.tensor].shape.c;
    m.weights = random(kh * kw * m.k * m.n);
    // Keep results in range: shift by about log2(sqrt(kh kw K) x 74 x 74 / 64).
    const auto shift = static_cast<uint8_t>(7 + std::lround(std::log2(std::sqrt(double(kh * kw * m.k)))));
    if (perchan) {
      std::uniform_int_distribution<int> b(-5000, 5000), mu(100, 300);
      for (uint64_t j = 0; j < m.n; ++j) {
        m.bias.push_back(b(rng));
        m.mult.push_back(static_cast<uint16_t>(mu(rng)));
        m.shift.push_back(static_cast<uint8_t>(shift + 8));
      }
    } else {
      m.mult = {1};
      m.shift = {shift};
    }
    m.func = isa::Func::relu;
    return m;
  }
  void add(compiler::QOp op, const std::string& layer) {
    g.ops.push_back(std::move(op));
    g.op_layer.push_back(layer);
  }
};

inline compiler::View whole(int t) { return {t, 0, 0}; }

}  // namespace tpusim::test
