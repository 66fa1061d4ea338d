// Point order and placement for sweep workers (schedule.h).
#include "tools/sweep/schedule.h"

#include <algorithm>
#include <numeric>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/reference.h"

namespace tpusim::tools::sweep {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / std::max<uint64_t>(b, 1); }

// What a model's shapes tell about its cost on a machine.
struct ModelShape {
  bool parsed = false, needs_data = false;
  uint64_t weights = 0;
  struct Matmul {
    uint64_t k = 0, n = 0, kernel = 1, rows = 0, repeats = 1, per_step = 1;  // rows: output pixels x batch
  };
  std::vector<Matmul> matmuls;
};

ModelShape shape_of(const std::filesystem::path& path, std::optional<uint64_t> batch) {
  ModelShape s;
  const std::string ext = path.extension().string();
  if (ext != ".toml" && ext != ".csv") return s;  // an ONNX model holds its weights: not read twice
  try {
    compiler::LoadOptions o;
    o.batch = batch;
    o.timing_only = true;
    const compiler::Model m = compiler::load_model(path, o);
    s.needs_data = compiler::timing_needs_data(m);
    for (const compiler::Layer& l : m.layers) {
      if (l.type != compiler::LayerType::dense && l.type != compiler::LayerType::conv2d &&
          l.type != compiler::LayerType::lstm)
        continue;
      const compiler::Shape& in = compiler::source_shape(m, l, l.inputs.at(0));
      s.weights += compiler::weight_count(l, in);
      if (l.type == compiler::LayerType::lstm) {
        // Per step and stacked layer: four gates, each reading x (the input's or the layer
        // below's h) and h, batch rows.
        for (uint64_t st = 0; st < l.stack; ++st)
          s.matmuls.push_back({(st ? l.units : in.c) + l.units, 4 * l.units, 1, m.batch, in.pixels(), 1});
      } else {
        s.matmuls.push_back({in.c, l.units, l.kernel_h * l.kernel_w, l.out.pixels() * m.batch, 1, 1});
      }
    }
    s.parsed = true;
  } catch (const std::exception&) {
    // Left to the worker, which reports the error as the point's.
  }
  return s;
}

PointCost estimate(const ModelShape& s, const Point& p, bool full_compile) {
  PointCost c;
  const sim::Arch& a = p.arch;
  if (!s.parsed) {
    c.run = 0.05;
    c.prepare = p.workload->is_model ? 0.05 : 0;
    return c;
  }
  // Matmul instructions (one per weight tile and chunk of accumulator rows: a pass takes half the
  // accumulators when its rows do not fit them all) and distinct weight tiles.
  double matmuls = 0, tiles = 0;
  for (const ModelShape::Matmul& m : s.matmuls) {
    const double t = double(m.kernel) * double(div_up(m.k, a.array_rows)) * double(div_up(m.n, a.array_cols));
    const uint64_t chunks = m.rows <= a.acc_entries ? 1 : div_up(m.rows, std::max<uint64_t>(a.acc_entries / 2, 1));
    tiles += t;
    matmuls += t * double(chunks) * double(m.repeats);
  }
  // Seconds, roughly as measured on the paper apps (CNN1 on 64 x 64 with 256 accumulator rows:
  // 0.56M matmuls; its weight tiles are handled by every try of the lowering's piece search).
  c.run = 0.003 + 1.2e-6 * matmuls + 6e-6 * tiles;
  c.prepare = 0.005 + (s.needs_data || full_compile ? 1.2e-8 : 1e-9) * double(s.weights);
  return c;
}

}  // namespace

std::string model_key(const std::string& path, std::optional<uint64_t> batch, bool concat_inplace) {
  return path + "\n" + (batch ? std::to_string(*batch) : "") + (concat_inplace ? "\nconcat_inplace" : "");
}

std::string model_key(const Point& p) {
  return model_key(p.workload->path.string(), p.batch, compiler::concat_inplace(p.mapper));
}

