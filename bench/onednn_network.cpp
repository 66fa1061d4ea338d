// oneDNN's own int8 inference of a plan's layers (onednn_network.h).
#include "bench/onednn_network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "isa/table.h"

namespace tpusim::bench {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
using gpu::PixelView;

// An operand of a row-wise step (matmul, concat, binary): a view of a tensor.
struct Operand {
  int tensor;
  PixelView v;
};

// The output function as post-ops; the factor the input scales take (the curves read y / 2^8).
float function_post_ops(isa::Func func, uint8_t clip, dnnl::post_ops& po) {
  switch (func) {
    case isa::Func::relu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); return 1.f;
    case isa::Func::relux: po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, float(clip)); return 1.f;
    case isa::Func::sigmoid:
      po.append_eltwise(127.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
      return std::ldexp(1.f, -isa::kCurveFractionBits);
    case isa::Func::tanh:
      po.append_eltwise(127.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f);
      return std::ldexp(1.f, -isa::kCurveFractionBits);
    default: return 1.f;
  }
}

}  // namespace

struct OneDnnNetwork::Impl {
  const gpu::GpuPlan& plan;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::vector<int8_t>> tensors;
  std::vector<std::vector<int8_t>> scratch;  // concatenated inputs
  struct Op {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
  };
  std::vector<Op> ops;
  std::map<std::string, int> counts;
  // Concatenations still valid (none of their inputs written since): their inputs and buffer.
  struct Joined {
    std::vector<Operand> inputs;
    bool flat = true;
    dnnl::memory::desc md;
    int8_t* data = nullptr;
  };
  std::vector<Joined> joined;

  // Per tensor: stored pixel-major (all samples' pixel 0, then pixel 1, ...) instead of the plan's
  // batch-major NHWC. A oneDNN user lays a sequence out so (oneDNN's own RNN primitives take
  // time-major data): then one time step of a batch is a dense matrix, which oneDNN's JIT
  // primitives take where a strided view sends a binary primitive to its reference implementation.
  // A row-wise step (a matmul other than a convolution, a binary) needs its operands of several
  // pixels stored alike: such operands form groups, and a group is stored pixel-major unless a
  // convolution or a pool (which need NHWC) reads or writes one of its tensors. A tensor of one
  // pixel per sample is the same either way.
  std::vector<bool> pixel_major;
  std::vector<uint64_t> tensor_pixels, tensor_c;

