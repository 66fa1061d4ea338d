// A compiled program against the machine it runs on: the host software's choices it was compiled
// with (sim/arch.h, driver_*). Beside sim::program_arch_mismatch (sim/arch.h), which checks the
// array's shape of any program. Owner: simulator.
#pragma once

#include <string>

#include "isa/program.h"
#include "sim/arch.h"

namespace tpusim::sim {

// Empty when `program` may run on `arch` as far as the host software's choices go: a program the
// compiler did not make (no meta.compiler: assembled by hand, its `.arch` naming the machine it was
// written for), one whose `.arch` this tpusim cannot read, or one compiled with the machine's
// driver_* parameters (driver_piece_schedule, driver_host_loop, driver_partial_tiles: the table's).
// Else why not: those choices shaped the program, so on it another value would change nothing,
// and the run would be reported as made with it.
std::string program_driver_mismatch(const isa::Program& program, const Arch& arch);

}  // namespace tpusim::sim
