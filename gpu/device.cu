// The CUDA runner (device.h): a GpuPlan on the GPU. Each group of matmul steps (plan.h,
// gemm_groups: one step, or consecutive steps that gather the same rows) is a gather kernel
// (im2col, gpu/im2col.h) unless the GEMM can read its input in place, one cuBLASLt int8 GEMM over
// the group's stacked weights in the TN form Hopper needs (CUBLAS_COMPUTE_32I, int8 A and B,
// int32 C; BUILD-NOTES.md), and one requantize-and-activate kernel that writes each member's
// columns to its own output; pools and element-wise steps are one kernel each. The integer
// arithmetic is gpu/integer_ops.h's constexpr functions, the same the host model runs
// (--expt-relaxed-constexpr lets device code call them).
//
// cuBLASLt is column-major. With X[m][k_pad] and W[n_pad][k_pad] row-major, C[m][n_pad] row-major
// is the column-major n_pad x m matrix C' = op(A) . B with A = W seen as a k_pad x n_pad
// column-major matrix (lda = k_pad), op(A) = A^T, and B = X seen as k_pad x m (ldb = k_pad):
// cuBLAS's m = n_pad, n = m, k = k_pad; every one of m, k, lda, ldb, ldc is a multiple of 4.
#include <cublasLt.h>
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <variant>

#include "gpu/device.h"
#include "gpu/provenance.h"

namespace tpusim::gpu {
namespace {

void check_cuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cudaGetErrorString(e));
}
void check_lt(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")");
}
#define CUDA_CHECK(x) check_cuda((x), #x, __FILE__, __LINE__)
#define LT_CHECK(x) check_lt((x), #x, __FILE__, __LINE__)

// Every kernel but the flush works on a [rows][columns] problem: a block is 8 warps, each warp
// one row at a time (threadIdx.y), its 32 lanes across the row's columns (threadIdx.x), so a
// row's indexing (its sample and pixel: 64-bit divisions) is done once per warp and row, and
// each lane's work is a coalesced load and store. A step's output table (OutputTable: 4 KB, the
// function over y in [-2048, 2047]) lives in device memory and is read through the L1 cache; as
// a by-value kernel parameter indexed per element it made the requantize kernel, on an H200,
// take 6 to 22 times as long as the GEMMs (ncu, 2026-11-28).
constexpr unsigned kLanes = 32, kRowsPerBlock = 8;
const dim3 kBlock(kLanes, kRowsPerBlock);
// x_blocks blocks across the columns, enough blocks down the rows (each loops if capped).
dim3 grid_for(uint64_t rows, uint64_t x_blocks) {
  const uint64_t y = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return dim3(static_cast<unsigned>(std::clamp<uint64_t>(x_blocks, 1, 65535)),
              static_cast<unsigned>(std::clamp<uint64_t>(y, 1, 65535)));
}
uint64_t column_blocks(uint64_t columns) { return (columns + kLanes - 1) / kLanes; }

__device__ uint64_t first_row() { return blockIdx.y * uint64_t{kRowsPerBlock} + threadIdx.y; }
__device__ uint64_t row_stride() { return gridDim.y * uint64_t{kRowsPerBlock}; }
struct InputPointers {
  const int8_t* p[kMaxGemmInputs];
};

// X[row][0 .. k_pad) by runs (gather_run): unit u = part x chunks + chunk is kGatherChunk bytes
// of one part's run, units spread over blockIdx.x; unit 0 also zeroes k .. k_pad - 1.
constexpr uint64_t kGatherChunk = 32 * kLanes;  // a multiple of 4 x kLanes
// Holds the stream until the host opens the gate (gate[0] != 0) or timeout_ns have passed, so that
// the host can queue a timed interval's launches while the GPU waits: the interval then measures
// the GPU's work alone, not the host's launch rate (small kernels launched one by one are
// otherwise launch-bound). An expired gate counts itself in gate[1]. gate is mapped host memory,
// which the host reads and writes at the same time: every access on both sides is atomic at
// system scope (the host side: Impl::gate_flag).
__global__ void gate_kernel(int* gate, uint64_t timeout_ns) {
  cuda::atomic_ref<int, cuda::thread_scope_system> open(gate[0]), expired(gate[1]);
  uint64_t t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (open.load(cuda::std::memory_order_acquire) == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) {
      expired.fetch_add(1, cuda::std::memory_order_release);
      return;
    }
    __nanosleep(500);
  }
}