  explicit Impl(const gpu::GpuPlan& p) : plan(p) {
    for (uint64_t bytes : plan.tensor_bytes) tensors.emplace_back(bytes, int8_t{0});
    const size_t n = tensors.size();
    tensor_pixels.assign(n, 1);
    tensor_c.assign(n, 0);
    std::vector<size_t> group(n);
    std::iota(group.begin(), group.end(), size_t{0});
    auto root = [&](size_t t) {
      while (group[t] != t) t = group[t] = group[group[t]];
      return t;
    };
    std::vector<bool> image(n, false);
    auto shape = [&](int t, uint64_t pixels, uint64_t c, bool is_image) {
      tensor_pixels[size_t(t)] = pixels;
      tensor_c[size_t(t)] = c;
      if (is_image) image[size_t(t)] = true;
    };
    // Joins the tensors of a row-wise step's operands of several pixels.
    auto join = [&](std::initializer_list<std::pair<int, uint64_t>> ops, const std::vector<std::pair<int, uint64_t>>& more) {
      int first = -1;
      auto one = [&](const std::pair<int, uint64_t>& o) {
        if (o.second <= 1) return;
        if (first < 0) first = o.first;
        else group[root(size_t(o.first))] = root(size_t(first));
      };
      for (const auto& o : ops) one(o);
      for (const auto& o : more) one(o);
    };
    for (const gpu::Step& s : plan.steps) {
      if (const auto* m = std::get_if<gpu::MatmulStep>(&s)) {
        std::vector<std::pair<int, uint64_t>> in;
        for (int i = 0; i < m->gather.inputs; ++i) {
          shape(m->input_tensor[i], m->gather.input[i].tensor_pixels, m->gather.input[i].c, m->gather.conv);
          in.push_back({m->input_tensor[i], m->gather.out_pixels});
        }
        shape(m->output_tensor, m->scatter.tensor_pixels, m->n, m->gather.conv);
        if (!m->gather.conv) join({{m->output_tensor, m->scatter.out_pixels}}, in);
      } else if (const auto* q = std::get_if<gpu::PoolStep>(&s)) {
        shape(q->input_tensor, q->in_h * q->in_w, q->c, true);
        shape(q->output_tensor, q->out_h * q->out_w, q->c, true);
      } else if (const auto* v = std::get_if<gpu::VectorStep>(&s)) {
        shape(v->a_tensor, v->a.tensor_pixels, v->a.c, false);
        shape(v->b_tensor, v->b.tensor_pixels, v->b.c, false);
        shape(v->output_tensor, v->out.tensor_pixels, v->out.c, false);
        join({{v->a_tensor, v->a.pixels}, {v->b_tensor, v->b.pixels}, {v->output_tensor, v->out.pixels}}, {});
      }
    }
    std::vector<bool> image_group(n, false);
    for (size_t t = 0; t < n; ++t)
      if (image[t]) image_group[root(t)] = true;
    pixel_major.assign(n, false);
    for (size_t t = 0; t < n; ++t) pixel_major[t] = !image_group[root(t)];
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const size_t t = size_t(plan.inputs[i]);
      tensors[t] = plan.input_data[i];
      if (tensor_c[t] && pixel_major[t]) relayout(plan.input_data[i].data(), tensors[t].data(), t, true);
    }
    for (const gpu::Step& s : plan.steps) {
      std::visit([this](const auto& step) { add(step); }, s);
      const int written = std::visit([](const auto& step) { return step.output_tensor; }, s);
      std::erase_if(joined, [&](const Joined& j) {
        return std::any_of(j.inputs.begin(), j.inputs.end(), [&](const Operand& in) { return in.tensor == written; });
      });
    }
  }

  // Batch-major to pixel-major (to_pixel_major) or back, for tensor t's shape.
  void relayout(const int8_t* from, int8_t* to, size_t t, bool to_pixel_major) const {
    const uint64_t b = plan.batch, p = tensor_pixels[t], c = tensor_c[t];
    for (uint64_t i = 0; i < b; ++i)
      for (uint64_t q = 0; q < p; ++q) {
        const uint64_t bm = (i * p + q) * c, pm = (q * b + i) * c;
        std::copy_n(from + (to_pixel_major ? bm : pm), c, to + (to_pixel_major ? pm : bm));
      }
  }

  // Whether the step's operands can be 2D (rows x channels) in one row order: each operand is one
  // pixel per sample (rows = samples), pixel-major (rows = pixel, then sample) or a whole batch-major
  // tensor (rows = sample, then pixel), and those of several pixels are all stored alike.
  bool flat(const std::vector<Operand>& ops) const {
    int layout = -1;
    for (const Operand& o : ops) {
      if (o.v.pixels == 1) continue;
      const bool pm = pixel_major[size_t(o.tensor)];
      if (!pm && o.v.pixels != o.v.tensor_pixels) return false;
      if (layout >= 0 && layout != int(pm)) return false;
      layout = int(pm);
    }
    return true;
  }
  // The operand as oneDNN memory: rows x c when `flat`, else batch x pixels x c with its strides.
  dnnl::memory memory(const Operand& o, bool flat) {
    const int64_t b = int64_t(plan.batch), p = int64_t(o.v.pixels), c = int64_t(o.v.c),
                  tp = int64_t(o.v.tensor_pixels);
    const bool pm = pixel_major[size_t(o.tensor)];
    int8_t* data = tensors[size_t(o.tensor)].data() + o.v.pixel0 * o.v.c * (pm ? plan.batch : 1);
    dnnl::memory::desc md;
    if (flat && (pm || p == tp)) md = {{b * p, c}, dt::s8, tag::ab};
    else if (flat) md = {{b, c}, dt::s8, dims{tp * c, 1}};  // one pixel of a batch-major tensor
    else md = {{b, p, c}, dt::s8, pm ? dims{c, b * c, 1} : dims{tp * c, c, 1}};
    return dnnl::memory(md, eng, data);
  }
  void push(dnnl::primitive prim, std::unordered_map<int, dnnl::memory> args, const char* kind) {
    ops.push_back({std::move(prim), std::move(args)});
    ++counts[kind];
  }
  // Weights as oneDNN wants them, from the plan's packed W[n_pad][k_pad] (row j: column j's k weights).
  dnnl::memory weights(const dnnl::memory::desc& want, const dnnl::memory::desc& plain, const gpu::MatmulStep& m) {
    dnnl::memory user(plain, eng, const_cast<int8_t*>(m.weights.data())), w(want, eng);
    dnnl::reorder(user, w).execute(strm, user, w);
    strm.wait();
    return w;
  }
  dnnl::memory bias(const gpu::MatmulStep& m, const dnnl::memory::desc& md) {
    dnnl::memory b(md, eng);
    int32_t* d = static_cast<int32_t*>(b.get_data_handle());
    for (uint64_t j = 0; j < m.n; ++j) d[j] = m.columns[j].bias;
    return b;
  }
  dnnl::primitive_attr requantization(const gpu::MatmulStep& m, int n_dim_mask) {
    dnnl::post_ops po;
    const float curve = function_post_ops(m.func, m.clip, po);
    std::vector<float> scales;
    for (const gpu::ColumnQuant& q : m.columns) scales.push_back(std::ldexp(float(q.mult), -int(q.shift)) * curve);
    dnnl::primitive_attr attr;
    attr.set_output_scales(n_dim_mask, scales);
    attr.set_post_ops(po);
    return attr;
  }

  void add(const gpu::MatmulStep& m) {
    const gpu::Im2colGeometry& g = m.gather;
    const int64_t b = int64_t(plan.batch), n = int64_t(m.n), k = int64_t(m.k), kp = int64_t(m.k_pad);
    if (g.conv) {
      const int64_t c = int64_t(g.input[0].c), kw = int64_t(g.kernel_w), kh = k / c / kw;
      const int64_t ih = int64_t(g.in_h), iw = int64_t(g.in_w), ow = int64_t(g.out_w);
      const int64_t oh = int64_t(g.out_pixels / g.out_w), st = int64_t(g.stride), pad = int64_t(g.pad);
      const dnnl::memory::desc src({b, c, ih, iw}, dt::s8, tag::nhwc), dst({b, n, oh, ow}, dt::s8, tag::nhwc);
      const dnnl::memory::desc bias_md({n}, dt::s32, tag::a);
      const dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
          {{n, c, kh, kw}, dt::s8, tag::any}, bias_md, dst, {st, st}, {pad, pad},
          {(oh - 1) * st + kh - ih - pad, (ow - 1) * st + kw - iw - pad});
      const dnnl::convolution_forward::primitive_desc pd(d, requantization(m, 1 << 1), eng);
      // OHWI with the plan's row stride k_pad.
      const dnnl::memory::desc plain({n, c, kh, kw}, dt::s8, dims{kp, 1, kw * c, c});
      push(dnnl::convolution_forward(pd),
           {{DNNL_ARG_SRC, dnnl::memory(src, eng, tensors[size_t(m.input_tensor[0])].data())},
            {DNNL_ARG_WEIGHTS, weights(pd.weights_desc(), plain, m)},
            {DNNL_ARG_BIAS, bias(m, bias_md)},
            {DNNL_ARG_DST, dnnl::memory(dst, eng, tensors[size_t(m.output_tensor)].data())}},
           "convolution");
      return;
    }
    std::vector<Operand> in;
    for (int i = 0; i < g.inputs; ++i)
      in.push_back({m.input_tensor[i], {g.input[i].tensor_pixels, g.input[i].pixel0, g.out_pixels, g.input[i].c}});
    const Operand out{m.output_tensor, {m.scatter.tensor_pixels, m.scatter.pixel0, m.scatter.out_pixels, m.n}};
    std::vector<Operand> all = in;
    all.push_back(out);
    const bool flat = this->flat(all);
    const dnnl::memory src = in.size() == 1 ? memory(in[0], flat) : concatenation(in, flat);
    const dnnl::memory dst = memory(out, flat);
    const dnnl::memory::desc wany = flat ? dnnl::memory::desc({k, n}, dt::s8, tag::any)
                                         : dnnl::memory::desc({1, k, n}, dt::s8, tag::any);
    const dnnl::memory::desc plain = flat ? dnnl::memory::desc({k, n}, dt::s8, dims{1, kp})
                                          : dnnl::memory::desc({1, k, n}, dt::s8, dims{n * kp, 1, kp});
    const dnnl::memory::desc bias_md = flat ? dnnl::memory::desc({1, n}, dt::s32, tag::ab)
                                            : dnnl::memory::desc({1, 1, n}, dt::s32, tag::abc);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src.get_desc(), wany, bias_md, dst.get_desc()),
                                          requantization(m, flat ? 1 << 1 : 1 << 2), eng);
    push(dnnl::matmul(pd),
         {{DNNL_ARG_SRC, src},
          {DNNL_ARG_WEIGHTS, weights(pd.weights_desc(), plain, m)},
          {DNNL_ARG_BIAS, bias(m, bias_md)},
          {DNNL_ARG_DST, dst}},
         "matmul");
  }

  // The inputs joined along channels by a concat primitive into a buffer, or the buffer of an
  // earlier join of the same views that nothing has written since.
  dnnl::memory concatenation(const std::vector<Operand>& in, bool flat) {
    auto same = [](const Operand& x, const Operand& y) {
      return x.tensor == y.tensor && x.v.tensor_pixels == y.v.tensor_pixels && x.v.pixel0 == y.v.pixel0 &&
             x.v.pixels == y.v.pixels && x.v.c == y.v.c;
    };
    for (const Joined& j : joined)
      if (j.flat == flat && j.inputs.size() == in.size() && std::equal(in.begin(), in.end(), j.inputs.begin(), same))
        return dnnl::memory(j.md, eng, j.data);
    const int64_t b = int64_t(plan.batch), p = int64_t(in[0].v.pixels);
    int64_t k = 0;
    std::vector<dnnl::memory::desc> mds;
    std::unordered_map<int, dnnl::memory> args;
    for (size_t i = 0; i < in.size(); ++i) {
      const dnnl::memory m = memory(in[i], flat);
      mds.push_back(m.get_desc());
      args.emplace(DNNL_ARG_MULTIPLE_SRC + int(i), m);
      k += int64_t(in[i].v.c);
    }
    const dnnl::memory::desc md = flat ? dnnl::memory::desc({b * p, k}, dt::s8, tag::ab)
                                       : dnnl::memory::desc({b, p, k}, dt::s8, tag::abc);
    int8_t* data = scratch.emplace_back(size_t(b * p * k)).data();
    const dnnl::concat::primitive_desc pd(md, flat ? 1 : 2, mds, eng);
    args.emplace(DNNL_ARG_DST, dnnl::memory(md, eng, data));
    push(dnnl::concat(pd), std::move(args), "concat");
    joined.push_back({in, flat, md, data});
    return dnnl::memory(md, eng, data);
  }

  void add(const gpu::PoolStep& p) {
    const int64_t b = int64_t(plan.batch), c = int64_t(p.c), win = int64_t(p.window), st = int64_t(p.stride);
    const dnnl::memory::desc src({b, c, int64_t(p.in_h), int64_t(p.in_w)}, dt::s8, tag::nhwc);
    const dnnl::memory::desc dst({b, c, int64_t(p.out_h), int64_t(p.out_w)}, dt::s8, tag::nhwc);
    const dnnl::pooling_forward::desc d(
        dnnl::prop_kind::forward_inference,
        p.avg ? dnnl::algorithm::pooling_avg_exclude_padding : dnnl::algorithm::pooling_max, src, dst, {st, st},
        {win, win}, {0, 0}, {0, 0});
    const dnnl::pooling_forward::primitive_desc pd(d, eng);
    push(dnnl::pooling_forward(pd),
         {{DNNL_ARG_SRC, dnnl::memory(src, eng, tensors[size_t(p.input_tensor)].data())},
          {DNNL_ARG_DST, dnnl::memory(dst, eng, tensors[size_t(p.output_tensor)].data())}},
         "pooling");
  }

  std::vector<std::vector<int8_t>> zeros;  // the broadcast zero operand of a pass

  void add(const gpu::VectorStep& v) {
    const auto op = isa::VecOp(v.op);
    const bool pass = op != isa::VecOp::add && op != isa::VecOp::sub && op != isa::VecOp::mul &&
                      op != isa::VecOp::max && op != isa::VecOp::min;
    const Operand a{v.a_tensor, v.a}, out{v.output_tensor, v.out};
    const bool flat = pass ? this->flat({a, out}) : this->flat({a, {v.b_tensor, v.b}, out});
    // The scale as a linear post-op before the function's (oneDNN 2.6 runs a binary with input scales
    // on a product in its reference implementation, not its JIT one).
    dnnl::post_ops function;
    const float s = std::ldexp(float(v.mult), -int(v.shift)) * function_post_ops(v.func, 127, function);
    dnnl::post_ops po;
    if (s != 1.f) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, s, 0.f);
    function_post_ops(v.func, 127, po);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    const dnnl::memory src0 = memory(a, flat), dst = memory(out, flat);
    dnnl::memory b;
    if (pass) {
      const dnnl::memory::desc zero = flat ? dnnl::memory::desc({1, 1}, dt::s8, tag::ab)
                                           : dnnl::memory::desc({1, 1, 1}, dt::s8, tag::abc);
      b = dnnl::memory(zero, eng, zeros.emplace_back(1, int8_t{0}).data());
    } else {
      b = memory({v.b_tensor, v.b}, flat);
    }
    const dnnl::algorithm alg = op == isa::VecOp::sub   ? dnnl::algorithm::binary_sub
                                : op == isa::VecOp::mul ? dnnl::algorithm::binary_mul
                                : op == isa::VecOp::max ? dnnl::algorithm::binary_max
                                : op == isa::VecOp::min ? dnnl::algorithm::binary_min
                                                        : dnnl::algorithm::binary_add;
    const dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, src0.get_desc(), b.get_desc(), dst.get_desc()),
                                          attr, eng);
    push(dnnl::binary(pd), {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, dst}}, "binary");
  }

  void run() {
    for (Op& op : ops) op.prim.execute(strm, op.args);
    strm.wait();
  }
};

