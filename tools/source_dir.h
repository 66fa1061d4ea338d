#pragma once

namespace tpusim {

// The checkout this build was configured from: scripts (plot.py, plot_compare.py), workloads and
// test data are found under it. Defined in tools/source_dir.cpp alone, the one file compiled with
// the path (which differs per clone and worktree): every other file's compile command is then the
// same in any clone, so the compiler cache that scripts/lib.sh shares between clones serves them.
const char* source_dir();

}  // namespace tpusim
