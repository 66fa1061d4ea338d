// A GpuPlan (plan.h) run on this machine's CPU: the CPU reference runner's engine (tpusim-cpu).
//
// A convolution step is one oneDNN int8 convolution (NHWC, s8 x s8 -> s32, from the input tensor);
// another matmul step is the plan's gather into X[m][k_pad] (skipped for a direct step) and one
// oneDNN int8 matmul C[m][n_pad] = X . W^T (s8 x s8 -> s32); weights are reordered once into each
// primitive's preferred layout. The products are requantized as the machine does (integer_ops.h,
// or its exact double form, requantize_clamp.h); max pools are oneDNN pooling (exact); average
// pools and element-wise steps are the plan's integer loops. oneDNN's own int8 output scaling
// rounds in float (to nearest even), where the machine rounds half away from zero in integers, so
// only exact int32 work is left to oneDNN and the output is bit-exact with the golden reference.
// Everything runs on `threads` OpenMP threads (oneDNN's and ours). Buffers are allocated once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/plan.h"
#include "gpu/timing.h"

namespace tpusim::gpu {

class CpuModel {
 public:
  // Throws std::runtime_error when oneDNN cannot make a primitive for a step.
  CpuModel(const GpuPlan& plan, int threads);
  ~CpuModel();
  CpuModel(const CpuModel&) = delete;
  CpuModel& operator=(const CpuModel&) = delete;

  // One batch: the plan's inputs to its output tensor (NHWC, batch-major). With `profile`, the
  // times below are measured (otherwise they read 0).
  const std::vector<int8_t>& infer(bool profile = false);
  // Warm-up batches, then repeats x iterations batches, each timed alone (steady clock): the
  // median repeat's mean per batch, the fastest and slowest repeat, and the 99th percentile of
  // single batches.
  Timing time(const TimingOptions& options);
  // Seconds spent in oneDNN's matmuls during the last infer(true) (the rest: gathers, requantization,
  // pools, element-wise steps).
  double last_matmul_seconds() const;
  // Seconds of each plan step during the last infer(true).
  const std::vector<double>& last_step_seconds() const;
  // Matmul steps that read an earlier step's gathered X instead of gathering their own (an LSTM
  // step's four gates read one [x_t, h_{t-1}]).
  int shared_gathers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CPUs this process may run on (sched_getaffinity), at least 1.
int usable_cpus();
// /proc/cpuinfo's "model name", or "unknown CPU".
std::string cpu_name();

// An attainable roof for this CPU, measured: the best int8 TOPS of a large oneDNN s8 x s8 -> s32
// matmul (m = 256, k = n = 1024) and the best read bandwidth over a 256 MiB buffer, both on
// `threads` threads, best of `tries`.
struct CpuRoof {
  double int8_tops = 0, read_gbps = 0;
};
CpuRoof measure_cpu_roof(int threads, int tries);

}  // namespace tpusim::gpu
