// Sweep specs: TOML -> numbered points (spec.h, docs/sweeps.md).
#include "tools/sweep/spec.h"

#include <fmt/format.h>
#include <glob.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "compiler/model.h"
#include "isa/assembler.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/program.h"
#include "isa/text.h"
#include "tools/machine_check.h"

namespace fs = std::filesystem;

namespace tpusim::tools::sweep {

namespace {

constexpr uint64_t kMaxPoints = 1'000'000;
constexpr uint64_t kMaxAxisValues = 10'000;

// One assignment of a parameter (or `batch`) and the line it came from.
struct Setting {
  std::string key, text;
  int line = 0;
};
// A grid axis: `values[i]` sets every parameter of the axis (one for a plain axis, several for a
// linked one) at its i-th step.
struct Axis {
  std::string name;
  int line = 0;
  std::vector<std::vector<Setting>> values;
};

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const auto [best, best_d] = isa::nearest(word, candidates);
  return best_d <= std::max<size_t>(2, word.size() / 3) ? fmt::format(" (did you mean '{}'?)", best) : "";
}

std::vector<std::string> parameter_names() {
  std::vector<std::string> names;
  for (const sim::ParamInfo& p : sim::arch_params()) names.emplace_back(p.name);
  names.emplace_back("batch");
  for (const compiler::MapperSwitch& m : compiler::kMapperSwitches) names.push_back(fmt::format("mapper.{}", m.key));
  return names;
}

// "mapper.pack" -> "pack"; "" for a key that is not a mapper switch's.
std::string_view mapper_key(std::string_view key) {
  return key.starts_with("mapper.") ? key.substr(7) : std::string_view{};
}


bool is_parameter(std::string_view key) {
  const auto names = parameter_names();
  return std::find(names.begin(), names.end(), key) != names.end();
}

// Errors: "FILE:LINE: WHERE: KEY: VALUE: what was expected".
class Reader {
 public:
  explicit Reader(const fs::path& path) : file_(path.string()) {}

  [[noreturn]] void fail(int line, std::string_view where, std::string_view key, std::string_view value,
                         std::string_view what) const {
    std::string s = fmt::format("{}:{}: {}", file_, line, where);
    if (!key.empty()) s += fmt::format(": {}", key);
    if (!value.empty()) s += fmt::format(": {}", value);
    throw InputError(s + ": " + std::string(what));
  }

  void unknown_key(const toml::node& n, std::string_view where, std::string_view key,
                   const std::vector<std::string>& known, std::string_view what) const {
    fail(line_of(n), where, key, "",
         fmt::format("unknown {}{}; expected one of: {}", what, did_you_mean(key, known),
                     fmt::join(known, ", ")));
  }

  void check_parameter(const toml::node& n, std::string_view where, std::string_view key) const {
    if (!is_parameter(key)) {
      const auto names = parameter_names();
      fail(line_of(n), where, key, "",
           fmt::format("unknown parameter{}; `tpusim arch` lists them (and `batch`, `mapper.KEY`: "
                       "docs/sweeps.md)",
                       did_you_mean(key, names)));
    }
  }

  // A scalar value as the text set_param parses, checked against the parameter now so that a bad
  // value is an error at its line, not a failed point later.
  Setting scalar(const toml::node& n, std::string_view where, const std::string& key) const {
    Setting s{key, "", line_of(n)};
    if (auto i = n.as_integer()) s.text = std::to_string(i->get());
    else if (auto f = n.as_floating_point()) s.text = fmt::format("{}", f->get());
    else if (auto t = n.as_string()) s.text = t->get();
    else if (auto b = n.as_boolean(); b && !mapper_key(key).empty()) s.text = b->get() ? "on" : "off";
    else fail(s.line, where, key, render(n), mapper_key(key).empty() ? "expected a number" : "expected on or off");
    return checked(std::move(s), where);
  }

