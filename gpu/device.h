// The CUDA side of the runner, behind a plain C++ interface (implemented in device.cu, built
// only where a CUDA toolkit is found): a GpuPlan resident on the GPU, run once for the check
// against the golden reference and timed with CUDA events.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/plan.h"
#include "gpu/results.h"
#include "gpu/timing.h"

namespace tpusim::gpu {

// Exit code of tpusim-gpu when no GPU answers (0, 1 and 2 are tpusim's: success, a failed check,
// bad input).
inline constexpr int kExitNoGpu = 3;

// "" when a CUDA device answers; otherwise why not, in CUDA's words (no device, no driver, a
// driver older than this runtime), for the runner's "no GPU found" message.
std::string gpu_absent_reason();

// The current device's name, clocks, memory, versions and dense int8 peak (SMs x peak SM clock x
// int8 tensor ops per SM per clock for the compute capabilities device.cu knows; 0 otherwise).
// peak_override_tops > 0 replaces the peak.
DeviceInfo query_device(double peak_override_tops);

class DeviceModel {
 public:
  // Allocates every tensor, uploads weights, column tables and inputs, prepares the cuBLASLt
  // descriptors and picks each GEMM's algorithm. Throws std::runtime_error on a CUDA error or
  // when cuBLASLt has no int8 algorithm for a shape.
  explicit DeviceModel(const GpuPlan& plan);
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  // One batch, host inputs to host output: the model's output tensor (NHWC batch-major).
  std::vector<int8_t> infer();

  // end_to_end: each batch copies the inputs from pinned host memory, runs, copies the output
  // back; else kernels only. flush_l2: the L2 cache is overwritten before each timed batch (not
  // timed). graph: the batch is one CUDA graph launch instead of a stream of launches.
  Timing time(bool end_to_end, bool flush_l2, bool graph, const TimingOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpusim::gpu
