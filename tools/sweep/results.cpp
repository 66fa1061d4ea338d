// Sweep rows: columns from the parameter table and the report schema, CSV in and out.
#include "tools/sweep/results.h"

#include <fmt/format.h>

#include <set>

#include "isa/error.h"
#include "isa/table.h"
#include "sim/energy.h"
#include "sim/report.h"

namespace tpusim::tools::sweep {

namespace {

using ojson = nlohmann::ordered_json;

// Report keys that columns of their own (or no column, for wall-clock time) stand in for.
const std::set<std::string_view> kOwnColumns = {"workload", "arch", "engine", "batch", "mapper"};
const std::set<std::string_view> kWallClock = {"host_seconds", "simulated_cycles_per_second"};
// Report keys too detailed for a column (the JSON lines and the database keep them).
const std::set<std::string_view> kDetail = {"layers", "layer_quantization_error"};

// The members of a report object, as columns.
std::vector<Column> members(std::string_view key) {
  std::vector<Column> out;
  const auto add = [&](std::string_view m, ColumnType t) {
    out.push_back({fmt::format("{}.{}", key, m), t});
  };
  if (key == "instructions" || key == "instruction_cycles") {
    for (const isa::OpcodeSpec& s : isa::kOpcodes) add(s.mnemonic, ColumnType::integer);
  } else if (key == "breakdown") {
    for (const sim::ReportKey& k : sim::breakdown_keys()) add(k.name, ColumnType::real);
  } else if (key == "units_busy") {
    for (std::string_view u : isa::kUnitNames) add(u, ColumnType::real);
  } else if (key == "energy") {
    for (std::string_view a : sim::kEnergyActionNames) add(a, ColumnType::real);
    add("static", ColumnType::real);
  } else if (key == "quantization_error") {
    for (std::string_view m : {"max_abs", "relative", "rms"}) add(m, ColumnType::real);
  } else if (key == "pieces") {  // (its `segments`: the JSON lines and the database keep them)
    for (std::string_view m : {"piece", "pieces"}) add(m, ColumnType::integer);
    add("schedule", ColumnType::text);
  } else if (key == "accuracy") {
    add("samples", ColumnType::integer);
    for (std::string_view m : {"top1_float", "top1_int8"}) add(m, ColumnType::real);
  } else {
    out.push_back({std::string(key), ColumnType::text});  // a new object key: its JSON, until named here
  }
  return out;
}

std::vector<Column> make_columns() {
  std::vector<Column> c = {{"point", ColumnType::integer},
                           {"workload", ColumnType::text},
                           {"workload_file", ColumnType::text},
                           {"engine", ColumnType::text},
                           {"arch", ColumnType::text}};
  for (const sim::ParamInfo& p : sim::arch_params())
    c.push_back({std::string(p.name), p.is_real ? ColumnType::real : ColumnType::integer});
  c.push_back({"batch", ColumnType::integer});
  for (const compiler::MapperSwitch& m : compiler::kMapperSwitches)
    c.push_back({fmt::format("mapper.{}", m.key), ColumnType::text});
  c.push_back({"status", ColumnType::text});
  c.push_back({"error", ColumnType::text});
  for (const sim::ReportKey& k : sim::report_keys()) {
    if (kOwnColumns.contains(k.name) || kWallClock.contains(k.name) || kDetail.contains(k.name)) continue;
    if (k.type.starts_with("object")) {
      for (Column& m : members(k.name)) c.push_back(std::move(m));
    } else {
      // "integer or null" (model_macs), "number or null" (model_tops): numbers, NULL when absent.
      const ColumnType t = k.type == "integer" || k.type == "integer or null" ? ColumnType::integer
                           : k.type == "number" || k.type == "number or null" ? ColumnType::real
                                                                               : ColumnType::text;
      c.push_back({std::string(k.name), t});
    }
  }
  return c;
}

Cell cell_of(const ojson& v, ColumnType t) {
  if (v.is_null()) return {};
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) {
    if (t == ColumnType::real) return v.get<double>();
    if (v.is_number_integer()) return v.get<int64_t>();
    return v.get<double>();
  }
  return v.dump();
}

// A mapper switch's column: "on" or "off" as the point set it, else its default on the point's
// machine (compiler/lower_options.h).
std::string mapper_cell(const compiler::LowerOptions& o, const sim::Arch& arch, std::string_view key) {
  for (const compiler::MapperSwitch& m : compiler::kMapperSwitches)
    if (m.key == key) return compiler::switch_on(o, m, arch) ? "on" : "off";
  return "";
}

// The report's value for a column (KEY or KEY.MEMBER).
const ojson* lookup(const ojson& report, const std::string& name) {
  if (const auto it = report.find(name); it != report.end()) return &*it;
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return nullptr;
  const auto obj = report.find(name.substr(0, dot));
  if (obj == report.end() || !obj->is_object()) return nullptr;
  const auto m = obj->find(name.substr(dot + 1));
  return m == obj->end() ? nullptr : &*m;
}

}  // namespace

