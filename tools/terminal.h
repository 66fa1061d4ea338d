// The terminal standard error is drawn on, for the progress lines of tpusim run
// (tools/run_progress.cpp) and tpusim sweep (tools/sweep/progress.cpp).
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

namespace tpusim::tools {

// Standard error's terminal width in columns; 80 where it is no terminal or says 20 or fewer.
inline int terminal_width() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 80;
}

}  // namespace tpusim::tools