__global__ void gather_kernel(Im2colGeometry g, InputPointers in, uint64_t chunks, int8_t* x) {
  const uint64_t units = gather_parts(g) * chunks;
  for (uint64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const uint64_t part = unit / chunks, chunk = unit % chunks;
    for (uint64_t row = first_row(); row < g.rows; row += row_stride()) {
      int8_t* xr = x + row * g.k_pad;
      if (unit == 0 && g.k + threadIdx.x < g.k_pad) xr[g.k + threadIdx.x] = 0;
      const GatherRun run = gather_run(g, row, part);
      const uint64_t end = std::min(run.length, (chunk + 1) * kGatherChunk);
      const int8_t* from = run.which < 0 ? nullptr : in.p[run.which] + run.offset;
      if (run.length % 4 == 0 && run.col % 4 == 0 && run.offset % 4 == 0) {
        // Four bytes a lane: the run starts and ends on a word in X (k_pad is a multiple of 4)
        // and in its tensor (cudaMalloc aligns each tensor to 256 bytes).
        int32_t* to = reinterpret_cast<int32_t*>(xr + run.col);
        const int32_t* words = reinterpret_cast<const int32_t*>(from);
        for (uint64_t w = chunk * kGatherChunk / 4 + threadIdx.x; w < end / 4; w += kLanes) to[w] = words ? words[w] : 0;
        continue;
      }
      for (uint64_t b = chunk * kGatherChunk + threadIdx.x; b < end; b += kLanes) xr[run.col + b] = from ? from[b] : 0;
    }
  }
}

// One member of a GEMM group (plan.h, gemm_groups): its columns of C and where they go.
struct RequantMember {
  uint64_t col0 = 0, n = 0;
  const ColumnQuant* columns = nullptr;
  const OutputTable* table = nullptr;
  ScatterGeometry sg{};
  int8_t* out = nullptr;
};
struct RequantMembers {
  RequantMember member[kMaxFusedGemms];
  int count = 0;
};

__global__ void requantize_kernel(const int32_t* c, uint64_t m, uint64_t ld, RequantMembers ms) {
  for (uint64_t row = first_row(); row < m; row += row_stride()) {
    const int32_t* cr = c + row * ld;
    for (int i = 0; i < ms.count; ++i) {
      const RequantMember& r = ms.member[i];
      int8_t* o = r.out + scatter_offset(r.sg, row, 0);  // scatter_offset is row's base + j
      for (uint64_t j = blockIdx.x * uint64_t{kLanes} + threadIdx.x; j < r.n; j += gridDim.x * uint64_t{kLanes})
        o[j] = requantize(cr[r.col0 + j], r.columns[j], *r.table);
    }
  }
}

__global__ void pool_kernel(PoolStep s, const int8_t* in, int8_t* out) {
  const uint64_t rows = s.elements / s.c;  // batch x out_h x out_w
  for (uint64_t row = first_row(); row < rows; row += row_stride()) {
    const uint64_t ox = row % s.out_w, oy = row / s.out_w % s.out_h, img = row / (s.out_w * s.out_h);
    const int8_t* window = in + ((img * s.in_h + oy * s.stride) * s.in_w + ox * s.stride) * s.c;
    for (uint64_t ch = blockIdx.x * uint64_t{kLanes} + threadIdx.x; ch < s.c; ch += gridDim.x * uint64_t{kLanes}) {
      int64_t v = s.avg ? 0 : -128;
      for (uint64_t r = 0; r < s.window; ++r)
        for (uint64_t q = 0; q < s.window; ++q) {
          const int64_t e = window[(r * s.in_w + q) * s.c + ch];
          v = s.avg ? v + e : (e > v ? e : v);
        }
      out[row * s.c + ch] = s.avg ? pool_average(v, static_cast<int64_t>(s.window * s.window)) : static_cast<int8_t>(v);
    }
  }
}

