// Import of ONNX models (.onnx: a serialized onnx.ModelProto, read with the ONNX project's own
// generated protobuf classes from Debian's libonnx-dev) as a float Model, a sibling of the TOML
// descriptions (model.cpp) and SCALE-Sim topologies (scalesim.cpp). Owner: front end.
//
// ONNX tensors are NCHW ([N, C, H, W]), [N, F] or sequences ([N, T, F] or, around LSTM nodes,
// [T, N, F]); the Model is NHWC per sample (graph.h). The importer converts weights and inputs
// (conv weights to [kh][kw][c][filters], a dense layer after a flattened map to the (h, w, c)
// row order, LSTM gates from ONNX's i, o, f, c to i, f, g, o) so that the Model computes what
// the ONNX graph computes. docs/onnx.md lists the operators and what is refused.
#pragma once

#include <string>
#include <string_view>

#include "compiler/graph.h"
#include "compiler/model.h"

namespace tpusim::compiler {

// `bytes` is the file's content, `source` its path (for messages). The batch is
// options.batch, else the number of samples in options.input_file, else the model input's
// batch dimension where it is a number, else 1. Inputs come from options.input_file (a .npy
// in the ONNX input's layout, batch first) or are seeded as descriptions' are (seed 1).
// Throws InputError "SOURCE: node NAME (OP): what is unsupported or wrong" for an operator,
// attribute or graph the machine cannot run, and "SOURCE: not an ONNX model: ..." for bytes
// that do not parse.
Model import_onnx(std::string_view bytes, const std::string& source, const LoadOptions& options = {});

}  // namespace tpusim::compiler
