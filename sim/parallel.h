// Work spread over the CPUs this process may use, with results that do not depend on how many:
// parallel_for hands out numbered items, each computed whole by one thread, so a caller that gives
// every item its own outputs (rows of a matrix, blocks of output positions) gets the same bytes on
// 1 thread as on 16. Used by the golden and float reference executors, the quantizer and the fast
// engine's matrix unit (docs/timing.md "Threads").
//
// One pool per process, started on first use: threads() - 1 workers beside the calling thread.
// Several threads may call parallel_for at once (the golden reference runs beside the simulation):
// each call works on its own items until they are handed out, and idle workers help whichever
// call waits longest, so every call finishes even when no worker is free.
#pragma once

#include <cstdint>
#include <functional>

namespace tpusim::sim {

// CPUs this process may run on (sched_getaffinity: taskset, a cgroup's cpuset, a Slurm
// allocation), at least 1.
unsigned usable_cpus();

// The threads parallel_for may use, the caller's included: set_threads (tpusim run --threads),
// else the environment variable TPUSIM_THREADS (a positive integer), else usable_cpus().
unsigned threads();
// n >= 1 threads from now on; 0: back to the default.
void set_threads(unsigned n);

// Calls f(i) once for every i < n, on up to threads() threads (this one among them), and returns
// when all calls have returned. When calls throw, the remaining items are skipped and the
// exception of the lowest item that threw is rethrown here. n <= 1 or threads() == 1: a plain
// loop on this thread.
void parallel_for(uint64_t n, const std::function<void(uint64_t)>& f);

}  // namespace tpusim::sim
