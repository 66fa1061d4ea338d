// The energy model: what a run did, counted per action, times the architecture's energy per action
// (the energy_* parameters and static_watts of sim/arch.h's table), plus static power over the
// run's simulated time. The actions:
//   mac          every cell multiply-accumulate of the array (array_macs: active cycles x rows x
//                cols; padding cells are clocked too), with the cell's input and partial-sum registers
//   ub_read      unified buffer bytes read: matmul input vectors, vec and pool operands, write_host
//   ub_write     unified buffer bytes written: read_host, act, vec and pool results
//   acc_read     accumulator bytes read: act, and matmul with `accumulate` (read-modify-write)
//   acc_write    accumulator bytes written by matmul (4 bytes per column per vector)
//   weight_fifo  weight bytes through the weight FIFO (written and read once each)
//   dram         weight-memory bytes read (the DRAM access and its I/O)
//   host_link    bytes over the host link (read_host, write_host)
//   static       static_watts x simulated seconds: the die's idle power (clock tree, leakage)
// Every count comes from the program's executed instructions and the run's counters: TPU timing
// does not depend on data, so every engine gives the same energy. The model and its calibration:
// docs/energy.md.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"

namespace tpusim::sim {

enum class EnergyAction { mac, ub_read, ub_write, acc_read, acc_write, weight_fifo, dram, host_link, count };
inline constexpr std::array<std::string_view, 8> kEnergyActionNames = {
    "mac", "ub_read", "ub_write", "acc_read", "acc_write", "weight_fifo", "dram", "host_link"};
static_assert(kEnergyActionNames.size() == static_cast<size_t>(EnergyAction::count));

// Actions counted: MACs for `mac`, bytes for the rest.
struct ActionCounts {
  std::array<uint64_t, kEnergyActionNames.size()> n{};
  uint64_t& operator[](EnergyAction a) { return n[static_cast<size_t>(a)]; }
  uint64_t operator[](EnergyAction a) const { return n[static_cast<size_t>(a)]; }
};

// The actions of the first `executed` instructions of `program` (a run executes every
// instruction up to its halt: RunResult::timeline.size()), with `array_macs` from the run.
ActionCounts count_actions(const isa::Program& program, const Arch& arch, uint64_t executed,
                           uint64_t array_macs);

// The energy of one action's unit (pJ per MAC or per byte), from the architecture.
double picojoules_per(const Arch& arch, EnergyAction a);

struct Energy {
  std::array<double, kEnergyActionNames.size()> joules{};  // per action
  double static_joules = 0;
  double total() const;
};
Energy energy_of(const ActionCounts& counts, const Arch& arch, double seconds);

}  // namespace tpusim::sim
