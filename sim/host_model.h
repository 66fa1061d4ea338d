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
// A program cut into segments by `int` (interrupt host: a loop whose steps the host drives, the TPU
// having no branches) is launched once per segment: the first launch and the last completion
// interrupt are the batch's driver time above and the download is the first segment's; every later
// segment's launch (the driver's time, one interrupt and one launch, and its download) is held
// issue inside the simulated cycles (launch_cycles, at each `int`), so it is counted once.
// `tpusim run` reports it (latency_seconds, host_overhead_seconds) and `tpusim compare` uses it
// for the simulated rows and its latency-limited batch sweep: one model for both.
#pragma once

#include <cstdint>
#include <span>

#include "isa/instruction.h"
#include "sim/arch.h"

namespace tpusim::sim {

struct BatchLatency {
  double driver_seconds = 0;       // host_driver_us
  double instruction_seconds = 0;  // the program's instructions over the host link
  double program_seconds = 0;      // the simulated cycles (host DMA of inputs and outputs included)
  double host_overhead() const { return driver_seconds + instruction_seconds; }
  double total() const { return program_seconds + host_overhead(); }
};

// A program whose first segment (segment_length(code, 0)) has `instructions` instructions and
// that ran for `cycles` cycles on `arch`.
BatchLatency batch_latency(const Arch& arch, uint64_t cycles, uint64_t instructions);

// The instructions of the segment that starts at code[from]: through the next `int` or `halt`
// (included), or to the end of the code.
uint64_t segment_length(std::span<const isa::Instruction> code, uint64_t from);

// The host's time between two segments, in cycles: the driver (host_driver_us: the completion
// interrupt and the next launch) and the next segment's download of `instructions` instructions
// over the host link (host_latency_cycles + transfer_cycles(instructions x kInstructionBytes)).
uint64_t launch_cycles(const Arch& arch, uint64_t instructions);

}  // namespace tpusim::sim
