// A timing-only compile (LoadOptions::timing_only, what `tpusim run --engine timing` and timing
// sweeps ask for) computes no data: no seeded weights, no float calibration run, no weight image
// bytes, no seeded inputs of a SCALE-Sim topology. Its programs must time exactly as the full
// compile's do: the same instructions in the same order (only requantization fields and table
// contents may differ), a weight image of the same size whose tiles the machine counts alike, the
// same cycle for every instruction's start and end, the same counters and the same report.
#include <catch2/catch.hpp>

#include "compiler/weight_image.h"
#include "e2e_support.h"
#include "isa/disassembler.h"
#include "model_text.h"
#include "sim/report.h"
#include "tools/source_dir.h"

namespace tpusim::test {

namespace {

// Every instruction's opcode and every field but the requantization ones (act's mult, shift).
void check_same_but_requantization(const isa::Program& a, const isa::Program& b) {
  CHECK(a.code.size() == b.code.size());
  size_t differing = 0;
  for (size_t i = 0; i < std::min(a.code.size(), b.code.size()); ++i) {
    isa::Instruction x = a.code[i], y = b.code[i];
    for (isa::Field f : {isa::Field::mult, isa::Field::shift}) x[f] = y[f] = 0;
    if (x == y) continue;
    INFO("instruction " << i << ": " << isa::format_instruction(a.code[i]) << " / " << isa::format_instruction(b.code[i]));
    CHECK(x == y);
    if (++differing == 5) break;  // (enough to see why)
  }
}

// The report of a timing-engine run, as `tpusim run --engine timing` and sweeps write it.
nlohmann::ordered_json timing_report(const isa::Program& p, const sim::Arch& arch, sim::RunResult& r) {
  r = sim::simulate(p, arch, {sim::Engine::timing, 0});
  return sim::make_report({&p, &arch, sim::Engine::timing, &r, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt});
}

// `full` compiled with data, `timing` without, for `arch`.
void check_same_timing(const compiler::Compiled& full, const compiler::Compiled& timing, const sim::Arch& arch) {
  const isa::Program& a = full.program;
  const isa::Program& b = timing.program;
  check_same_but_requantization(a, b);
  CHECK(a.host_regions.size() == b.host_regions.size());
  CHECK(a.symbols == b.symbols);
  // The weight image: its size, and every tile's useful cells (meta.tile_uses): the same in both
  // compiles, and in the full compile's image every nonzero cell is one of them.
  REQUIRE(b.weight_bytes() == a.weights.size());
  const bool seeded = std::any_of(timing.model.layers.begin(), timing.model.layers.end(),
                                  [](const compiler::Layer& l) { return l.seeded_weights; });
  if (seeded && !a.weights.empty()) CHECK(b.weights.empty());
  if (!seeded) CHECK(a.weights == b.weights);
  const std::vector<isa::WeightTileUse> ua = isa::tile_uses(a, arch.array_rows, arch.array_cols);
  REQUIRE(ua.size() == a.meta.at("weight_tiles").get<uint64_t>());
  CHECK(ua == isa::tile_uses(b, arch.array_rows, arch.array_cols));
  for (size_t t = 0; t < ua.size(); ++t) {
    // A tile is stored whole, or (a partial tile) as its useful box (docs/compiler.md "Partial tiles").
    const uint64_t end = t + 1 < ua.size() ? ua[t + 1].waddr : a.weights.size();
    const bool whole = end - ua[t].waddr == arch.tile_bytes();
    const uint64_t rows = whole ? arch.array_rows : std::max<uint32_t>(ua[t].rows, 1);
    const uint64_t cols = whole ? arch.array_cols : std::max<uint32_t>(ua[t].cols, 1);
    INFO("tile " << t);
    REQUIRE(end - ua[t].waddr == rows * cols);
    const uint8_t* tile = a.weights.data() + ua[t].waddr;
    const sim::TileUse box = sim::tile_use(tile, rows, cols);
    CHECK(box.rows <= ua[t].rows);
    CHECK(box.cols <= ua[t].cols);
    CHECK(isa::tile_use_of(tile, box.rows, cols).spans <= ua[t].spans);
  }
  sim::RunResult ra, rb;
  const nlohmann::ordered_json ja = timing_report(a, arch, ra), jb = timing_report(b, arch, rb);
  CHECK(ra.cycles == rb.cycles);
  CHECK(ra.timeline == rb.timeline);
  CHECK(ra.matrix == rb.matrix);
  CHECK(ra.macs == rb.macs);
  CHECK(ra.array_macs == rb.array_macs);
  // Every report key: the run's figures and the program's (mapping, tiles, layers).
  for (const auto& [key, value] : ja.items()) {
    if (key == "host_seconds" || key == "simulated_cycles_per_second") continue;  // the host's time
    INFO("report key " << key);
    REQUIRE(jb.contains(key));
    CHECK(jb[key] == value);
  }
  CHECK(ja.size() == jb.size());
}

void check_file(const fs::path& model, const sim::Arch& arch, std::optional<uint64_t> batch = std::nullopt) {
  INFO(model.string() << " on " << arch.array_rows << " x " << arch.array_cols);
  compiler::LoadOptions full, timing;
  full.batch = timing.batch = batch;
  timing.timing_only = true;
  const compiler::Compiled a = compiler::compile_file(model, arch, full);
  const compiler::Compiled b = compiler::compile_file(model, arch, timing);
  // No seeded weight was generated (or, where the program depends on calibrated scales, kept past
  // the float run: compiler::timing_needs_data), quantized or laid out in a weight image.
  for (const compiler::Layer& l : b.model.layers)
    if (l.seeded_weights) CHECK(l.weights.empty());
  check_same_timing(a, b, arch);
  // A timing-only SCALE-Sim topology carries no input data.
  if (model.extension() == ".csv")
    for (const isa::HostRegion& r : b.program.host_regions)
      if (r.name.starts_with("input")) CHECK(r.init.empty());
}

}  // namespace

TEST_CASE("a timing-only compile times exactly as the full compile on every kind of workload") {
  const fs::path data = fs::path(tpusim::source_dir()) / "tests/data/models";
  for (const char* w : {"small/lenet5.toml", "small/lstm1.toml", "small/resblock.toml", "small/tiny_cnn.toml",
                        "small/mnist_mlp.toml", "small/wide_mlp.toml"})
    check_file(kWorkloads / w, sim::Arch{});
  check_file(kWorkloads / "small/lenet5.toml", square(16));
  for (const char* t : {"topology.csv", "depthwise.csv", "gemm.csv"}) {
    check_file(data / t, sim::Arch{});
    check_file(data / t, square(8));
  }
  // 16-bit tensors into matmuls and a 16-bit output (seeded weights, precision by the keys), and
  // an LSTM whose automatic precision is measured on the calibration samples (weights from the
  // file: the timing-only compile calibrates, precision_needs_calibration, and chooses alike).
  check_file(data / "wide16.toml", square(8));
  check_file(kWorkloads / "trained/digits_lstm.onnx", sim::Arch{}, 8);
  // A seeded GRU (the timing-only compile's placeholder scales for its n gate's parts) and one
  // from ONNX (its automatic precision measured on the calibration samples).
  check_file(data / "gru.toml", square(8));
  check_file(fs::path(tpusim::source_dir()) / "tests/data/onnx/gru_stack.onnx", square(8), 3);
}

// The six paper apps (workloads/tpu-v1) at batch 4 (the weights, which the full compile
// generates and quantizes, are the same at any batch): CNN1 has 100M of them.
TEST_CASE("a timing-only compile times exactly as the full compile on the six paper apps") {
  for (const char* app : {"mlp0", "mlp1", "lstm0", "lstm1", "cnn0", "cnn1"})
    check_file(kWorkloads / "tpu-v1" / (std::string(app) + ".toml"), sim::Arch{}, 4);
  // and on a smaller array, with more tiles and other paddings
  sim::Arch a = sim::Arch{};
  a.array_rows = a.array_cols = 64;
  for (const char* app : {"mlp1", "lstm0", "cnn0"})
    check_file(kWorkloads / "tpu-v1" / (std::string(app) + ".toml"), a, 4);
}

TEST_CASE("a timing-only compile times exactly as the full compile on random models and arrays") {
  std::mt19937 rng(1818);
  const uint64_t sizes[][2] = {{4, 4}, {8, 8}, {4, 8}, {8, 4}, {16, 16}};
  for (int i = 0; i < 40; ++i) {
    const std::string text = random_description(rng, 500 + i);
    const auto& s = sizes[i % 5];
    sim::Arch arch = square(s[0]);
    arch.array_cols = s[1];
    arch.ub_bytes = 8192 * arch.ub_row_bytes();
    INFO("model " << i << ":\n" << text);
    compiler::LoadOptions timing;
    timing.timing_only = true;
    compiler::Compiled a = prepare_text(text), b = prepare_text(text, timing);
    compiler::lower_for(a, arch);
    compiler::lower_for(b, arch);
    check_same_timing(a, b, arch);
  }
}

TEST_CASE("a timing-only compile's program runs on the timing engine only and is never written") {
  compiler::LoadOptions timing;
  timing.timing_only = true;
  const compiler::Compiled c = compiler::compile_file(kWorkloads / "small/mnist_mlp.toml", sim::Arch{}, timing);
  // Its image's size is the full compile's (partial tiles stored compactly: less than a whole
  // tile each).
  REQUIRE(c.program.weights_not_computed ==
          compiler::compile_file(kWorkloads / "small/mnist_mlp.toml", sim::Arch{}, {}).program.weights.size());
  REQUIRE(c.program.weights_not_computed < c.program.meta["weight_tiles"].get<uint64_t>() * sim::Arch{}.tile_bytes());
  CHECK_THROWS_WITH(sim::simulate(c.program, sim::Arch{}, {sim::Engine::fast, 0}),
                    Catch::Contains("runs on the timing engine only, not the fast engine"));
  CHECK_THAT(isa::check_program(c.program), Catch::Contains("cannot be written"));
  // Its tiles' useful cells stand in for the bytes: they must be there, one per tile.
  isa::Program p = c.program;
  p.meta["tile_uses"].erase(0);
  CHECK_THROWS_WITH(sim::simulate(p, sim::Arch{}, {sim::Engine::timing, 0}),
                    Catch::Contains("meta.tile_uses[0]: a tile at weight address") &&
                        Catch::Contains("expected one [rows, cols, spans, waddr] per weight tile"));
  p.meta["tile_uses"] = c.program.meta["tile_uses"];
  p.meta["tile_uses"].erase(p.meta["tile_uses"].size() - 1);
  CHECK_THROWS_WITH(sim::simulate(p, sim::Arch{}, {sim::Engine::timing, 0}),
                    Catch::Contains("does not end the weight image's"));
  p.meta.erase("tile_uses");
  CHECK_THROWS_WITH(sim::simulate(p, sim::Arch{}, {sim::Engine::timing, 0}), Catch::Contains("needs meta.tile_uses"));
}

}  // namespace tpusim::test
