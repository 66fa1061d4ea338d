// The back end: a QGraph to a TPU program for one architecture. Owner: back end.
#pragma once

#include "compiler/graph.h"
#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::compiler {

struct LowerOptions {
  // Fuse a pool into the activates of the convolution before it where the shapes allow
  // (docs/compiler.md "Fusion"); off: every pool is its own instruction, as before.
  bool fuse_pools = true;
};

isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options = {});

}  // namespace tpusim::compiler
