// Shapes and the names descriptions use for layer types and activation functions (graph.h).
#include "compiler/graph.h"

#include <fmt/format.h>

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

}  // namespace tpusim::compiler
