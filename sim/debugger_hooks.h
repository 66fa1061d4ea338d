// The machine's hooks for the stepping debugger (sim/debugger.h). Internal to sim/.
//
// The machine is elaborated once per process (machine.cpp). A MachineRun is one run on it, in
// three parts: begin (check the program, reset the units), advance (the SystemC kernel runs),
// finish (unwind every process, gather the counters). simulate() is begin, advance to the end,
// finish; the debugger advances one cycle at a time and looks at the units in between.
#pragma once

#include <chrono>
#include <optional>

#include "sim/units.h"

namespace tpusim::sim {

// The units of the machine, read-only.
struct MachineUnits {
  const Context& ctx;
  const WeightPath& weights;
  const MatrixUnit& matrix;
};

class MachineRun {
 public:
  // Everything simulate() does before time starts (throws as simulate does). One run at a time
  // per process: a second MachineRun while one is alive throws std::logic_error.
  MachineRun(const isa::Program& program, const Arch& arch, const RunOptions& options);
  ~MachineRun();  // unwinds a run that was not finished, leaving the machine ready for the next
  MachineRun(const MachineRun&) = delete;
  MachineRun& operator=(const MachineRun&) = delete;

  // simulate(): runs to the halt, an error, a deadlock or the cycle limit.
  void run_to_end();
  // Runs until every process has acted at `cycle` (all of that cycle's delta cycles), or less
  // when the run ends first. The run has then reached `cycle` unless over(), and the built-in
  // stepped array holds what every cycle before it left (MatrixUnit::catch_up).
  void run_to_cycle(uint64_t cycle);
  // The cycle the run has reached: after run_to_cycle(c), c (the halt's end once halted).
  uint64_t cycle() const;
  // The run cannot go on: halted, failed, deadlocked (nothing left to happen) or at the limit.
  bool over() const;
  // The next cycle after cycle() at which some process acts (UINT64_MAX: none is scheduled).
  uint64_t next_activity() const;
  // Ends the run (unwinds every process): the result, or SimError as simulate() throws it.
  RunResult finish();

  MachineUnits units() const;
  const MachineState* state() const { return state_ ? &*state_ : nullptr; }

 private:
  void unwind();
  RunOptions options_;
  std::optional<MachineState> state_;
  std::chrono::steady_clock::duration wall_{};
  bool finished_ = false;
};

}  // namespace tpusim::sim
