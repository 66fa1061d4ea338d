// Point order and placement for sweep workers (schedule.h).
#include "tools/sweep/schedule.h"

#include <algorithm>
#include <numeric>
#include <variant>

#include "compiler/compile.h"
#include "compiler/lower.h"
#include "compiler/model.h"
#include "compiler/reference.h"
#include "sim/parallel.h"

namespace tpusim::tools::sweep {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / std::max<uint64_t>(b, 1); }

// What a model's shapes tell about its cost on a machine: its weights (the preparation's cost),
// and the quantized graph a timing-only compile lowers (compiler::uncalibrated_graph: no float run),
// whose matmuls, packing (compiler::packing_for) and pieces (compiler::pieces) the compiler's own
// rules give per machine.
struct ModelShape {
  bool parsed = false, needs_data = false;
  uint64_t weights = 0;
  compiler::QGraph graph;
  compiler::Model model;  // (quantized again for a point that keeps concats as parts)
};

ModelShape shape_of(const std::filesystem::path& path, std::optional<uint64_t> batch, const compiler::LowerOptions& mapper) {
  ModelShape s;
  const std::string ext = path.extension().string();
  if (ext != ".toml" && ext != ".csv") return s;  // an ONNX model holds its weights: not read twice
  try {
    compiler::LoadOptions o;
    o.batch = batch;
    o.timing_only = true;
    compiler::Model m = compiler::load_model(path, o);
    s.needs_data = compiler::timing_needs_data(m);
    for (const compiler::Layer& l : m.layers)
      if (l.type == compiler::LayerType::dense || l.type == compiler::LayerType::conv2d ||
          compiler::is_recurrent(l.type))
        s.weights += compiler::weight_count(l, compiler::source_shape(m, l, l.inputs.at(0)));
    s.model = m;
    s.graph = compiler::uncalibrated_graph(std::move(m), mapper);
    s.parsed = true;
  } catch (const std::exception&) {
    // Left to the worker, which reports the error as the point's.
  }
  return s;
}

// The instructions a matmul op's lowering emits on a machine for a piece of `piece` samples, as
// compiler/lower.cpp emits them: matmul instructions (one per weight tile and chunk of
// accumulator rows, compiler::pass_budget; a packed convolution one per output row and kernel-row
// tile, compiler::packing_for, its chunks by compiler::acc_budget), distinct weight tiles (an op whose seeded weights another op
// shares, an LSTM gate at each step, counted once: `shared`), and activates (one per chunk and N
// tile; a packed convolution's one per group of pixels of each output row, which it scatters: on a
// wide array, where narrow convolutions pack several pixels a vector, CNN1's activates outnumber
// its matmuls).
struct Emitted {
  double matmuls = 0, tiles = 0, activates = 0;
  uint64_t packed = 0;  // convolutions packed
};

Emitted emitted(const compiler::QGraph& g, const compiler::MatmulOp& m, const Point& p,
                const compiler::LowerOptions& mapper, uint64_t piece, bool shared) {
  const sim::Arch& a = p.arch;
  const compiler::Shape& os = g.tensors.at(m.output.tensor).shape;
  const uint64_t rows = (m.output.pixels ? m.output.pixels : os.pixels()) * piece;
  const uint64_t n_tiles = div_up(m.n, a.array_cols);
  if (const std::optional<compiler::Packing> pk = compiler::packing_for(g, m, a, mapper, piece)) {
    const uint64_t chunks = div_up(rows, compiler::acc_budget(rows, a));
    const uint64_t row_tiles = div_up(pk->kernel_rows, pk->rows), groups = div_up(os.w, pk->p);
    const uint64_t nt = pk->p > 1 ? 1 : n_tiles;
    return {double(nt * row_tiles * os.h * (pk->tail ? 2 : 1)), shared ? 0 : double(nt * row_tiles),
            double(pk->p > 1 ? os.h * groups : chunks * nt), 1};
  }
  uint64_t k_tiles = 0;  // per input (a concat's parts read one by one)
  for (const compiler::View& v : m.inputs) k_tiles += div_up(g.tensors.at(v.tensor).shape.c, a.array_rows);
  // (the kernel positions with a tap: MatmulOp::taps; the others' tiles are not computed)
  const double t = double(std::max<uint64_t>(1, m.taps_in_rows(0, m.kernel_h))) * double(k_tiles) * double(n_tiles);
  // The pass budget's inputs as lower() has them (Lowering::pass_budget): the N tiles' activation
  // cycles a row, and what a tile switched in again costs: the mean fetch of its stored box (each K
  // tile's rows x each N tile's columns, partial tiles fetched as their box) and the shift a matmul
  // of V vectors leaves unhidden (array_rows + Arch::shift_after_switch() - V,
  // Lowering::unhidden_shift).
  uint64_t drain = 0;
  double fetch = 0, boxes = 0;
  for (uint64_t j = 0; j < m.n; j += a.array_cols) {
    const uint64_t cols = std::min<uint64_t>(a.array_cols, m.n - j);
    drain += div_up(cols, a.activation_lanes);
    for (const compiler::View& v : m.inputs) {
      const uint64_t c = g.tensors.at(v.tensor).shape.c;
      for (uint64_t k = 0; k < c; k += a.array_rows, boxes += 1)
        fetch += double(sim::transfer_cycles(std::min<uint64_t>(a.array_rows, c - k) * cols, a.weight_mem_gbps, a.clock_mhz));
    }
  }
  if (boxes > 0) fetch /= boxes;
  const auto refetch = [&](double v) {
    return fetch + std::max(0.0, double(a.array_rows + a.shift_after_switch()) - v);
  };
  const uint64_t chunks = div_up(rows, compiler::pass_budget(rows, uint64_t(t), drain, refetch, a));
  return {t * double(chunks), shared ? 0 : t, double(chunks * n_tiles), 0};
}

