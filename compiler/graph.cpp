// Shapes and the names descriptions use for layer types and activation functions (graph.h).
#include "compiler/graph.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpusim::compiler {

std::string Shape::str() const {
  switch (rank) {
    case 1: return fmt::format("[{}]", c);
    case 2: return fmt::format("[{}, {}]", h, c);
    default: return fmt::format("[{}, {}, {}]", h, w, c);
  }
}

Shape vector_shape(uint64_t c) { return Shape{1, 1, 1, c}; }
Shape sequence_shape(uint64_t steps, uint64_t c) { return Shape{2, steps, 1, c}; }
Shape map_shape(uint64_t h, uint64_t w, uint64_t c) { return Shape{3, h, w, c}; }

const char* layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::dense: return "dense";
    case LayerType::conv2d: return "conv2d";
    case LayerType::max_pool: return "max_pool";
    case LayerType::avg_pool: return "avg_pool";
    case LayerType::flatten: return "flatten";
    case LayerType::add: return "add";
    case LayerType::mul: return "mul";
    case LayerType::activation: return "activation";
    case LayerType::lstm: return "lstm";
    case LayerType::concat: return "concat";
    case LayerType::gru: return "gru";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::relu6: return "relu6";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
  }
  return "?";
}

MatmulWork& MatmulWork::operator+=(const MatmulWork& o) {
  model_macs += o.model_macs;
  gemm_macs += o.gemm_macs;
  model_weights += o.model_weights;
  gemm_weights += o.gemm_weights;
  return *this;
}

MatmulWork matmul_work(const QGraph& graph, const MatmulOp& op) {
  MatmulWork w;
  const size_t t = static_cast<size_t>(op.output.tensor);
  if (op.output.tensor < 0 || t >= graph.tensors.size()) return w;
  const uint64_t pixels = graph.tensors[t].shape.pixels();
  const uint64_t count = op.output.pixels ? op.output.pixels : pixels - std::min(op.output.pixel0, pixels);
  const uint64_t positions = op.kernel_h * op.kernel_w;
  w.gemm_weights = positions * op.k * op.n;
  w.gemm_macs = graph.batch * count * w.gemm_weights;
  if (op.copy) return w;
  w.model_weights = op.taps_in_rows(0, op.kernel_h) * (op.groups > 1 ? op.k / op.groups : op.k) * op.n;
  w.model_macs = graph.batch * count * w.model_weights;
  return w;
}

MatmulWork graph_matmul_work(const QGraph& graph) {
  MatmulWork w;
  for (const QOp& op : graph.ops)
    if (const auto* m = std::get_if<MatmulOp>(&op)) w += matmul_work(graph, *m);
  return w;
}

uint64_t model_macs(const QGraph& graph) { return graph_matmul_work(graph).model_macs; }

}  // namespace tpusim::compiler
