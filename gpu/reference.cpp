// Reference data (reference.h): the three spellings read into ReferenceData, and written back.
#include "gpu/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/json_reader.h"
#include "gpu/results.h"
#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::gpu {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const std::vector<std::string> kFileKeys = {"format", "source", "citation", "note",    "tool",  "command",
                                            "date",   "host",   "device",   "results", "ratios"};
const std::vector<std::string> kRowKeys = {"workload",
                                           "model",
                                           "batch",
                                           "inferences_per_second",
                                           "throughput",
                                           "latency_seconds",
                                           "latency_statistic",
                                           "latency_limit_seconds",
                                           "timing",
                                           "l2",
                                           "cuda_graph",
                                           "engine",
                                           "model_macs",
                                           "gemm_macs",
                                           "macs",
                                           "weight_bytes",
                                           "output_matches_reference",
                                           "launches_queued_ahead",
                                           "where",
                                           "note",
                                           "latency_seconds_min",
                                           "latency_seconds_max",
                                           "repeats",
                                           "iterations",
                                           "warmup",
                                           "threads",
                                           "tops",
                                           "latency_p99_seconds",
                                           "load_average"};
const std::vector<std::string> kDeviceKeys = {"name",        "kind",        "peak_int8_tops",
                                              "memory_gbps", "peak_source", "details"};

// The CUDA runner's format, already checked by parse_results.
ReferenceData from_gpu_results(const ResultsFile& f, const std::string& path) {
  ReferenceData d;
  d.path = path;
  d.source = f.kind == "test-fixture" ? "test-fixture" : "measured";
  d.note = f.note;
  d.tool = f.tool;
  d.command = f.command;
  d.date = f.date;
  d.host = f.host;
  d.device = {
      f.device.name,
      "gpu",
      f.device.peak_int8_tops,
      f.device.memory_gbps,
      f.device.peak_source,
      fmt::format("compute capability {}, {} SMs, driver {}, CUDA runtime {}", f.device.compute_capability,
                  f.device.sms, f.device.driver_version, f.device.cuda_runtime_version)};
  for (const Measurement& m : f.results) {
    ReferenceRow r;
    r.workload = m.workload;
    r.model = m.model;
    r.batch = m.batch;
    r.inferences_per_second =
        m.inferences_per_second > 0 ? m.inferences_per_second : double(m.batch) / m.latency_seconds;
    r.latency_seconds = m.latency_seconds;
    r.latency_statistic = "median";
    r.timing = m.timing;
    r.l2 = m.l2;
    r.cuda_graph = m.cuda_graph;
    r.engine = m.engine;
    r.model_macs = m.model_macs;
    r.gemm_macs = m.gemm_macs;
    r.macs = m.legacy_macs;
    r.weight_bytes = m.weight_bytes;
    r.output_matches_reference = m.output_matches_reference;
    r.launches_queued_ahead = m.launches_queued_ahead;
    d.rows.push_back(r);
  }
  return d;
}

ReferenceDevice read_device(const JsonReader& file) {
  const json& v = file.at("device");
  ReferenceDevice d;
  if (v.is_string()) {
    d.name = v.get<std::string>();
  } else {
    const JsonReader r = file.child("device");
    r.only(kDeviceKeys);
    d.name = r.text("name");
    d.kind = r.choice("kind", {"cpu", "gpu", "tpu", "other"}, false);
    d.peak_int8_tops = r.number("peak_int8_tops", 0, false, false);
    d.memory_gbps = r.number("memory_gbps", 0, false, false);
    d.peak_source = r.text("peak_source", false);
    d.details = r.text("details", false);
  }
  if (d.name.empty()) file.fail("device", "the device's name is empty");
  return d;
}