std::vector<PointCost> estimate_costs(const Spec& spec, const std::vector<const Point*>& todo) {
  std::map<std::string, ModelShape> shapes;
  std::vector<PointCost> out;
  out.reserve(todo.size());
  for (const Point* p : todo) {
    // One key per model a worker prepares and keeps (workers.cpp run_request keys its cache the same way).
    const std::string key = model_key(*p);
    auto it = shapes.find(key);
    if (it == shapes.end())
      it = shapes.emplace(key, p->workload->is_model ? shape_of(p->workload->path, p->batch) : ModelShape{}).first;
    PointCost c = estimate(it->second, *p, spec.full_compile || spec.engine != sim::Engine::timing);
    c.model = p->workload->is_model ? key : "";
    out.push_back(std::move(c));
  }
  return out;
}

Scheduler::Scheduler(std::vector<const Point*> todo, std::vector<PointCost> costs, size_t workers)
    : prepared_(workers) {
  for (size_t i = 0; i < todo.size(); ++i) items_.push_back({todo[i], costs.at(i)});
  // Longest first; among equals, in point order.
  std::stable_sort(items_.begin(), items_.end(),
                   [](const Item& a, const Item& b) { return a.cost.run > b.cost.run; });
  for (const Item& it : items_) {
    remaining_[it.cost.model] += it.cost.run;
    remaining_all_ += it.cost.run;
  }
  left_ = items_.size();
}

void Scheduler::take(size_t w, size_t i) {
  Item& it = items_[i];
  it.taken = true;
  --left_;
  remaining_[it.cost.model] -= it.cost.run;
  remaining_all_ -= it.cost.run;
  if (!it.cost.model.empty()) prepared_[w].insert(it.cost.model);
}

const Point* Scheduler::next(size_t w, bool others_busy) {
  if (left_ == 0) return nullptr;
  const auto held_elsewhere = [&](const std::string& model) {
    if (model.empty() || prepared_[w].contains(model)) return false;
    for (size_t o = 0; o < prepared_.size(); ++o)
      if (o != w && prepared_[o].contains(model)) return true;
    return false;
  };
  // The dearest point (its preparation counted where this worker has not prepared its model)
  // among those of models this worker holds or no worker holds.
  size_t best = items_.size(), steal = items_.size();
  double best_cost = -1;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    if (it.taken) continue;
    if (held_elsewhere(it.cost.model)) {
      if (steal == items_.size()) steal = i;  // (longest first)
      continue;
    }
    const double cost = it.cost.run + (prepared_[w].contains(it.cost.model) ? 0 : it.cost.prepare);
    if (cost > best_cost) best = i, best_cost = cost;
  }
  if (best < items_.size()) {
    take(w, best);
    return items_[best].point;
  }
  // Only points of models other workers hold: take the longest when preparing its model here
  // costs less than what is left of that model's points (the holder would run them all in
  // turn), or when no other worker is running anything.
  const Item& it = items_[steal];
  if (others_busy && it.cost.prepare + it.cost.run >= remaining_[it.cost.model]) return nullptr;
  take(w, steal);
  return it.point;
}

const Point* Scheduler::queued(size_t w, const Point* running) {
  // The other workers must have work for as long as w's current point runs (at most its estimate;
  // their own running points not counted), or one of them could be left idle while this point waits.
  const auto r = std::find_if(items_.begin(), items_.end(), [&](const Item& it) { return it.point == running; });
  const double others_need = (r == items_.end() ? 0 : r->cost.run) * double(prepared_.size() - 1);
  for (size_t i = 0; i < items_.size(); ++i) {  // (longest first)
    const Item& it = items_[i];
    if (!it.taken && (it.cost.model.empty() || prepared_[w].contains(it.cost.model))) {
      if (remaining_all_ - it.cost.run < others_need) return nullptr;
      take(w, i);
      return it.point;
    }
  }
  return nullptr;
}

void Scheduler::put_back(const Point* p) {
  for (Item& it : items_)
    if (it.point == p && it.taken) {
      it.taken = false;
      ++left_;
      remaining_[it.cost.model] += it.cost.run;
      remaining_all_ += it.cost.run;
      return;
    }
}

void Scheduler::restart(size_t w) { prepared_.at(w).clear(); }

}  // namespace tpusim::tools::sweep
