// The GPU reference data format (workloads/gpu-reference/README.md): one JSON document per
// device and run of the runner, with the device, how it was measured, and one record per
// workload, batch and timing mode, in the simulator report's names and units (workload, batch,
// inferences_per_second, tops; latency in seconds). Written by tpusim-gpu, read by
// `tpusim compare`; plain C++ so both sides share one definition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tpusim::gpu {

inline constexpr char kResultsFormat[] = "tpusim-gpu-results/1";

struct DeviceInfo {
  std::string name;                 // "NVIDIA H100 80GB HBM3"
  std::string compute_capability;   // "9.0"
  uint64_t sms = 0;
  double sm_clock_mhz = 0;          // the device's peak SM clock (cudaDevAttrClockRate)
  double memory_clock_mhz = 0;      // peak memory clock (cudaDevAttrMemoryClockRate)
  uint64_t memory_bus_bits = 0;
  double memory_gbps = 0;           // 2 x memory clock x bus width / 8 (double data rate)
  uint64_t l2_bytes = 0;
  std::string driver_version;       // CUDA driver API version, "13.0"
  std::string cuda_runtime_version; // "13.0"
  std::string cublaslt_version;     // "130000"
  double peak_int8_tops = 0;        // dense int8 tensor-core peak (0: unknown)
  std::string peak_source;          // how peak_int8_tops was obtained
};

struct Measurement {
  std::string workload;             // the model's name, as in the simulator's report
  std::string model;                // the description's path, as given to the runner
  uint64_t batch = 1;
  std::string engine = "cublaslt";  // how the matmuls ran: "cublaslt" (im2col + cuBLASLt int8 GEMM)
  std::string timing = "device";    // "device": kernels only; "end_to_end": with host copies
  std::string l2 = "warm";          // "warm" or "flushed" (L2 overwritten before each inference)
  bool cuda_graph = false;          // launched as one CUDA graph
  double latency_seconds = 0;       // median over repeats of the time of one batch
  double latency_seconds_min = 0, latency_seconds_max = 0;
  uint64_t repeats = 0, iterations = 0;  // repeats x iterations timed batches, after warm-up
  double inferences_per_second = 0;      // batch / latency_seconds
  double tops = 0;                       // 2 x model_macs / latency_seconds / 10^12
  // The model's MACs per batch (compiler::model_macs: each once, whatever the mapping).
  uint64_t model_macs = 0;
  // The MACs the GEMMs computed per batch (compiler::MatmulWork::gemm_macs of the runner's graph:
  // the identity copies that join concats and a grouped convolution's zero blocks included).
  uint64_t gemm_macs = 0;
  // Files written before model_macs (2026-11-28): their "macs", the runner's gemm_macs then (and
  // their "tops" 2 x macs / latency); 0 in newer files, which do not write it.
  uint64_t legacy_macs = 0;
  uint64_t weight_bytes = 0;             // int8 weight bytes the GEMMs read per batch
  std::optional<bool> output_matches_reference;  // against compiler::run_golden; empty: not checked
  // GPU runner: true when every timed interval began only after the host had queued all of its
  // launches (a gate kernel held the stream meanwhile), so the time is the GPU's alone; false when
  // a gate expired first (launch gaps may be inside); empty in files written before the gate
  // (2026-11-28, first run) and from the CPU runner.
  std::optional<bool> launches_queued_ahead;
};

struct ResultsFile {
  std::string format = kResultsFormat;
  std::string kind = "measured";  // "measured", or "test-fixture" (made-up numbers for tests)
  std::string note;
  std::string tool;     // "tpusim-gpu 0.1.0"
  std::string command;  // the exact command line
  std::string date;     // ISO 8601, UTC
  std::string host;     // machine name
  DeviceInfo device;
  std::vector<Measurement> results;
};

std::string results_json(const ResultsFile& f);  // the JSON document, 2-space indented
std::string results_csv(const ResultsFile& f);   // one row per measurement, device columns repeated
// Throws InputError naming the file and the field when the document does not follow the format.
ResultsFile parse_results(const std::string& text, const std::string& source);
ResultsFile load_results(const std::filesystem::path& path);

}  // namespace tpusim::gpu