__global__ void vector_kernel(VectorStep s, const OutputTable* table, const int8_t* a, const int8_t* b, int8_t* out) {
  const uint64_t rows = s.elements / s.out.c;  // batch x pixels
  for (uint64_t row = first_row(); row < rows; row += row_stride()) {
    const uint64_t img = row / s.out.pixels, p = row % s.out.pixels;  // view_offset is linear in ch
    const int8_t *ar = a + view_offset(s.a, img, p, 0), *br = b + view_offset(s.b, img, p, 0);
    int8_t* o = out + view_offset(s.out, img, p, 0);
    for (uint64_t ch = blockIdx.x * uint64_t{kLanes} + threadIdx.x; ch < s.out.c; ch += gridDim.x * uint64_t{kLanes})
      o[ch] = vector_element(s.op, ar[ch], br[ch], s.mult, s.shift, *table);
  }
}

// Dense int8 tensor-core operations per SM per clock (NVIDIA's architecture whitepapers: e.g.
// H100 SXM5, 132 SMs at 1830 MHz, 1979 dense int8 TOPS = 8192 per SM per clock).
double int8_ops_per_sm_clock(int major, int minor) {
  const int cc = major * 10 + minor;
  switch (cc) {
    case 75: return 2048;  // Turing (T4)
    case 80: return 4096;  // A100
    case 86: return 2048;  // GA10x
    case 89: return 2048;  // Ada
    case 90: return 8192;  // Hopper
    default: return 0;
  }
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The kernel module's version from /proc/driver/nvidia/version (gpu/provenance.h).
std::string kernel_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "unknown";
  return kernel_module_version(line);
}

}  // namespace

std::string gpu_absent_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return count == 0 ? "the CUDA runtime sees no device" : "";
}

DeviceInfo query_device(double peak_override_tops) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  int clock_khz = 0, mem_khz = 0, bus_bits = 0, l2 = 0, drv = 0, rt = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  DeviceInfo d;
  d.name = p.name;
  d.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
  d.sms = static_cast<uint64_t>(p.multiProcessorCount);
  d.sm_clock_mhz = clock_khz / 1e3;
  d.memory_clock_mhz = mem_khz / 1e3;
  d.memory_bus_bits = static_cast<uint64_t>(bus_bits);
  d.memory_gbps = 2.0 * mem_khz * 1e3 * bus_bits / 8 / 1e9;
  d.l2_bytes = static_cast<uint64_t>(l2);
  d.driver_version = kernel_driver_version() + " (CUDA driver API " + version_text(drv) + ")";
  d.cuda_runtime_version = version_text(rt);
  d.cublaslt_version = std::to_string(cublasLtGetVersion());
  const double per_clock = int8_ops_per_sm_clock(p.major, p.minor);
  if (peak_override_tops > 0) {
    d.peak_int8_tops = peak_override_tops;
    d.peak_source = "given with --peak-tops";
  } else if (per_clock > 0) {
    d.peak_int8_tops = d.sms * d.sm_clock_mhz * 1e6 * per_clock / 1e12;
    d.peak_source = "SMs x peak SM clock x " + std::to_string(static_cast<int>(per_clock)) +
                    " dense int8 ops per SM per clock (sm_" + std::to_string(p.major * 10 + p.minor) + ")";
  } else {
    d.peak_source = "unknown for compute capability " + d.compute_capability + ": give --peak-tops";
  }
  return d;
}

