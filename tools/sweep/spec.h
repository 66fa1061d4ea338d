// A sweep spec (docs/sweeps.md): workloads crossed with a grid and/or a list of architecture
// points, read from TOML and expanded into numbered points.
//
// Points are numbered in one fixed order (workloads outermost, in the order written; then the
// grid, its axes in the order written with the last varying fastest; then the [[points]] list),
// so that the same spec gives the same numbering on every machine: shards (--shard K/N takes the
// points whose number is K modulo N) and merged results refer to points by it. A point's identity
// is its key (workload, engine, batch, every parameter), not its number: a resumed sweep whose
// spec gained points or grid values matches stored results by key and renumbers them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compiler/lower_options.h"
#include "sim/arch.h"
#include "sim/machine.h"

namespace tpusim::tools::sweep {

struct Workload {
  std::string name;            // CSV `workload`: the file's stem unless the spec names it
  std::string file;            // as written in the spec (CSV `workload_file`)
  std::filesystem::path path;  // resolved against the spec's folder
  bool is_model = false;       // a model description (.toml, .csv), else a program (.tpu, .s)
  // A program: the machine it was compiled or written for (its `.arch`), as `tpusim run PROG` runs
  // it; its points start from it unless `[sweep] arch` names another. tpu-v1 for a model.
  sim::Arch machine;
  int line = 0;  // the spec's line that names it
};

struct Point {
  uint64_t index = 0;  // the point's number in the spec's order
  const Workload* workload = nullptr;
  sim::Arch arch;                 // every parameter resolved (validated only when the point runs)
  std::optional<uint64_t> batch;  // models: overrides the description's batch
  compiler::LowerOptions mapper;  // models: the mapper's switches (`mapper.pack = "off"`)
  std::string key;                // identity for --resume and merging: workload, engine, batch, arch
};

struct Spec {
  std::filesystem::path path;
  std::string text;  // the spec file, stored with the results
  std::string name;  // [sweep] name, default: the file's stem
  sim::Engine engine = sim::Engine::timing;
  uint64_t max_cycles = 0;  // per point; 0: no limit
  std::vector<Workload> workloads;
  std::filesystem::path arch_file;  // [sweep] arch when it names a .json file (an input, as the workloads)
  std::vector<Point> points;
  uint64_t duplicates = 0;  // points dropped because an earlier point is the same
  // `sweep --full-compile` (not part of the spec): compile every point with data, as for the other
  // engines, even on the timing engine (whose compiles otherwise compute none: docs/sweeps.md).
  bool full_compile = false;
};

// Reads and expands a spec. Throws InputError naming the file, line, key, value and what was
// expected: unknown keys and parameters (with the closest known name), values a parameter does
// not accept, linked axes of unequal lengths, missing workload files, batch on programs.
Spec load_spec(const std::filesystem::path& path);
Spec parse_spec(const std::string& text, const std::filesystem::path& path);

// A point's key as a reader wants it: "workload W (FILE), engine E, batch=B, tpu-v1 array_rows=64".
std::string describe_key(const std::string& key);

// "K/N" with 0 <= K < N; throws InputError.
struct Shard {
  uint64_t index = 0, count = 1;
};
Shard parse_shard(const std::string& text);
inline bool in_shard(const Point& p, Shard s) { return p.index % s.count == s.index; }

}  // namespace tpusim::tools::sweep