  Setting checked(Setting s, std::string_view where) const {
    const std::string& key = s.key;
    if (key == "batch") {
      parse_batch(s, where);
    } else if (const std::string_view m = mapper_key(key); !m.empty()) {
      compiler::LowerOptions scratch;
      try {
        compiler::set_mapper_switch(scratch, m, s.text, where);
      } catch (const InputError&) {
        fail(s.line, where, key, s.text, "expected on or off (true/false, 1/0)");
      }
    } else {
      sim::Arch scratch;
      try {
        sim::set_param(scratch, key, s.text, fmt::format("{}:{}: {}", file_, s.line, where));
      } catch (const InputError& e) {
        throw InputError(fmt::format("{} (a parameter's units and range: `tpusim arch`)", e.what()));
      }
      check_range(scratch, s, where);
    }
    return s;
  }

  // The parameter's own range (the `range` column of `tpusim arch`: array_rows = 0, clock_mhz =
  // 2e6) is an error at its line now; rules between parameters (ub_bytes a multiple of the row
  // width) wait for the point, whose other parameters may satisfy them. `scratch` is tpu-v1 with
  // only this parameter set, and validate checks every range before any rule between parameters,
  // so a range message about this key comes first when there is one.
  void check_range(const sim::Arch& scratch, const Setting& s, std::string_view where) const {
    if (const auto v = sim::arch_violation(scratch); v && v->range && v->key == s.key)
      fail(s.line, where, s.key, s.text, fmt::format("{}; `tpusim arch` gives each parameter's units and range", v->reason));
  }

  uint64_t parse_batch(const Setting& s, std::string_view where) const {
    uint64_t v = 0;
    const char* end = s.text.data() + s.text.size();
    const auto [ptr, ec] = std::from_chars(s.text.data(), end, v);
    // The front ends' own limit (compiler::kMaxBatch), here rather than as a failed point at run time.
    if (ec != std::errc() || ptr != end || v == 0 || v > compiler::kMaxBatch)
      fail(s.line, where, "batch", s.text,
           fmt::format("expected a whole number of inferences 1..{} (the largest batch a model takes)",
                       compiler::kMaxBatch));
    return v;
  }

  static std::string render(const toml::node& n) {
    std::ostringstream os;
    if (n.is_table()) return "a table";
    if (n.is_array()) return "an array";
    n.visit([&](const auto& v) { os << v; });
    return os.str();
  }

  // An axis's values: an array of scalars, or a range {from, to, step} / {from, to, times}.
  std::vector<Setting> values(const toml::node& n, std::string_view where, const std::string& key) const {
    std::vector<Setting> out;
    if (const toml::array* a = n.as_array()) {
      if (a->empty()) fail(line_of(n), where, key, "[]", "expected at least one value");
      for (const toml::node& v : *a) out.push_back(scalar(v, where, key));
    } else if (const toml::table* t = n.as_table()) {
      out = range(*t, where, key);
    } else {
      fail(line_of(n), where, key, render(n),
           "expected an array of values such as [64, 128, 256] or a range such as {from = 8, to = 64, times "
           "= 2}");
    }
    if (out.size() > kMaxAxisValues)
      fail(line_of(n), where, key, "",
           fmt::format("{} values; at most {} per axis", out.size(), kMaxAxisValues));
    return out;
  }

