// tpusim compare's output (compare.h): the text table, CSV, and the plot through
// scripts/plot_compare.py.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "isa/error.h"
#include "tools/compare.h"
#include "tools/source_dir.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace tpusim::tools {
namespace {

double num(const json& v) { return v.is_number() ? v.get<double>() : 0.0; }
std::string str(const json& r, const char* key) {
  return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : std::string();
}

// The short notes of a row: how its latency was taken, its table, its timing mode.
std::string notes(const json& r) {
  std::vector<std::string> parts;
  if (!str(r, "latency_statistic").empty()) {
    std::string s = str(r, "latency_statistic");
    if (num(r.value("latency_limit_seconds", json())) > 0)
      s += fmt::format(" at a {:g} ms limit", 1e3 * num(r["latency_limit_seconds"]));
    parts.push_back(s);
  }
  if (str(r, "latency_statistic").empty() && num(r.value("latency_limit_seconds", json())) > 0)
    parts.push_back(fmt::format("within a {:g} ms limit", 1e3 * num(r["latency_limit_seconds"])));
  if (!str(r, "timing").empty()) parts.push_back(str(r, "timing"));
  if (!str(r, "l2").empty()) parts.push_back("L2 " + str(r, "l2"));
  if (r.contains("cuda_graph") && r["cuda_graph"].is_boolean())
    parts.push_back(r["cuda_graph"].get<bool>() ? "graph" : "no graph");
  // A GPU runner's time whose gate expired: the host's launches may be inside it.
  if (r.contains("launches_queued_ahead") && r["launches_queued_ahead"] == false) parts.push_back("launch gaps");
  std::string where = str(r, "where");
  if (const size_t cut = where.find(" ("); cut != std::string::npos) where.resize(cut);
  if (!where.empty()) parts.push_back(where);
  // A simulated graph with 16-bit weights or elements: the runners measured the all-int8 variant.
  if (str(r, "precision") == "16-bit parts") parts.push_back("16-bit parts (runners: all int8, --int8)");
  // A measurement on a busy machine says so: its times include waiting for a CPU.
  if (num(r.value("load_average", json())) > 0) parts.push_back(fmt::format("load {:.1f}", num(r["load_average"])));
  // Above 100% of the device's peak: that peak is not a hard limit (the footer says why).
  if (num(r.value("utilization", json())) > 1) parts.push_back("above its peak (*)");
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string cell(const json& v, const char* format, double scale = 1) {
  return v.is_number() ? fmt::format(fmt::runtime(format), scale * v.get<double>()) : std::string("-");
}

// A figure with `decimals` decimals, or two significant digits where those would show nothing
// but zeros (a small model's 0.0018 TOPS, an H200's 0.015% of its peak at batch 1: "0.00" and
// "0.0" before), at most 8 decimals.
std::string figure(const json& v, int decimals, double scale = 1) {
  if (!v.is_number()) return "-";
  const double x = scale * v.get<double>();
  int d = decimals;
  if (x > 0 && x < 0.5 * std::pow(10.0, -decimals)) d = std::min(8, int(std::ceil(-std::log10(x))) + 1);
  return fmt::format("{:.{}f}", x, d);
}

}  // namespace

std::string compare_table_text(const CompareDoc& doc) {
  const json& arch = doc["arch"];
  std::string s = fmt::format(
      "simulated: {} ({:.1f} TOPS peak, {:g} GB/s weight memory, {:g} GB/s host link), "
      "timing engine",
      arch["name"].get<std::string>(), num(arch["peak_tops"]), num(arch["weight_mem_gbps"]),
      num(arch["host_gbps"]));
  s += fmt::format(
      ";\n           latency per batch with the host: the program (its input and output DMA included) + {:g} "
      "us driver + the instruction download (docs/timing.md, \"Host model\")\n",
      1e6 * num(arch["driver_seconds"]));
  s += fmt::format("{:<12} {:>5}  {:<12} {:<40} {:>10} {:>11} {:>8} {:>7} {:>8}  {}\n", "workload", "batch",
                   "source", "device", "ms/batch", "inf/s", "TOPS", "% peak", "sim x", "notes");
  std::string last;
  for (const json& r : doc["rows"]) {
    const std::string group =
        fmt::format("{}@{}@{}", r["workload"].get<std::string>(), r["batch"].get<uint64_t>(), str(r, "model"));
    if (!last.empty() && group != last) s += "\n";
    last = group;
    s += fmt::format("{:<12} {:>5}  {:<12} {:<40} {:>10} {:>11.0f} {:>8} {:>7} {:>8}  {}\n",
                     r["workload"].get<std::string>(), r["batch"].get<uint64_t>(),
                     r["source"].get<std::string>(), r["device"].get<std::string>(),
                     cell(r["latency_seconds"], "{:.4f}", 1e3), num(r["inferences_per_second"]),
                     figure(r["tops"], 2), figure(r["utilization"], 1, 100),
                     figure(r["speedup_of_simulated"], 2), notes(r));
    while (s.size() > 1 && s[s.size() - 2] == ' ') s.erase(s.size() - 2, 1);  // no trailing blanks
  }
  s += "\nsource: simulated = this simulator; measured = a runner of this project (or a user's own figure); "
       "published "
       "= quoted from the citation below;\n        test-fixture = made-up numbers for tests. Rows are never "
       "combined "
       "across sources.\n"
       "sim x = simulated inferences/s / this row's at the same batch (above 1: the simulated TPU is "
       "faster); TOPS = 2 x "
       "the model's MACs per inference (this project's\n        description) x inferences/s; % peak = of the "
       "row's "
       "device peak, where known. ms/batch: the latency of one batch as the row states it.\n";
  // Rows above 100% of their device's peak: name each device's peak_source, so that the reader sees
  // a measured roof (the CPU runner's best oneDNN GEMM) rather than a broken figure.
  std::set<std::string> above;
  for (const json& r : doc["rows"])
    if (num(r.value("utilization", json())) > 1) above.insert(str(r, "device"));
  for (const std::string& device : above) {
    std::string source = "no peak_source given";
    for (const json& d : doc["devices"])
      if (str(d, "name") == device && !str(d, "peak_source").empty()) source = str(d, "peak_source");
    s += fmt::format(
        "(*) above 100% of {}'s peak: that peak is {}; TOPS count the model's MACs (a convolution's "
        "zero-padding taps included), so a workload that maps better than the peak's measurement, or "
        "skips the padding taps, goes past it, as does any row beside a roof measured while other jobs ran "
        "(its load average, where given)\n",
        device, source);
  }
  std::set<std::string> cited;
  for (const json& r : doc["rows"])
    if (!str(r, "citation").empty() && cited.insert(str(r, "citation")).second)
      s += fmt::format("published: {}\n", str(r, "citation"));
  if (!doc["ratios"].empty()) {
    s += "\npublished ratios (no absolute figure given):\n";
    for (const json& q : doc["ratios"])
      s += fmt::format("  {} / {} performance, {}: {:g}  ({})\n", str(q, "of"), str(q, "to"),
                       str(q, "workload"), num(q["value"]), str(q, "where"));
  }
  return s;
}

std::string compare_table_csv(const CompareDoc& doc) {
  std::vector<std::string> columns;
  for (const json& r : doc["rows"])
    for (auto it = r.begin(); it != r.end(); ++it)
      if (std::find(columns.begin(), columns.end(), it.key()) == columns.end()) columns.push_back(it.key());
  std::string s;
  for (size_t i = 0; i < columns.size(); ++i) s += (i ? "," : "") + columns[i];
  s += "\n";
  for (const json& r : doc["rows"]) {
    for (size_t i = 0; i < columns.size(); ++i) {
      const json v = r.value(columns[i], json());
      std::string t = v.is_null()           ? ""
                      : v.is_string()       ? v.get<std::string>()
                      : v.is_number_float() ? fmt::format("{:.9g}", v.get<double>())
                                            : v.dump();
      if (t.find_first_of(",\"\n") != std::string::npos) {
        std::string q = "\"";
        for (char c : t) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        t = q + "\"";
      }
      s += (i ? "," : "") + t;
    }
    s += "\n";
  }
  return s;
}

namespace {
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

void compare_plot(const CompareDoc& doc, const CompareArgs& a) {
  const std::string data = a.plot_prefix + ".json";
  write_text(data, doc.dump(2) + "\n");
  const std::string script =
      a.plot_script.empty() ? std::string(tpusim::source_dir()) + "/scripts/plot_compare.py" : a.plot_script;
  // Debian's python3-matplotlib belongs to /usr/bin/python3, which a python3 earlier in PATH
  // (pyenv, a venv) may not see.
  const std::string python = !a.python.empty()                ? a.python
                             : fs::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                              : "python3";
  const std::string cmd =
      fmt::format("{} {} {} --png {} --svg {}", python, shell_quote(script), shell_quote(data),
                  shell_quote(a.plot_prefix + ".png"), shell_quote(a.plot_prefix + ".svg"));
  if (std::system(cmd.c_str()) != 0)
    throw InputError(
        fmt::format("plot: `{}` failed (needs python3-matplotlib: scripts/install-deps.sh)", cmd));
  fmt::print(stderr, "wrote {}.png and {}.svg\n", a.plot_prefix, a.plot_prefix);
}

}  // namespace tpusim::tools
