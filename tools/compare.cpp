// tpusim compare: simulated figures against GPU reference data (gpu/results.h), per workload and
// batch: latency, throughput, speedup, achieved TOPS and utilisation of each machine's peak, and
// each workload's operational intensity for the roofline plot (scripts/plot_compare.py).
//
// Both machines' TOPS count the same work, the model's MACs per batch from its quantized graph
// (gpu::graph_work), so the TOPS and utilisation columns compare like with like. The TPU figures
// come from the timing engine (or from `tpusim run --report` files given with --tpu-report).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/quantize.h"
#include "gpu/plan.h"
#include "gpu/results.h"
#include "isa/error.h"
#include "sim/arch.h"
#include "sim/machine.h"
#include "tools/commands.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace tpusim::tools {
namespace {

struct Row {
  std::string workload, model, device, device_kind;
  uint64_t batch = 0;
  gpu::Measurement gpu;
  double gpu_peak_tops = 0, gpu_memory_gbps = 0;
  gpu::GraphWork work;
  double tpu_seconds = 0;
};

// A TPU figure: simulated seconds per batch.
struct TpuFigure {
  double seconds = 0;
};

double tpu_peak_tops(const sim::Arch& a) { return 2.0 * double(a.array_rows * a.array_cols) * a.clock_mhz * 1e6 / 1e12; }

std::string key_of(const std::string& workload, uint64_t batch) { return fmt::format("{}@{}", workload, batch); }

// `tpusim run --report` files, by workload and batch; their architecture must be the one compared.
std::map<std::string, TpuFigure> load_reports(const std::vector<std::string>& paths) {
  std::map<std::string, TpuFigure> figures;
  for (const std::string& p : paths) {
    std::ifstream in(p);
    if (!in) throw InputError(fmt::format("{}: cannot read", p));
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: invalid JSON: {}", p, e.what()));
    }
    for (const char* key : {"workload", "batch", "seconds"})
      if (!j.contains(key)) throw InputError(fmt::format("{}: not a tpusim run report (no \"{}\")", p, key));
    if (!j["seconds"].is_number() || j["seconds"].get<double>() <= 0)
      throw InputError(fmt::format("{}: seconds: expected a number above 0", p));
    if (!j["workload"].is_string() || !j["batch"].is_number_unsigned())
      throw InputError(fmt::format("{}: workload and batch: expected a string and an unsigned integer", p));
    figures[key_of(j["workload"].get<std::string>(), j["batch"].get<uint64_t>())] = {j["seconds"].get<double>()};
  }
  return figures;
}

// The model at `batch`: its work from the quantized graph, and (unless given) its simulated time.
struct Simulated {
  gpu::GraphWork work;
  std::optional<TpuFigure> figure;
};
Simulated simulate_model(const std::string& name, uint64_t batch, const sim::Arch& arch, bool run,
                         const std::string& root) {
  const fs::path model = fs::path(name).is_relative() && !root.empty() ? fs::path(root) / name : fs::path(name);
  if (!fs::exists(model))
    throw InputError(fmt::format("{}: model not found (GPU data name models relative to the repository root: run "
                                 "compare there or give --models-root)", model.string()));
  compiler::LoadOptions lo;
  lo.batch = batch;
  Simulated s;
  if (!run) {
    s.work = gpu::graph_work(compiler::quantize(compiler::load_model(model, lo)));
    return s;
  }
  const compiler::Compiled c = compiler::compile_file(model, arch, lo);
  s.work = gpu::graph_work(c.graph);
  sim::RunOptions opt;
  opt.engine = sim::Engine::timing;
  const sim::RunResult r = sim::simulate(c.program, arch, opt);
  s.figure = TpuFigure{double(r.cycles) / (arch.clock_mhz * 1e6)};
  return s;
}

bool selected(const gpu::Measurement& m, const CompareArgs& a) {
  return m.timing == a.timing && m.l2 == a.l2 &&
         (a.graph == "any" || m.cuda_graph == (a.graph == "yes"));
}