OneDnnNetwork::OneDnnNetwork(const gpu::GpuPlan& plan) {
  try {
    impl_ = std::make_unique<Impl>(plan);
  } catch (const dnnl::error& e) {
    throw std::runtime_error(fmt::format("{}: oneDNN: {}", plan.name, e.what()));
  }
}
OneDnnNetwork::~OneDnnNetwork() = default;
void OneDnnNetwork::run() { impl_->run(); }
std::vector<int8_t> OneDnnNetwork::output() const {
  const size_t t = size_t(impl_->plan.output);
  std::vector<int8_t> out = impl_->tensors[t];
  if (impl_->tensor_c[t] && impl_->pixel_major[t]) impl_->relayout(impl_->tensors[t].data(), out.data(), t, false);
  return out;
}
std::string OneDnnNetwork::primitives() const {
  std::string s;
  for (const auto& [kind, count] : impl_->counts) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", count, kind);
  return s;
}

OutputDifference output_difference(const std::vector<int8_t>& a, const std::vector<int8_t>& b) {
  if (a.size() != b.size() || a.empty()) return {0, 256};
  OutputDifference d;
  uint64_t equal = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    equal += a[i] == b[i];
    d.max_abs = std::max(d.max_abs, std::abs(int(a[i]) - int(b[i])));
  }
  d.equal_share = double(equal) / double(a.size());
  return d;
}

}  // namespace tpusim::bench
