// The run report: one JSON document per run (`tpusim run --report R.json`), its schema defined
// once here (kReportKeys drives docs/report.md and a test that every report has exactly these
// keys), and the readable table `tpusim run` prints without --report.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "sim/arch.h"
#include "sim/machine.h"

namespace tpusim::sim {

struct ReportKey {
  std::string_view name;
  std::string_view type;
  std::string_view meaning;
};
// Top-level keys, in report order; `breakdown` and `units_busy` members follow.
std::span<const ReportKey> report_keys();
std::span<const ReportKey> breakdown_keys();

struct ReportInput {
  const isa::Program* program = nullptr;
  const Arch* arch = nullptr;
  Engine engine = Engine::fast;
  const RunResult* result = nullptr;
  std::optional<bool> output_matches_reference;  // empty when not checked (timing engine)
  std::string checked_against;                   // what output_matches_reference compared with
  // A compiled model: its output against the float reference (max abs, relative, rms).
  std::optional<std::array<double, 3>> quantization_error;
  // A compiled model run on a labelled data set (--labels): samples, top-1 of the float
  // reference, top-1 of the simulated int8 output.
  struct Accuracy {
    uint64_t samples = 0;
    double top1_float = 0, top1_int8 = 0;
  };
  std::optional<Accuracy> accuracy;
  // A compiled model run with --layer-errors: each layer's output against the float reference's
  // (compiler::layer_errors, on the samples of quantization_error).
  struct LayerError {
    std::string layer;
    int bits = 8;
    double scale = 0, max_abs = 0, max_float = 0, rms = 0, rms_relative = 0, sqnr_db = 0;
  };
  std::optional<std::vector<LayerError>> layer_errors;
};

// Keys in the documented order (report_keys()); arch parameters in table order.
nlohmann::ordered_json make_report(const ReportInput& in);
std::string format_report(const nlohmann::ordered_json& report);  // the readable table
std::string report_markdown();                                    // docs/report.md

// Inferences in one run of the program: its metadata's "batch" (an integer >= 1), else 1.
uint64_t program_batch(const isa::Program& program);

}  // namespace tpusim::sim
