// The back end: a QGraph to a TPU program for one architecture. Owner: back end.
#pragma once

#include "compiler/graph.h"
#include "compiler/lower_options.h"
#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::compiler {

isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options = {});

}  // namespace tpusim::compiler