ReferenceRow read_row(const JsonReader& r) {
  r.only(kRowKeys);
  ReferenceRow row;
  row.workload = r.text("workload", false);
  row.model = r.text("model", false);
  if (row.workload.empty() && row.model.empty())
    r.fail("", "needs \"model\" (a description's path) or \"workload\" (a name such as \"mlp0\")");
  if (row.workload.empty()) row.workload = fs::path(row.model).stem().string();
  row.batch = r.count("batch", 1);
  if (r.has("inferences_per_second") && r.has("throughput"))
    r.fail("throughput", "give inferences_per_second or throughput (the same figure), not both");
  const std::string ips_key = r.has("throughput") ? "throughput" : "inferences_per_second";
  row.inferences_per_second = r.number(ips_key, 0, true, false);
  row.latency_seconds = r.number("latency_seconds", 0, true, false);
  if (row.inferences_per_second == 0 && row.latency_seconds == 0)
    r.fail("",
           "needs inferences_per_second (or throughput: inferences per second) or latency_seconds (of one "
           "batch)");
  // A latency alone: batches one after another, batch / latency.
  if (row.inferences_per_second == 0) row.inferences_per_second = double(row.batch) / row.latency_seconds;
  row.latency_p99_seconds = r.number("latency_p99_seconds", 0, true, false);
  row.threads = r.count("threads", 1, false);
  row.warmup = r.count("warmup", 0, false);
  row.repeats = r.count("repeats", 1, false);
  row.iterations = r.count("iterations", 1, false);
  row.latency_statistic = r.text("latency_statistic", false);
  row.latency_limit_seconds = r.number("latency_limit_seconds", 0, true, false);
  row.timing = r.choice("timing", {"device", "end_to_end"}, false);
  row.l2 = r.choice("l2", {"warm", "flushed"}, false);
  if (r.has("cuda_graph")) row.cuda_graph = r.flag("cuda_graph");
  row.engine = r.text("engine", false);
  row.model_macs = r.count("model_macs", 0, false);
  row.gemm_macs = r.count("gemm_macs", 0, false);
  row.macs = r.count("macs", 0, false);
  if (row.macs && (row.model_macs || row.gemm_macs))
    r.fail("macs", "the earlier name of gemm_macs (files before model_macs): give model_macs and gemm_macs");
  row.weight_bytes = r.count("weight_bytes", 0, false);
  if (r.has("output_matches_reference") && !r.at("output_matches_reference").is_null())
    row.output_matches_reference = r.flag("output_matches_reference");
  if (r.has("launches_queued_ahead")) row.launches_queued_ahead = r.flag("launches_queued_ahead");
  row.where = r.text("where", false);
  row.note = r.text("note", false);
  row.load_average = r.number("load_average", 0, false, false);
  return row;
}

ReferenceRatio read_ratio(const JsonReader& r) {
  r.only({"workload", "of", "to", "value", "where"});
  return {r.text("workload"), r.text("of"), r.text("to"), r.number("value", 0, true), r.text("where", false)};
}

ReferenceData read_reference(const json& j, const std::string& path, std::string_view text) {
  const JsonReader file(j, path, text);
  if (file.has("seconds") && file.has("workload") && !file.has("device"))
    file.fail("", "a `tpusim run --report` file, not reference data: give it to compare with --tpu-report");
  ReferenceData d;
  d.path = path;
  const bool one_record = !file.has("results");
  if (one_record) {
    // A minimal file: one record and the device's name at the top level.
    std::vector<std::string> keys = kRowKeys;
    keys.insert(keys.end(), kFileKeys.begin(), kFileKeys.end());
    file.only(keys);
  } else {
    file.only(kFileKeys);
  }
  d.source =
      file.has("source") ? file.choice("source", {"measured", "published", "test-fixture"}) : "measured";
  d.citation = file.text("citation", false);
  if (d.source == "published" && d.citation.empty())
    file.fail("citation", "missing: published figures need the publication they come from");
  d.note = file.text("note", false);
  d.tool = file.text("tool", false);
  d.command = file.text("command", false);
  d.date = file.text("date", false);
  d.host = file.text("host", false);
  if (!file.has("device"))
    file.fail("device",
              "missing: the machine the figures are for, e.g. \"device\": \"Intel Xeon E5-2699 v3\"");
  d.device = read_device(file);
  if (one_record) {
    json row = json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      if (std::find(kRowKeys.begin(), kRowKeys.end(), it.key()) != kRowKeys.end() || it.key() == "note")
        row[it.key()] = it.value();
    d.rows.push_back(read_row(JsonReader(row, path, text)));
  } else {
    const json& results = file.at("results");
    if (!results.is_array()) file.fail("results", "expected an array of records");
    for (size_t i = 0; i < results.size(); ++i)
      d.rows.push_back(read_row(file.element("results", i)));
  }
  if (file.has("ratios")) {
    const json& ratios = file.at("ratios");
    if (!ratios.is_array()) file.fail("ratios", "expected an array");
    for (size_t i = 0; i < ratios.size(); ++i)
      d.ratios.push_back(read_ratio(file.element("ratios", i)));
  }
  if (d.rows.empty() && d.ratios.empty()) file.fail("results", "empty: no figure in this file");
  return d;
}

std::string read_text(const fs::path& path) {
  return io::read_text_file(path, io::kMaxDataFileBytes, "reference data (JSON)");
}

}  // namespace