struct DeviceModel::Impl {
  // One per group of gemm_groups(plan): a matmul group's GEMM and requantize pass, or a pool or
  // vector step (its table only).
  struct Gemm {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    int8_t* w = nullptr;
    std::vector<ColumnQuant*> columns;  // per member
    std::vector<OutputTable*> tables;   // per member, in device memory (matmul and vector steps)
    RequantMembers requant{};
    uint64_t widest = 0;  // the widest member's n (the requantize grid)
    uint64_t ld = 0;      // columns of C: the group's n_total
  };

  const GpuPlan& plan;
  std::vector<GemmGroup> groups;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::vector<int8_t*> tensors;
  std::vector<Gemm> gemms;  // one per group
  int8_t* gathered = nullptr;
  int32_t* accumulators = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t{32} << 20;
  std::vector<int8_t*> pinned_inputs;
  int8_t* pinned_output = nullptr;
  void* flush = nullptr;
  size_t flush_bytes = 0;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraphExec_t graphs[2] = {nullptr, nullptr};  // [end_to_end]
  int* gate_host = nullptr;  // [0]: open, [1]: gates expired (mapped pinned memory; gate_flag)
  int* gate_device = nullptr;
  // L2-warm timing's batches per gate (time): 0 until a gate first expires, then kept for the
  // model's later repeats and modes.
  uint64_t warm_chunk = 0;