  std::vector<Setting> range(const toml::table& t, std::string_view where, const std::string& key) const {
    const std::vector<std::string> known = {"from", "to", "step", "times"};
    for (const auto& [k, v] : t)
      if (std::find(known.begin(), known.end(), k.str()) == known.end())
        unknown_key(v, fmt::format("{}: {}", where, key), k.str(), known, "range key");
    const auto num = [&](std::string_view k) -> std::optional<double> {
      const toml::node* n = t.get(k);
      if (!n) return std::nullopt;
      if (!n->is_number())
        fail(line_of(*n), where, fmt::format("{}.{}", key, k), render(*n), "expected a number");
      return n->value<double>();
    };
    const auto from = num("from"), to = num("to"), step = num("step"), times = num("times");
    const int line = line_of(t);
    if (!from || !to || step.has_value() == times.has_value())
      fail(line, where, key, "a table",
           "a range needs from, to and one of step (adds) or times (multiplies)");
    if (*to < *from)
      fail(line, where, key, "", fmt::format("range from {} to {}: to is below from", *from, *to));
    if (step && !(*step > 0))
      fail(line, where, fmt::format("{}.step", key), fmt::format("{}", *step), "expected > 0");
    if (times && !(*times > 1 && *from > 0))
      fail(line, where, fmt::format("{}.times", key), fmt::format("{}", *times),
           "expected > 1 (and from > 0)");
    const bool integral = std::all_of(known.begin(), known.end(), [&](std::string_view k) {
      const toml::node* n = t.get(k);
      return !n || n->is_integer();
    });
    std::vector<Setting> out;
    for (uint64_t i = 0; out.size() <= kMaxAxisValues; ++i) {
      const double v = step ? *from + double(i) * *step : *from * std::pow(*times, double(i));
      if (v > *to * (1 + 1e-12)) break;
      const std::string text =
          integral ? std::to_string(static_cast<uint64_t>(std::llround(v))) : fmt::format("{}", v);
      out.push_back(checked(Setting{key, text, line}, where));
    }
    return out;
  }

 private:
  std::string file_;
};

const toml::table& table_at(const Reader& r, const toml::node& n, std::string_view where) {
  if (!n.is_table()) r.fail(line_of(n), where, "", Reader::render(n), "expected a table");
  return *n.as_table();
}

// Keys in the order they appear in the file (toml++ tables iterate alphabetically).
std::vector<std::pair<std::string, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  for (const auto& [k, v] : t) out.emplace_back(k.str(), &v);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto &sa = a.second->source().begin, &sb = b.second->source().begin;
    return std::pair(sa.line, sa.column) < std::pair(sb.line, sb.column);
  });
  return out;
}

// A spec's keys with the `mapper` table flattened: TOML reads `mapper.pack = ...` as a table
// `mapper` holding `pack`; each of its members is a key "mapper.pack" of its own.
std::vector<std::pair<std::string, const toml::node*>> flatten_mapper(
    std::vector<std::pair<std::string, const toml::node*>> keys) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  for (auto& [k, v] : keys) {
    if (k == "mapper" && v->is_table()) {
      for (auto& [mk, mv] : in_file_order(*v->as_table())) out.emplace_back("mapper." + mk, mv);
    } else {
      out.emplace_back(std::move(k), v);
    }
  }
  return out;
}