const std::vector<Column>& columns() {
  static const std::vector<Column> c = make_columns();
  return c;
}

Row make_row(const PointResult& r) {
  const Point& p = *r.point;
  const ojson arch = sim::arch_to_json(p.arch);
  const bool ok = !r.report.is_null();
  // The switches the program ran with: its report's (meta.mapper), which for a compiled program
  // (.tpu) are those it was compiled with, not the point's (a program takes none); the point's
  // where it failed.
  compiler::LowerOptions switches = p.mapper;
  if (ok && r.report.contains("mapper")) try {
      switches = compiler::mapper_from_json(nlohmann::json::parse(r.report["mapper"].dump()), "report");
    } catch (const InputError&) {
      // (A program's meta.mapper this tpusim cannot read, e.g. a newer compiler's switch, says
      // nothing: the point's switches, as for a program without one.)
    }
  Row row;
  for (const Column& c : columns()) {
    const std::string& n = c.name;
    if (n == "point") row.emplace_back(static_cast<int64_t>(p.index));
    else if (n == "workload") row.emplace_back(p.workload->name);
    else if (n == "workload_file") row.emplace_back(p.workload->file);
    else if (n == "engine") row.emplace_back(std::string(sim::engine_name(r.spec->engine)));
    else if (n == "arch") row.emplace_back(p.arch.name);
    else if (n == "batch") {
      if (ok) row.push_back(cell_of(r.report["batch"], c.type));
      else if (p.batch) row.emplace_back(static_cast<int64_t>(*p.batch));
      else row.emplace_back();
    } else if (n == "status") row.emplace_back(std::string(ok ? "ok" : "failed"));
    else if (n == "error") row.push_back(ok ? Cell{} : Cell{r.error});
    else if (arch.contains(n)) row.push_back(cell_of(arch[n], c.type));
    else if (n.starts_with("mapper.")) row.emplace_back(mapper_cell(switches, p.arch, n.substr(7)));
    else if (!ok) row.emplace_back();
    else if (const ojson* v = lookup(r.report, n)) row.push_back(cell_of(*v, c.type));
    else if (n.starts_with("instructions.") || n.starts_with("instruction_cycles."))
      row.emplace_back(int64_t{0});
    else row.emplace_back();
  }
  return row;
}

double host_seconds(const PointResult& r) {
  return r.report.is_null() ? 0.0 : r.report.value("host_seconds", 0.0);
}

std::string json_line(const PointResult& r) {
  const Point& p = *r.point;
  ojson params = ojson::object();
  const ojson arch = sim::arch_to_json(p.arch);
  for (const sim::ParamInfo& i : sim::arch_params()) params[std::string(i.name)] = arch[std::string(i.name)];
  params["batch"] = p.batch ? ojson(*p.batch) : ojson(nullptr);
  params["mapper"] = compiler::mapper_to_json(p.mapper);  // the switches given off, and any given whose default is the machine's
  ojson j = {{"point", p.index},
             {"workload", p.workload->name},
             {"workload_file", p.workload->file},
             {"engine", sim::engine_name(r.spec->engine)},
             {"arch", p.arch.name},
             {"params", params},
             {"status", r.report.is_null() ? "failed" : "ok"},
             {"error", r.report.is_null() ? ojson(r.error) : ojson(nullptr)},
             {"point_seconds", r.point_seconds},
             {"report", r.report}};
  return j.dump();
}

std::string csv_field(const Cell& c) {
  if (std::holds_alternative<std::monostate>(c)) return "";
  if (const auto* i = std::get_if<int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) return fmt::format("{}", *d);
  const std::string& s = std::get<std::string>(c);
  if (s.find_first_of(",\"\r\n") == std::string::npos && (s.empty() || (s.front() != ' ' && s.back() != ' ')))
    return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

std::string csv_line(const Row& row) {
  std::string out;
  for (size_t i = 0; i < row.size(); ++i) {
    if (i) out += ',';
    out += csv_field(row[i]);
  }
  out += '\n';
  return out;
}

std::string csv_header() {
  std::string out;
  for (const Column& c : columns()) {
    if (!out.empty()) out += ',';
    out += c.name;
  }
  out += '\n';
  return out;
}

std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& source) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, any = false;
  size_t line = 1, record_line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c, line += c == '\n';
      continue;
    }
    if (c == '"' && field.empty()) quoted = any = true;
    else if (c == ',') fields.push_back(std::move(field)), field.clear(), any = true;
    else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) fields.push_back(std::move(field)), records.push_back(std::move(fields));
      field.clear(), fields.clear(), any = false, record_line = ++line;
    } else field += c, any = true;
  }
  if (quoted)
    throw InputError(
        fmt::format("{}:{}: a quoted field never ends (a truncated file?)", source, record_line));
  if (any || !field.empty()) fields.push_back(std::move(field)), records.push_back(std::move(fields));
  return records;
}

}  // namespace tpusim::tools::sweep
