// QGraph -> GpuPlan (plan.h): the checks run_golden makes, then each op's GEMM shape, gather and
// scatter geometry, packed weights, per-column requantization and output table.
#include "gpu/plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/graph.h"
#include "isa/error.h"
#include "sim/state.h"

namespace tpusim::gpu {
namespace {

using compiler::QGraph;
using compiler::Shape;
using compiler::View;

class Planner {
 public:
  explicit Planner(const QGraph& g) : g_(g) {}

  GpuPlan run() && {
    plan_.name = g_.name;
    plan_.batch = g_.batch;
    for (const compiler::QTensor& t : g_.tensors) {
      if (t.bits != 8)
        fail("graph", "tensor {} is {}-bit: the runners' kernels are int8 (quantize with LoadOptions::precision int8)",
             t.name, t.bits);
      plan_.tensor_names.push_back(t.name);
      plan_.tensor_bytes.push_back(g_.batch * t.shape.elements());
    }
    if (g_.input_data.size() != g_.inputs.size())
      fail("graph", "input data for {} of {} inputs", g_.input_data.size(), g_.inputs.size());
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const size_t t = tensor(g_.inputs[i]);
      if (g_.input_data[i].size() != plan_.tensor_bytes[t])
        fail("graph", "input {} has {} values, expected {}", i, g_.input_data[i].size(), plan_.tensor_bytes[t]);
    }
    plan_.inputs = g_.inputs;
    plan_.input_data = g_.input_data;
    plan_.output = static_cast<int>(tensor(g_.output));
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const std::string layer = i < g_.op_layer.size() ? g_.op_layer[i] : std::string("?");
      where_ = fmt::format("op {} ({})", i, layer);
      plan_.steps.push_back(std::visit([this](const auto& op) { return Step(step(op)); }, g_.ops[i]));
      plan_.step_layer.push_back(layer);
    }
    return std::move(plan_);
  }

 private:
  const QGraph& g_;
  GpuPlan plan_;
  std::string where_ = "graph";

  template <typename... A>
  [[noreturn]] void fail(const std::string& where, fmt::format_string<A...> f, A&&... a) const {
    throw InputError("quantized graph: " + where + ": " + fmt::format(f, std::forward<A>(a)...));
  }
  template <typename... A>
  [[noreturn]] void fail_op(fmt::format_string<A...> f, A&&... a) const {
    fail(where_, f, std::forward<A>(a)...);
  }

  size_t tensor(int t) const {
    if (t < 0 || static_cast<size_t>(t) >= g_.tensors.size()) fail(where_, "tensor {} does not exist", t);
    return static_cast<size_t>(t);
  }
  const Shape& shape(const View& v) const { return g_.tensors[tensor(v.tensor)].shape; }

  PixelView pixel_view(const View& v) const {
    const size_t i = tensor(v.tensor);
    const Shape& s = g_.tensors[i].shape;
    const uint64_t count = v.pixels ? v.pixels : s.pixels() - std::min(v.pixel0, s.pixels());
    if (v.pixel0 + count > s.pixels() || count == 0)
      fail_op("view of pixels {}..{} outside tensor {} ({} pixels)", v.pixel0, v.pixel0 + count, g_.tensors[i].name,
              s.pixels());
    return {s.pixels(), v.pixel0, count, s.c};
  }

  void check(const compiler::MatmulOp& op, const std::vector<PixelView>& in, const PixelView& out) const;
  MatmulStep step(const compiler::MatmulOp& op);
  PoolStep step(const compiler::PoolOp& op);
  VectorStep step(const compiler::VectorOp& op);
};

void Planner::check(const compiler::MatmulOp& op, const std::vector<PixelView>& in, const PixelView& out) const {
  uint64_t k = 0;
  for (const PixelView& s : in) k += s.c;
  if (in.empty() || k != op.k) fail_op("inputs have {} channels, K is {}", k, op.k);
  if (in.size() > static_cast<size_t>(kMaxGemmInputs))
    fail_op("{} inputs, the GPU runner takes at most {}", in.size(), kMaxGemmInputs);
  if (op.output.channel0 || (out.c != op.n && g_.concat_inplace))
    fail_op("writes channels {}.. of a concat written in place: the runners read a concat as its parts (quantize "
            "with the mapper's concat_inplace off)", op.output.channel0);
  if (out.c != op.n) fail_op("output has {} channels, N is {}", out.c, op.n);
  if (op.weights.size() != op.kernel_h * op.kernel_w * op.k * op.n)
    fail_op("{} weights, expected {} x {} x {} x {}", op.weights.size(), op.kernel_h, op.kernel_w, op.k, op.n);
  if (op.wide_weights())
    fail_op("16-bit weights: the runners' GEMMs are int8 (quantize the model with --precision int8)");
  if (!op.bias.empty() && op.bias.size() != op.n) fail_op("{} biases for {} columns", op.bias.size(), op.n);
  if ((op.mult.size() != 1 && op.mult.size() != op.n) || op.shift.size() != op.mult.size())
    fail_op("{} multipliers and {} shifts for {} columns", op.mult.size(), op.shift.size(), op.n);
  for (uint8_t s : op.shift)
    if (s > 63) fail_op("shift {} above 63", s);
}

