// The CPU reference runner's engine (cpu_model.h): oneDNN int8 matmuls and the plan's integer
// loops on OpenMP threads.
#include "gpu/cpu_model.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <variant>

#include "gpu/onednn_ops.h"
#include "gpu/requantize_clamp.h"

namespace tpusim::gpu {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// o[e] = requantize_clamp(c[e], bias[e], scale[e], lo, hi) for e < count: the runner's hottest loop
// outside oneDNN, compiled for AVX-512 (with 512-bit vectors: GCC's default tuning keeps 256-bit ones,
// which measured 2.6 times slower on this loop), AVX2 and the baseline, chosen once at run time.
using RequantizeSpan = void (*)(const int32_t*, const double*, const double*, int, int, int8_t*, uint64_t);

[[gnu::always_inline]] inline void requantize_loop(const int32_t* __restrict c, const double* __restrict bias,
                                                   const double* __restrict scale, int lo, int hi,
                                                   int8_t* __restrict o, uint64_t count) {
  for (uint64_t e = 0; e < count; ++e) o[e] = requantize_clamp(c[e], bias[e], scale[e], lo, hi);
}
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")]] void requantize_avx512(
    const int32_t* c, const double* bias, const double* scale, int lo, int hi, int8_t* o, uint64_t count) {
  requantize_loop(c, bias, scale, lo, hi, o, count);
}
[[gnu::target("avx2")]] void requantize_avx2(const int32_t* c, const double* bias, const double* scale,
                                             int lo, int hi, int8_t* o, uint64_t count) {
  requantize_loop(c, bias, scale, lo, hi, o, count);
}
void requantize_baseline(const int32_t* c, const double* bias, const double* scale, int lo, int hi, int8_t* o,
                         uint64_t count) {
  requantize_loop(c, bias, scale, lo, hi, o, count);
}
RequantizeSpan pick_requantize_span() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return requantize_avx512;
  return __builtin_cpu_supports("avx2") ? requantize_avx2 : requantize_baseline;
}
const RequantizeSpan requantize_span = pick_requantize_span();

// Output row r (image r / out_h, row r % out_h) of an average pool: the window's sums accumulated
// over the whole row (contiguous: the compiler vectorizes; `sum` holds out_w x c int32), then
// rounded as the machine does (pool_average; a power-of-two window's division as a shift).
void average_pool_row(const PoolStep& s, const int8_t* __restrict in, uint64_t r, int32_t* __restrict sum,
                      int8_t* __restrict o) {
  const uint64_t img = r / s.out_h, oy = r % s.out_h, width = s.out_w * s.c, c = s.c;
  std::fill_n(sum, width, 0);
  for (uint64_t a = 0; a < s.window; ++a)
    for (uint64_t b = 0; b < s.window; ++b) {
      const int8_t* src = in + ((img * s.in_h + oy * s.stride + a) * s.in_w + b) * c;
      for (uint64_t ox = 0; ox < s.out_w; ++ox)
        for (uint64_t ch = 0; ch < c; ++ch) sum[ox * c + ch] += src[ox * s.stride * c + ch];
    }
  const int32_t size = int32_t(s.window * s.window);
  if (!std::has_single_bit(uint32_t(size))) {
    for (uint64_t e = 0; e < width; ++e) o[e] = pool_average(sum[e], size);
    return;
  }
  const int p = std::countr_zero(uint32_t(size)) + 1;
  for (uint64_t e = 0; e < width; ++e) {
    const int32_t v = sum[e], q = ((v < 0 ? -v : v) * 2 + size) >> p;
    o[e] = static_cast<int8_t>(v < 0 ? -q : q);
  }
}

}  // namespace

