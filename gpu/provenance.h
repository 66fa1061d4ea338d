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

// The NVIDIA kernel module's version from the first line of /proc/driver/nvidia/version: the
// first token after "Kernel Module" that starts with a digit and holds a '.' ("NVIDIA UNIX
// x86_64 Kernel Module  550.54.15  Tue Mar ..." and "NVIDIA UNIX Open Kernel Module for x86_64
// 580.159.04  Release Build ..." both give the version); the whole line when there is none.
std::string kernel_module_version(const std::string& line);

}  // namespace tpusim::gpu
