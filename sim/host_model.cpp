// The host model of one batch (host_model.h).
#include "sim/host_model.h"

#include <cmath>

#include "isa/table.h"

namespace tpusim::sim {

namespace {

uint64_t download_cycles(const Arch& a, uint64_t instructions) {
  return a.host_latency_cycles + transfer_cycles(instructions * isa::kInstructionBytes, a.host_gbps, a.clock_mhz);
}

}  // namespace

uint64_t segment_length(std::span<const isa::Instruction> code, uint64_t from) {
  for (uint64_t i = from; i < code.size(); ++i)
    if (code[i].opcode == isa::Opcode::interrupt || code[i].opcode == isa::Opcode::halt) return i + 1 - from;
  return code.size() > from ? code.size() - from : 0;
}

uint64_t launch_cycles(const Arch& a, uint64_t instructions) {
  // (host_driver_us in whole cycles, rounded up: 10 us at 700 MHz = 7,000)
  return static_cast<uint64_t>(std::ceil(a.host_driver_us * a.clock_mhz)) + download_cycles(a, instructions);
}

BatchLatency batch_latency(const Arch& a, uint64_t cycles, uint64_t instructions) {
  const double hz = a.clock_mhz * 1e6;
  const uint64_t download = download_cycles(a, instructions);
  BatchLatency l;
  l.driver_seconds = a.host_driver_us * 1e-6;
  l.instruction_seconds = double(download) / hz;
  l.program_seconds = double(cycles) / hz;
  return l;
}

}  // namespace tpusim::sim
