// Models written inline in the compiler's tests: prepared from their TOML text, and the identity
// copies the quantizer added to them counted.
#pragma once

#include <string>
#include <variant>

#include "compiler/compile.h"
#include "compiler/graph.h"
#include "compiler/model.h"

namespace tpusim::test {

// `text` (a model description, as a .toml file holds it) parsed and prepared as
// compiler::prepare_file prepares a file: quantized with options.mapper's switches, calibrated
// unless options.timing_only. lower_for it next (with the same mapper).
inline compiler::Compiled prepare_text(const std::string& text, const compiler::LoadOptions& options = {}) {
  return compiler::prepare_model(compiler::parse_model(text, "model.toml", ".", options), options.timing_only,
                                 options.mapper);
}

// The identity matmuls (MatmulOp::copy) the quantizer added to join concats' parts: none of the
// model's own layers.
inline int identity_copies(const compiler::QGraph& g) {
  int n = 0;
  for (const compiler::QOp& op : g.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op)) n += m->copy;
  return n;
}

}  // namespace tpusim::test
