// The traces a run writes (--trace, --vcd, --log, docs/traces.md), shared by tpusim run and
// tpusim debug (tools/run.cpp): options checked before the run, files written after it.
#pragma once

#include <memory>

#include "sim/trace.h"
#include "tools/commands.h"

namespace tpusim::tools {

struct TracePlan {
  sim::TraceSelection selection;
  sim::VcdScope scope;
  sim::TraceRecorder recorder;
};

// Null when `r` asks for no trace; throws InputError for a bad window, filter or scope.
std::unique_ptr<TracePlan> plan_traces(const RunArgs& r, const isa::Program& p, const sim::Arch& arch,
                                       sim::Engine engine);
void write_traces(const RunArgs& r, const TracePlan& plan, const sim::TraceInput& in);

}  // namespace tpusim::tools
