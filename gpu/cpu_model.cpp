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

#include "gpu/cpu_kernels.h"
#include "gpu/onednn_ops.h"
#include "gpu/requantize_clamp.h"

namespace tpusim::gpu {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Output row r (image r / out_h, row r % out_h) of an average pool: the window's sums accumulated
// over the whole row (contiguous: the compiler vectorizes; `sum` holds out_w x c int32), then
// rounded as the machine does (pool_average_span: cpu_kernels.h).
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
  pool_average_span(sum, int32_t(s.window * s.window), o, width);
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
  // Per matmul step whose shifts are all <= 52: each column's bias and scale for requantize_span
  // (cpu_kernels.h), and the output map (a clamp or the curve's table); else empty (integer path).
  struct ColumnScales {
    std::vector<double> bias, scale;  // per column, repeated for `rows_per_tile` rows
    uint64_t rows_per_tile = 1;
    OutputMap map;
    std::vector<int32_t> table;  // map.table's storage (a curve)
  };
  std::vector<std::optional<ColumnScales>> column_scales;
  // Per matmul step: the earlier step whose gathered X it reads (the same inputs and geometry, none
  // written in between: an LSTM step's four gates), or -1.
  std::vector<int> shares_gather;
  // Per vector step: its arithmetic prepared for vector_span (empty: the scalar form).
  std::vector<std::optional<VectorKernel>> vector_kernels;
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
    column_scales.resize(plan.steps.size());
    shares_gather.assign(plan.steps.size(), -1);
    vector_kernels.resize(plan.steps.size());
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (const auto* v = std::get_if<VectorStep>(&plan.steps[i]))
        vector_kernels[i] = vector_kernel(v->op, v->mult, v->shift, v->table);
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
          shares_gather[i] = earlier_gather(i);
          if (shares_gather[i] < 0) gathered[i].assign(s->m * s->k_pad, 0);  // padding columns stay zero
          in = gathered[size_t(shares_gather[i] < 0 ? int(i) : shares_gather[i])].data();
        }
        products[i].assign(s->m * s->n_pad, 0);
        c_stride[i] = s->n_pad;
        products_of[i] = std::make_unique<OneDnnOp>(onednn_matmul(eng, strm, *s, in, products[i].data()));
      }
      if (std::all_of(s->columns.begin(), s->columns.end(),
                      [](const ColumnQuant& q) { return q.shift <= kMaxClampShift; })) {
        ColumnScales& cc = column_scales[i].emplace();
        cc.rows_per_tile = std::max<uint64_t>(1, 512 / s->n);  // long loops the compiler vectorizes
        for (uint64_t r = 0; r < cc.rows_per_tile; ++r)
          for (const ColumnQuant& q : s->columns) {
            cc.bias.push_back(double(q.bias));
            cc.scale.push_back(std::ldexp(double(q.mult), -int(q.shift)));
          }
        cc.map = output_map(s->table, cc.table);
      }
    }
  }

  // The earlier matmul step whose gathered X step i can read: the same inputs and geometry, and no
  // step in between writes any of those inputs; else -1.
  int earlier_gather(size_t i) const {
    const MatmulStep& s = std::get<MatmulStep>(plan.steps[i]);
    for (size_t j = i; j-- > 0;) {
      const int written = std::visit([](const auto& step) { return step.output_tensor; }, plan.steps[j]);
      if (std::find(s.input_tensor, s.input_tensor + s.gather.inputs, written) != s.input_tensor + s.gather.inputs)
        return -1;
      if (const auto* e = std::get_if<MatmulStep>(&plan.steps[j]);
          e && !e->direct && !e->gather.conv && shares_gather[j] < 0 && same_gather(*e, s))
        return int(j);
    }
    return -1;
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
    if (!s.direct && !s.gather.conv && shares_gather[i] < 0) gather(s, gathered[i]);
    if (profiling) {
      const Clock::time_point t0 = Clock::now();
      products_of[i]->run(strm);
      matmul_seconds += seconds_since(t0);
    } else {
      products_of[i]->run(strm);
    }
    const std::vector<int32_t>& c = products[i];
    const std::optional<ColumnScales>& cc = column_scales[i];
    std::vector<int8_t>& out = tensors[size_t(s.output_tensor)];
    // Rows of C side by side in memory, and so are the output's: tiles of rows in one flat loop.
    if (cc && c_stride[i] == s.n && s.scatter.pixel0 == 0 &&
        s.scatter.out_pixels == s.scatter.tensor_pixels) {
      const uint64_t tiles = (s.m + cc->rows_per_tile - 1) / cc->rows_per_tile;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.m * s.n))
      for (uint64_t t = 0; t < tiles; ++t) {
        const uint64_t first = t * cc->rows_per_tile, count = std::min(cc->rows_per_tile, s.m - first) * s.n;
        requantize_span(&c[first * s.n], cc->bias.data(), cc->scale.data(), cc->map, &out[first * s.n], count);
      }
      return;
    }
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.m * s.n))
    for (uint64_t row = 0; row < s.m; ++row) {
      int8_t* o = &out[scatter_offset(s.scatter, row, 0)];
      const int32_t* cr = &c[row * c_stride[i]];
      if (cc) {
        requantize_span(cr, cc->bias.data(), cc->scale.data(), cc->map, o, s.n);
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

  void run(size_t i, const VectorStep& s) {
    const int8_t* a = tensors[size_t(s.a_tensor)].data();
    const int8_t* b = tensors[size_t(s.b_tensor)].data();
    int8_t* out = tensors[size_t(s.output_tensor)].data();
    const uint64_t per_sample = s.out.pixels * s.out.c, samples = s.elements / per_sample;
    const std::optional<VectorKernel>& k = vector_kernels[i];
    if (!k) {  // a multiplier above 16 bits (never planned): the integer form, pixel by pixel
      for (uint64_t img = 0; img < samples; ++img)
        for (uint64_t p = 0; p < s.out.pixels; ++p)
          for (uint64_t ch = 0; ch < s.out.c; ++ch)
            out[view_offset(s.out, img, p, ch)] = vector_element(
                s.op, a[view_offset(s.a, img, p, ch)], b[view_offset(s.b, img, p, ch)], s.mult, s.shift, s.table);
      return;
    }
    // A view's pixels are consecutive in its tensor: a sample's part of all three is one span each,
    // and whole tensors are one span altogether. Spans of at least kTile elements go in tiles.
    constexpr uint64_t kTile = 4096;
    const bool whole = s.a.pixels == s.a.tensor_pixels && s.b.pixels == s.b.tensor_pixels &&
                       s.out.pixels == s.out.tensor_pixels;
    const uint64_t spans = whole ? 1 : samples, span = whole ? s.elements : per_sample;
    const uint64_t tiles_per_span = (span + kTile - 1) / kTile;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel(s.elements))
    for (uint64_t t = 0; t < spans * tiles_per_span; ++t) {
      const uint64_t img = t / tiles_per_span, first = t % tiles_per_span * kTile;
      const uint64_t count = std::min(kTile, span - first);
      vector_span(*k, a + view_offset(s.a, img, 0, 0) + first, b + view_offset(s.b, img, 0, 0) + first,
                  out + view_offset(s.out, img, 0, 0) + first, count);
    }
  }

  std::vector<double> step_seconds;
  bool profiling = false;

  // With `profile`, the time of each step and of the matmuls in it (clock reads cost tens of
  // nanoseconds each: a few percent of a small model's batch, so timed batches go without).
  const std::vector<int8_t>& infer(bool profile) {
    profiling = profile;
    matmul_seconds = 0;
    step_seconds.assign(plan.steps.size(), 0);
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      if (!profile) {
        std::visit([&](const auto& step) { run(i, step); }, plan.steps[i]);
        continue;
      }
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

const std::vector<int8_t>& CpuModel::infer(bool profile) { return impl_->infer(profile); }
double CpuModel::last_matmul_seconds() const { return impl_->matmul_seconds; }
const std::vector<double>& CpuModel::last_step_seconds() const { return impl_->step_seconds; }
int CpuModel::shared_gathers() const {
  return int(std::count_if(impl_->shares_gather.begin(), impl_->shares_gather.end(), [](int j) { return j >= 0; }));
}

Timing CpuModel::time(const TimingOptions& o) {
  for (uint64_t i = 0; i < o.warmup; ++i) impl_->infer(false);
  std::vector<double> batches, repeats;
  for (uint64_t r = 0; r < o.repeats; ++r) {
    double sum = 0;
    for (uint64_t i = 0; i < o.iterations; ++i) {
      const Clock::time_point t0 = Clock::now();
      impl_->infer(false);
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
