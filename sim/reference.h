// The golden functional ISA executor: the plainest possible reading of docs/isa.md.
//
// Runs a program's instructions one after another, with no notion of time: rw appends tiles
// to an unbounded FIFO, matmul with `switch` pops the head into the active tile, every other
// instruction applies its exec_* semantics. Every engine of the timed machine must leave the
// memories exactly as this does (tests/sim/differential_test.cpp).
#pragma once

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/state.h"

namespace tpusim::sim {

// Throws SimError for programs that address outside a memory, switch to a tile that was never
// read, multiply with no active tile, or do not end with halt.
MachineState run_reference(const isa::Program& program, const Arch& arch);

// True when the two states' UB, accumulators and host regions are identical; else `why`
// names the first difference (memory, row/byte, both values).
bool same_memories(const MachineState& a, const MachineState& b, std::string* why = nullptr);

}  // namespace tpusim::sim
