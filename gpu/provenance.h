// Where and how a measurement was taken, as both runners (tpusim-gpu, tpusim-cpu) record it in
// their data files: the command line (shell-quoted, so it can be pasted to rerun), the UTC time
// and the host name.
#pragma once

#include <string>

namespace tpusim::gpu {

struct Provenance {
  std::string command;  // argv joined, each argument quoted for a POSIX shell where it needs it
  std::string date;     // ISO 8601 UTC, e.g. 2026-11-25T09:12:00Z
  std::string host;     // gethostname(), or "" when it fails
};

Provenance provenance(int argc, const char* const* argv);

// `s` quoted for a POSIX shell: unchanged when it holds only safe characters, else in single
// quotes with each ' written as '\''.
std::string shell_quote(const std::string& s);

}  // namespace tpusim::gpu
