// How the reference runners time a model (tpusim-gpu, tpusim-cpu): untimed warm-up batches, then
// `repeats` timed repeats of `iterations` batches each; the median repeat is reported with the
// fastest and the slowest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tpusim::gpu {

struct TimingOptions {
  uint64_t warmup = 10;      // untimed batches first
  double warmup_seconds = 0;  // then more untimed batches until this long has passed (tpusim-gpu:
                              // an idle GPU's clocks take time to rise; docs/gpu.md, "Timing")
  uint64_t iterations = 20;  // batches per timed repeat
  uint64_t repeats = 7;      // the median repeat is reported
};

struct Timing {
  double median = 0, min = 0, max = 0;  // seconds per batch over the repeats
  double p99 = 0;                       // 99th percentile of single batches (CPU runner; 0: not measured)
  uint64_t repeats = 0, iterations = 0;
  // tpusim-gpu: timed intervals whose gate expired before the host had queued their launches
  // (docs/gpu.md, "Timing"); 0: every interval measured the GPU's work alone.
  uint64_t gates_expired = 0;
  // tpusim-gpu: the batches behind each gate in the last repeat (L2 warm: halved from iterations
  // while gates expire; L2 flushed: 1); 0: no gate (the CPU runner).
  uint64_t batches_per_gate = 0;
};

// The q-quantile (0..1) of `v` by the nearest-rank method (the smallest value with at least
// q x n values at or below it); 0 for none.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(q * double(v.size()) + 0.999999999);
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

}  // namespace tpusim::gpu
