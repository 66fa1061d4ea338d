// The traces a run writes (--trace, --vcd, --log, docs/traces.md), shared by tpusim run and
// tpusim debug (tools/run.cpp): options checked before the run, files written after it.
#pragma once

#include <memory>
#include <string_view>

#include "sim/trace.h"
#include "tools/commands.h"

namespace tpusim::tools {

struct TracePlan {
  sim::TraceSelection selection;
  sim::VcdScope scope;
  sim::TraceRecorder recorder;
};

// Null when `r` asks for no trace; throws InputError for a bad window, filter or scope, or for a
// file that cannot be written (checked now, so that a long run or debugging session does not end
// in "cannot write"). `command` (run, debug) leads the messages about the options.
std::unique_ptr<TracePlan> plan_traces(const RunArgs& r, const isa::Program& p, const sim::Arch& arch,
                                       sim::Engine engine, std::string_view command = "run");
void write_traces(const RunArgs& r, const TracePlan& plan, const sim::TraceInput& in);

}  // namespace tpusim::tools