std::vector<Axis> read_grid(const Reader& r, const toml::table& grid) {
  std::vector<Axis> axes;
  for (const auto& [key, node] : flatten_mapper(in_file_order(grid))) {
    Axis axis{key, line_of(*node), {}};
    const bool linked = !is_parameter(key) && node->is_table() && !node->as_table()->contains("from");
    if (!linked) {
      r.check_parameter(*node, "grid", key);
      for (Setting& s : r.values(*node, "grid", key)) axis.values.push_back({std::move(s)});
    } else {
      const std::string where = fmt::format("grid.{}", key);
      for (const auto& [param, values] : in_file_order(*node->as_table())) {
        r.check_parameter(*values, where, param);
        std::vector<Setting> column = r.values(*values, where, param);
        if (axis.values.empty()) axis.values.resize(column.size());
        if (column.size() != axis.values.size())
          r.fail(
              line_of(*values), where, param, "",
              fmt::format("{} values, but the linked axis's first parameter has {}; linked parameters step "
                          "together and need as many values each",
                          column.size(), axis.values.size()));
        for (size_t i = 0; i < column.size(); ++i) axis.values[i].push_back(std::move(column[i]));
      }
      if (axis.values.empty()) r.fail(axis.line, where, "", "", "a linked axis needs at least one parameter");
    }
    // A parameter on two axes: the later would overwrite the earlier and collapse points.
    for (const Setting& s : axis.values.empty() ? std::vector<Setting>{} : axis.values.front())
      for (const Axis& other : axes)
        for (const Setting& o : other.values.empty() ? std::vector<Setting>{} : other.values.front())
          if (o.key == s.key)
            r.fail(s.line, axis.name == s.key ? "grid" : "grid." + axis.name, s.key, "",
                   fmt::format("also varied by the axis at line {}; a parameter may vary on one axis only",
                               other.line));
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::vector<Setting> read_settings(const Reader& r, const toml::table& t, const std::string& where) {
  std::vector<Setting> out;
  for (const auto& [key, node] : flatten_mapper(in_file_order(t))) {
    r.check_parameter(*node, where, key);
    out.push_back(r.scalar(*node, where, key));
  }
  return out;
}

std::vector<std::string> expand_glob(const fs::path& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;  // glob sorts
}

// The machine a program names (its `.arch` metadata: a preset, then the parameters it lists), as
// `tpusim run PROG` runs it: a program compiled for a 64 x 256 array with 256 KiB sweeps from there.
sim::Arch program_machine(const Reader& r, const Workload& w, int line) {
  try {
    const isa::Program p = w.path.extension() == ".s" ? isa::assemble_file(w.path) : isa::load_program(w.path);
    return tools::program_machine(p.arch, w.path.string());
  } catch (const InputError& e) {
    r.fail(line, "sweep", "workloads", w.file, e.what());
  }
}

// A description that cannot be read (a syntax error, no [model] table, an empty file) is an error of
// the spec, at the line that names it, not a failed point on every machine: read as the timing
// engine reads it (no weights), at `batch`, the smallest its points ask for (nullopt: one of them
// keeps the description's own), so that a description whose own batch is over a limit (the front
// ends' compiler::kMaxBatch, the compile's memory estimate) sweeps at the batches asked for.
void check_description(const Reader& r, const Workload& w, int line, std::optional<uint64_t> batch) {
  compiler::LoadOptions o;
  o.timing_only = true;
  o.batch = batch;
  try {
    (void)compiler::load_model(w.path, o);
  } catch (const InputError& e) {
    r.fail(line, "sweep", "workloads", w.file, e.what());
  }
}

void add_workload(const Reader& r, Spec& spec, const std::string& file, const std::string& name, int line) {
  const fs::path base = spec.path.parent_path();
  const bool pattern = file.find_first_of("*?[") != std::string::npos;
  std::vector<std::string> paths = pattern ? expand_glob(base / file) : std::vector{(base / file).string()};
  if (pattern && paths.empty()) r.fail(line, "sweep", "workloads", file, "no file matches the pattern");
  if (pattern && !name.empty()) r.fail(line, "sweep", "workloads", file, "a pattern cannot take a name");
  for (const std::string& p : paths) {
    Workload w;
    w.path = p;
    w.file = pattern ? fs::path(file).parent_path().append(fs::path(p).filename().string()).string() : file;
    w.name = name.empty() ? fs::path(p).stem().string() : name;
    w.is_model = compiler::is_model_path(w.path);
    const std::string ext = w.path.extension().string();
    if (!w.is_model && ext != ".tpu" && ext != ".s")
      r.fail(line, "sweep", "workloads", w.file,
             "expected a model description (.toml), a SCALE-Sim topology (.csv), a program (.tpu) or "
             "assembly (.s)");
    std::error_code ec;
    if (!fs::is_regular_file(w.path, ec))
      r.fail(line, "sweep", "workloads", w.file, fmt::format("no such file ({})", w.path.string()));
    if (!w.is_model) w.machine = program_machine(r, w, line);
    w.line = line;  // (a description is read once the points' batches are known: check_descriptions)
    for (const Workload& o : spec.workloads)
      if (o.name == w.name)
        r.fail(
            line, "sweep", "workloads", w.file,
            fmt::format("two workloads named '{}' ({} and {}); name one: {{ path = \"{}\", name = \"...\" }}",
                        w.name, o.file, w.file, w.file));
    spec.workloads.push_back(std::move(w));
  }
}

void read_workloads(const Reader& r, const toml::node& n, Spec& spec) {
  const toml::array* a = n.as_array();
  if (!a || a->empty())
    r.fail(line_of(n), "sweep", "workloads", Reader::render(n),
           "expected a list of model descriptions or programs, such as [\"../tpu-v1/mlp0.toml\"]");
  for (const toml::node& e : *a) {
    if (auto s = e.as_string()) {
      add_workload(r, spec, s->get(), "", line_of(e));
    } else if (auto t = e.as_table()) {
      const toml::node* path = t->get("path");
      const toml::node* name = t->get("name");
      for (const auto& [k, v] : *t)
        if (k != "path" && k != "name")
          r.unknown_key(v, "sweep: workloads", k.str(), {"path", "name"}, "key");
      if (!path || !path->is_string() || (name && !name->is_string()))
        r.fail(line_of(e), "sweep", "workloads", "a table", "expected { path = \"FILE\", name = \"NAME\" }");
      add_workload(r, spec, path->as_string()->get(), name ? name->as_string()->get() : "", line_of(e));
    } else {
      r.fail(line_of(e), "sweep", "workloads", Reader::render(e), "expected a file name");
    }
  }
}

sim::Arch base_arch(const Reader& r, const toml::node& n, const fs::path& spec_path) {
  if (!n.is_string())
    r.fail(line_of(n), "sweep", "arch", Reader::render(n), "expected a preset name or a .json file");
  const std::string text = n.as_string()->get();
  try {
    if (text.ends_with(".json")) return sim::load_arch_file(spec_path.parent_path() / text);
    return sim::arch_preset(text);
  } catch (const InputError& e) {
    r.fail(line_of(n), "sweep", "arch", text, e.what());
  }
}

void read_sweep_table(const Reader& r, const toml::table& t, Spec& spec, sim::Arch& arch) {
  const std::vector<std::string> known = {"name", "engine", "arch", "workloads", "max_cycles"};
  for (const auto& [k, v] : t)
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      r.unknown_key(v, "sweep", k.str(), known, "key");
  if (const toml::node* n = t.get("name")) {
    if (!n->is_string() || n->as_string()->get().empty())
      r.fail(line_of(*n), "sweep", "name", Reader::render(*n), "expected a non-empty string");
    spec.name = n->as_string()->get();
  }
  if (const toml::node* n = t.get("engine")) {
    const std::string e = n->is_string() ? n->as_string()->get() : Reader::render(*n);
    try {
      spec.engine = sim::parse_engine(e);  // the engines' names have one home
    } catch (const InputError& err) {
      r.fail(line_of(*n), "sweep", "engine", e, err.what());
    }
  }
  if (const toml::node* n = t.get("max_cycles")) {
    if (!n->is_integer() || n->as_integer()->get() < 0)
      r.fail(line_of(*n), "sweep", "max_cycles", Reader::render(*n),
             "expected a whole number of cycles (0: no limit)");
    spec.max_cycles = static_cast<uint64_t>(n->as_integer()->get());
  }
  if (const toml::node* n = t.get("arch")) {
    arch = base_arch(r, *n, spec.path);
    if (n->as_string()->get().ends_with(".json")) spec.arch_file = spec.path.parent_path() / n->as_string()->get();
  }
  const toml::node* w = t.get("workloads");
  if (!w) r.fail(line_of(t), "sweep", "workloads", "", "missing: the models or programs to run");
  read_workloads(r, *w, spec);
}

// Applies settings (already checked) to a point.
void apply(const std::vector<Setting>& settings, Point& p) {
  for (const Setting& s : settings) {
    if (s.key == "batch") p.batch = std::stoull(s.text);
    else if (const std::string_view m = mapper_key(s.key); !m.empty()) compiler::set_mapper_switch(p.mapper, m, s.text, "sweep");
    else sim::set_param(p.arch, s.key, s.text, "sweep");
  }
}

// Mapper switches appear only as meta.mapper records them (a switch away from its default, or one
// whose default is the machine's, pieces, host_loop or partial, given either way: compiler::describe), so
// that the keys of every other point stay as they were before the switches existed (results
// stored then still resume).
std::string point_key(const Spec& spec, const Point& p) {
  const std::string mapper = compiler::describe(p.mapper);
  return fmt::format("{}|{}|{}|batch={}|{}{}", p.workload->name, p.workload->file,
                     sim::engine_name(spec.engine), p.batch ? std::to_string(*p.batch) : "-",
                     mapper.empty() ? "" : fmt::format("mapper={}|", mapper), sim::arch_to_json(p.arch).dump());
}

struct Expansion {
  sim::Arch arch;
  bool arch_given = false;  // [sweep] arch: every point starts from it, programs' included
  std::vector<Setting> base;
  std::vector<Axis> axes;
  std::vector<std::vector<Setting>> list;
};

void expand(const Reader& r, const Expansion& x, Spec& spec) {
  std::vector<std::vector<Setting>> combos;
  uint64_t grid = x.axes.empty() ? 0 : 1;
  bool too_many = false;  // checked before each product: five axes of 8192 values wrap to 0
  for (const Axis& a : x.axes) {
    if (a.values.size() && grid > kMaxPoints / a.values.size()) too_many = true;
    grid *= too_many ? 1 : a.values.size();
  }
  const uint64_t per_workload = std::max<uint64_t>(1, grid + x.list.size());
  if (too_many || grid > kMaxPoints || per_workload > kMaxPoints ||
      per_workload * spec.workloads.size() > kMaxPoints)
    r.fail(1, "grid", "", "",
           fmt::format("more than {} points; split the sweep into several specs", kMaxPoints));
  for (uint64_t i = 0; i < grid; ++i) {
    std::vector<Setting> c;
    uint64_t rest = i;
    for (size_t a = x.axes.size(); a-- > 0;) {  // the last axis varies fastest
      const auto& v = x.axes[a].values[rest % x.axes[a].values.size()];
      rest /= x.axes[a].values.size();
      c.insert(c.begin(), v.begin(), v.end());
    }
    combos.push_back(std::move(c));
  }
  combos.insert(combos.end(), x.list.begin(), x.list.end());
  if (combos.empty()) combos.emplace_back();
  std::set<std::string> seen;
  for (const Workload& w : spec.workloads) {
    for (const auto& c : combos) {
      Point p;
      p.workload = &w;
      p.arch = x.arch_given || w.is_model ? x.arch : w.machine;
      apply(x.base, p);
      apply(c, p);
      if (p.batch && !w.is_model) {
        const int line = c.empty() ? x.base.front().line : c.front().line;
        r.fail(line, "sweep", "batch", std::to_string(*p.batch),
               fmt::format("batch applies to models, and workload {} is a program", w.file));
      }
      if (p.mapper != compiler::LowerOptions{} && !w.is_model) {  // (any switch given, as tpusim run refuses --mapper)
        const int line = c.empty() ? x.base.front().line : c.front().line;
        r.fail(line, "sweep", "mapper", compiler::describe_given(p.mapper),
               fmt::format("mapper switches apply to models, and workload {} is a program", w.file));
      }
      p.key = point_key(spec, p);
      if (!seen.insert(p.key).second) {
        ++spec.duplicates;
        continue;
      }
      p.index = spec.points.size();
      spec.points.push_back(std::move(p));
    }
  }
}

// Each description read (check_description) at the smallest batch its points ask for.
void check_descriptions(const Reader& r, const Spec& spec) {
  for (const Workload& w : spec.workloads) {
    if (!w.is_model) continue;
    std::optional<uint64_t> batch;
    bool own = false;  // a point keeps the description's own batch
    for (const Point& p : spec.points)
      if (p.workload == &w) {
        if (!p.batch) own = true;
        else if (!batch || *p.batch < *batch) batch = p.batch;
      }
    check_description(r, w, w.line, own ? std::nullopt : batch);
  }
}

}  // namespace

Spec parse_spec(const std::string& text, const fs::path& path) {
  Spec spec;
  spec.path = path;
  spec.text = text;
  spec.name = path.stem().string();
  const Reader r(path);
  toml::table doc;
  try {
    doc = toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", path.string(), e.source().begin.line,
                                 e.source().begin.column, e.description()));
  }
  const std::vector<std::string> known = {"sweep", "set", "grid", "points"};
  for (const auto& [k, v] : doc)
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      r.unknown_key(v, "spec", k.str(), known, "table");
  const toml::node* sweep = doc.get("sweep");
  if (!sweep) r.fail(1, "[sweep]", "", "", "missing: a spec needs a [sweep] table with its workloads");
  Expansion x;
  read_sweep_table(r, table_at(r, *sweep, "[sweep]"), spec, x.arch);
  x.arch_given = table_at(r, *sweep, "[sweep]").contains("arch");
  if (const toml::node* n = doc.get("set")) x.base = read_settings(r, table_at(r, *n, "[set]"), "set");
  if (const toml::node* n = doc.get("grid")) x.axes = read_grid(r, table_at(r, *n, "[grid]"));
  if (const toml::node* n = doc.get("points")) {
    const toml::array* a = n->as_array();
    if (!a) r.fail(line_of(*n), "[[points]]", "", "", "expected an array of tables: [[points]]");
    for (const toml::node& e : *a) x.list.push_back(read_settings(r, table_at(r, e, "[[points]]"), "points"));
  }
  expand(r, x, spec);
  check_descriptions(r, spec);
  return spec;
}