MatmulStep Planner::step(const compiler::MatmulOp& op) {
  std::vector<PixelView> in;
  for (const View& v : op.inputs) in.push_back(pixel_view(v));
  const PixelView out = pixel_view(op.output);
  check(op, in, out);
  MatmulStep s;
  Im2colGeometry& g = s.gather;
  g.conv = !(op.kernel_h == 1 && op.kernel_w == 1 && op.stride == 1 && op.pad == 0);
  g.out_pixels = out.pixels;
  g.rows = g_.batch * out.pixels;
  g.k = op.kernel_h * op.kernel_w * op.k;
  g.k_pad = round_up4(g.k);
  g.inputs = static_cast<int>(in.size());
  uint64_t col = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    g.input[i] = {in[i].tensor_pixels, in[i].c, in[i].pixel0, col};
    s.input_tensor[i] = op.inputs[i].tensor;
    col += in[i].c;
    if (!g.conv && in[i].pixels != out.pixels)
      fail_op("an input view has {} pixels, the output {}", in[i].pixels, out.pixels);
  }
  if (g.conv) {
    if (in.size() != 1) fail_op("a {} x {} kernel needs exactly one input", op.kernel_h, op.kernel_w);
    const Shape& is = shape(op.inputs[0]);
    const Shape& os = shape(op.output);
    const uint64_t kh = op.kernel_h, kw = op.kernel_w, st = op.stride, pad = op.pad;
    if (in[0].pixels != is.pixels() || out.pixels != os.pixels() || st == 0 || is.h + 2 * pad < kh ||
        is.w + 2 * pad < kw || (is.h + 2 * pad - kh) / st + 1 != os.h || (is.w + 2 * pad - kw) / st + 1 != os.w)
      fail_op("a {} x {} kernel (stride {}, pad {}) does not map the {} x {} input onto the {} x {} output", kh, kw,
              st, pad, is.h, is.w, os.h, os.w);
    g.kernel_w = kw;
    g.stride = st;
    g.pad = pad;
    g.in_h = is.h;
    g.in_w = is.w;
    g.out_w = os.w;
  }
  s.direct = !g.conv && in.size() == 1 && in[0].pixel0 == 0 && in[0].pixels == in[0].tensor_pixels &&
             g.k == g.k_pad;
  s.scatter = {out.pixels, out.tensor_pixels, out.pixel0, op.n};
  s.output_tensor = op.output.tensor;
  s.m = g.rows;
  s.k = g.k;
  s.n = op.n;
  s.k_pad = g.k_pad;
  s.n_pad = round_up4(op.n);
  s.weights = pack_weights(op.weights, g.k, op.n, s.k_pad, s.n_pad);
  s.columns.resize(op.n);
  for (uint64_t j = 0; j < op.n; ++j) {
    const size_t q = op.mult.size() == 1 ? 0 : j;
    s.columns[j] = {op.bias.empty() ? 0 : op.bias[j], op.mult[q], op.shift[q]};
  }
  s.table = output_table(op.func, op.clip);
  s.func = op.func;
  s.clip = op.clip;
  s.macs = s.m * s.k * s.n;
  plan_.gemm_macs += s.macs;
  plan_.weight_bytes += s.k * s.n;
  return s;
}

PoolStep Planner::step(const compiler::PoolOp& op) {
  const PixelView in = pixel_view(op.input), out = pixel_view(op.output);
  const Shape& is = shape(op.input);
  const Shape& os = shape(op.output);
  const uint64_t win = op.window, st = op.stride;
  if (in.pixels != is.pixels() || out.pixels != os.pixels() || win == 0 || st == 0 || is.h < win || is.w < win ||
      (is.h - win) / st + 1 != os.h || (is.w - win) / st + 1 != os.w || os.c != is.c)
    fail_op("a {} x {} window (stride {}) does not map the {} x {} x {} input onto the {} x {} x {} output", win, win,
            st, is.h, is.w, is.c, os.h, os.w, os.c);
  PoolStep s;
  s.input_tensor = op.input.tensor;
  s.output_tensor = op.output.tensor;
  s.avg = op.kind == isa::PoolKind::avg;
  s.window = win;
  s.stride = st;
  s.in_h = is.h;
  s.in_w = is.w;
  s.c = is.c;
  s.out_h = os.h;
  s.out_w = os.w;
  s.elements = g_.batch * os.h * os.w * os.c;
  return s;
}

