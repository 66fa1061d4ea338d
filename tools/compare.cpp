// tpusim compare: the simulated TPU beside reference data (gpu/reference.h: measured on this
// or another machine, published, or test fixtures), per workload and batch.
//
// Every row keeps its source. For each workload and batch that reference data name, compare
// compiles the model for the architecture (tpu-v1 unless --arch/--set) at that batch and runs the
// timing engine (or takes the time from a `tpusim run --report` file given with --tpu-report):
// that is the "simulated" row. TOPS count the same work on every row: the model's MACs
// (compiler::model_macs, each once whatever the mapping) times the row's inferences per second.
#include "tools/compare.h"
#include "tools/machine_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <toml++/toml.h>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/quantize.h"
#include "gpu/json_reader.h"
#include "gpu/plan.h"
#include "gpu/reference.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "sim/arch.h"
#include "sim/host_model.h"
#include "sim/machine.h"
#include "tools/program_to_run.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace tpusim::tools {
namespace {

struct Entry {
  const gpu::ReferenceData* file = nullptr;
  gpu::ReferenceRow row;
};

struct Group {
  std::string workload, model;  // model: "" when no reference row names one and none is found
  std::string model_key;        // the description's canonical path ("" without one): rows group by it
  uint64_t batch = 0;
  std::vector<Entry> entries;
  compiler::MatmulWork work;
  std::optional<double> tpu_seconds;  // simulated latency of one batch with the host (sim/host_model.h)
  double latency_limit = 0;           // > 0: this batch is the latency sweep's answer for this limit
  std::string sweep_note;
  std::optional<bool> wide;  // the simulated graph has 16-bit weights or elements (unknown: a --tpu-report's)
};

double tpu_peak_tops(const sim::Arch& a) {
  return 2.0 * double(a.array_rows * a.array_cols) * a.clock_mhz * 1e6 / 1e12;
}

std::string key_of(const std::string& workload, uint64_t batch) {
  return fmt::format("{}@{}", workload, batch);
}

// `tpusim run --report` files, by workload and batch: latency per batch with the host.
std::map<std::string, double> load_reports(const std::vector<std::string>& paths) {
  std::map<std::string, double> figures;
  for (const std::string& p : paths) {
    const std::string text = io::read_text_file(p, io::kMaxDataFileBytes, "a tpusim run report (JSON)");
    const json j = gpu::parse_json(text, p);
    for (const char* key : {"workload", "batch", "seconds"})
      if (!j.contains(key)) throw InputError(fmt::format("{}: not a tpusim run report (no \"{}\")", p, key));
    if (!j.contains("latency_seconds"))
      throw InputError(fmt::format(
          "{}: no \"latency_seconds\" (a report of an older tpusim, before the host model): run it again",
          p));
    if (!j["latency_seconds"].is_number() || j["latency_seconds"].get<double>() <= 0)
      throw InputError(fmt::format("{}: latency_seconds: expected a number above 0", p));
    if (!j["workload"].is_string() || !j["batch"].is_number_unsigned())
      throw InputError(fmt::format("{}: workload and batch: expected a string and an unsigned integer", p));
    figures[key_of(j["workload"].get<std::string>(), j["batch"].get<uint64_t>())] =
        j["latency_seconds"].get<double>();
  }
  return figures;
}

bool selected(const gpu::ReferenceRow& r, const CompareArgs& a) {
  if (!r.timing.empty() && r.timing != a.timing) return false;
  if (!r.l2.empty() && r.l2 != a.l2) return false;
  return a.graph == "any" || !r.cuda_graph || *r.cuda_graph == (a.graph == "yes");
}

// A description's name, as `tpusim run` reports it (the report's "workload"): a .toml's
// [model] name, else the file's stem (an ONNX model or a SCALE-Sim topology).
std::string description_name(const fs::path& p) {
  if (p.extension() == ".toml") try {
      const toml::table t = toml::parse_file(p.string());
      if (const auto name = t["model"]["name"].value<std::string>()) return *name;
    } catch (const toml::parse_error&) {
      // compiling it reports the error with its line
    }
  return p.stem().string();
}

// A description for a workload named without a model path: the paper apps and the small models,
// by file name (workloads/tpu-v1/NAME.toml, workloads/small/NAME.toml), else by the name the
// description gives itself (lstm1_small is workloads/small/lstm1.toml).
std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string find_model(const std::string& workload, const std::string& root) {
  const std::string lower = lowercase(workload);
  const fs::path base = root.empty() ? "." : root;
  for (const char* dir : {"workloads/tpu-v1", "workloads/small"}) {
    const fs::path p = base / dir / (lower + ".toml");
    if (fs::exists(p)) return fs::path(dir) / (lower + ".toml");
  }
  for (const char* dir : {"workloads/tpu-v1", "workloads/small"}) {
    std::error_code ec;
    std::vector<fs::path> found;
    for (const fs::directory_entry& e : fs::directory_iterator(base / dir, ec))
      if (e.path().extension() == ".toml") found.push_back(e.path());
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found)
      if (description_name(p) == workload) return fs::path(dir) / p.filename();
  }
  return {};
}

