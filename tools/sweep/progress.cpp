// The sweep progress line (progress.h).
#include "tools/sweep/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "tools/terminal.h"

namespace tpusim::tools::sweep {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<uint64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressBar::ProgressBar(std::string label, uint64_t total, uint64_t already)
    : label_(std::move(label)), total_(total), already_(already), enabled_(isatty(STDERR_FILENO) == 1) {}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::point_done(bool failed) {
  ++done_;
  failed_ += failed;
  draw();
}

std::string ProgressBar::format(const std::string& label, uint64_t done, uint64_t total, uint64_t failed,
                                double rate, double seconds, int width) {
  const size_t digits = std::to_string(total).size();  // a steady width, so the bar does not jump
  std::string tail = fmt::format(" {:>{}}/{} points", done, digits, total);
  if (failed) tail += fmt::format(" ({} failed)", failed);
  if (rate > 0)
    tail += fmt::format("  {:.2f} points/s  {} left", rate, clock_text(double(total - done) / rate));
  else tail += fmt::format("  {} elapsed", clock_text(seconds));
  const int bar = std::clamp(width - static_cast<int>(label.size() + tail.size()) - 4, 0, 40);
  const int filled = total ? static_cast<int>(bar * done / total) : bar;
  return fmt::format("{} [{}{}]{}", label, std::string(filled, '#'), std::string(bar - filled, '-'), tail);
}

void ProgressBar::draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const int width = terminal_width();
  // The rate counts this run's points only; the bar shows the whole shard (resumed points too).
  const double seconds = elapsed_seconds();
  const double rate = done_ > 0 && seconds > 0 ? double(done_) / seconds : 0;
  const std::string line = format(label_, already_ + done_, total_, failed_, rate, seconds, width - 1);
  fmt::print(stderr, "\r\033[K{}", line.substr(0, static_cast<size_t>(width - 1)));
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace tpusim::tools::sweep
