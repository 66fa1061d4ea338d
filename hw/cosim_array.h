// Co-simulation: the RTL systolic array (hw/rtl/tpusim_systolic_array.sv), Verilated as a SystemC
// module (`verilator --sc`), standing in for sim::SystolicArray inside the SystemC machine.
//
// Pass it as sim::RunOptions::array with the stepped engine: the matrix unit then drives the
// Verilated module's ports every cycle it steps the array and reads its bottom row back, in the
// same SystemC kernel as the rest of the machine, and the run must give the same memories, cycles,
// timelines and counters as with the C++ array (tests/hw/cosim_test.cpp holds it to that).
//
// How a step runs (hw/README.md, "Co-simulation"): the module's clk is an sc_signal the matrix
// unit toggles, not a free-running sc_clock, so the RTL is clocked exactly in the cycles the
// stepped engine steps its array (it skips idle cycles while the array is empty) and the kernel
// still starves when a run ends. One step: the inputs and a rising clk are written, two delta
// cycles let the Verilated process evaluate and its outputs update, the outputs are read, and the
// falling edge commits in a third delta. Time never advances inside a step. reset() (called by the
// matrix unit outside the kernel, before each run) takes effect as one clock cycle with rst high
// before the run's first step.
//
// No Verilator or SystemC header leaks from here: sim/ and its users see only sim::ArrayModel.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/systolic_array.h"

namespace tpusim::hw {

// The array sizes Verilated into tpusim_cosim (hw/CMakeLists.txt), as {rows, cols}.
std::vector<std::pair<uint64_t, uint64_t>> cosim_array_sizes();

// The co-simulated rows x cols array, created on the first call for that size and kept until the
// process ends (a SystemC module cannot be removed from an elaborated design). The first call
// for a size must come before the SystemC kernel elaborates, that is before the process's first
// sim::simulate() or sc_start(): std::logic_error otherwise. std::invalid_argument for a size not
// in cosim_array_sizes().
sim::ArrayModel& cosim_array(uint64_t rows, uint64_t cols);

}  // namespace tpusim::hw
