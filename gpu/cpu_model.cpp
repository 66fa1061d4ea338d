// The CPU reference runner's engine (cpu_model.h): oneDNN int8 matmuls and the plan's integer
// loops on OpenMP threads.
#include "gpu/cpu_model.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <dnnl.hpp>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <variant>

namespace tpusim::gpu {
namespace {

using Clock = std::chrono::steady_clock;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A oneDNN s8 x s8 -> s32 matmul of fixed shape, its weights reordered once.
struct Matmul {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst;
  Matmul(const dnnl::engine& eng, dnnl::stream& strm, int64_t m, int64_t k, int64_t n, const int8_t* w_nk,
         int8_t* x, int32_t* c) {
    const dnnl::memory::desc src_md({m, k}, dt::s8, tag::ab), dst_md({m, n}, dt::s32, tag::ab);
    const dnnl::memory::desc any_w({k, n}, dt::s8, tag::any);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, any_w, dst_md), eng);
    prim = dnnl::matmul(pd);
    // W[n][k] is the {k, n} matrix in "ba" order (k fastest).
    dnnl::memory user_w({{k, n}, dt::s8, tag::ba}, eng, const_cast<int8_t*>(w_nk));
    weights = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(user_w, weights).execute(strm, user_w, weights);
    strm.wait();
    src = dnnl::memory(src_md, eng, x);
    dst = dnnl::memory(dst_md, eng, c);
  }
  void run(dnnl::stream& strm) {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
};

}  // namespace

struct CpuModel::Impl {
  const GpuPlan& plan;
  int threads;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::vector<int8_t>> tensors;
  std::vector<std::vector<int8_t>> gathered;   // per step: X (empty for direct and non-matmul steps)
  std::vector<std::vector<int32_t>> products;  // per step: C
  std::vector<std::unique_ptr<Matmul>> matmuls;
  double matmul_seconds = 0;

  Impl(const GpuPlan& p, int t) : plan(p), threads(t) {
    omp_set_num_threads(threads);  // oneDNN's OpenMP threads, and ours
    tensors.resize(plan.tensor_bytes.size());
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].assign(plan.tensor_bytes[i], 0);
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      tensors[static_cast<size_t>(plan.inputs[i])] = plan.input_data[i];
    gathered.resize(plan.steps.size());
    products.resize(plan.steps.size());
    matmuls.resize(plan.steps.size());
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto* s = std::get_if<MatmulStep>(&plan.steps[i]);
      if (!s) continue;
      int8_t* x = tensors[static_cast<size_t>(s->input_tensor[0])].data();
      if (!s->direct) {
        gathered[i].assign(s->m * s->k_pad, 0);  // padding columns stay zero
        x = gathered[i].data();
      }
      products[i].assign(s->m * s->n_pad, 0);
      matmuls[i] = std::make_unique<Matmul>(eng, strm, int64_t(s->m), int64_t(s->k_pad), int64_t(s->n_pad),
                                            s->weights.data(), x, products[i].data());
    }
  }

  void gather(const MatmulStep& s, std::vector<int8_t>& x) {
    const Im2colGeometry& g = s.gather;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (uint64_t row = 0; row < g.rows; ++row) {
      const uint64_t sample = row / g.out_pixels, p = row % g.out_pixels;
      int8_t* dst = &x[row * g.k_pad];
      if (!g.conv) {
        for (int i = 0; i < g.inputs; ++i) {
          const GatherInput& in = g.input[i];
          const int8_t* src =
              &tensors[size_t(s.input_tensor[i])][(sample * in.tensor_pixels + in.pixel0 + p) * in.c];
          std::memcpy(dst + in.col0, src, in.c);
        }
        continue;
      }
      // A kernel row's in-bounds positions are contiguous in the input: one copy per kernel row.
      const GatherInput& in = g.input[0];
      const int8_t* t = tensors[size_t(s.input_tensor[0])].data() + sample * in.tensor_pixels * in.c;
      const uint64_t kernel_h = g.k / in.c / g.kernel_w, oy = p / g.out_w, ox = p % g.out_w;
      const int64_t ix0 = int64_t(ox * g.stride) - int64_t(g.pad);
      const int64_t q0 = std::max<int64_t>(0, -ix0),
                    q1 = std::min<int64_t>(int64_t(g.kernel_w), int64_t(g.in_w) - ix0);
      for (uint64_t r = 0; r < kernel_h; ++r) {
        int8_t* d = dst + r * g.kernel_w * in.c;
        const int64_t iy = int64_t(oy * g.stride + r) - int64_t(g.pad);
        if (iy < 0 || iy >= int64_t(g.in_h) || q1 <= q0) {
          std::memset(d, 0, g.kernel_w * in.c);
          continue;
        }
        std::memset(d, 0, uint64_t(q0) * in.c);
        std::memcpy(d + q0 * int64_t(in.c),
                    t + (in.pixel0 + uint64_t(iy) * g.in_w + uint64_t(ix0 + q0)) * in.c,
                    uint64_t(q1 - q0) * in.c);
        std::memset(d + q1 * int64_t(in.c), 0, uint64_t(int64_t(g.kernel_w) - q1) * in.c);
      }
    }
  }

  void run(size_t i, const MatmulStep& s) {
    if (!s.direct) gather(s, gathered[i]);
    const Clock::time_point t0 = Clock::now();
    matmuls[i]->run(strm);
    matmul_seconds += seconds_since(t0);
    const std::vector<int32_t>& c = products[i];
    std::vector<int8_t>& out = tensors[size_t(s.output_tensor)];
#pragma omp parallel for num_threads(threads) schedule(static)
    for (uint64_t row = 0; row < s.m; ++row) {
      int8_t* o = &out[scatter_offset(s.scatter, row, 0)];
      const int32_t* cr = &c[row * s.n_pad];
      for (uint64_t j = 0; j < s.n; ++j) o[j] = requantize(cr[j], s.columns[j], s.table);
    }
  }

  void run(size_t, const PoolStep& s) {
    const std::vector<int8_t>& in = tensors[size_t(s.input_tensor)];
    std::vector<int8_t>& out = tensors[size_t(s.output_tensor)];
    const uint64_t rows = s.elements / (s.out_w * s.c);  // batch x out_h
#pragma omp parallel for num_threads(threads) schedule(static)
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t img = r / s.out_h, oy = r % s.out_h;
      for (uint64_t ox = 0; ox < s.out_w; ++ox)
        for (uint64_t ch = 0; ch < s.c; ++ch) {
          int64_t v = s.avg ? 0 : -128;
          for (uint64_t a = 0; a < s.window; ++a)
            for (uint64_t b = 0; b < s.window; ++b) {
              const int64_t e =
                  in[((img * s.in_h + oy * s.stride + a) * s.in_w + ox * s.stride + b) * s.c + ch];
              v = s.avg ? v + e : (e > v ? e : v);
            }
          out[((img * s.out_h + oy) * s.out_w + ox) * s.c + ch] =
              s.avg ? pool_average(v, int64_t(s.window * s.window)) : static_cast<int8_t>(v);
        }
    }
  }

  void run(size_t, const VectorStep& s) {
    const std::vector<int8_t>& a = tensors[size_t(s.a_tensor)];
    const std::vector<int8_t>& b = tensors[size_t(s.b_tensor)];
    std::vector<int8_t>& out = tensors[size_t(s.output_tensor)];
    const uint64_t per_sample = s.out.pixels * s.out.c;
#pragma omp parallel for num_threads(threads) schedule(static) if (s.elements > 4096)
    for (uint64_t i = 0; i < s.elements; ++i) {
      const uint64_t img = i / per_sample, p = i % per_sample / s.out.c, ch = i % s.out.c;
      out[view_offset(s.out, img, p, ch)] = vector_element(
          s.op, a[view_offset(s.a, img, p, ch)], b[view_offset(s.b, img, p, ch)], s.mult, s.shift, s.table);
    }
  }

  std::vector<double> step_seconds;

  const std::vector<int8_t>& infer() {
    matmul_seconds = 0;
    step_seconds.assign(plan.steps.size(), 0);
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Clock::time_point t0 = Clock::now();
      std::visit([&](const auto& step) { run(i, step); }, plan.steps[i]);
      step_seconds[i] = seconds_since(t0);
    }
    return tensors[size_t(plan.output)];
  }
};

