#include "tools/freed_memory.h"

#include <malloc.h>

namespace tpusim::tools {

// The piece search lowers a model several times (compiler/lower.cpp) and a sweep worker runs
// point after point, each writing programs and timelines of up to a million instructions: with
// glibc's thresholds each of those large blocks is mapped fresh and given back when freed, and
// the next touches new pages, a page fault per 4 KB. Kept, the next block reuses them. CNN1 on a
// 64 x 64 array with 256 accumulator rows, timing engine: 86k page faults before, 51k after, peak
// RSS 214 MB either. Only for timing-only work: the full check (the fast engine and the golden
// reference beside it, blocks of every size on several threads) peaked at 831 MB so, 624 MB without.
void keep_freed_memory(bool keep) {
  const int bytes = keep ? 1 << 30 : 128 * 1024;
  mallopt(M_MMAP_THRESHOLD, bytes);
  mallopt(M_TRIM_THRESHOLD, bytes);
}

}  // namespace tpusim::tools
