// tpusim run --engine rtl (rtl_engine.h), in a build without Verilator: no RTL array is built.
#include <fmt/format.h>

#include "isa/error.h"
#include "tools/rtl_engine.h"

namespace tpusim::tools {

sim::ArrayModel& rtl_array(uint64_t rows, uint64_t cols) {
  throw InputError(
      fmt::format("--engine rtl: no RTL array of {} x {} is built: this build found no Verilator "
                  "(scripts/install-deps.sh "
                  "installs it)",
                  rows, cols));
}

}  // namespace tpusim::tools
