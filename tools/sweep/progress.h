// The sweep's progress line on a terminal: points done, failures, rate, time left. Draws only
// when stderr is a terminal (isatty), at most five times a second; silent otherwise (batch jobs,
// tests, pipes).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tpusim::tools::sweep {

class ProgressBar {
 public:
  // `total` points in this run, of which `already` were done before it (--resume).
  ProgressBar(std::string label, uint64_t total, uint64_t already);
  void point_done(bool failed);
  void draw(bool force = false);
  void finish();  // clears the line
  uint64_t done_now() const { return done_; }
  uint64_t failed() const { return failed_; }
  double elapsed_seconds() const;

  // The text of the line (without terminal control), for tests and logs.
  static std::string format(const std::string& label, uint64_t done, uint64_t total, uint64_t failed,
                            double rate, double seconds, int width);

 private:
  std::string label_;
  uint64_t total_, already_, done_ = 0, failed_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_draw_{};
  bool enabled_;
};

}  // namespace tpusim::tools::sweep
