// Import of SCALE-Sim topology files (CSV: layer name, IFMAP height, IFMAP width, filter height,
// filter width, channels, num filter, strides) as a conv2d model. Owner: front end.
#pragma once

#include <string>
#include <string_view>

#include "compiler/graph.h"
#include "compiler/model.h"

namespace tpusim::compiler {

// Each row becomes a conv2d layer without padding (SCALE-Sim's IFMAP sizes include padding) and
// without bias or activation. A row whose input map is the previous row's output map reads that
// layer; any other row reads a model input of its own, named "<layer>_in". Weights and inputs are
// seeded. Throws InputError "FILE:LINE: column: value: expected ...".
Model import_scalesim(std::string_view csv, const std::string& source, const LoadOptions& options = {});

}  // namespace tpusim::compiler