PointCost estimate(const ModelShape& s, const Point& p, bool full_compile) {
  PointCost c;
  uint64_t n = 1;
  bool lowers = s.parsed;
  // The graph the point's worker lowers: the model's, or where the lowering refuses a concat
  // written in place (compiler::ConcatInHost: its joined tensor would be held in host memory) and
  // the mapper's concat_inplace is not given, the model quantized again with that concat kept as
  // parts, as the worker does (compiler::concats_kept_as_parts, one concat at a time).
  compiler::LowerOptions mapper = p.mapper;
  compiler::QGraph as_parts;
  const compiler::QGraph* g = &s.graph;
  while (lowers) {
    try {
      n = compiler::pieces(*g, p.arch, mapper);
      break;
    } catch (const compiler::ConcatInHost& e) {
      std::vector<std::string>& parts = mapper.concats_as_parts;
      if (mapper.concat_inplace || std::find(parts.begin(), parts.end(), e.concat) != parts.end()) lowers = false;
      parts.push_back(e.concat);
      if (lowers) as_parts = compiler::uncalibrated_graph(s.model, mapper), g = &as_parts;
    } catch (const std::exception&) {
      lowers = false;  // (the point fails in the worker, which reports why)
    }
  }
  if (!lowers) {
    c.run = 0.05;
    c.prepare = p.workload->is_model ? 0.05 : 0;
    return c;
  }
  // Per piece (every piece emits its own instructions; the weight tiles are the same).
  const uint64_t piece = div_up(g->batch, n);
  Emitted e;
  std::set<int> weights;  // seeded weights counted already (compiler::MatmulOp::weight_id)
  for (const compiler::QOp& op : g->ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op)) {
      const bool shared = m->weight_id >= 0 && !weights.insert(m->weight_id).second;
      const Emitted l = emitted(*g, *m, p, mapper, piece, shared);
      e.matmuls += l.matmuls * double(n), e.tiles += l.tiles, e.activates += l.activates * double(n);
      e.packed += l.packed;
    }
  // Seconds, roughly as measured on the paper apps (CNN1 on 64 x 64 with 256 accumulator rows:
  // 0.56M matmuls; its weight tiles are handled by every try of the lowering's piece search). An
  // activate costs about what a matmul and its weight load do (in the lowering and the timing
  // engine alike: a packed convolution's activate comes with its scatter's setcfg); CNN1's on
  // 512 x 512 and 1024 x 1024 arrays are half its time (bench/sweep_cost_bench).
  c.pieces = n;
  c.packed = e.packed;
  c.activates = e.activates;
  c.activation = 1.2e-6 * e.activates;
  c.run = 0.003 + 1.2e-6 * e.matmuls + 6e-6 * e.tiles + c.activation;
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
  // One shape per model a worker prepares and keeps (workers.cpp run_request keys its cache the
  // same way), then one estimate per point: each on sim::parallel_for's threads, every item
  // computing only its own result (the same estimates on any thread count). The sweep's parent
  // does this while its workers start, which leaves most CPUs idle.
  std::vector<std::string> keys(todo.size());
  std::map<std::string, size_t> shape_of_key;
  std::vector<const Point*> first;  // per shape: the first point of its model
  for (size_t i = 0; i < todo.size(); ++i) {
    keys[i] = model_key(*todo[i]);
    if (shape_of_key.emplace(keys[i], first.size()).second) first.push_back(todo[i]);
  }
  std::vector<ModelShape> shapes(first.size());
  sim::parallel_for(first.size(), [&](uint64_t i) {
    const Point& p = *first[i];
    if (p.workload->is_model) shapes[i] = shape_of(p.workload->path, p.batch, p.mapper);
  });
  const bool full_compile = spec.full_compile || spec.engine != sim::Engine::timing;
  std::vector<PointCost> out(todo.size());
  sim::parallel_for(todo.size(), [&](uint64_t i) {
    const Point& p = *todo[i];
    out[i] = estimate(shapes[shape_of_key.at(keys[i])], p, full_compile);
    out[i].model = p.workload->is_model ? keys[i] : "";
  });
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
