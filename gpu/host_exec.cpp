// The host model of the GPU pipeline (host_exec.h).
#include "gpu/host_exec.h"

#include <algorithm>
#include <variant>

namespace tpusim::gpu {
namespace {

using Tensors = std::vector<std::vector<int8_t>>;

// A group of matmul steps (plan.h, gemm_groups): one gather, one GEMM over the stacked weights,
// each member's columns requantized into its own output, as the CUDA runner does it.
void run_matmuls(const GpuPlan& plan, const GemmGroup& g, Tensors& t) {
  const auto& lead = std::get<MatmulStep>(plan.steps[g.first]);
  const std::vector<int8_t> x = lead.direct ? t[static_cast<size_t>(lead.input_tensor[0])] : gather_rows(lead, t);
  const std::vector<int32_t> c =
      gemm_s8s8s32(x, g.count == 1 ? lead.weights : g.weights, lead.m, lead.k_pad, g.n_total);
  for (size_t i = 0; i < g.count; ++i) {
    const auto& s = std::get<MatmulStep>(plan.steps[g.first + i]);
    std::vector<int8_t>& out = t[static_cast<size_t>(s.output_tensor)];
    for (uint64_t row = 0; row < s.m; ++row)
      for (uint64_t j = 0; j < s.n; ++j)
        out[scatter_offset(s.scatter, row, j)] =
            requantize(c[row * g.n_total + g.col0[i] + j], s.columns[j], s.table);
  }
}

void run(const PoolStep& s, Tensors& t) {
  const std::vector<int8_t>& in = t[static_cast<size_t>(s.input_tensor)];
  std::vector<int8_t>& out = t[static_cast<size_t>(s.output_tensor)];
  const uint64_t batch = s.elements / (s.out_h * s.out_w * s.c);
  for (uint64_t img = 0; img < batch; ++img)
    for (uint64_t oy = 0; oy < s.out_h; ++oy)
      for (uint64_t ox = 0; ox < s.out_w; ++ox)
        for (uint64_t ch = 0; ch < s.c; ++ch) {
          int64_t v = s.avg ? 0 : -128;
          for (uint64_t r = 0; r < s.window; ++r)
            for (uint64_t q = 0; q < s.window; ++q) {
              const int64_t e = in[((img * s.in_h + oy * s.stride + r) * s.in_w + ox * s.stride + q) * s.c + ch];
              v = s.avg ? v + e : (e > v ? e : v);
            }
          out[((img * s.out_h + oy) * s.out_w + ox) * s.c + ch] =
              s.avg ? pool_average(v, static_cast<int64_t>(s.window * s.window)) : static_cast<int8_t>(v);
        }
}

void run(const VectorStep& s, Tensors& t) {
  const std::vector<int8_t>& a = t[static_cast<size_t>(s.a_tensor)];
  const std::vector<int8_t>& b = t[static_cast<size_t>(s.b_tensor)];
  std::vector<int8_t>& out = t[static_cast<size_t>(s.output_tensor)];
  const uint64_t per_sample = s.out.pixels * s.out.c;
  for (uint64_t i = 0; i < s.elements; ++i) {
    const uint64_t img = i / per_sample, p = i % per_sample / s.out.c, ch = i % s.out.c;
    out[view_offset(s.out, img, p, ch)] =
        vector_element(s.op, a[view_offset(s.a, img, p, ch)], b[view_offset(s.b, img, p, ch)], s.mult, s.shift,
                       s.table);
  }
}

}  // namespace

std::vector<int8_t> gather_rows(const MatmulStep& step, const Tensors& tensors) {
  const Im2colGeometry& g = step.gather;
  std::vector<int8_t> x(g.rows * g.k_pad, 0);
  // By runs, as the CUDA gather kernel walks it (tests/gpu/plan_test.cpp holds the runs against
  // gather_source, byte by byte).
  for (uint64_t row = 0; row < g.rows; ++row)
    for (uint64_t part = 0; part < gather_parts(g); ++part) {
      const GatherRun run = gather_run(g, row, part);
      if (run.which < 0) continue;
      const int8_t* from = &tensors[static_cast<size_t>(step.input_tensor[run.which])][run.offset];
      std::copy(from, from + run.length, &x[row * g.k_pad + run.col]);
    }
  return x;
}

std::vector<int32_t> gemm_s8s8s32(const std::vector<int8_t>& x, const std::vector<int8_t>& w, uint64_t m,
                                  uint64_t k_pad, uint64_t n_pad) {
  std::vector<int32_t> c(m * n_pad);
  for (uint64_t row = 0; row < m; ++row)
    for (uint64_t j = 0; j < n_pad; ++j) {
      uint32_t acc = 0;  // int32 with wrap-around
      const int8_t* xr = &x[row * k_pad];
      const int8_t* wr = &w[j * k_pad];
      for (uint64_t i = 0; i < k_pad; ++i) acc += static_cast<uint32_t>(int32_t{xr[i]} * int32_t{wr[i]});
      c[row * n_pad + j] = static_cast<int32_t>(acc);
    }
  return c;
}

std::vector<std::vector<int8_t>> run_plan_on_host(const GpuPlan& plan) {
  Tensors t(plan.tensor_bytes.size());
  for (size_t i = 0; i < t.size(); ++i) t[i].assign(plan.tensor_bytes[i], 0);
  for (size_t i = 0; i < plan.inputs.size(); ++i) t[static_cast<size_t>(plan.inputs[i])] = plan.input_data[i];
  for (const GemmGroup& g : gemm_groups(plan)) {
    if (std::holds_alternative<MatmulStep>(plan.steps[g.first])) run_matmuls(plan, g, t);
    else if (const auto* p = std::get_if<PoolStep>(&plan.steps[g.first])) run(*p, t);
    else run(std::get<VectorStep>(plan.steps[g.first]), t);
  }
  return t;
}

}  // namespace tpusim::gpu