Spec load_spec(const fs::path& path) {
  return parse_spec(io::read_text_file(path, io::kMaxConfigBytes, "a sweep spec (TOML)"), path);
}

std::string describe_key(const std::string& key) {
  // workload|file|engine|batch=B|{arch JSON}: the JSON may hold '|' only inside its strings.
  std::vector<std::string> parts;
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t bar = key.find('|', at);
    if (bar == std::string::npos) return key.substr(0, 200);
    parts.push_back(key.substr(at, bar - at));
    at = bar + 1;
  }
  std::string mapper;  // "mapper=pack=off|" before the JSON when a switch is off
  if (key.compare(at, 7, "mapper=") == 0) {
    const size_t bar = key.find('|', at);
    if (bar == std::string::npos) return key.substr(0, 200);
    mapper = fmt::format(", mapper {}", key.substr(at + 7, bar - at - 7));
    at = bar + 1;
  }
  std::string machine;
  try {
    const nlohmann::json arch = nlohmann::json::parse(key.substr(at));
    sim::Arch a;
    for (const auto& [k, v] : arch.items())
      sim::set_param(a, k, v.is_string() ? v.get<std::string>() : v.dump(), "key");
    machine = sim::machine_name(a);
  } catch (const std::exception&) {
    machine = "an architecture this tpusim cannot read";
  }
  return fmt::format("workload {} ({}), engine {}, {}, {}{}", parts[0], parts[1], parts[2], parts[3], machine, mapper);
}

Shard parse_shard(const std::string& text) {
  Shard s;
  const size_t slash = text.find('/');
  const auto number = [&](std::string_view t, uint64_t& out) {
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() && ptr == t.data() + t.size() && !t.empty();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), s.index) ||
      !number(std::string_view(text).substr(slash + 1), s.count) || s.count == 0 || s.index >= s.count)
    throw InputError(
        fmt::format("--shard: '{}': expected K/N with 0 <= K < N, such as 0/4 (Slurm: "
                    "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)",
                    text));
  return s;
}

}  // namespace tpusim::tools::sweep
