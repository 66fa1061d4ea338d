// The run's useful-MAC count (sim::RunResult::macs, the report's `macs` and `tops`) equals the
// model's MACs on every design point: where a matmul's useful MACs per vector are not its weight
// tile's box, the compiler gives them in meta.matmul_macs (isa::MatmulMacs) and the machine counts
// them on every engine. Grouped and depthwise convolutions (a tile across groups holds the zero
// blocks between them in its box), a last N tile shifted back to fit its UB slice (its first
// columns are the tile before's), and a concat's identity copies, which do none of the model's
// arithmetic and are counted apart (RunResult::copy_macs, the report's `copy_macs`).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "e2e_support.h"
#include "graph_builder.h"
#include "model_text.h"

namespace tpusim::test {

using isa::Opcode;

namespace {

compiler::Compiled compile_text(const std::string& text, const sim::Arch& arch,
                                const compiler::LowerOptions& mapper = {}) {
  compiler::LoadOptions lo;
  lo.mapper = mapper;
  compiler::Compiled c = prepare_text(text, lo);
  compiler::lower_for(c, arch, mapper);
  return c;
}

std::vector<isa::MatmulMacs> given(const isa::Program& p, const sim::Arch& a) {
  return isa::matmul_macs(p, a.array_rows, a.array_cols);
}

// The sums of the manifest's layers: macs, copy_macs (absent: 0), model_macs.
struct LayerSums {
  uint64_t macs = 0, copies = 0, model = 0;
};
LayerSums layer_sums(const isa::Program& p) {
  LayerSums s;
  for (const nlohmann::json& l : p.meta["mapping"]) {
    s.macs += l["macs"].get<uint64_t>();
    s.copies += l.value("copy_macs", uint64_t{0});
    s.model += l["model_macs"].get<uint64_t>();
  }
  return s;
}

std::string conv_model(uint64_t batch, uint64_t h, uint64_t w, uint64_t c, uint64_t filters, uint64_t kernel,
                       uint64_t stride, uint64_t pad, uint64_t groups) {
  return fmt::format(
      "[model]\nname = \"g\"\nbatch = {}\nseed = 5\ninput = [{}, {}, {}]\n[[layer]]\nname = \"conv\"\ntype = "
      "\"conv2d\"\nfilters = {}\nkernel = {}\nstride = {}\npadding = {}\ngroups = {}\nactivation = \"relu\"\n",
      batch, h, w, c, filters, kernel, stride, pad, groups);
}

}  // namespace

TEST_CASE("a 1 x 1 convolution with 3 groups counts the model's MACs, not its tile's box, on every engine") {
  // 3 -> 3 channels in 3 groups on a 4 x 4 map, batch 2, on tpu-v1: one tile, its K = 3 rows and
  // N = 3 columns hold the diagonal (channel i -> channel i), so its box is 3 x 3 = 9 cells of
  // which 3 are the model's. 16 pixels x batch 2 = 32 vectors.
  const sim::Arch a;  // tpu-v1
  const compiler::Compiled c = compile_text(conv_model(2, 4, 4, 3, 3, 1, 1, 0, 3), a);
  const isa::Program& p = c.program;
  // The model: 16 pixels x 1 x 1 x (3 / 3) x 3 x 2 = 96 (the box counted 32 x 9 = 288, 3x).
  CHECK(compiler::model_macs(c.graph) == 96);
  const std::vector<isa::MatmulMacs> g = given(p, a);
  REQUIRE(g.size() == 1);
  CHECK(p.code[g[0].instruction].opcode == Opcode::matmul);
  CHECK(g[0].macs == 3);
  CHECK_FALSE(g[0].copy);
  CHECK(p.meta["macs"] == 96);
  CHECK(p.meta["mapping"][0]["macs"] == 96);
  CHECK(p.meta["mapping"][0]["array_macs"] == 32 * 256 * 256);
  const EngineRuns r = run_all(p, a);  // (fast, stepped and timing held equal, macs included)
  CHECK(r.fast.macs == 96);
  CHECK(r.fast.copy_macs == 0);
  // The breakdown's useful MACs are the same figure in cycles: 96 / (256 x 256).
  CHECK(r.fast.matrix.useful_mac_cycles == Approx(96.0 / 65536.0));
  // Without the list the machine counts the box: the old figure.
  isa::Program bare = p;
  bare.meta.erase("matmul_macs");
  CHECK(sim::simulate(bare, a, {sim::Engine::timing, 0}).macs == 288);
}

TEST_CASE("depthwise 3 x 3 on an 8 x 8 array: tiles across groups count one input channel per output") {
  // 20 channels, depthwise (20 groups), 3 x 3 stride 1 padding 1 on 5 x 5, batch 2: 25 pixels x 2
  // = 50 vectors per computed tile. On 8 x 8 (lanes of 8): K and N tiles of channels 0-7, 8-15,
  // 16-19; only the 3 diagonal tiles per kernel position are computed (9 x 3 = 27 matmuls), each
  // with its diagonal: 8, 8 and 4 useful cells a vector (the boxes: 64, 64, 16).
  const sim::Arch a = arch8x8();
  const compiler::Compiled c = compile_text(conv_model(2, 5, 5, 20, 20, 3, 1, 1, 20), a, whole_input());
  const isa::Program& p = c.program;
  CHECK(count(p, Opcode::matmul) == 27);
  // The model: 25 pixels x 9 taps x (20 / 20) x 20 x 2 = 9,000 (the boxes: 9 x 50 x 144 = 64,800).
  CHECK(compiler::model_macs(c.graph) == 9000);
  const std::vector<isa::MatmulMacs> g = given(p, a);
  REQUIRE(g.size() == 27);
  uint64_t per_vector = 0;
  for (const isa::MatmulMacs& m : g) per_vector += m.macs;
  CHECK(per_vector == 9 * (8 + 8 + 4));
  const EngineRuns r = run_all(p, a);
  CHECK(r.fast.macs == 9000);
  CHECK(r.timing.macs == 9000);
  CHECK(layer_sums(p).macs == 9000);
}

TEST_CASE("a last N tile shifted back to fit its UB slice counts only its own columns") {
  // 8 -> 250 channels, 1 x 1 on 3 x 3, batch 1, on a 256 x 96 array: UB rows of 256 bytes, N tiles
  // of 96 columns at channels 0, 96 and (192 shifted back to fit the slice) 160: the last holds 90
  // columns, of which channels 192-249 (58) are its own, 160-191 the tile before's. 9 vectors.
  const sim::Arch a = rect(256, 96);
  const compiler::Compiled c = compile_text(conv_model(1, 3, 3, 8, 250, 1, 1, 0, 1), a);
  const isa::Program& p = c.program;
  // The model: 9 x 8 x 250 = 18,000; the boxes counted 9 x 8 x (96 + 96 + 90) = 20,304.
  CHECK(compiler::model_macs(c.graph) == 18000);
  const std::vector<isa::MatmulMacs> g = given(p, a);
  REQUIRE(g.size() == 1);
  CHECK(g[0].macs == 8 * 58);
  const EngineRuns r = run_all(p, a);
  CHECK(r.fast.macs == 18000);
  CHECK(p.meta["macs"] == 18000);
}

// Grouped and depthwise convolutions of every shape below, described as a user writes them
// (seeded weights): channels, groups 1..C that divide them, depthwise with a channel multiplier,
// kernels, strides, padding, on square and non-square arrays (8 x 8, 16 x 16, 64 x 256, 256 x 64,
// 256 x 96), packed or not as the compiler chooses. Each run counts the model's MACs: out pixels
// x kernel x (C / groups) x filters x batch, as do the layers. Every engine on one shape in nine,
// the timing engine on all.
TEST_CASE("every grouped and depthwise convolution's run counts the model's MACs, on every array") {
  std::vector<sim::Arch> arrays = {arch8x8(), rect(16, 16), rect(64, 256), rect(256, 64), rect(256, 96)};
  uint64_t shapes = 0, grouped = 0, listed = 0, packed = 0;
  for (const sim::Arch& a : arrays)
    for (const uint64_t ch : {3, 6, 12, 20})
      for (uint64_t groups = 1; groups <= ch; ++groups) {
        if (ch % groups) continue;  // (every divisor: 3: 1, 3; 6: 1, 2, 3, 6; 12: 1 .. 12; 20: 1 .. 20)
        for (const uint64_t mult : {1, 2})  // filters = channels x mult (a depthwise channel multiplier)
          for (const auto& [k, stride, pad] : {std::tuple<uint64_t, uint64_t, uint64_t>{1, 1, 0}, {3, 1, 1}, {3, 2, 0},
                                               {3, 2, 1}, {2, 1, 0}}) {
            const uint64_t h = 5 + shapes % 3, w = 4 + shapes % 4, batch = 1 + shapes % 2, f = ch * mult;
            const uint64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
            INFO(ch << " -> " << f << " channels in " << groups << " groups, " << k << "x" << k << " stride " << stride
                    << " pad " << pad << " on " << h << "x" << w << ", batch " << batch << ", array "
                    << a.array_rows << "x" << a.array_cols);
            const compiler::Compiled c = compile_text(conv_model(batch, h, w, ch, f, k, stride, pad, groups), a);
            const uint64_t model = oh * ow * k * k * (ch / groups) * f * batch;
            REQUIRE(compiler::model_macs(c.graph) == model);
            const LayerSums s = layer_sums(c.program);
            CHECK(s.model == model);
            CHECK(s.macs == model);
            CHECK(s.copies == 0);
            if (shapes % 9 == 0) {
              const EngineRuns r = run_all(c.program, a);
              CHECK(r.fast.macs == model);
            } else {
              CHECK(sim::simulate(c.program, a, {sim::Engine::timing, 0}).macs == model);
            }
            grouped += groups > 1;
            listed += !given(c.program, a).empty();
            packed += c.program.meta["mapping"][0].contains("packing");
            ++shapes;
          }
      }
  // Not vacuous: many grouped shapes, many with matmuls that give their figure, some packed.
  INFO(shapes << " shapes, " << grouped << " grouped, " << listed << " with meta.matmul_macs, " << packed
              << " packed");
  CHECK(shapes == 5 * (2 + 4 + 6 + 6) * 2 * 5);  // arrays x (channels, groups) x multipliers x kernels
  CHECK(grouped > shapes / 2);
  CHECK(listed > shapes / 3);
  CHECK(packed > 20);
}

TEST_CASE("a concat's identity copies are counted as copy MACs, one per byte copied, apart from the model's") {
  // small/inception.toml, batch 4: the model's 3,894,080 MACs (model_macs_test.cpp) either way.
  // As parts (concat_inplace off), one 52-channel identity joins m2_pool's parts for its padded
  // projection (recorded under m2_pool): 6 x 6 pixels x batch 4 = 144 vectors x 52 channels =
  // 7,488 copy MACs (its tile's 52 x 52 box, which the run counted as useful MACs before, is 144 x
  // 2,704 = 389,376). In place, no copy.
  for (const bool on : {true, false}) {
    CAPTURE(on);
    compiler::LoadOptions lo;
    lo.mapper.concat_inplace = on;
    compiler::Compiled c = compiler::prepare_file(kWorkloads / "small/inception.toml", lo);
    const sim::Arch a;  // tpu-v1
    compiler::lower_for(c, a, lo.mapper);
    const isa::Program& p = c.program;
    CHECK(identity_copies(c.graph) == (on ? 0 : 1));
    const LayerSums s = layer_sums(p);
    CHECK(s.model == 3894080);
    CHECK(s.macs == 3894080);
    CHECK(s.copies == (on ? 0u : 7488u));
    for (const nlohmann::json& l : p.meta["mapping"])
      if (l["layer"] == "m2_pool") CHECK(l.value("copy_macs", uint64_t{0}) == (on ? 0u : 7488u));
    // The copy reads m1's 4 parts, each on a K tile of its own: 4 matmuls listed as copies, whose
    // ones add up to the 52 channels a vector.
    uint64_t copies_listed = 0, ones = 0;
    for (const isa::MatmulMacs& m : given(p, a))
      if (m.copy) ++copies_listed, ones += m.macs;
    CHECK(copies_listed == (on ? 0u : 4u));
    CHECK(ones == (on ? 0u : 52u));
    const EngineRuns r = run_all(p, a);
    CHECK(r.fast.macs == 3894080);
    CHECK(r.fast.copy_macs == (on ? 0u : 7488u));
  }
}

TEST_CASE("random concat models: the run's macs are the layers' and the model's, its copy MACs the layers'") {
  // random_concat_description's modules (pool branches, the module's input, nested concats,
  // reductions, sometimes 16-bit weights) on arrays of several shapes, concats in place and as
  // parts. The layers' sums equal the run's on every engine; an all-8-bit model's macs are its
  // model MACs; the copy MACs are the copies' batch x pixels x channels.
  std::mt19937 rng(31);
  const std::vector<sim::Arch> arrays = {arch8x8(), rect(16, 16), rect(64, 256), rect(24, 40)};
  uint64_t with_copies = 0, models = 0;
  for (int i = 0; i < 24; ++i) {
    const std::string text = random_concat_description(rng, i);
    const sim::Arch& a = arrays[size_t(i) % arrays.size()];
    const bool on = i % 3 != 0;
    INFO(text << "\non " << a.array_rows << "x" << a.array_cols << ", concat_inplace " << on);
    compiler::LowerOptions mapper;
    mapper.concat_inplace = on;
    const compiler::Compiled c = compile_text(text, a, mapper);
    uint64_t copies = 0;
    bool wide = false;
    for (const compiler::QOp& op : c.graph.ops)
      if (const auto* m = std::get_if<compiler::MatmulOp>(&op)) {
        wide |= m->wide_weights();
        if (m->copy) copies += c.graph.batch * c.graph.tensors[m->output.tensor].shape.pixels() * m->n;
      }
    const LayerSums s = layer_sums(c.program);
    CHECK(s.copies == copies);
    if (!wide) CHECK(s.macs == compiler::model_macs(c.graph));
    const sim::RunResult r = i % 4 == 0 ? run_all(c.program, a).fast
                                        : sim::simulate(c.program, a, {sim::Engine::timing, 0});
    CHECK(r.macs == s.macs);
    CHECK(r.copy_macs == s.copies);
    with_copies += copies > 0;
    ++models;
  }
  CHECK(with_copies >= 4);
}

}  // namespace tpusim::test
