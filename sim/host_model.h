// The host's view of one batch: the latency a serving host sees from handing a batch to the
// driver to having its results back (docs/timing.md, "Host model"). The program's own input and
// output DMA over the host link (read_host, write_host: host_gbps, host_latency_cycles each) are
// simulated and inside its cycles; around them the host adds, serially:
//   - the driver's time per batch (host_driver_us: formatting the batch, the launch, the
//     completion interrupt), and
//   - the download of the program's instructions into the TPU's instruction buffer over the host
//     link ("TPU instructions are sent from the host over the PCIe bus into an instruction
//     buffer", Jouppi et al. 2017, Section 2): one DMA of instructions x kInstructionBytes bytes,
//     host_latency_cycles + transfer_cycles(bytes, host_gbps).
// `tpusim run` reports it (latency_seconds, host_overhead_seconds) and `tpusim compare` uses it
// for the simulated rows and its latency-limited batch sweep: one model for both.
#pragma once

#include <cstdint>

#include "sim/arch.h"

namespace tpusim::sim {

struct BatchLatency {
  double driver_seconds = 0;       // host_driver_us
  double instruction_seconds = 0;  // the program's instructions over the host link
  double program_seconds = 0;      // the simulated cycles (host DMA of inputs and outputs included)
  double host_overhead() const { return driver_seconds + instruction_seconds; }
  double total() const { return program_seconds + host_overhead(); }
};

// A program of `instructions` instructions that ran for `cycles` cycles on `arch`.
BatchLatency batch_latency(const Arch& arch, uint64_t cycles, uint64_t instructions);

}  // namespace tpusim::sim