fs::path model_path(const std::string& model, const CompareArgs& a) {
  const fs::path p = fs::path(model).is_relative() && !a.models_root.empty() ? fs::path(a.models_root) / model
                                                                             : fs::path(model);
  if (!fs::exists(p))
    throw InputError(
        fmt::format("{}: model not found (reference data name models relative to the repository root: "
                    "run compare there or give --models-root)",
                    p.string()));
  return p;
}

std::string canonical_key(const fs::path& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return (ec ? fs::absolute(p) : c).string();
}

// A GPU runner's row whose timed intervals had launch gaps (a gate expired: docs/gpu.md, Timing).
bool launch_gaps(const gpu::ReferenceRow& r) { return r.launches_queued_ahead == false; }

// One group per workload and batch; within a group, one entry per file: the fastest of the file's
// rows that the filters select (the GPU runner records several timing modes), a row without
// launch gaps before any with them (whose time may be the host's launch rate, not the GPU's).
std::vector<Group> collect(const std::vector<gpu::ReferenceData>& files, const CompareArgs& a) {
  std::vector<Group> groups;
  std::map<std::string, size_t> index;
  for (const gpu::ReferenceData& f : files) {
    if (f.source == "test-fixture")
      fmt::print(stderr, "{}: test-fixture data ({}): not a measurement\n", f.path,
                 f.note.empty() ? "no note" : f.note);
    size_t kept = 0;
    for (const gpu::ReferenceRow& r : f.rows) {
      if (!selected(r, a)) continue;
      ++kept;
      // The row's model: the one it names, else the description its workload names. Rows group by
      // the description itself, so that two models that share a file name (workloads/small/lstm1.toml
      // is lstm1_small, not the paper's LSTM1) are never compared with each other's simulated row.
      const std::string model = r.model.empty() ? find_model(r.workload, a.models_root) : r.model;
      std::string workload = r.workload, model_key;
      if (!model.empty()) {
        const fs::path p = model_path(model, a);
        workload = description_name(p);
        model_key = canonical_key(p);
        // (names as find_model reads them: in any case)
        if (!r.model.empty() && lowercase(r.workload) != lowercase(workload) &&
            lowercase(r.workload) != lowercase(fs::path(r.model).stem().string()))
          throw InputError(fmt::format(
              "{}: workload \"{}\" with model \"{}\", whose description is named \"{}\": which one is it? "
              "(give one of the two, or both of the same model)",
              f.path, r.workload, r.model, workload));
      }
      const std::string k = key_of(model_key.empty() ? "workload " + workload : model_key, r.batch);
      auto [it, fresh] = index.try_emplace(k, groups.size());
      if (fresh) groups.push_back({workload, model, model_key, r.batch, {}, {}, {}, 0, {}, {}});
      Group& g = groups[it->second];
      auto same_file =
          std::find_if(g.entries.begin(), g.entries.end(), [&](const Entry& e) { return e.file == &f; });
      if (same_file == g.entries.end()) g.entries.push_back({&f, r});
      else if (launch_gaps(same_file->row) != launch_gaps(r) ? launch_gaps(same_file->row)
                                                             : r.inferences_per_second > same_file->row.inferences_per_second)
        same_file->row = r;
    }
    if (kept == 0 && !f.rows.empty())
      fmt::print(stderr, "{}: no figure with timing {}, L2 {}, graph {}\n", f.path, a.timing, a.l2, a.graph);
  }
  for (const std::string& path : a.models) {
    if (!fs::exists(path)) throw InputError(fmt::format("{}: model not found (--model)", path));
    const compiler::Model m = compiler::load_model(path);
    const std::string model_key = canonical_key(path);
    auto [it, fresh] = index.try_emplace(key_of(model_key, m.batch), groups.size());
    if (fresh) groups.push_back({m.name, fs::absolute(path).string(), model_key, m.batch, {}, {}, {}, 0, {}, {}});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) {
    return x.workload != y.workload ? x.workload < y.workload
           : x.model_key != y.model_key ? x.model_key < y.model_key
                                        : x.batch < y.batch;
  });
  return groups;
}

