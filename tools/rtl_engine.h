// `tpusim run --engine rtl`: the stepped engine with the Verilated RTL array (hw/cosim_array.h)
// in place of the C++ one, inside the same SystemC machine. Which sizes exist is decided when
// the project is built (hw/CMakeLists.txt); a build without Verilator has none.
#pragma once

#include <cstdint>

#include "sim/systolic_array.h"

namespace tpusim::tools {

// The RTL array of rows x cols, created before the process's first simulation. Throws
// InputError (exit 2) for a size that is not built, naming the sizes that are.
sim::ArrayModel& rtl_array(uint64_t rows, uint64_t cols);

}  // namespace tpusim::tools