// One row per GPU file, workload and batch: the fastest of the measurements the filters select.
std::vector<Row> collect_rows(const CompareArgs& a) {
  std::vector<Row> rows;
  for (const std::string& path : a.gpu_files) {
    const gpu::ResultsFile f = gpu::load_results(path);
    if (f.kind != "measured")
      fmt::print(stderr, "{}: {} data ({}): not a measurement\n", path, f.kind, f.note.empty() ? "no note" : f.note);
    std::map<std::string, size_t> index;
    for (const gpu::Measurement& m : f.results) {
      if (!selected(m, a)) continue;
      const std::string k = key_of(m.workload, m.batch);
      auto it = index.find(k);
      if (it != index.end()) {
        if (m.latency_seconds < rows[it->second].gpu.latency_seconds) rows[it->second].gpu = m;
        continue;
      }
      index[k] = rows.size();
      Row r;
      r.workload = m.workload;
      r.model = m.model;
      r.batch = m.batch;
      r.device = f.device.name;
      r.device_kind = f.kind;
      r.gpu = m;
      r.gpu_peak_tops = f.device.peak_int8_tops;
      r.gpu_memory_gbps = f.device.memory_gbps;
      rows.push_back(r);
    }
    if (index.empty())
      fmt::print(stderr, "{}: no measurement with timing {}, L2 {}, graph {}\n", path, a.timing, a.l2, a.graph);
  }
  return rows;
}

void fill_tpu(std::vector<Row>& rows, const sim::Arch& arch, const CompareArgs& a) {
  const std::map<std::string, TpuFigure> reports = load_reports(a.tpu_reports);
  std::map<std::string, Simulated> done;  // by model and batch
  for (Row& r : rows) {
    const std::string k = key_of(r.model, r.batch);
    if (!done.count(k)) {
      const auto given = reports.find(key_of(r.workload, r.batch));
      const bool run = given == reports.end();
      if (run && !a.tpu_reports.empty())
        throw InputError(fmt::format("no --tpu-report for workload {} at batch {}", r.workload, r.batch));
      Simulated s = simulate_model(r.model, r.batch, arch, run, a.models_root);
      if (!run) s.figure = given->second;
      done[k] = s;
    }
    r.work = done[k].work;
    r.tpu_seconds = done[k].figure->seconds;
    if (r.gpu.macs != r.work.macs)
      fmt::print(stderr, "warning: {} batch {}: the GPU data count {} MACs, the model here {}: a different model?\n",
                 r.workload, r.batch, r.gpu.macs, r.work.macs);
  }
}

json row_json(const Row& r, double tpu_peak) {
  const double macs = double(r.work.macs);
  const double tpu_tops = 2 * macs / r.tpu_seconds / 1e12, gpu_tops = 2 * macs / r.gpu.latency_seconds / 1e12;
  return {{"workload", r.workload},
          {"batch", r.batch},
          {"device", r.device},
          {"gpu_kind", r.device_kind},
          {"gpu_timing", r.gpu.timing},
          {"gpu_l2", r.gpu.l2},
          {"gpu_cuda_graph", r.gpu.cuda_graph},
          {"macs", r.work.macs},
          {"weight_bytes", r.work.weight_bytes},
          {"macs_per_weight_byte", r.work.weight_bytes ? macs / double(r.work.weight_bytes) : 0.0},
          {"tpu_latency_seconds", r.tpu_seconds},
          {"gpu_latency_seconds", r.gpu.latency_seconds},
          {"tpu_inferences_per_second", double(r.batch) / r.tpu_seconds},
          {"gpu_inferences_per_second", double(r.batch) / r.gpu.latency_seconds},
          {"speedup", r.gpu.latency_seconds / r.tpu_seconds},
          {"tpu_tops", tpu_tops},
          {"gpu_tops", gpu_tops},
          {"tpu_peak_tops", tpu_peak},
          {"gpu_peak_tops", r.gpu_peak_tops},
          {"tpu_utilization", tpu_tops / tpu_peak},
          {"gpu_utilization", r.gpu_peak_tops > 0 ? gpu_tops / r.gpu_peak_tops : 0.0},
          {"gpu_memory_gbps", r.gpu_memory_gbps}};
}