// The model compiled for `arch` at `batch` and run on the timing engine; `seconds` is the latency
// of one batch with the host (sim/host_model.h: what `tpusim run` reports as latency_seconds).
struct Simulated {
  compiler::MatmulWork work;
  double seconds = 0;
  bool wide = false;  // 16-bit weights or elements somewhere (the runners run every part int8)
};

// Whether a quantized graph has 16-bit weights or tensors (the LSTMs' gates and cells by default:
// docs/compiler.md, "Element width"); the runners quantize every part int8.
bool has_wide_parts(const compiler::QGraph& g) {
  for (const compiler::QTensor& t : g.tensors)
    if (t.bits == 16) return true;
  for (const compiler::QOp& op : g.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op); m && m->wide_weights()) return true;
  return false;
}

Simulated simulate_at(const fs::path& model, uint64_t batch, const sim::Arch& arch, const CompareArgs& a) {
  compiler::LoadOptions lo;
  lo.batch = batch;
  lo.timing_only = true;  // cycles and shapes only: no weight values (the cycles are a full compile's)
  if (a.int8) lo.precision = compiler::Precision::int8;  // the runners' variant (gpu::runner_load_options)
  const compiler::Compiled c = compiler::compile_file(model, arch, lo);
  sim::RunOptions opt;
  opt.engine = sim::Engine::timing;
  const uint64_t cycles = sim::simulate(c.program, arch, opt).cycles;
  return {compiler::graph_matmul_work(c.graph),
          sim::batch_latency(arch, cycles, sim::segment_length(c.program.code, 0)).total(), has_wide_parts(c.graph)};
}

// Whether each entry's file counted the model compare simulates: its model_macs against the
// model's (compiler::model_macs), else (a file written before model_macs) its macs, the runner's
// GEMM count then, against the GEMM MACs of the graph the runners build (gpu::runner_load_options):
// the same figure on both sides, so a mapping difference (a concat in place or copied, int8 or
// 16-bit elements) never warns, and another model (other shapes, other batch) does.
void check_macs(const Group& g, const fs::path& model) {
  std::optional<uint64_t> runner_gemm;
  for (const Entry& e : g.entries) {
    const gpu::ReferenceRow& r = e.row;
    if (r.model_macs && r.model_macs != g.work.model_macs)
      fmt::print(stderr,
                 "warning: {} batch {}: {} counts {} model MACs per batch, the model here {}: a different model?\n",
                 g.workload, g.batch, e.file->path, r.model_macs, g.work.model_macs);
    if (r.model_macs || !r.macs) continue;
    if (!runner_gemm) {
      compiler::LoadOptions lo = gpu::runner_load_options(g.batch);
      lo.timing_only = true;  // shapes only
      runner_gemm = compiler::graph_matmul_work(compiler::prepare_file(model, lo).graph).gemm_macs;
    }
    if (r.macs != *runner_gemm)
      fmt::print(stderr,
                 "warning: {} batch {}: {} counts {} MACs per batch (\"macs\": its runner's GEMMs, before "
                 "model_macs), the model here {} (its model MACs {}): a different model?\n",
                 g.workload, g.batch, e.file->path, r.macs, *runner_gemm, g.work.model_macs);
  }
}

// Where a group's figures come from, for a message: its files, or --model.
std::string files_of(const Group& g) {
  std::string s;
  for (const Entry& e : g.entries)
    if (s.find(e.file->path) == std::string::npos) s += (s.empty() ? "" : ", ") + e.file->path;
  return s.empty() ? "--model" : s;
}

