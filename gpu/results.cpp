// The GPU reference data format (results.h): JSON in and out, CSV out.
#include "gpu/results.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/json_reader.h"
#include "isa/error.h"
#include "isa/file_io.h"

namespace tpusim::gpu {
namespace {

using json = nlohmann::ordered_json;

json device_json(const DeviceInfo& d) {
  return {{"name", d.name},
          {"compute_capability", d.compute_capability},
          {"sms", d.sms},
          {"sm_clock_mhz", d.sm_clock_mhz},
          {"memory_clock_mhz", d.memory_clock_mhz},
          {"memory_bus_bits", d.memory_bus_bits},
          {"memory_gbps", d.memory_gbps},
          {"l2_bytes", d.l2_bytes},
          {"driver_version", d.driver_version},
          {"cuda_runtime_version", d.cuda_runtime_version},
          {"cublaslt_version", d.cublaslt_version},
          {"peak_int8_tops", d.peak_int8_tops},
          {"peak_source", d.peak_source}};
}

json measurement_json(const Measurement& m) {
  json j = {{"workload", m.workload},
            {"model", m.model},
            {"batch", m.batch},
            {"engine", m.engine},
            {"timing", m.timing},
            {"l2", m.l2},
            {"cuda_graph", m.cuda_graph},
            {"latency_seconds", m.latency_seconds},
            {"latency_seconds_min", m.latency_seconds_min},
            {"latency_seconds_max", m.latency_seconds_max},
            {"repeats", m.repeats},
            {"iterations", m.iterations},
            {"inferences_per_second", m.inferences_per_second},
            {"tops", m.tops},
            {"model_macs", m.model_macs},
            {"gemm_macs", m.gemm_macs},
            {"weight_bytes", m.weight_bytes}};
  j["output_matches_reference"] =
      m.output_matches_reference ? json(*m.output_matches_reference) : json(nullptr);
  if (m.launches_queued_ahead) j["launches_queued_ahead"] = *m.launches_queued_ahead;
  return j;
}

using Reader = JsonReader;

DeviceInfo read_device(const Reader& r) {
  DeviceInfo d;
  d.name = r.text("name");
  d.compute_capability = r.text("compute_capability");
  d.sms = r.count("sms");
  d.sm_clock_mhz = r.number("sm_clock_mhz");
  d.memory_clock_mhz = r.number("memory_clock_mhz");
  d.memory_bus_bits = r.count("memory_bus_bits");
  d.memory_gbps = r.number("memory_gbps");
  d.l2_bytes = r.count("l2_bytes");
  d.driver_version = r.text("driver_version");
  d.cuda_runtime_version = r.text("cuda_runtime_version");
  d.cublaslt_version = r.text("cublaslt_version");
  d.peak_int8_tops = r.number("peak_int8_tops");
  d.peak_source = r.text("peak_source");
  return d;
}

Measurement read_measurement(const Reader& r) {
  Measurement m;
  m.workload = r.text("workload");
  if (m.workload.empty()) r.fail("workload", "empty");
  m.model = r.text("model");
  m.batch = r.count("batch", 1);
  m.engine = r.choice("engine", {"cublaslt", "cudnn"});
  m.timing = r.choice("timing", {"device", "end_to_end"});
  m.l2 = r.choice("l2", {"warm", "flushed"});
  m.cuda_graph = r.flag("cuda_graph");
  m.latency_seconds = r.number("latency_seconds");
  if (m.latency_seconds <= 0) r.fail("latency_seconds", "must be above 0");
  m.latency_seconds_min = r.number("latency_seconds_min");
  m.latency_seconds_max = r.number("latency_seconds_max");
  m.repeats = r.count("repeats", 1);
  m.iterations = r.count("iterations", 1);
  m.inferences_per_second = r.number("inferences_per_second");
  m.tops = r.number("tops");
  // A file written before model_macs has "macs" (the GEMMs' count) instead.
  if (r.has("model_macs") || !r.has("macs")) {
    m.model_macs = r.count("model_macs");
    m.gemm_macs = r.count("gemm_macs");
  } else {
    m.legacy_macs = r.count("macs");
  }
  m.weight_bytes = r.count("weight_bytes");
  const json& ok = r.at("output_matches_reference");
  if (!ok.is_null() && !ok.is_boolean())
    r.fail("output_matches_reference", "expected true, false or null, got {}", ok.dump());
  if (ok.is_boolean()) m.output_matches_reference = ok.get<bool>();
  if (r.has("launches_queued_ahead")) m.launches_queued_ahead = r.flag("launches_queued_ahead");
  return m;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string results_json(const ResultsFile& f) {
  json j = {{"format", f.format},   {"kind", f.kind}, {"note", f.note}, {"tool", f.tool},
            {"command", f.command}, {"date", f.date}, {"host", f.host}, {"device", device_json(f.device)}};
  j["results"] = json::array();
  for (const Measurement& m : f.results) j["results"].push_back(measurement_json(m));
  return j.dump(2) + "\n";
}

std::string results_csv(const ResultsFile& f) {
  std::string s =
      "kind,device,compute_capability,driver_version,cuda_runtime_version,sm_clock_mhz,memory_clock_mhz,"
      "memory_gbps,peak_int8_tops,date,workload,model,batch,engine,timing,l2,cuda_graph,latency_seconds,"
      "latency_seconds_min,latency_seconds_max,repeats,iterations,inferences_per_second,tops,model_macs,gemm_macs,weight_"
      "bytes,"
      "output_matches_reference,launches_queued_ahead,command\n";
  const DeviceInfo& d = f.device;
  for (const Measurement& m : f.results)
    s += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{},{},{:.9g},{:.9g},{},{},{},{}"
        ",{},{}\n",
        f.kind, csv_field(d.name), d.compute_capability, d.driver_version, d.cuda_runtime_version,
        d.sm_clock_mhz, d.memory_clock_mhz, d.memory_gbps, d.peak_int8_tops, f.date, csv_field(m.workload),
        csv_field(m.model), m.batch, m.engine, m.timing, m.l2, m.cuda_graph ? "true" : "false",
        m.latency_seconds, m.latency_seconds_min, m.latency_seconds_max, m.repeats, m.iterations,
        m.inferences_per_second, m.tops, m.model_macs, m.gemm_macs, m.weight_bytes,
        m.output_matches_reference ? (*m.output_matches_reference ? "true" : "false") : "",
        m.launches_queued_ahead ? (*m.launches_queued_ahead ? "true" : "false") : "", csv_field(f.command));
  return s;
}

ResultsFile parse_results(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  const Reader r(j, source, text);
  ResultsFile f;
  f.format = r.text("format");
  if (f.format != kResultsFormat) r.fail("format", "\"{}\", expected \"{}\"", f.format, kResultsFormat);
  f.kind = r.choice("kind", {"measured", "test-fixture"});
  f.note = r.text("note", false);
  f.tool = r.text("tool");
  f.command = r.text("command");
  f.date = r.text("date");
  f.host = r.text("host", false);
  f.device = read_device(r.child("device"));
  const json& results = r.at("results");
  if (!results.is_array()) r.fail("results", "expected an array");
  for (size_t i = 0; i < results.size(); ++i)
    f.results.push_back(read_measurement(r.element("results", i)));
  return f;
}

ResultsFile load_results(const std::filesystem::path& path) {
  return parse_results(io::read_text_file(path, io::kMaxDataFileBytes, "GPU reference data (JSON)"),
                       path.string());
}

}  // namespace tpusim::gpu