CpuModel::CpuModel(const GpuPlan& plan, int threads) {
  try {
    impl_ = std::make_unique<Impl>(plan, threads < 1 ? 1 : threads);
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN: ") + e.what());
  }
}
CpuModel::~CpuModel() = default;

const std::vector<int8_t>& CpuModel::infer() { return impl_->infer(); }
double CpuModel::last_matmul_seconds() const { return impl_->matmul_seconds; }
const std::vector<double>& CpuModel::last_step_seconds() const { return impl_->step_seconds; }

Timing CpuModel::time(const TimingOptions& o) {
  for (uint64_t i = 0; i < o.warmup; ++i) impl_->infer();
  std::vector<double> batches, repeats;
  for (uint64_t r = 0; r < o.repeats; ++r) {
    double sum = 0;
    for (uint64_t i = 0; i < o.iterations; ++i) {
      const Clock::time_point t0 = Clock::now();
      impl_->infer();
      const double t = seconds_since(t0);
      batches.push_back(t);
      sum += t;
    }
    repeats.push_back(sum / double(o.iterations));
  }
  Timing t;
  t.median = quantile(repeats, 0.5);
  t.min = *std::min_element(repeats.begin(), repeats.end());
  t.max = *std::max_element(repeats.begin(), repeats.end());
  t.p99 = quantile(batches, 0.99);
  t.repeats = o.repeats;
  t.iterations = o.iterations;
  return t;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

CpuRoof measure_cpu_roof(int threads, int tries) {
  omp_set_num_threads(threads);
  CpuRoof roof;
  {
    constexpr int64_t m = 512, k = 2048, n = 2048;
    std::vector<int8_t> x(m * k, 1), w(n * k, 1);
    std::vector<int32_t> c(m * n);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    Matmul mm(eng, strm, m, k, n, w.data(), x.data(), c.data());
    mm.run(strm);
    for (int i = 0; i < tries; ++i) {
      const Clock::time_point t0 = Clock::now();
      mm.run(strm);
      roof.int8_tops = std::max(roof.int8_tops, 2.0 * m * k * n / seconds_since(t0) / 1e12);
    }
  }
  {
    std::vector<uint64_t> buf((256u << 20) / sizeof(uint64_t));
    std::iota(buf.begin(), buf.end(), 0);
    for (int i = 0; i < tries; ++i) {
      uint64_t sum = 0;
      const Clock::time_point t0 = Clock::now();
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
      for (size_t j = 0; j < buf.size(); ++j) sum += buf[j];
      const double t = seconds_since(t0);
      if (sum == 42) roof.read_gbps += 0;  // keeps the sum alive
      roof.read_gbps = std::max(roof.read_gbps, double(buf.size() * sizeof(uint64_t)) / t / 1e9);
    }
  }
  return roof;
}

}  // namespace tpusim::gpu