  explicit Impl(const GpuPlan& p) : plan(p), groups(gemm_groups(p)) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    LT_CHECK(cublasLtCreate(&lt));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (uint64_t bytes : plan.tensor_bytes) {
      int8_t* t = nullptr;
      CUDA_CHECK(cudaMalloc(&t, std::max<uint64_t>(bytes, 4)));
      CUDA_CHECK(cudaMemset(t, 0, std::max<uint64_t>(bytes, 4)));
      tensors.push_back(t);
    }
    uint64_t x_bytes = 4, c_elements = 4;
    for (const GemmGroup& g : groups)
      if (const auto* m = std::get_if<MatmulStep>(&plan.steps[g.first])) {
        if (!m->direct) x_bytes = std::max(x_bytes, m->m * m->k_pad);
        c_elements = std::max(c_elements, m->m * g.n_total);
      }
    CUDA_CHECK(cudaMalloc(&gathered, x_bytes));
    CUDA_CHECK(cudaMalloc(&accumulators, c_elements * sizeof(int32_t)));
    CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    gemms.resize(groups.size());
    for (size_t i = 0; i < groups.size(); ++i)
      if (std::holds_alternative<MatmulStep>(plan.steps[groups[i].first])) prepare(groups[i], gemms[i]);
      else if (const auto* v = std::get_if<VectorStep>(&plan.steps[groups[i].first])) upload_table(v->table, gemms[i]);
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      int8_t* h = nullptr;
      CUDA_CHECK(cudaMallocHost(&h, std::max<size_t>(plan.input_data[i].size(), 4)));
      std::copy(plan.input_data[i].begin(), plan.input_data[i].end(), h);
      pinned_inputs.push_back(h);
    }
    CUDA_CHECK(cudaMallocHost(&pinned_output, std::max<uint64_t>(plan.tensor_bytes[plan.output], 4)));
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    flush_bytes = std::max<size_t>(size_t{2} * static_cast<size_t>(l2), size_t{1} << 20);
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    void* g = nullptr;
    CUDA_CHECK(cudaHostAlloc(&g, 2 * sizeof(int), cudaHostAllocMapped));
    gate_host = static_cast<int*>(g);
    gate_flag(0).store(1);
    gate_flag(1).store(0);
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_device), g, 0));
  }

  ~Impl() {  // no throwing here: errors at teardown are ignored
    for (cudaGraphExec_t g : graphs)
      if (g) cudaGraphExecDestroy(g);
    for (Gemm& g : gemms) {
      if (g.desc) cublasLtMatmulDescDestroy(g.desc);
      if (g.a) cublasLtMatrixLayoutDestroy(g.a);
      if (g.b) cublasLtMatrixLayoutDestroy(g.b);
      if (g.c) cublasLtMatrixLayoutDestroy(g.c);
      cudaFree(g.w);
      for (ColumnQuant* c : g.columns) cudaFree(c);
      for (OutputTable* t : g.tables) cudaFree(t);
    }
    for (int8_t* t : tensors) cudaFree(t);
    for (int8_t* h : pinned_inputs) cudaFreeHost(h);
    cudaFreeHost(pinned_output);
    cudaFree(gathered);
    cudaFree(accumulators);
    cudaFree(workspace);
    cudaFree(flush);
    cudaFreeHost(gate_host);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (lt) cublasLtDestroy(lt);
    if (stream) cudaStreamDestroy(stream);
  }

  void upload_table(const OutputTable& table, Gemm& g) {
    OutputTable* t = nullptr;
    CUDA_CHECK(cudaMalloc(&t, sizeof(OutputTable)));
    g.tables.push_back(t);
    CUDA_CHECK(cudaMemcpy(t, &table, sizeof(OutputTable), cudaMemcpyHostToDevice));
  }
  // A matmul group: its stacked weights (or the one step's), each member's columns and table,
  // and one GEMM of m x n_total over k_pad.
  void prepare(const GemmGroup& group, Gemm& g) {
    const MatmulStep& m = std::get<MatmulStep>(plan.steps[group.first]);
    const std::vector<int8_t>& w = group.count == 1 ? m.weights : group.weights;
    CUDA_CHECK(cudaMalloc(&g.w, w.size()));
    CUDA_CHECK(cudaMemcpy(g.w, w.data(), w.size(), cudaMemcpyHostToDevice));
    g.requant.count = static_cast<int>(group.count);
    for (size_t i = 0; i < group.count; ++i) {
      const MatmulStep& s = std::get<MatmulStep>(plan.steps[group.first + i]);
      ColumnQuant* c = nullptr;
      CUDA_CHECK(cudaMalloc(&c, s.columns.size() * sizeof(ColumnQuant)));
      g.columns.push_back(c);
      CUDA_CHECK(cudaMemcpy(c, s.columns.data(), s.columns.size() * sizeof(ColumnQuant), cudaMemcpyHostToDevice));
      upload_table(s.table, g);
      g.requant.member[i] = {group.col0[i], s.n, c, g.tables.back(), s.scatter,
                             tensors[static_cast<size_t>(s.output_tensor)]};
      g.widest = std::max(g.widest, s.n);
    }
    const uint64_t n_pad = group.n_total;
    g.ld = n_pad;
    LT_CHECK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_8I, m.k_pad, n_pad, static_cast<int64_t>(m.k_pad)));
    LT_CHECK(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_8I, m.k_pad, m.m, static_cast<int64_t>(m.k_pad)));
    LT_CHECK(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_32I, n_pad, m.m, static_cast<int64_t>(n_pad)));
    cublasLtMatmulPreference_t pref = nullptr;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                  sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.c, g.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0)
      throw std::runtime_error("cuBLASLt has no int8 GEMM algorithm for m " + std::to_string(n_pad) + ", n " +
                               std::to_string(m.m) + ", k " + std::to_string(m.k_pad) + " (" +
                               cublasLtGetStatusName(s) + ")");
    g.algo = result.algo;
  }

  void run_matmuls(const MatmulStep& m, const Gemm& g) {
    const int8_t* x = tensors[static_cast<size_t>(m.input_tensor[0])];
    if (!m.direct) {
      InputPointers in{};
      for (int i = 0; i < m.gather.inputs; ++i) in.p[i] = tensors[static_cast<size_t>(m.input_tensor[i])];
      uint64_t longest = 1;
      for (int i = 0; i < m.gather.inputs; ++i) longest = std::max(longest, m.gather.input[i].c);
      const uint64_t chunks = (longest + kGatherChunk - 1) / kGatherChunk;
      gather_kernel<<<grid_for(m.m, gather_parts(m.gather) * chunks), kBlock, 0, stream>>>(m.gather, in, chunks,
                                                                                          gathered);
      CUDA_CHECK(cudaGetLastError());
      x = gathered;
    }
    const int32_t alpha = 1, beta = 0;
    LT_CHECK(cublasLtMatmul(lt, g.desc, &alpha, g.w, g.a, x, g.b, &beta, accumulators, g.c, accumulators, g.c,
                            &g.algo, workspace, workspace_bytes, stream));
    requantize_kernel<<<grid_for(m.m, column_blocks(g.widest)), kBlock, 0, stream>>>(accumulators, m.m, g.ld,
                                                                                      g.requant);
    CUDA_CHECK(cudaGetLastError());
  }
  void run(const PoolStep& p, const Gemm&) {
    if (p.elements == 0) return;
    pool_kernel<<<grid_for(p.elements / p.c, column_blocks(p.c)), kBlock, 0, stream>>>(p, tensors[static_cast<size_t>(p.input_tensor)],
                                                                  tensors[static_cast<size_t>(p.output_tensor)]);
    CUDA_CHECK(cudaGetLastError());
  }
  void run(const VectorStep& v, const Gemm& g) {
    if (v.elements == 0) return;
    vector_kernel<<<grid_for(v.elements / v.out.c, column_blocks(v.out.c)), kBlock, 0, stream>>>(
        v, g.tables.front(), tensors[static_cast<size_t>(v.a_tensor)], tensors[static_cast<size_t>(v.b_tensor)],
        tensors[static_cast<size_t>(v.output_tensor)]);
    CUDA_CHECK(cudaGetLastError());
  }

  void forward() {
    for (size_t i = 0; i < groups.size(); ++i) {
      const Step& s = plan.steps[groups[i].first];
      if (const auto* m = std::get_if<MatmulStep>(&s)) run_matmuls(*m, gemms[i]);
      else if (const auto* p = std::get_if<PoolStep>(&s)) run(*p, gemms[i]);
      else run(std::get<VectorStep>(s), gemms[i]);
    }
  }
  void upload() {
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      CUDA_CHECK(cudaMemcpyAsync(tensors[static_cast<size_t>(plan.inputs[i])], pinned_inputs[i],
                                 plan.input_data[i].size(), cudaMemcpyHostToDevice, stream));
  }
  void download() {
    CUDA_CHECK(cudaMemcpyAsync(pinned_output, tensors[static_cast<size_t>(plan.output)],
                               plan.tensor_bytes[static_cast<size_t>(plan.output)], cudaMemcpyDeviceToHost, stream));
  }
  void batch(bool end_to_end) {
    if (end_to_end) upload();
    forward();
    if (end_to_end) download();
  }
  cudaGraphExec_t graph(bool end_to_end) {
    cudaGraphExec_t& exec = graphs[end_to_end];
    if (!exec) {
      cudaGraph_t g = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      batch(end_to_end);
      CUDA_CHECK(cudaStreamEndCapture(stream, &g));
      CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      CUDA_CHECK(cudaGraphDestroy(g));
    }
    return exec;
  }
  void launch(bool end_to_end, bool use_graph) {
    if (use_graph) CUDA_CHECK(cudaGraphLaunch(graph(end_to_end), stream));
    else batch(end_to_end);
  }
  // The host's side of the gate's words (gate_kernel's are system-scope atomics).
  std::atomic_ref<int> gate_flag(int i) const { return std::atomic_ref<int>(gate_host[i]); }
  int gates_expired() const { return gate_flag(1).load(); }
  // Closes the gate and queues the kernel that waits for it (see gate_kernel); open_gate() lets
  // the stream run. 200 ms is far more than queuing an interval's launches takes (CNN1's 20
  // batches: a few thousand launches, tens of ms), unless the launch queue fills first: then the
  // gate expires and the host keeps launching while the GPU runs (counted; time() then gives
  // the gate fewer batches).
  void close_gate() {
    gate_flag(0).store(0);
    gate_kernel<<<1, 1, 0, stream>>>(gate_device, uint64_t{200'000'000});
    CUDA_CHECK(cudaGetLastError());
  }
  void open_gate() { gate_flag(0).store(1); }
  float elapsed_ms() {
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

DeviceModel::DeviceModel(const GpuPlan& plan) : impl_(std::make_unique<Impl>(plan)) {}
DeviceModel::~DeviceModel() = default;

std::vector<int8_t> DeviceModel::infer() {
  Impl& d = *impl_;
  d.batch(true);
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  const uint64_t bytes = d.plan.tensor_bytes[static_cast<size_t>(d.plan.output)];
  return std::vector<int8_t>(d.pinned_output, d.pinned_output + bytes);
}

Timing DeviceModel::time(bool end_to_end, bool flush_l2, bool graph, const TimingOptions& o) {
  Impl& d = *impl_;
  for (uint64_t i = 0; i < o.warmup; ++i) d.launch(end_to_end, graph);
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  const auto warm_start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count() < o.warmup_seconds) {
    for (int i = 0; i < 4; ++i) d.launch(end_to_end, graph);
    CUDA_CHECK(cudaStreamSynchronize(d.stream));
  }
  std::vector<double> per_batch;
  uint64_t expired_kept = 0;  // gates expired in the repeats kept
  for (uint64_t r = 0; r < o.repeats; ++r) {
    double ms = 0;
    if (!flush_l2) {
      // Chunks of batches, each behind its own gate and timed by its own event pair: the time
      // between chunks is not counted, so the sum is GPU time alone. A chunk's launches can fill
      // the driver's launch queue while the gate holds the GPU (long streams of small kernels:
      // the LSTMs' and CNNs' 20 batches); the host then blocks and the gate expires. The repeat
      // is then redone from scratch with half the chunk, down to one batch per gate (kept, with
      // its expired gates counted, if that still expires). The chunk stays for later repeats.
      for (;;) {
        const uint64_t chunk = d.warm_chunk == 0 ? o.iterations : std::min(d.warm_chunk, o.iterations);
        const int before = d.gates_expired();
        bool expired = false;
        ms = 0;
        for (uint64_t done = 0; done < o.iterations && !expired;) {
          const uint64_t n = std::min(chunk, o.iterations - done);
          d.close_gate();
          CUDA_CHECK(cudaEventRecord(d.start, d.stream));
          for (uint64_t i = 0; i < n; ++i) d.launch(end_to_end, graph);
          CUDA_CHECK(cudaEventRecord(d.stop, d.stream));
          d.open_gate();
          ms += d.elapsed_ms();
          done += n;
          expired = d.gates_expired() != before && chunk > 1;
        }
        if (!expired) {
          expired_kept += static_cast<uint64_t>(d.gates_expired() - before);
          break;
        }
        d.warm_chunk = std::max<uint64_t>(chunk / 2, 1);
      }
    } else {
      const int before = d.gates_expired();
      for (uint64_t i = 0; i < o.iterations; ++i) {
        d.close_gate();
        CUDA_CHECK(cudaMemsetAsync(d.flush, static_cast<int>(i & 0xff), d.flush_bytes, d.stream));
        CUDA_CHECK(cudaEventRecord(d.start, d.stream));
        d.launch(end_to_end, graph);
        CUDA_CHECK(cudaEventRecord(d.stop, d.stream));
        d.open_gate();
        ms += d.elapsed_ms();
      }
      expired_kept += static_cast<uint64_t>(d.gates_expired() - before);
    }
    per_batch.push_back(ms / 1e3 / static_cast<double>(o.iterations));
  }
  std::sort(per_batch.begin(), per_batch.end());
  Timing t;
  t.median = per_batch[per_batch.size() / 2];
  t.min = per_batch.front();
  t.max = per_batch.back();
  t.repeats = o.repeats;
  t.iterations = o.iterations;
  t.gates_expired = expired_kept;
  t.batches_per_gate = flush_l2 ? 1 : d.warm_chunk == 0 ? o.iterations : std::min(d.warm_chunk, o.iterations);
  return t;
}

}  // namespace tpusim::gpu
