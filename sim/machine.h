// The timed machine: runs a program on the configured TPU and says when everything happened.
//
// Units are SystemC modules (sim/units.h): the control unit issues instructions in order into
// the stations of the 4-stage pipeline (host DMA, weight fetch, matrix unit, activation unit);
// the weight path (weight memory, weight FIFO, shadow tile) feeds the matrix unit. Time is
// sc_time at the configured clock; every unit waits in bulk, so simulated time advances by
// whole instructions wherever nothing observable changes. The timing rules are written out in
// docs/timing.md.
//
// Three engines, one truth (tests/sim/differential_test.cpp): `stepped` moves every cell of the
// systolic array every cycle and observes when results reach the accumulators; `fast` computes
// each matmul at once with an int8 GEMM and its end in closed form; `timing` skips all data.
// All three give the same cycle for every instruction's start and end, and the same counters;
// stepped and fast leave the same memories as the reference executor (reference.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/state.h"

namespace tpusim::sim {

enum class Engine { fast, stepped, timing };
std::string_view engine_name(Engine e);
Engine parse_engine(std::string_view name);  // throws InputError

class ArrayModel;     // sim/systolic_array.h
class TraceRecorder;  // sim/trace.h
struct RunProgress;   // sim/trace.h

struct RunOptions {
  Engine engine = Engine::fast;
  uint64_t max_cycles = 0;  // 0: no limit (a cycle limit turns a runaway program into an error)
  // Stepped engine only: the array the matrix unit steps instead of its own SystolicArray, for
  // co-simulation (hw/cosim_array.h: the Verilated RTL array). Not owned; must be array_rows x
  // array_cols and outlive the run. Null: the built-in SystolicArray.
  ArrayModel* array = nullptr;
  // Tracing (sim/trace.h, docs/traces.md): the recorder this run reports to, and a progress
  // counter another thread may read. Not owned; null: off (one pointer check per event).
  TraceRecorder* trace = nullptr;
  RunProgress* progress = nullptr;
};

// When one instruction ran, in cycles from the start of the run. For a station instruction,
// `issue` is when the control unit issued it, `start` when its station began it (a matmul:
// its first input vector entering the array), `end` when it finished (a matmul: the cycle after
// its last accumulator write; read_weights: the cycle after its last tile request).
struct InstructionTiming {
  uint64_t issue = 0, start = 0, end = 0;
  bool operator==(const InstructionTiming&) const = default;
};

// The TPU paper's hardware counters (Table 3), as cycle counts; fractions are these over
// `cycles`. array_active + weight_stall + weight_shift + non_matrix == cycles;
// raw_stall, input_stall and host_launch are parts of non_matrix.
struct MatrixCounters {
  uint64_t array_active = 0;     // cycles an input vector entered the array
  double useful_mac_cycles = 0;  // array_active weighted by the fraction of cells holding useful weights
  uint64_t weight_stall = 0;     // a matmul waiting for its tile to arrive from weight memory
  uint64_t weight_shift = 0;     // a matmul waiting for its tile to shift into the shadow slot
  uint64_t non_matrix = 0;       // everything else
  uint64_t raw_stall = 0;        // non_matrix cycles while issue waits on a sync naming `act` (or int's drain)
  uint64_t input_stall = 0;      // non_matrix cycles while issue waits on a sync naming `host` only (or int's)
  uint64_t host_launch = 0;      // non_matrix cycles while issue is held by `int` for the host's launch
  bool operator==(const MatrixCounters&) const = default;
};

inline constexpr int kUnitCount = static_cast<int>(isa::kUnitNames.size());  // isa::Unit values

// The bit of a `sync` mask that names a station (isa::kUnitMaskValues: host 0, weights 1,
// matrix 2, act 3, in isa::Unit order after control), and the name `sync units=` uses for it.
inline uint64_t sync_mask_bit(isa::Unit station) { return uint64_t{1} << (static_cast<int>(station) - 1); }
inline std::string_view sync_unit_name(isa::Unit station) {
  return isa::kUnitMaskValues[static_cast<int>(station) - 1].name;
}

struct RunResult {
  uint64_t cycles = 0;                      // the cycle after halt completed
  std::vector<InstructionTiming> timeline;  // one per instruction up to and including halt
  MatrixCounters matrix;
  uint64_t macs = 0;        // useful multiply-accumulates (cells inside each tile's used box,
                            // or the program's figure: isa::MatmulMacs)
  uint64_t copy_macs = 0;   // an identity copy's (isa::MatmulMacs copy): moves data, no model work
  uint64_t array_macs = 0;  // all cell multiply-accumulates (array_active x rows x cols)
  std::array<uint64_t, kUnitCount> unit_busy{};  // cycles each unit had work in progress
  uint64_t weight_mem_busy = 0;                  // cycles the weight memory bus transferred
  uint64_t array_steps = 0;           // stepped engine: cycles the array was stepped (each moves every cell)
  uint64_t ub_peak_rows = 0;          // UB rows any instruction touched (their count: the footprint)
  uint64_t acc_peak_rows = 0;         // same for the accumulators
  std::optional<MachineState> state;  // final memories (not for the timing engine)
  double host_seconds = 0;            // wall time of the simulation proper
  bool operator==(const RunResult&) const = delete;
};

// The records a run keeps besides the machine's memories, on every engine (the timing engine's
// whole footprint), from the program up to halt: each instruction's timeline entry and the
// setcfg settings it saw (an index), the distinct settings (one per setcfg, and the reset's),
// the matrix unit's spans (a matmul's stream and its wait for a tile: two each), issue holds
// (a sync's wait: one; an int's drain, input wait and launch: three), and meta.tile_uses and
// meta.matmul_macs as parsed. Each vector is reserved whole before the run (none grows by
// doubling, leaving its old buffers behind), and `run`'s memory check counts these bytes,
// sizeof of each record, by part (saturating at 2^64 - 1).
std::vector<std::pair<std::string, uint64_t>> run_record_bytes(const isa::Program& program);

// Simulates `program` to its halt. Throws SimError (a program error naming the instruction:
// addresses outside a memory, a weight tile never read, a data hazard a missing sync would
// cause, a deadlock, the cycle limit) and InputError (bad architecture).
// May be called many times in one process (the SystemC design is elaborated once).
RunResult simulate(const isa::Program& program, const Arch& arch, const RunOptions& options);

// The bounding box of a tile's nonzero weights, as rows x cols: the cells that hold useful
// weights (compilers pad partial tiles with zeros). The unused-MACs counter is built on it.
struct TileUse {
  uint32_t rows = 0, cols = 0;
};
TileUse tile_use(const uint8_t* tile, uint64_t rows, uint64_t cols);

}  // namespace tpusim::sim
