// tpusim run --engine rtl (rtl_engine.h), in a build with the co-simulated arrays.
#include "tools/rtl_engine.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "hw/cosim_array.h"
#include "isa/error.h"

namespace tpusim::tools {

sim::ArrayModel& rtl_array(uint64_t rows, uint64_t cols) {
  try {
    return hw::cosim_array(rows, cols);
  } catch (const std::invalid_argument&) {
    std::string built;
    for (const auto& [r, c] : hw::cosim_array_sizes()) built += fmt::format(" {}x{}", r, c);
    throw InputError(
        fmt::format("--engine rtl: no RTL array of {} x {} is built (this build has:{}; choose one with "
                    "--set array_rows=N "
                    "--set array_cols=N, or add the size in hw/CMakeLists.txt)",
                    rows, cols, built));
  }
}

}  // namespace tpusim::tools
