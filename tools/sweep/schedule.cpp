// Point order and placement for sweep workers (schedule.h).
#include "tools/sweep/schedule.h"

#include <algorithm>
#include <numeric>

#include "compiler/compile.h"
#include "compiler/layout.h"
#include "compiler/model.h"
#include "compiler/packing.h"
#include "compiler/reference.h"

namespace tpusim::tools::sweep {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / std::max<uint64_t>(b, 1); }

// What a model's shapes tell about its cost on a machine.
struct ModelShape {
  bool parsed = false, needs_data = false;
  uint64_t weights = 0, batch = 1;
  // The tensors that live in the unified buffer at once, at each layer of the model: a sample's
  // pixels and channels of each (pieces()).
  struct Tensor {
    uint64_t pixels = 1, c = 1;
  };
  std::vector<std::vector<Tensor>> live;
  struct Matmul {
    uint64_t k = 0, n = 0, kernel = 1, rows = 0, repeats = 1, per_step = 1;  // rows: a sample's output pixels
    // A convolution the lowering may pack (compiler/packing.h): its shape; packable false for the
    // others (1 x 1 stride 1 without padding, 16-bit weights, dense and LSTM layers).
    bool packable = false;
    compiler::ConvShape conv;
  };
  std::vector<Matmul> matmuls;
};

// At each layer, the tensors live then: every layer's output from the layer that writes it (a
// concat's from its first input's: its branches write into it, compiler/quantize.cpp) to the last
// that reads it, the model's inputs from the start; a convolution or dense layer read only by
// concats is their tensor's part, not a tensor of its own. Each with the border its readers' zero
// padding needs.
std::vector<std::vector<ModelShape::Tensor>> live_tensors(const compiler::Model& m) {
  const size_t n = m.layers.size();
  std::vector<size_t> first(n), last(n);
  std::vector<bool> part(n, false), read(n, false), only_concats(n, true);
  std::vector<size_t> input_last(m.inputs.size(), 0);
  std::vector<uint64_t> pad(n, 0), input_pad(m.inputs.size(), 0);  // the border its readers need
  for (size_t i = 0; i < n; ++i) first[i] = last[i] = i;
  for (size_t i = 0; i < n; ++i)
    for (const int in : m.layers[i].inputs) {
      const uint64_t p = m.layers[i].type == compiler::LayerType::conv2d ? m.layers[i].pad : 0;
      if (compiler::is_model_input(in)) {
        input_last[size_t(compiler::model_input_index(in))] = i;
        input_pad[size_t(compiler::model_input_index(in))] = std::max(input_pad[size_t(compiler::model_input_index(in))], p);
        continue;
      }
      const size_t j = size_t(in);
      pad[j] = std::max(pad[j], p);
      last[j] = std::max(last[j], i);
      read[j] = true;
      if (m.layers[i].type == compiler::LayerType::concat) first[i] = std::min(first[i], j);
      else only_concats[j] = false;
    }
  for (size_t i = 0; i < n; ++i)
    part[i] = read[i] && only_concats[i] &&
              (m.layers[i].type == compiler::LayerType::conv2d || m.layers[i].type == compiler::LayerType::dense);
  // (Stored with the border its readers' padding needs: (h + 2 pad) x (w + 2 pad) pixels.)
  const auto stored = [](const compiler::Shape& s, uint64_t p) {
    return ModelShape::Tensor{s.rank == 3 ? (s.h + 2 * p) * (s.w + 2 * p) : s.pixels(), s.c};
  };
  std::vector<std::vector<ModelShape::Tensor>> live(n);
  for (size_t k = 0; k < m.inputs.size(); ++k)
    for (size_t i = 0; i <= input_last[k] && i < n; ++i) live[i].push_back(stored(m.inputs[k].shape, input_pad[k]));
  for (size_t j = 0; j < n; ++j)
    if (!part[j])
      for (size_t i = first[j]; i <= last[j]; ++i) live[i].push_back(stored(m.layers[j].out, pad[j]));
  return live;
}

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
    s.batch = std::max<uint64_t>(m.batch, 1);
    for (const compiler::Layer& l : m.layers) {
      if (l.type != compiler::LayerType::dense && l.type != compiler::LayerType::conv2d &&
          l.type != compiler::LayerType::lstm)
        continue;
      const compiler::Shape& in = compiler::source_shape(m, l, l.inputs.at(0));
      s.weights += compiler::weight_count(l, in);
      if (l.type == compiler::LayerType::lstm) {
        // Per step and stacked layer: four gates, each reading x (the input's or the layer
        // below's h) and h, a row per sample.
        for (uint64_t st = 0; st < l.stack; ++st)
          s.matmuls.push_back({(st ? l.units : in.c) + l.units, 4 * l.units, 1, 1, in.pixels(), 1, false, {}});
      } else {
        ModelShape::Matmul mm{in.c, l.units, l.kernel_h * l.kernel_w, l.out.pixels(), 1, 1, false, {}};
        if (l.type == compiler::LayerType::conv2d) {
          mm.packable = !(l.kernel_h == 1 && l.kernel_w == 1 && l.stride == 1 && l.pad == 0) && l.weight_bits != 16;
          mm.conv = {in.c, l.units, l.kernel_h, l.kernel_w, l.stride, l.out.h, l.out.w, 1};
        }
        s.matmuls.push_back(mm);
      }
    }
    s.live = live_tensors(m);
    s.parsed = true;
  } catch (const std::exception&) {
    // Left to the worker, which reports the error as the point's.
  }
  return s;
}