struct CpuModel::Impl {
  const GpuPlan& plan;
  int threads;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<std::vector<int8_t>> tensors;
  std::vector<std::vector<int8_t>> gathered;           // per step: X (empty for direct and non-matmul steps)
  std::vector<std::vector<int32_t>> products;          // per step: C
  std::vector<std::unique_ptr<OneDnnOp>> products_of;  // per matmul step
  std::vector<uint64_t> c_stride;                      // per matmul step: C's row stride
  // Per matmul step whose table is a clamp and whose shifts are <= 52: each column's bias and
  // scale for requantize_clamp (requantize_clamp.h), and the clamp; else empty (integer path).
  struct ClampColumns {
    std::vector<double> bias, scale;  // per column, repeated for `rows_per_tile` rows
    uint64_t rows_per_tile = 1;
    int lo = -128, hi = 127;
  };
  std::vector<std::optional<ClampColumns>> clamp_columns;
  std::vector<std::unique_ptr<OneDnnOp>> max_pools;  // per max pool step
  double matmul_seconds = 0;

  // Below this many byte operations a loop runs on one thread: a parallel region's fork and
  // join cost more than the work (a few microseconds, far more on a busy machine).
  static constexpr uint64_t kParallelWork = uint64_t{1} << 16;
  bool parallel(uint64_t work) const { return threads > 1 && work >= kParallelWork; }