// Simulates every group with a model; returns the number the compiler refused at their batch
// (each said on standard error, naming its files: the group is shown without a simulated row).
int simulate(std::vector<Group>& groups, const sim::Arch& arch, const CompareArgs& a) {
  const std::map<std::string, double> reports = load_reports(a.tpu_reports);
  int refused = 0;
  for (Group& g : groups) {
    if (g.model.empty()) {
      fmt::print(stderr,
                 "{} batch {}: no model description named: not simulated (no workloads/tpu-v1/{}.toml or "
                 "workloads/small/{}.toml, nor a description there named {}: give \"model\", its path, in the data)\n",
                 g.workload, g.batch, g.workload, g.workload, g.workload);
      continue;
    }
    const fs::path model = model_path(g.model, a);
    const auto given = reports.find(key_of(g.workload, g.batch));
    if (given == reports.end() && !a.tpu_reports.empty())
      throw InputError(fmt::format("no --tpu-report for workload {} at batch {}", g.workload, g.batch));
    if (given != reports.end()) {
      compiler::LoadOptions lo;
      lo.batch = g.batch;
      lo.timing_only = true;  // shapes only
      g.work = compiler::graph_matmul_work(compiler::prepare_file(model, lo).graph);
      g.tpu_seconds = given->second;
    } else {
      try {
        const Simulated r = simulate_at(model, g.batch, arch, a);
        g.work = r.work;
        g.tpu_seconds = r.seconds;
        g.wide = r.wide;
      } catch (const InputError& e) {
        // A batch the compiler refuses (over its batch limit, too big for the unified buffer or
        // for this machine's memory): say which file asked for it; the figures are still shown.
        std::string why = e.what();
        if (why.rfind("--batch: ", 0) == 0) why = "batch " + why.substr(9);
        fmt::print(stderr, "{}: {} ({}) at batch {}: not simulated, the compiler refuses it: {}\n", files_of(g),
                   g.workload, g.model, g.batch, why);
        ++refused;
        continue;
      }
    }
    check_macs(g, model);
  }
  return refused;
}

// For each workload with a model: the largest batch whose simulated latency of one batch with the
// host (sim/host_model.h) is within --latency-limit, by doubling and bisection up to --max-batch; a
// batch the compiler refuses (too big for the unified buffer) counts as over the limit.
void latency_sweep(std::vector<Group>& groups, const sim::Arch& arch, const CompareArgs& a) {
  const double limit = a.latency_limit_ms / 1e3;
  struct Workload {
    std::string name, model, key;
  };
  std::vector<Workload> workloads;
  for (const Group& g : groups)
    if (!g.model.empty() && std::none_of(workloads.begin(), workloads.end(),
                                         [&](const Workload& w) { return w.key == g.model_key; }))
      workloads.push_back({g.workload, g.model, g.model_key});
  for (const auto& [workload, model, key] : workloads) {
    const fs::path path = model_path(model, a);
    std::map<uint64_t, std::optional<Simulated>> probes;
    std::string refused;
    auto probe = [&](uint64_t b) -> const std::optional<Simulated>& {
      if (!probes.count(b)) try {
          probes[b] = simulate_at(path, b, arch, a);
        } catch (const InputError& e) {
          probes[b] = std::nullopt;
          if (refused.empty()) refused = fmt::format("batch {} refused: {}", b, e.what());
        }
      return probes[b];
    };
    auto within = [&](uint64_t b) { return probe(b) && probe(b)->seconds <= limit; };
    if (!within(1)) {
      fmt::print(stderr, "{}: no batch is within {:g} ms on {} ({})\n", workload, a.latency_limit_ms,
                 sim::machine_name(arch),
                 probe(1) ? fmt::format("batch 1 takes {:.4g} ms", probe(1)->seconds * 1e3) : refused);
      continue;
    }
    uint64_t good = 1, bad = 0;
    while (bad == 0 && good < a.max_batch) {
      const uint64_t next = std::min(good * 2, a.max_batch);
      (within(next) ? good : bad) = next;
    }
    while (bad && bad - good > 1) {
      const uint64_t mid = good + (bad - good) / 2;
      (within(mid) ? good : bad) = mid;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.model_key == key && g.batch == good; });
    if (it == groups.end()) {
      groups.push_back({workload, model, key, good, {}, {}, {}, 0, {}, {}});
      it = groups.end() - 1;
    }
    it->work = probe(good)->work;
    it->tpu_seconds = probe(good)->seconds;
    it->wide = probe(good)->wide;
    it->latency_limit = limit;
    it->sweep_note = good == a.max_batch ? fmt::format("--max-batch {} reached within the limit", a.max_batch)
                     : probe(bad)        ? "the largest batch within the limit"
                                  : "the largest batch within the limit; the next is refused by the compiler";
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) {
    return x.workload != y.workload ? x.workload < y.workload
           : x.model_key != y.model_key ? x.model_key < y.model_key
                                        : x.batch < y.batch;
  });
}

