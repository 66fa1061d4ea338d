// A quantized graph (compiler/graph.h QGraph) prepared for the GPU runner: every tensor a device
// buffer, every MatmulOp an im2col gather, an int8 GEMM C[m][n_pad] = X[m][k_pad] . W[n_pad][k_pad]^T
// with int32 accumulation (cuBLASLt's TN form: gpu/device.cu) and a requantize-and-activate
// pass; pools and element-wise ops as kernels. Everything here is plain C++ (no CUDA): the CUDA
// runner executes a plan, and the host model (host_exec.h) executes the same plan with loops so
// the CPU tests can hold the plan's layouts, padding and arithmetic against the golden reference.
//
// Padding: k_pad = round_up4(kernel_h x kernel_w x K), n_pad = round_up4(N); the padded weight
// rows and columns are zero, so padded columns of C are zero and never stored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/model.h"
#include "gpu/im2col.h"
#include "gpu/integer_ops.h"
#include "isa/table.h"

namespace tpusim::compiler {
struct QGraph;
}

namespace tpusim::gpu {

struct MatmulStep {
  Im2colGeometry gather;
  int input_tensor[kMaxGemmInputs] = {};  // tensor of each gather input
  // The GEMM reads the single input tensor in place (ld = k) instead of a gathered X: one whole
  // tensor, 1 x 1, stride 1, no padding, k a multiple of 4.
  bool direct = false;
  ScatterGeometry scatter;
  int output_tensor = -1;
  uint64_t m = 0, k = 0, n = 0, k_pad = 0, n_pad = 0;
  std::vector<int8_t> weights;       // [n_pad][k_pad]: row j holds output column j's weights
  std::vector<ColumnQuant> columns;  // n entries
  OutputTable table{};
  isa::Func func = isa::Func::identity;  // what `table` is made of (for a float reference: bench/)
  uint8_t clip = 127;
  uint64_t macs = 0;  // batch x out_pixels x k x n
};

// A view of a tensor's pixels, element-wise.
struct PixelView {
  uint64_t tensor_pixels = 0, pixel0 = 0, pixels = 0, c = 0;
};
constexpr uint64_t view_offset(const PixelView& v, uint64_t sample, uint64_t p, uint64_t ch) {
  return (sample * v.tensor_pixels + v.pixel0 + p) * v.c + ch;
}

struct VectorStep {
  uint32_t op = 5;  // isa::VecOp
  int a_tensor = -1, b_tensor = -1, output_tensor = -1;
  PixelView a, b, out;
  uint32_t mult = 1, shift = 0;
  OutputTable table{};
  isa::Func func = isa::Func::identity;  // what `table` is made of
  uint64_t elements = 0;  // batch x out.pixels x out.c
};

struct PoolStep {
  int input_tensor = -1, output_tensor = -1;
  bool avg = false;
  uint64_t window = 2, stride = 2, in_h = 0, in_w = 0, c = 0, out_h = 0, out_w = 0;
  uint64_t elements = 0;  // batch x out_h x out_w x c
};

using Step = std::variant<MatmulStep, PoolStep, VectorStep>;

struct GpuPlan {
  std::string name;
  uint64_t batch = 1;
  std::vector<std::string> tensor_names;
  std::vector<uint64_t> tensor_bytes;  // batch x elements
  std::vector<int> inputs;             // tensor of each model input
  std::vector<std::vector<int8_t>> input_data;
  int output = -1;
  std::vector<Step> steps;
  std::vector<std::string> step_layer;  // the description layer of each step
  // The model's MACs per batch (compiler::model_macs: what the runners' TOPS count).
  uint64_t model_macs = 0;
  // Sum of the matmul steps' macs: what the GEMMs compute, the identity copies that join concats
  // (concats are read as parts here) and a grouped convolution's zero blocks included; equal to
  // compiler::graph_matmul_work(graph).gemm_macs.
  uint64_t gemm_macs = 0;
  uint64_t weight_bytes = 0;  // sum of the matmul weights (k x n each, unpadded): read per batch
};

// How the runners (tpusim-gpu, tpusim-cpu) load a model: int8 elements (their kernels are int8;
// an LSTM's cell is int16 on the simulator) and concats as parts (the plan has no output at a
// channel). compare reads a results file's gemm_macs against this graph.
compiler::LoadOptions runner_load_options(std::optional<uint64_t> batch);

// Throws InputError naming the op when the graph is malformed (as run_golden would) or a matmul
// has more than kMaxGemmInputs inputs.
GpuPlan make_plan(const compiler::QGraph& graph);


// Whether two matmul steps gather the same X: the same rows from the same input tensors and
// views with the same geometry, or the same tensor read in place (the GEMM groups below; the CPU
// runner's shared gathers).
bool same_gather(const MatmulStep& a, const MatmulStep& b);

// Horizontal fusion (the CUDA runner and the host model; the CPU runner runs steps one by one):
// consecutive matmul steps that gather the same rows (the same input tensors and geometry, or
// the same tensor read in place) and whose outputs none of them reads share one gather and one
// GEMM over their weights stacked, and one requantize pass writes each member's columns to its
// own output: an LSTM time step's gates over [x_t, h_(t-1)], an inception module's 1 x 1
// branches over one input. Integer GEMM columns do not depend on their neighbours, so the result
// is bit for bit the members' own.
inline constexpr size_t kMaxFusedGemms = 8;
struct GemmGroup {
  size_t first = 0, count = 1;  // plan.steps[first, first + count): a matmul run, or any one step
  uint64_t n_total = 0;         // columns of the shared C: the sum of the members' n_pad (matmuls)
  std::vector<uint64_t> col0;   // each member's first column of C
  std::vector<int8_t> weights;  // [n_total][k_pad], the members' weights in order; empty for one step
};

// The plan's steps in order, as groups (every step in exactly one).
std::vector<GemmGroup> gemm_groups(const GpuPlan& plan);

// table.value[b - OutputTable::kLo] = sim::apply_func(func, b, clip, false) for b in
// [OutputTable::kLo, OutputTable::kHi] (the curves' input range, isa::kCurveInputMin..Max).
OutputTable output_table(isa::Func func, uint8_t clip);

// W[n_pad][k_pad] from weights [rows][n] (rows = kernel_h x kernel_w x K: graph.h's layout,
// flattened), zero-padded.
std::vector<int8_t> pack_weights(const std::vector<int8_t>& weights, uint64_t rows, uint64_t n, uint64_t k_pad,
                                 uint64_t n_pad);

}  // namespace tpusim::gpu
