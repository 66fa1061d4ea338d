// Running sweep points in parallel: worker processes.
//
// SystemC elaborates its design once per process, and sim::simulate may be called again and again
// in one process, but never from two threads at once. So the parallel unit is a process: the
// sweep starts `jobs` copies of its own executable as `tpusim sweep worker` (a hidden subcommand)
// and keeps each busy with one point at a time, and one more of a model it holds queued behind it
// (the next point of a new model goes to whichever worker is idle first, so long and short points
// balance). The protocol is JSON Lines over pipes:
//   parent -> worker stdin:  {"point", "path", "arch": {every parameter}, "batch", "engine", "max_cycles"}
//   worker -> parent:        {"point", "report": {...}} or {"point", "error": "message"}
// A worker compiles the workload for the point's architecture, simulates it and answers; a model
// too big for the point's machine, a cross-parameter rule it breaks or a program error is an
// answer with "error" (a failed point). A worker that dies (a crash, the kernel's OOM killer)
// fails only the point it was running and is replaced.
#pragma once

#include <functional>
#include <vector>

#include "tools/sweep/results.h"
#include "tools/sweep/spec.h"

namespace tpusim::tools::sweep {

// The most worker processes a sweep takes (`-j`, the Python module's `jobs=`).
inline constexpr unsigned kMaxJobs = 4096;

// Runs `todo` on `jobs` workers; `done` is called in this process with the points that finished
// (in the order they did) since its last call, and `tick` about five times a second (progress),
// both on a thread of their own, one call at a time: the workers get their next points meanwhile. When `stop` turns true (Ctrl-C, SIGTERM) the workers are
// killed and the points they were running are left undone (not failed), for --resume; returns
// false then, true when every point ran. Workers ignore SIGINT (a terminal's Ctrl-C reaches the
// whole process group; the sweep decides), and a worker killed by SIGTERM, SIGINT or SIGHUP has
// its point run again once by another worker before it counts as failed.
bool run_points(const Spec& spec, const std::vector<const Point*>& todo, unsigned jobs,
                const std::function<void(const std::vector<PointResult>&)>& done, const std::function<void()>& tick,
                const std::function<bool()>& stop = {});

// Starts `count` workers now, for the next run_points to use (a worker's start, a process loading
// its libraries, then overlaps the caller's work before the points are known: opening the results
// database, which waits for the disk). Workers it does not need are stopped.
void prestart_workers(unsigned count);

// The executable run_points starts as `EXE sweep worker`: this process's own (the default), or the
// tpusim executable for a process that is not tpusim (the Python module).
void set_worker_executable(const std::string& path);

// `tpusim sweep worker`: answers requests on stdin until it closes. Its stdout is the answer
// channel; anything else that writes to stdout goes to stderr instead.
int worker_main();

// Processors this process may run on (Slurm's and taskset's limits included).
unsigned available_cpus();

}  // namespace tpusim::tools::sweep