json null_if_zero(double v) { return v > 0 ? json(v) : json(nullptr); }

json row_json(const Group& g, const std::string& source, const std::string& device, double ips,
              double latency, double peak, double gbps) {
  const double macs_per_inference = g.batch ? double(g.work.model_macs) / double(g.batch) : 0;
  const double tops = 2 * macs_per_inference * ips / 1e12;
  json r = {{"workload", g.workload},
            {"model", g.model},
            {"batch", g.batch},
            {"source", source},
            {"device", device},
            {"latency_seconds", null_if_zero(latency)},
            {"inferences_per_second", ips},
            {"tops", g.work.model_macs ? json(tops) : json(nullptr)},
            {"peak_tops", null_if_zero(peak)},
            {"utilization", g.work.model_macs && peak > 0 ? json(tops / peak) : json(nullptr)},
            {"memory_gbps", null_if_zero(gbps)},
            {"macs", g.work.model_macs},
            {"weight_bytes", g.work.model_weights},
            {"macs_per_weight_byte",
             g.work.model_weights ? double(g.work.model_macs) / double(g.work.model_weights) : 0.0}};
  r["speedup_of_simulated"] =
      g.tpu_seconds && source != "simulated" ? json(double(g.batch) / *g.tpu_seconds / ips) : json(nullptr);
  return r;
}

CompareDoc build_doc(const std::vector<Group>& groups, const std::vector<gpu::ReferenceData>& files,
                     const sim::Arch& arch) {
  CompareDoc doc;
  doc["arch"] = {{"name", sim::machine_name(arch)},
                 {"peak_tops", tpu_peak_tops(arch)},
                 {"weight_mem_gbps", arch.weight_mem_gbps},
                 {"host_gbps", arch.host_gbps},
                 {"driver_seconds", arch.host_driver_us * 1e-6}};
  doc["devices"] = json::array();
  doc["devices"].push_back({{"name", sim::machine_name(arch)},
                            {"source", "simulated"},
                            {"kind", "tpu"},
                            {"peak_tops", tpu_peak_tops(arch)},
                            {"memory_gbps", arch.weight_mem_gbps},
                            {"peak_source", "2 x array_rows x array_cols x clock; weight_mem_gbps"}});
  for (const gpu::ReferenceData& f : files)
    doc["devices"].push_back({{"name", f.device.name},
                              {"source", f.source},
                              {"kind", f.device.kind},
                              {"peak_tops", null_if_zero(f.device.peak_int8_tops)},
                              {"memory_gbps", null_if_zero(f.device.memory_gbps)},
                              {"peak_source", f.device.peak_source},
                              {"file", f.path}});
  doc["rows"] = json::array();
  for (const Group& g : groups) {
    if (g.tpu_seconds) {
      // Latency with the host model (sim/host_model.h): the program's own host DMA, the driver
      // time and the instruction download.
      const double latency = *g.tpu_seconds;
      json r = row_json(g, "simulated", sim::machine_name(arch), double(g.batch) / latency, latency,
                        tpu_peak_tops(arch), arch.weight_mem_gbps);
      r["latency_limit_seconds"] = null_if_zero(g.latency_limit);
      r["where"] = g.sweep_note;
      // The runners (tpusim-cpu, tpusim-gpu) run every weight and element int8; a simulated graph
      // with 16-bit parts (the LSTMs' by default) is another variant of the model: say so.
      r["precision"] = !g.wide ? json(nullptr) : *g.wide ? json("16-bit parts") : json("int8");
      doc["rows"].push_back(r);
    }
    for (const char* source : {"measured", "published", "test-fixture"})
      for (const Entry& e : g.entries) {
        if (e.file->source != source) continue;
        const gpu::ReferenceRow& r = e.row;
        json j = row_json(g, source, e.file->device.name, r.inferences_per_second, r.latency_seconds,
                          e.file->device.peak_int8_tops, e.file->device.memory_gbps);
        j["latency_statistic"] = r.latency_statistic;
        j["latency_limit_seconds"] = null_if_zero(r.latency_limit_seconds);
        j["timing"] = r.timing;
        j["l2"] = r.l2;
        j["cuda_graph"] = r.cuda_graph ? json(*r.cuda_graph) : json(nullptr);
        j["launches_queued_ahead"] = r.launches_queued_ahead ? json(*r.launches_queued_ahead) : json(nullptr);
        j["where"] = r.where;
        if (r.load_average > 0) j["load_average"] = r.load_average;
        j["citation"] = e.file->citation;
        j["file"] = e.file->path;
        doc["rows"].push_back(j);
      }
  }
  doc["ratios"] = json::array();
  for (const gpu::ReferenceData& f : files)
    for (const gpu::ReferenceRatio& q : f.ratios)
      doc["ratios"].push_back({{"workload", q.workload},
                               {"of", q.of},
                               {"to", q.to},
                               {"value", q.value},
                               {"where", q.where},
                               {"source", f.source},
                               {"citation", f.citation}});
  return doc;
}

