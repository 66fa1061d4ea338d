// The progress line of `tpusim run` on a terminal: simulated cycles, station instructions done,
// the simulation rate. A thread reads the run's sim::RunProgress counters (atomics) five times a
// second and draws only when stderr is a terminal and the run has taken more than a couple of
// seconds (TPUSIM_PROGRESS_AFTER_MS overrides the 2000 ms, for tests); silent otherwise (pipes,
// tests, batch jobs). The line is cleared when the run ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "sim/trace.h"

namespace tpusim::tools {

// A status line on stderr redrawn five times a second by a thread, from `draw(seconds, width)`
// (the seconds since the start, the terminal's width): only when stderr is a terminal and after
// the quiet time; cleared when the object is destroyed.
class ProgressLine {
 public:
  using Draw = std::function<std::string(double seconds, int width)>;
  explicit ProgressLine(Draw draw);
  ~ProgressLine();  // stops the thread and clears the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

 private:
  void loop();
  Draw draw_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false, drawn_ = false;
  std::thread thread_;
};

class RunProgressLine {
 public:
  // `total`: the station instructions the run will complete (up to halt).
  RunProgressLine(std::string label, const sim::RunProgress& progress, uint64_t total);

  // The text of the line: e.g. "run cnn1.tpu [####------] 5012/13858 instructions  cycle 3.84M
  // 21.9M cycles/s".
  static std::string format(const std::string& label, uint64_t done, uint64_t total, uint64_t cycle,
                            double cycles_per_second, int width);

 private:
  ProgressLine line_;
};

// The same for a compile: its phase ("parsing", "quantizing", "lowering", set by the compiler in
// compiler::LoadOptions::phase) and the seconds so far, e.g. "compile cnn1.toml: lowering  41 s".
// A long compile thus shows it is alive; drawn under the same conditions, cleared at the end.
class CompileProgressLine {
 public:
  CompileProgressLine(std::string label, const std::atomic<const char*>& phase);

 private:
  ProgressLine line_;
};

}  // namespace tpusim::tools