ReferenceData parse_reference(const std::string& text, const std::string& path) {
  const json j = parse_json(text, path);
  if (!j.is_object())
    throw InputError(
        fmt::format("{}: expected a JSON object (reference data: workloads/gpu-reference/README.md)", path));
  if (j.contains("format")) {
    const json& f = j["format"];
    if (f == kResultsFormat) return from_gpu_results(parse_results(text, path), path);
    if (f != kReferenceFormat)
      throw InputError(fmt::format("{}: format: {}, expected \"{}\" or \"{}\" (or no format key)", path,
                                   f.dump(), kReferenceFormat, kResultsFormat));
  }
  return read_reference(j, path, text);
}

std::vector<ReferenceData> load_reference(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(
        fmt::format("{}: no such file or folder (reference data: a JSON file, or a folder of them such as "
                    "workloads/gpu-reference)",
                    path.string()));
  if (!fs::is_directory(path, ec)) return {parse_reference(read_text(path), path.string())};
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  if (ec) throw InputError(fmt::format("{}: cannot list the folder: {}", path.string(), ec.message()));
  if (files.empty())
    throw InputError(
        fmt::format("{}: a folder with no .json reference data in it (see workloads/gpu-reference/README.md)",
                    path.string()));
  std::sort(files.begin(), files.end());
  std::vector<ReferenceData> out;
  for (const fs::path& f : files) out.push_back(parse_reference(read_text(f), f.string()));
  return out;
}

std::string reference_json(const ReferenceData& d) {
  json j = {{"format", kReferenceFormat}, {"source", d.source}};
  if (!d.citation.empty()) j["citation"] = d.citation;
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"note", &d.note},
                                   {"tool", &d.tool},
                                   {"command", &d.command},
                                   {"date", &d.date},
                                   {"host", &d.host}})
    if (!value->empty()) j[key] = *value;
  json dev = {{"name", d.device.name}};
  if (!d.device.kind.empty()) dev["kind"] = d.device.kind;
  if (d.device.peak_int8_tops > 0) dev["peak_int8_tops"] = d.device.peak_int8_tops;
  if (d.device.memory_gbps > 0) dev["memory_gbps"] = d.device.memory_gbps;
  if (!d.device.peak_source.empty()) dev["peak_source"] = d.device.peak_source;
  if (!d.device.details.empty()) dev["details"] = d.device.details;
  j["device"] = dev;
  j["results"] = json::array();
  for (const ReferenceRow& r : d.rows) {
    json row = {{"workload", r.workload}};
    if (!r.model.empty()) row["model"] = r.model;
    row["batch"] = r.batch;
    row["inferences_per_second"] = r.inferences_per_second;
    if (r.latency_seconds > 0) row["latency_seconds"] = r.latency_seconds;
    if (!r.latency_statistic.empty()) row["latency_statistic"] = r.latency_statistic;
    if (r.latency_p99_seconds > 0) row["latency_p99_seconds"] = r.latency_p99_seconds;
    for (const auto& [key, value] : {std::pair<const char*, uint64_t>{"threads", r.threads},
                                     {"warmup", r.warmup},
                                     {"repeats", r.repeats},
                                     {"iterations", r.iterations}})
      if (value) row[key] = value;
    if (r.latency_limit_seconds > 0) row["latency_limit_seconds"] = r.latency_limit_seconds;
    if (!r.timing.empty()) row["timing"] = r.timing;
    if (!r.l2.empty()) row["l2"] = r.l2;
    if (r.cuda_graph) row["cuda_graph"] = *r.cuda_graph;
    if (!r.engine.empty()) row["engine"] = r.engine;
    if (r.model_macs) row["model_macs"] = r.model_macs;
    if (r.gemm_macs) row["gemm_macs"] = r.gemm_macs;
    if (r.macs) row["macs"] = r.macs;
    if (r.weight_bytes) row["weight_bytes"] = r.weight_bytes;
    if (r.output_matches_reference) row["output_matches_reference"] = *r.output_matches_reference;
    if (r.launches_queued_ahead) row["launches_queued_ahead"] = *r.launches_queued_ahead;
    if (!r.where.empty()) row["where"] = r.where;
    if (!r.note.empty()) row["note"] = r.note;
    if (r.load_average > 0) row["load_average"] = r.load_average;
    j["results"].push_back(row);
  }
  if (!d.ratios.empty()) {
    j["ratios"] = json::array();
    for (const ReferenceRatio& q : d.ratios)
      j["ratios"].push_back(
          {{"workload", q.workload}, {"of", q.of}, {"to", q.to}, {"value", q.value}, {"where", q.where}});
  }
  return j.dump(2) + "\n";
}

}  // namespace tpusim::gpu
