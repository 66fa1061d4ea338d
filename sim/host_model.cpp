// The host model of one batch (host_model.h).
#include "sim/host_model.h"

#include "isa/table.h"

namespace tpusim::sim {

BatchLatency batch_latency(const Arch& a, uint64_t cycles, uint64_t instructions) {
  const double hz = a.clock_mhz * 1e6;
  const uint64_t download = a.host_latency_cycles +
                            transfer_cycles(instructions * isa::kInstructionBytes, a.host_gbps, a.clock_mhz);
  BatchLatency l;
  l.driver_seconds = a.host_driver_us * 1e-6;
  l.instruction_seconds = double(download) / hz;
  l.program_seconds = double(cycles) / hz;
  return l;
}

}  // namespace tpusim::sim
