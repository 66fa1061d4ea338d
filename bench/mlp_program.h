// MLP programs built the way a TPU compiler would schedule them, for the default tpu-v1 machine
// (256 x 256 array, UB rows of 256 bytes, 4096 accumulator rows, weight FIFO of 4 tiles, station
// queues of 4): weight prefetch a few tiles ahead, one matmul per 256 x 256 weight tile
// (switch, accumulate over K), double-buffered accumulators, activations ping-ponging between two
// UB regions, explicit syncs for the read-after-write dependencies between layers.
// Used by bench/machine_bench.cpp; the schedule is described in mlp_program.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isa/program.h"

namespace tpusim::bench {

struct MlpSpec {
  std::string name;              // Program::model
  std::vector<uint64_t> widths;  // input width, then each layer's output width (>= 2 entries)
  uint64_t batch = 1;            // input vectors per matmul (1..2048: two accumulator blocks)
  uint64_t seed = 1;             // input and weight contents (isa::fill_random)
};

// Throws std::invalid_argument when the spec does not fit the tpu-v1 machine (batch > 2048,
// activations beyond the unified buffer, zero widths). The result passes isa::check_program and
// sim::check_static for sim::Arch{}.
isa::Program make_mlp_program(const MlpSpec& spec);

// Weight count (sum of K x N over the layers, without tile padding).
uint64_t mlp_weights(const MlpSpec& spec);

// Reconstructions of the TPU paper's MLPs (Table 1; layer shapes are not published, see
// mlp_program.cpp for the choice) and a large MLP with about 100 MB of weights.
MlpSpec mlp0_spec();
MlpSpec mlp1_spec();
MlpSpec big_mlp_spec();

}  // namespace tpusim::bench
