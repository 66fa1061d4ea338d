// Helpers shared by the simulator's unit tests: a tiny machine, host regions, instructions built
// from field lists, and memory rows set by hand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "isa/instruction.h"
#include "isa/program.h"
#include "sim/arch.h"
#include "sim/state.h"

namespace tpusim::test {

// A rows x cols array (4 x 4 by default): UB rows of max(rows, cols) bytes, 64 UB rows, 16
// accumulator rows.
inline sim::Arch tiny(uint64_t rows = 4, uint64_t cols = 4) {
  sim::Arch a;
  a.name = "tiny";
  a.array_rows = rows;
  a.array_cols = cols;
  a.ub_bytes = 64 * a.ub_row_bytes();
  a.acc_entries = 16;
  return a;
}

// A host region (aggregate initialisation would have to name every member).
inline isa::HostRegion host_region(std::string name, uint64_t addr, uint64_t bytes, std::vector<uint8_t> init = {},
                                   bool output = false) {
  isa::HostRegion r;
  r.name = std::move(name);
  r.host_addr = addr;
  r.bytes = bytes;
  r.init = std::move(init);
  r.output = output;
  return r;
}

// An instruction with its defaults, then the given fields.
inline isa::Instruction make(isa::Opcode op, std::initializer_list<std::pair<isa::Field, uint64_t>> fields = {}) {
  isa::Instruction inst = isa::make_instruction(op);
  for (const auto& [f, v] : fields) inst[f] = v;
  return inst;
}

// UB row `row` from its first bytes (each value's low byte: -1 is 0xff).
inline void set_row(sim::MachineState& s, uint64_t row, std::vector<int> bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) s.ub_row(row)[i] = static_cast<uint8_t>(bytes[i]);
}

// Accumulator row `row` from its first values.
inline void set_acc(sim::MachineState& s, uint64_t row, std::vector<int32_t> values) {
  std::copy(values.begin(), values.end(), s.acc_row(row));
}

}  // namespace tpusim::test
