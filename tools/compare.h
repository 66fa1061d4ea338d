// tpusim compare's table (tools/compare.cpp collects it, tools/compare_table.cpp prints and plots
// it): one group per workload and batch, holding the simulated TPU's row and every reference
// row (measured, published, test-fixture) for that workload and batch, each labelled with its
// source and never merged with another source's figure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/commands.h"

namespace tpusim::tools {

// The JSON document compare writes (--json, and PREFIX.json for the plot):
//   {"arch": {name, peak_tops, weight_mem_gbps, host_gbps},
//    "devices": [{name, source, kind, peak_tops, memory_gbps, peak_source}],
//    "rows": [{workload, batch, source, device, latency_seconds, inferences_per_second, tops,
//              utilization, speedup_of_simulated, macs_per_weight_byte, ...}],
//    "ratios": [{workload, of, to, value, where, citation}]}
using CompareDoc = nlohmann::ordered_json;

std::string compare_table_text(const CompareDoc& doc);
std::string compare_table_csv(const CompareDoc& doc);
void compare_plot(const CompareDoc& doc, const CompareArgs& args);  // PREFIX.json, .png, .svg

}  // namespace tpusim::tools