// The pieces the batch runs in (compiler/lower.cpp's lower()): the fewest equal pieces within half
// the accumulators whose live tensors fit the unified buffer at every layer. A tensor holds a UB
// row per pixel, sample and slice of its channels, less where narrow channels hold q samples a row
// (compiler::dense_q: q divides the piece): a piece of few samples leaves a wide array's rows
// mostly empty, so a wider array needs more pieces. A rough count: the lowering's own search also
// aligns its allocations, may stage tensors in host memory and keeps a pool within 255 samples.
uint64_t pieces(const ModelShape& s, const sim::Arch& a) {
  const uint64_t row = a.ub_row_bytes(), limit = std::max<uint64_t>(std::min(s.batch, a.acc_entries / 2), 1);
  const auto bytes = [&](uint64_t pixels, uint64_t c, uint64_t piece) {
    return double(pixels) * double(div_up(c, row)) * double(row) * double(piece / compiler::dense_q(c, piece, row));
  };
  for (uint64_t n = div_up(s.batch, limit); n < s.batch; ++n) {
    const uint64_t piece = div_up(s.batch, n);
    double need = 0;
    for (const std::vector<ModelShape::Tensor>& at : s.live) {
      double sum = 0;
      for (const ModelShape::Tensor& t : at) sum += bytes(t.pixels, t.c, piece);
      need = std::max(need, sum);
    }
    if (need <= double(a.ub_bytes)) return div_up(s.batch, piece);  // (batch 10 in 6: pieces of 2, 5 of them)
  }
  return s.batch;
}

// The instructions a layer's lowering emits on a machine for a piece of `piece` samples, as
// compiler/lower.cpp emits them: matmul instructions (one per weight tile and chunk of
// accumulator rows, a pass taking half the accumulators when its rows do not fit them all; a
// packed convolution one per output row and kernel-row tile, compiler/packing.h), distinct weight
// tiles, and activates (one per chunk and N tile; a packed convolution's one per group of pixels
// of each output row, which it scatters: on a wide array, where narrow convolutions pack several
// pixels a vector, CNN1's activates outnumber its matmuls).
struct Emitted {
  double matmuls = 0, tiles = 0, activates = 0;
};

Emitted emitted(const ModelShape::Matmul& m, const sim::Arch& a, uint64_t piece) {
  const uint64_t rows = m.rows * piece;
  const uint64_t budget = rows <= a.acc_entries ? rows : std::max<uint64_t>(a.acc_entries / 2, 1);
  const uint64_t chunks = div_up(rows, budget), n_tiles = div_up(m.n, a.array_cols);
  if (m.packable) {
    compiler::ConvShape conv = m.conv;
    conv.batch = piece;
    if (const std::optional<compiler::Packing> pk = compiler::choose_packing(conv, a, budget)) {
      const uint64_t row_tiles = div_up(conv.kh, pk->rows), groups = div_up(conv.ow, pk->p);
      const uint64_t nt = pk->p > 1 ? 1 : n_tiles;
      return {double(nt * row_tiles * conv.oh * (pk->tail ? 2 : 1)), double(nt * row_tiles),
              double(pk->p > 1 ? conv.oh * groups : chunks * nt)};
    }
  }
  const double t = double(m.kernel) * double(div_up(m.k, a.array_rows)) * double(n_tiles);
  return {t * double(chunks) * double(m.repeats), t, double(chunks * n_tiles * m.repeats)};
}

PointCost estimate(const ModelShape& s, const Point& p, bool full_compile) {
  PointCost c;
  const sim::Arch& a = p.arch;
  if (!s.parsed) {
    c.run = 0.05;
    c.prepare = p.workload->is_model ? 0.05 : 0;
    return c;
  }
  // Per piece (every piece emits its own instructions; the weight tiles are the same).
  const uint64_t n = pieces(s, a), piece = div_up(s.batch, n);
  Emitted e;
  for (const ModelShape::Matmul& m : s.matmuls) {
    const Emitted l = emitted(m, a, piece);
    e.matmuls += l.matmuls * double(n), e.tiles += l.tiles, e.activates += l.activates * double(n);
  }
  // Seconds, roughly as measured on the paper apps (CNN1 on 64 x 64 with 256 accumulator rows:
  // 0.56M matmuls; its weight tiles are handled by every try of the lowering's piece search). An
  // activate costs about what a matmul and its weight load do (in the lowering and the timing
  // engine alike: a packed convolution's activate comes with its scatter's setcfg); CNN1's on
  // 512 x 512 and 1024 x 1024 arrays are half its time (bench/sweep_cost_bench).
  c.pieces = n;
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
