// The GPU runner's pipeline executed on the CPU with plain loops: for each group of matmul
// steps (plan.h, gemm_groups: one step, or several that gather the same rows), the im2col gather
// into X[m][k_pad] (gather_source), the padded int8 GEMM over the group's weights with int32
// wrap-around, then requantize per column through each member's output table; pools and element-wise steps with
// the same integer_ops.h functions the CUDA kernels call. The CPU tests hold its output against
// compiler::run_golden, which checks the plan (layouts, padding, concatenation, views, tables)
// everywhere, with or without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/plan.h"

namespace tpusim::gpu {

// The im2col matrix X[m][k_pad] of one matmul step, from the tensors' data.
std::vector<int8_t> gather_rows(const MatmulStep& step, const std::vector<std::vector<int8_t>>& tensors);

// C[m][n_pad] = X[m][k_pad] . W[n_pad][k_pad]^T in int32 with wrap-around.
std::vector<int32_t> gemm_s8s8s32(const std::vector<int8_t>& x, const std::vector<int8_t>& w, uint64_t m,
                                  uint64_t k_pad, uint64_t n_pad);

// Every tensor's data after running the plan, indexed like GpuPlan::tensor_bytes.
std::vector<std::vector<int8_t>> run_plan_on_host(const GpuPlan& plan);

}  // namespace tpusim::gpu