std::string table_text(const json& doc) {
  std::string s = fmt::format("TPU: {} ({:.1f} TOPS peak, {} GB/s weight memory), simulated (timing engine)\n",
                              doc["arch"]["name"].get<std::string>(), doc["arch"]["peak_tops"].get<double>(),
                              doc["arch"]["weight_mem_gbps"].get<double>());
  s += fmt::format("{:<12} {:>5}  {:<24} {:>10} {:>10} {:>11} {:>11} {:>8} {:>8} {:>8} {:>7} {:>7} {:>9}\n", "workload",
                   "batch", "GPU", "TPU ms", "GPU ms", "TPU inf/s", "GPU inf/s", "speedup", "TPU TOPS", "GPU TOPS",
                   "TPU %", "GPU %", "MACs/wB");
  for (const json& r : doc["rows"]) {
    std::string dev = r["device"].get<std::string>();
    if (r["gpu_kind"] != "measured") dev += " [" + r["gpu_kind"].get<std::string>() + "]";
    s += fmt::format("{:<12} {:>5}  {:<24} {:>10.4f} {:>10.4f} {:>11.0f} {:>11.0f} {:>8.2f} {:>8.2f} {:>8.2f} {:>7.1f} "
                     "{:>7.1f} {:>9.1f}\n",
                     r["workload"].get<std::string>(), r["batch"].get<uint64_t>(), dev,
                     r["tpu_latency_seconds"].get<double>() * 1e3, r["gpu_latency_seconds"].get<double>() * 1e3,
                     r["tpu_inferences_per_second"].get<double>(), r["gpu_inferences_per_second"].get<double>(),
                     r["speedup"].get<double>(), r["tpu_tops"].get<double>(), r["gpu_tops"].get<double>(),
                     100 * r["tpu_utilization"].get<double>(), 100 * r["gpu_utilization"].get<double>(),
                     r["macs_per_weight_byte"].get<double>());
  }
  s += "speedup = GPU latency / TPU latency (above 1: the simulated TPU is faster); TOPS = 2 x the model's MACs / "
       "latency; % = of each machine's peak\n";
  return s;
}

std::string table_csv(const json& doc) {
  std::string s;
  bool header = true;
  for (const json& r : doc["rows"]) {
    if (header) {
      for (auto it = r.begin(); it != r.end(); ++it) s += (it == r.begin() ? "" : ",") + it.key();
      s += "\n";
      header = false;
    }
    for (auto it = r.begin(); it != r.end(); ++it) {
      std::string v = it->is_string() ? it->get<std::string>() : it->is_number_float() ? fmt::format("{:.9g}", it->get<double>()) : it->dump();
      if (v.find_first_of(",\"") != std::string::npos) v = "\"" + v + "\"";
      s += (it == r.begin() ? "" : ",") + v;
    }
    s += "\n";
  }
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// PREFIX.json (the plot's input), then PREFIX.png and PREFIX.svg from scripts/plot_compare.py.
void plot(const json& doc, const CompareArgs& a) {
  const std::string data = a.plot_prefix + ".json";
  write_text(data, doc.dump(2) + "\n");
  const std::string script = a.plot_script.empty() ? std::string(TPUSIM_SOURCE_DIR "/scripts/plot_compare.py") : a.plot_script;
  // Debian's python3-matplotlib belongs to /usr/bin/python3, which a python3 earlier in PATH
  // (pyenv, a venv) may not see.
  const std::string python = !a.python.empty() ? a.python : fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = fmt::format("{} {} {} --png {} --svg {}", python, shell_quote(script), shell_quote(data),
                                      shell_quote(a.plot_prefix + ".png"), shell_quote(a.plot_prefix + ".svg"));
  if (std::system(cmd.c_str()) != 0)
    throw InputError(fmt::format("plot: `{}` failed (needs python3-matplotlib: scripts/install-deps.sh)", cmd));
  fmt::print(stderr, "wrote {}.png and {}.svg\n", a.plot_prefix, a.plot_prefix);
}

}  // namespace

int cmd_compare(const CompareArgs& a) {
  if (a.gpu_files.empty()) throw InputError("compare: at least one GPU data file is required (see tpusim compare --help)");
  sim::Arch arch = a.arch_file.empty() ? sim::Arch{} : sim::load_arch_file(a.arch_file);
  for (const std::string& s : a.sets) sim::apply_set(arch, s);
  sim::validate(arch);
  std::vector<Row> rows = collect_rows(a);
  if (rows.empty()) throw InputError("compare: no GPU measurement matches the filters (--timing, --l2, --graph)");
  fill_tpu(rows, arch, a);
  json doc;
  doc["arch"] = {{"name", arch.name}, {"peak_tops", tpu_peak_tops(arch)}, {"weight_mem_gbps", arch.weight_mem_gbps}};
  doc["rows"] = json::array();
  for (const Row& r : rows) doc["rows"].push_back(row_json(r, tpu_peak_tops(arch)));
  write_text("-", table_text(doc));
  if (!a.csv_out.empty()) write_text(a.csv_out, table_csv(doc));
  if (!a.json_out.empty()) write_text(a.json_out, doc.dump(2) + "\n");
  if (!a.plot_prefix.empty()) plot(doc, a);
  return 0;
}

}  // namespace tpusim::tools
