// The oneDNN primitives the CPU runner (cpu_model.h) executes, each exact: int8 products with int32
// output (a matmul C[m][n_pad] = X[m][k_pad] . W^T, a convolution from an NHWC tensor to C[m][n])
// and max pooling of int8 values. Weights are reordered once into the primitive's preferred layout;
// every buffer is the caller's and must outlive the op.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <unordered_map>

#include "gpu/plan.h"

namespace tpusim::gpu {

struct OneDnnOp {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  void run(dnnl::stream& strm);  // executes and waits
};

// C[m][n_pad] (int32) = X[m][k_pad] . W^T for a matmul step's packed weights.
OneDnnOp onednn_matmul(const dnnl::engine& eng, dnnl::stream& strm, const MatmulStep& s, int8_t* x,
                       int32_t* c);
// A convolution step (one input, the whole map: plan.cpp checks) from the NHWC input to C[m][n].
OneDnnOp onednn_conv(const dnnl::engine& eng, dnnl::stream& strm, const MatmulStep& s, uint64_t batch,
                     int8_t* input, int32_t* c);
// A max pool step, NHWC int8 to NHWC int8.
OneDnnOp onednn_max_pool(const dnnl::engine& eng, const PoolStep& p, uint64_t batch, int8_t* input,
                         int8_t* output);

}  // namespace tpusim::gpu
