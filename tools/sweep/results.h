// One sweep point's result as a flat row: the columns of the CSV and of the SQLite `results`
// table (docs/sweeps.md), derived from the parameter table (sim/arch.h) and the report schema
// (sim/report.h), so a new parameter or report key becomes a column without edits here.
//
// Wall-clock figures (host_seconds, simulated_cycles_per_second) are not columns: the CSV must be
// byte-identical whatever -j, order or sharding ran it. They stay in the database (`host_seconds`
// beside the row, and the full report in `json`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tools/sweep/spec.h"

namespace tpusim::tools::sweep {

enum class ColumnType { integer, real, text };

struct Column {
  std::string name;  // "tops", "breakdown.array_active", "instructions.matmul", ...
  ColumnType type;
};

// point, workload, workload_file, engine, arch, every parameter, batch, status, error, then the
// report's keys flattened (objects as KEY.MEMBER) less the wall-clock ones.
const std::vector<Column>& columns();

using Cell = std::variant<std::monostate, int64_t, double, std::string>;
using Row = std::vector<Cell>;  // aligned with columns()

// A finished point: `report` is the run report (make_report), or null with `error` set.
struct PointResult {
  const Point* point = nullptr;
  const Spec* spec = nullptr;
  nlohmann::ordered_json report;  // null when the point failed
  std::string error;
  double point_seconds = 0;  // wall time of the whole point in its worker: compile and simulate
};
Row make_row(const PointResult& r);
double host_seconds(const PointResult& r);  // 0 for a failed point

// The JSON Lines record: point, workload, workload_file, engine, params (with batch), status,
// error and the whole report (wall-clock keys included).
std::string json_line(const PointResult& r);

// CSV (RFC 4180): fields with a comma, quote or line break are quoted; numbers in the shortest
// form that reads back to the same value.
std::string csv_field(const Cell& c);
std::string csv_line(const Row& row);
std::string csv_header();

// Splits CSV text into records of fields (quoted fields may hold line breaks). Throws InputError
// naming `source` and the line for unbalanced quotes.
std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& source);

}  // namespace tpusim::tools::sweep
