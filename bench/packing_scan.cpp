// The packing estimate (compiler/packing.cpp) against the machine: for each model, array and
// weight memory bandwidth, every convolution the compiler may pack is lowered with each packing it
// can take (no packing, P = 1, 2, ... pixels a vector: LowerOptions::pack_pixels), the other
// layers as the compiler chooses, and run on the timing engine. A layer's choice is the best when
// no other packing of it runs the model in fewer cycles; its loss is how many more it takes.
//
// Usage: packing_scan [--csv FILE] [--set KEY=VALUE]... [--batch N] [--detail "MODEL RxC GBPS LAYER"]
//                     [MODEL.toml...]
// (default models: lenet5, cifar_cnn, tiny_cnn, inception, resblock, CNN0; arrays 64x256,
// 256x64, 128x128, 256x256; 8.5, 34 and 136 GB/s; tpu-v1 otherwise, `--set` on top).
// Prints one line per layer and point where the choice is not the best, then the summary;
// --detail prints each packing's estimate and cycles for one layer and point.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "compiler/lower.h"
#include "sim/machine.h"
#include "tools/source_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace tpusim;

uint64_t cycles_of(compiler::Compiled& c, const sim::Arch& a, const compiler::LowerOptions& o) {
  compiler::lower_for(c, a, o);
  return sim::simulate(c.program, a, {sim::Engine::timing, 0}).cycles;
}

// The pixels a vector the program packs `layer` with (0: not packed).
uint64_t packed_p(const isa::Program& p, const std::string& layer) {
  for (const auto& l : p.meta["mapping"])
    if (l["layer"] == layer && l.contains("packing")) return std::stoull(l["packing"].get<std::string>());
  return 0;
}

}  // namespace

extern "C" int sc_main(int argc, char** argv) {
  const fs::path w = fs::path(source_dir()) / "workloads";
  std::vector<fs::path> models;
  std::vector<std::string> sets;
  std::optional<uint64_t> batch;  // the descriptions' own unless given
  std::string csv_path, detail;  // detail: "MODEL ROWSxCOLS GBPS LAYER" as the lines print it
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (arg == "--set" && i + 1 < argc) sets.push_back(argv[++i]);
    else if (arg == "--detail" && i + 1 < argc) detail = argv[++i];
    else if (arg == "--batch" && i + 1 < argc) batch = std::stoull(argv[++i]);
    else models.push_back(arg);
  }
  if (models.empty())
    for (const char* m : {"small/lenet5.toml", "small/cifar_cnn.toml", "small/tiny_cnn.toml", "small/inception.toml",
                          "small/resblock.toml", "tpu-v1/cnn0.toml"})
      models.push_back(w / m);
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "model,rows,cols,gbps,layer,chosen_p,chosen_cycles,best_p,best_cycles\n";
  }
  uint64_t cases = 0, best_cases = 0;
  double worst = 0, total_loss = 0;
  std::string worst_case;
  for (const fs::path& model : models) {
    compiler::LoadOptions lo;
    lo.timing_only = true;
    lo.batch = batch;
    compiler::Compiled c = compiler::prepare_file(model, lo);
    for (const auto& [rows, cols] : {std::pair{64, 256}, {256, 64}, {128, 128}, {256, 256}})
      for (const double gbps : {8.5, 34.0, 136.0}) {
        sim::Arch a;
        a.array_rows = rows;
        a.array_cols = cols;
        a.weight_mem_gbps = gbps;
        for (const std::string& s : sets) sim::apply_set(a, s);
        const uint64_t chosen_cycles = cycles_of(c, a, {});
        const isa::Program chosen = c.program;
        for (size_t i = 0; i < c.graph.ops.size(); ++i) {
          const auto* m = std::get_if<compiler::MatmulOp>(&c.graph.ops[i]);
          if (!m) continue;
          const std::string& layer = c.graph.op_layer.at(i);
          compiler::LowerOptions o;
          // The P this layer can take: 1, 2, ... while packing_for gives it (the batch as one piece).
          std::vector<uint64_t> ps{0};
          for (uint64_t p = 1;; ++p) {
            o.pack_pixels = {{layer, p}};
            const auto pk = compiler::packing_for(c.graph, *m, a, o, c.graph.batch);
            if (!pk || pk->p != p) break;
            ps.push_back(p);
          }
          if (ps.size() == 1) continue;
          const uint64_t chosen_p = packed_p(chosen, layer);
          uint64_t best_p = chosen_p, best = chosen_cycles;
          for (const uint64_t p : ps) {
            o.pack_pixels = {{layer, p}};
            const uint64_t cy = p == chosen_p ? chosen_cycles : cycles_of(c, a, o);
            if (fmt::format("{} {}x{} {} {}", model.stem().string(), rows, cols, gbps, layer) == detail)
              std::printf("  P=%llu: estimate %.0f, %llu cycles%s\n", (unsigned long long)p,
                          p ? compiler::packing_for(c.graph, *m, a, o, c.graph.batch)->cycles : 0.0,
                          (unsigned long long)cy, p == chosen_p ? " (chosen)" : "");
            if (cy < best) best = cy, best_p = p;
          }
          const double loss = double(chosen_cycles) / double(best) - 1;
          ++cases;
          best_cases += best_p == chosen_p;
          total_loss += loss;
          const std::string where = fmt::format("{} {}x{} {} GB/s {}", model.stem().string(), rows, cols, gbps, layer);
          if (loss > worst) worst = loss, worst_case = where;
          if (best_p != chosen_p)
            std::printf("%s: chose P=%llu (%llu cycles), best P=%llu (%llu), loss %.3f%%\n", where.c_str(),
                        (unsigned long long)chosen_p, (unsigned long long)chosen_cycles, (unsigned long long)best_p,
                        (unsigned long long)best, 100 * loss);
          if (csv.is_open())
            csv << model.stem().string() << ',' << rows << ',' << cols << ',' << gbps << ',' << layer << ','
                << chosen_p << ',' << chosen_cycles << ',' << best_p << ',' << best << '\n';
          std::fflush(stdout);
        }
      }
  }
  std::printf("layers x points: %llu; the choice is the best in %llu (%.1f%%); mean loss %.3f%%, worst %.3f%% (%s)\n",
              (unsigned long long)cases, (unsigned long long)best_cases, cases ? 100.0 * double(best_cases) / double(cases) : 0.0,
              cases ? 100 * total_loss / double(cases) : 0.0, 100 * worst, worst_case.c_str());
  return 0;
}