VectorStep Planner::step(const compiler::VectorOp& op) {
  VectorStep s;
  s.op = static_cast<uint32_t>(op.op);
  s.a = pixel_view(op.a);
  s.out = pixel_view(op.output);
  s.b = op.op == isa::VecOp::pass ? s.a : pixel_view(op.b);
  if (s.a.c != s.out.c || s.b.c != s.out.c || s.a.pixels != s.out.pixels || s.b.pixels != s.out.pixels)
    fail_op("operands of {} x {}, {} x {} and output {} x {} differ", s.a.pixels, s.a.c, s.b.pixels, s.b.c,
            s.out.pixels, s.out.c);
  if (op.shift > 63) fail_op("shift {} above 63", op.shift);
  s.a_tensor = op.a.tensor;
  s.b_tensor = op.op == isa::VecOp::pass ? op.a.tensor : op.b.tensor;
  s.output_tensor = op.output.tensor;
  s.mult = op.mult;
  s.shift = op.shift;
  s.table = output_table(op.func, 127);
  s.func = op.func;
  s.elements = g_.batch * s.out.pixels * s.out.c;
  return s;
}

}  // namespace

GpuPlan make_plan(const compiler::QGraph& graph) {
  GpuPlan plan = Planner(graph).run();
  plan.model_macs = compiler::model_macs(graph);
  return plan;
}

bool same_gather(const MatmulStep& a, const MatmulStep& b) {
  if (a.direct != b.direct || a.m != b.m || a.k != b.k || a.k_pad != b.k_pad) return false;
  if (a.direct) return a.input_tensor[0] == b.input_tensor[0];
  const Im2colGeometry &x = a.gather, &y = b.gather;
  if (x.rows != y.rows || x.out_pixels != y.out_pixels || x.conv != y.conv || x.inputs != y.inputs ||
      x.kernel_w != y.kernel_w || x.stride != y.stride || x.pad != y.pad || x.in_h != y.in_h || x.in_w != y.in_w ||
      x.out_w != y.out_w)
    return false;
  for (int i = 0; i < x.inputs; ++i) {
    const GatherInput &p = x.input[i], &q = y.input[i];
    if (a.input_tensor[i] != b.input_tensor[i] || p.tensor_pixels != q.tensor_pixels || p.c != q.c ||
        p.pixel0 != q.pixel0 || p.col0 != q.col0)
      return false;
  }
  return true;
}

namespace {

bool reads(const MatmulStep& s, int tensor) {
  const int inputs = s.direct ? 1 : s.gather.inputs;
  return std::find(s.input_tensor, s.input_tensor + inputs, tensor) != s.input_tensor + inputs;
}

}  // namespace

std::vector<GemmGroup> gemm_groups(const GpuPlan& plan) {
  std::vector<GemmGroup> groups;
  for (size_t i = 0; i < plan.steps.size();) {
    GemmGroup g;
    g.first = i;
    const auto* lead = std::get_if<MatmulStep>(&plan.steps[i]);
    if (lead && !reads(*lead, lead->output_tensor)) {
      g.n_total = lead->n_pad;
      g.col0 = {0};
      std::vector<int> outputs = {lead->output_tensor};
      while (g.count < kMaxFusedGemms && i + g.count < plan.steps.size()) {
        const auto* next = std::get_if<MatmulStep>(&plan.steps[i + g.count]);
        if (!next || !same_gather(*lead, *next) || reads(*lead, next->output_tensor) ||
            std::find(outputs.begin(), outputs.end(), next->output_tensor) != outputs.end())
          break;
        outputs.push_back(next->output_tensor);
        g.col0.push_back(g.n_total);
        g.n_total += next->n_pad;
        ++g.count;
      }
      if (g.count > 1) {
        g.weights.reserve(g.n_total * lead->k_pad);
        for (size_t j = 0; j < g.count; ++j) {
          const auto& w = std::get<MatmulStep>(plan.steps[i + j]).weights;
          g.weights.insert(g.weights.end(), w.begin(), w.end());
        }
      }
    } else if (lead) {
      g.n_total = lead->n_pad;
      g.col0 = {0};
    }
    groups.push_back(std::move(g));
    i += groups.back().count;
  }
  return groups;
}

compiler::LoadOptions runner_load_options(std::optional<uint64_t> batch) {
  compiler::LoadOptions lo;
  lo.batch = batch;
  lo.precision = compiler::Precision::int8;  // every weight and tensor int8, keys or not
  lo.mapper.concat_inplace = false;
  return lo;
}

OutputTable output_table(isa::Func func, uint8_t clip) {
  OutputTable t{};
  for (int64_t b = OutputTable::kLo; b <= OutputTable::kHi; ++b)
    t.value[b - OutputTable::kLo] = static_cast<int8_t>(sim::apply_func(func, b, clip, false));
  return t;
}

std::vector<int8_t> pack_weights(const std::vector<int8_t>& weights, uint64_t rows, uint64_t n, uint64_t k_pad,
                                 uint64_t n_pad) {
  std::vector<int8_t> w(n_pad * k_pad, 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t j = 0; j < n; ++j) w[j * k_pad + r] = weights[r * n + j];
  return w;
}

}  // namespace tpusim::gpu
