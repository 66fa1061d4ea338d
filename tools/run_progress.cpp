// The progress line of tpusim run (run_progress.h).
#include "tools/run_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "tools/terminal.h"

namespace tpusim::tools {

namespace {

// Runs shorter than this draw nothing: 2 s, or TPUSIM_PROGRESS_AFTER_MS (tests set 0).
std::chrono::milliseconds quiet_for() {
  const char* env = std::getenv("TPUSIM_PROGRESS_AFTER_MS");
  return std::chrono::milliseconds(env && *env ? std::strtoull(env, nullptr, 10) : 2000);
}
constexpr auto kEvery = std::chrono::milliseconds(200);

// 1234567 -> "1.23M": three significant digits and an SI prefix.
std::string si(double v) {
  const char* prefix[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (v >= 999.5 && p < 4) {
    v /= 1000;
    ++p;
  }
  return fmt::format("{:.{}f}{}", v, p == 0 || v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2, prefix[p]);
}

}  // namespace

ProgressLine::ProgressLine(Draw draw) : draw_(std::move(draw)) {
  if (isatty(STDERR_FILENO) == 1) thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  if (drawn_) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

void ProgressLine::loop() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  if (stop_cv_.wait_for(lock, quiet_for(), [this] { return stop_; })) return;
  do {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int width = terminal_width();
    fmt::print(stderr, "\r\033[K{}", draw_(seconds, width - 1).substr(0, size_t(width - 1)));
    std::fflush(stderr);
    drawn_ = true;
  } while (!stop_cv_.wait_for(lock, kEvery, [this] { return stop_; }));
}

RunProgressLine::RunProgressLine(std::string label, const sim::RunProgress& progress, uint64_t total)
    : line_([label = std::move(label), &progress, total](double seconds, int width) {
        const uint64_t cycle = progress.cycle.load(std::memory_order_relaxed);
        return format(label, progress.completed.load(std::memory_order_relaxed), total, cycle,
                      double(cycle) / seconds, width);
      }) {}

std::string RunProgressLine::format(const std::string& label, uint64_t done, uint64_t total, uint64_t cycle,
                                    double cycles_per_second, int width) {
  const size_t digits = std::to_string(total).size();
  const std::string tail = fmt::format(" {:>{}}/{} instructions  cycle {}  {} cycles/s", done, digits, total,
                                       si(double(cycle)), si(cycles_per_second));
  const int bar = std::clamp(width - static_cast<int>(label.size() + tail.size()) - 4, 0, 40);
  const int filled = total ? static_cast<int>(bar * std::min(done, total) / total) : bar;
  return fmt::format("{} [{}{}]{}", label, std::string(filled, '#'), std::string(bar - filled, '-'), tail);
}

CompileProgressLine::CompileProgressLine(std::string label, const std::atomic<const char*>& phase)
    : line_([label = std::move(label), &phase](double seconds, int) {
        const char* now = phase.load(std::memory_order_relaxed);
        return fmt::format("{}: {}  {:.0f} s", label, now ? now : "starting", seconds);
      }) {}

}  // namespace tpusim::tools
