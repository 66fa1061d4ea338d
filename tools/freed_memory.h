// Where freed memory goes between the large blocks of timing-only work: `tpusim run` on the timing
// engine (tools/run.cpp) and a sweep worker's timing-only points (tools/sweep/workers.cpp).
#pragma once

namespace tpusim::tools {

// keep: freed memory stays with the process for the next allocation (no large block mapped apart,
// none given back); else glibc's initial thresholds again.
void keep_freed_memory(bool keep);

}  // namespace tpusim::tools