  Impl(const GpuPlan& p, int t) : plan(p), threads(t) {
    omp_set_num_threads(threads);  // oneDNN's OpenMP threads, and ours
    tensors.resize(plan.tensor_bytes.size());
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].assign(plan.tensor_bytes[i], 0);
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      tensors[static_cast<size_t>(plan.inputs[i])] = plan.input_data[i];
    gathered.resize(plan.steps.size());
    products.resize(plan.steps.size());
    products_of.resize(plan.steps.size());
    c_stride.resize(plan.steps.size());
    clamp_columns.resize(plan.steps.size());
    max_pools.resize(plan.steps.size());
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (const auto* p = std::get_if<PoolStep>(&plan.steps[i]); p && !p->avg)
        max_pools[i] = std::make_unique<OneDnnOp>(onednn_max_pool(eng, *p, plan.batch,
                                                                  tensors[size_t(p->input_tensor)].data(),
                                                                  tensors[size_t(p->output_tensor)].data()));
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto* s = std::get_if<MatmulStep>(&plan.steps[i]);
      if (!s) continue;
      int8_t* in = tensors[static_cast<size_t>(s->input_tensor[0])].data();
      if (s->gather.conv) {
        products[i].assign(s->m * s->n, 0);
        c_stride[i] = s->n;
        products_of[i] =
            std::make_unique<OneDnnOp>(onednn_conv(eng, strm, *s, plan.batch, in, products[i].data()));
      } else {
        if (!s->direct) {
          gathered[i].assign(s->m * s->k_pad, 0);  // padding columns stay zero
          in = gathered[i].data();
        }
        products[i].assign(s->m * s->n_pad, 0);
        c_stride[i] = s->n_pad;
        products_of[i] = std::make_unique<OneDnnOp>(onednn_matmul(eng, strm, *s, in, products[i].data()));
      }
      const auto clamp = table_clamp(s->table);
      if (clamp && std::all_of(s->columns.begin(), s->columns.end(),
                               [](const ColumnQuant& q) { return q.shift <= kMaxClampShift; })) {
        ClampColumns cc;
        cc.rows_per_tile = std::max<uint64_t>(1, 512 / s->n);  // long loops the compiler vectorizes
        for (uint64_t r = 0; r < cc.rows_per_tile; ++r)
          for (const ColumnQuant& q : s->columns) {
            cc.bias.push_back(double(q.bias));
            cc.scale.push_back(std::ldexp(double(q.mult), -int(q.shift)));
          }
        cc.lo = clamp->first;
        cc.hi = clamp->second;
        clamp_columns[i] = std::move(cc);
      }
    }
  }

  void gather(const MatmulStep& s, std::vector<int8_t>& x) {
    const Im2colGeometry& g = s.gather;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(g.rows * g.k_pad))
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
    if (!s.direct && !s.gather.conv) gather(s, gathered[i]);
    const Clock::time_point t0 = Clock::now();
    products_of[i]->run(strm);
    matmul_seconds += seconds_since(t0);
    const std::vector<int32_t>& c = products[i];
    const std::optional<ClampColumns>& cc = clamp_columns[i];
    std::vector<int8_t>& out = tensors[size_t(s.output_tensor)];
    // Rows of C side by side in memory, and so are the output's: tiles of rows in one flat loop.
    if (cc && c_stride[i] == s.n && s.scatter.pixel0 == 0 &&
        s.scatter.out_pixels == s.scatter.tensor_pixels) {
      const uint64_t tiles = (s.m + cc->rows_per_tile - 1) / cc->rows_per_tile;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.m * s.n))
      for (uint64_t t = 0; t < tiles; ++t) {
        const uint64_t first = t * cc->rows_per_tile, count = std::min(cc->rows_per_tile, s.m - first) * s.n;
        requantize_span(&c[first * s.n], cc->bias.data(), cc->scale.data(), cc->lo, cc->hi, &out[first * s.n],
                        count);
      }
      return;
    }
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.m * s.n))
    for (uint64_t row = 0; row < s.m; ++row) {
      int8_t* o = &out[scatter_offset(s.scatter, row, 0)];
      const int32_t* cr = &c[row * c_stride[i]];
      if (cc) {
        requantize_span(cr, cc->bias.data(), cc->scale.data(), cc->lo, cc->hi, o, s.n);
      } else {
        for (uint64_t j = 0; j < s.n; ++j) o[j] = requantize(cr[j], s.columns[j], s.table);
      }
    }
  }

  void run(size_t i, const PoolStep& s) {
    if (max_pools[i]) {  // oneDNN's max pooling: a maximum of int8 values, exact
      max_pools[i]->run(strm);
      return;
    }
    // Average pooling (max pools went to oneDNN above): one output row at a time (average_pool_row).
    const int8_t* in = tensors[size_t(s.input_tensor)].data();
    int8_t* out = tensors[size_t(s.output_tensor)].data();
    const uint64_t rows = s.elements / (s.out_w * s.c), width = s.out_w * s.c;  // batch x out_h rows
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.elements * s.window * s.window))
    for (uint64_t r = 0; r < rows; ++r) {
      thread_local std::vector<int32_t> sum;
      sum.resize(width);
      average_pool_row(s, in, r, sum.data(), out + r * width);
    }
  }

  void run(size_t, const VectorStep& s) {
    const int8_t* a = tensors[size_t(s.a_tensor)].data();
    const int8_t* b = tensors[size_t(s.b_tensor)].data();
    int8_t* out = tensors[size_t(s.output_tensor)].data();
    // One pixel's channels at a time: contiguous in all three views.
    const uint64_t channels = s.out.c, pixels = s.elements / channels;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.elements))
    for (uint64_t i = 0; i < pixels; ++i) {
      const uint64_t img = i / s.out.pixels, p = i % s.out.pixels;
      const int8_t* pa = a + view_offset(s.a, img, p, 0);
      const int8_t* pb = b + view_offset(s.b, img, p, 0);
      int8_t* po = out + view_offset(s.out, img, p, 0);
      for (uint64_t ch = 0; ch < channels; ++ch)
        po[ch] = vector_element(s.op, pa[ch], pb[ch], s.mult, s.shift, s.table);
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
    constexpr int64_t m = 256, k = 1024, n = 1024;
    MatmulStep step;  // only the shape and the weights matter here
    step.m = m;
    step.k = step.k_pad = k;
    step.n = step.n_pad = n;
    step.weights.assign(n * k, 1);
    std::vector<int8_t> x(m * k, 1);
    std::vector<int32_t> c(m * n);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    OneDnnOp mm = onednn_matmul(eng, strm, step, x.data(), c.data());
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