// Without paths: workloads/gpu-reference (under --models-root, else here) where it exists; with
// only --model, nothing.
std::vector<std::string> default_reference(const CompareArgs& a) {
  const fs::path d = fs::path(a.models_root.empty() ? "." : a.models_root) / "workloads/gpu-reference";
  if (fs::is_directory(d)) return {d.string()};
  if (!a.models.empty()) return {};
  throw InputError(
      "compare: give reference data (JSON files or folders), e.g. tpusim compare workloads/gpu-reference, or "
      "--model (see tpusim compare --help)");
}

}  // namespace

int cmd_compare(const CompareArgs& a) {
  std::error_code ec;
  if (!a.models_root.empty() && !fs::is_directory(a.models_root, ec))
    throw InputError(fmt::format("{}: --models-root: {}", a.models_root,
                                 fs::exists(a.models_root, ec) ? "not a folder" : "no such folder"));
  sim::Arch arch = a.arch_file.empty() ? sim::Arch{} : sim::load_arch_file(a.arch_file);
  for (const std::string& s : a.sets) sim::apply_set(arch, s);
  validate_machine(arch, a.sets);
  std::vector<gpu::ReferenceData> files;
  for (const std::string& p : a.gpu_files.empty() ? default_reference(a) : a.gpu_files)
    for (gpu::ReferenceData& d : gpu::load_reference(p)) files.push_back(std::move(d));
  std::vector<Group> groups = collect(files, a);
  // No output over a file compare reads (`--csv ref.json`, `--plot ref` writing ref.json, `--json
  // mlp0.toml` replaced the reference data or the model): refused before anything is simulated.
  std::vector<std::string> inputs = {a.arch_file};
  for (const gpu::ReferenceData& f : files) inputs.push_back(f.path);
  inputs.insert(inputs.end(), a.tpu_reports.begin(), a.tpu_reports.end());
  compiler::append_model_files(inputs, a.models);
  for (const Group& g : groups) compiler::append_model_files(inputs, {g.model_key});  // each description, canonical
  const std::string plot_data = a.plot_prefix.empty() ? "" : a.plot_prefix + ".json";
  for (const auto& [flag, f] : {std::pair{"--csv", a.csv_out}, std::pair{"--json", a.json_out},
                                std::pair{"--plot", plot_data}})
    io::refuse_input_as_output(f, flag, inputs);
  // An output that cannot be written (a folder, a missing folder) fails before anything is simulated.
  for (const std::string& f : {a.csv_out, a.json_out, plot_data}) try_output(f);
  bool any_ratio = false;
  for (const gpu::ReferenceData& f : files) any_ratio |= !f.ratios.empty();
  if (groups.empty() && !any_ratio)
    throw InputError("compare: no reference figure matches the filters (--timing, --l2, --graph)");
  const int refused = simulate(groups, arch, a);
  if (a.latency_limit_ms > 0) latency_sweep(groups, arch, a);
  const CompareDoc doc = build_doc(groups, files, arch);
  write_text("-", compare_table_text(doc));
  std::fflush(stdout);  // the table before the plot's messages on standard error
  if (!a.csv_out.empty()) write_text(a.csv_out, compare_table_csv(doc));
  if (!a.json_out.empty()) write_text(a.json_out, doc.dump(2) + "\n");
  if (!a.plot_prefix.empty()) compare_plot(doc, a);
  if (refused) {
    fmt::print(stderr, "compare: {} workload{} and batch{} not simulated (above): exit code 2\n", refused,
               refused > 1 ? "s" : "", refused > 1 ? "es" : "");
    return 2;
  }
  return 0;
}

}  // namespace tpusim::tools
