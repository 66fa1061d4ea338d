// Reference data for `tpusim compare`: figures of real machines set beside the simulated TPU,
// each file labelled with where its figures come from (workloads/gpu-reference/README.md):
//   "measured"     on a machine by a runner of this project (tpusim-gpu, tpusim-cpu) or by hand;
//   "published"    quoted from a publication, with its citation and the table of each figure;
//   "test-fixture" made-up numbers for tests (tests/data/gpu).
// Three spellings are read, all into ReferenceData:
//   - the CUDA runner's full format (results.h, "format": "tpusim-gpu-results/1");
//   - the reference format ("format": "tpusim-reference/1", or no "format"): source, device,
//     citation and a "results" array whose records need only a model or workload name, a batch
//     and inferences_per_second (or latency_seconds); the CPU runner writes it;
//   - a minimal file: one such record at the top level with a "device" name.
// A folder is every *.json below it. Errors are InputErrors naming the file, record and key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tpusim::gpu {

inline constexpr char kReferenceFormat[] = "tpusim-reference/1";

struct ReferenceDevice {
  std::string name;           // "NVIDIA K80 (one die)", "Intel Xeon Gold 6338 (8 threads)"
  std::string kind;           // "gpu", "cpu", "tpu" or "" (not said)
  double peak_int8_tops = 0;  // the roof's flat part; 0: unknown (no roof drawn)
  double memory_gbps = 0;     // the roof's slope (weights' memory); 0: unknown
  std::string peak_source;    // how the two were obtained
  std::string details;        // free text: versions, threads, clocks
};

struct ReferenceRow {
  std::string workload;  // the model's name (grouping key with the simulated rows)
  std::string model;     // the description's path; "" when only the name is known
  uint64_t batch = 1;
  double inferences_per_second = 0;  // > 0
  double latency_seconds = 0;        // of one batch; 0: not given
  double latency_p99_seconds = 0;    // 99th percentile of single batches; 0: not given
  std::string latency_statistic;     // "median", "p99", ... ("" not said)
  double latency_limit_seconds = 0;  // the response-time limit the figure was taken under; 0: none
  std::string timing;                // GPU runner: "device" or "end_to_end"; "" otherwise
  std::string l2;                    // GPU runner: "warm" or "flushed"
  std::optional<bool> cuda_graph;
  std::string engine;                   // "cublaslt", "onednn", ...
  // Per batch, as counted by the runner (0: not given): model_macs the model's MACs
  // (compiler::model_macs), gemm_macs those its GEMMs computed (copies and padding included),
  // weight_bytes the weight bytes they read. macs: a file written before model_macs
  // (2026-11-28), the runner's GEMM count then (of the graph gpu::runner_load_options gives).
  uint64_t model_macs = 0, gemm_macs = 0, macs = 0, weight_bytes = 0;
  uint64_t threads = 0, warmup = 0, repeats = 0, iterations = 0;  // how it was measured (0: not said)
  std::optional<bool> output_matches_reference;
  // GPU runner: false when a timed interval's gate expired (launch gaps may be inside the time:
  // docs/gpu.md, Timing); compare prefers a file's rows that are not false.
  std::optional<bool> launches_queued_ahead;
  std::string where;  // published: the table or figure ("Table 4")
  std::string note;
  // The machine's 1-minute load average at the end of the measurement (0: not said): above the
  // CPU count, the times include waiting for a CPU (tpusim-cpu records it; compare shows it).
  double load_average = 0;
};

// A published ratio between two machines on one workload (or a mean over workloads), for
// figures a publication states only as ratios (the TPU paper's Table 6).
struct ReferenceRatio {
  std::string workload;  // "mlp1", or "geometric mean", "weighted mean"
  std::string of, to;    // "TPU" performance relative to "K80"
  double value = 0;
  std::string where;
};

struct ReferenceData {
  std::string path;
  std::string source = "measured";  // "measured", "published" or "test-fixture"
  std::string citation;             // required for published data
  std::string note, tool, command, date, host;
  ReferenceDevice device;
  std::vector<ReferenceRow> rows;
  std::vector<ReferenceRatio> ratios;
};

ReferenceData parse_reference(const std::string& text, const std::string& path);
// A file, or every *.json under a folder (sorted by path). Throws InputError for a missing
// path, an empty folder or a malformed file.
std::vector<ReferenceData> load_reference(const std::filesystem::path& path);
// The reference format (tpusim-reference/1), 2-space indented.
std::string reference_json(const ReferenceData& data);

}  // namespace tpusim::gpu
