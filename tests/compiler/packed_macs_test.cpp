// The run's useful-MAC count (sim::RunResult::macs, the report's `macs`) on packed convolutions
// (compiler/packing.h): a vector holds P output pixels, and an output row whose width P does not
// divide ends in a short group that runs on the full group's block-Toeplitz tile. The machine
// cannot tell from the tile which of its windows the short group keeps, so the compiler gives such
// a matmul's useful MACs per vector in meta.matmul_macs (isa::MatmulMacs), and the run counts the
// model's MACs exactly, on every engine.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "e2e_support.h"
#include "graph_builder.h"

namespace tpusim::test {

using isa::Field;
using isa::Opcode;

namespace {

// The matmuls meta.matmul_macs names, each with its figure (checked by the machine's reader).
std::vector<isa::MatmulMacs> given(const isa::Program& p, const sim::Arch& a) {
  return isa::matmul_macs(p, a.array_rows, a.array_cols);
}

compiler::Compiled lenet5(const sim::Arch& arch, uint64_t batch, const compiler::LowerOptions& mapper = {}) {
  compiler::LoadOptions lo;
  lo.batch = batch;
  lo.mapper = mapper;
  return compiler::compile_file(kWorkloads / "small/lenet5.toml", arch, lo);
}

}  // namespace

TEST_CASE("LeNet-5 on tpu-v1 with 64 columns: each row's short last group counts its own pixels, on every engine") {
  sim::Arch a;  // tpu-v1
  a.array_cols = 64;
  const compiler::Compiled c = lenet5(a, 1);
  const isa::Program& p = c.program;
  const auto& mapping = p.meta["mapping"];
  REQUIRE(mapping[0]["layer"] == "conv1");
  REQUIRE(mapping[2]["layer"] == "conv2");
  // conv1 (5 x 5, 1 -> 6, 28 x 28 out): 10 pixels x 6 channels = 60 of 64 columns, rows of
  // 28 = 10 + 10 + 8. conv2 (5 x 5, 6 -> 16, 10 x 10 out): 4 pixels x 16 = 64 columns, rows of
  // 10 = 4 + 4 + 2.
  CHECK(mapping[0]["packing"] == "10 pixels per vector, 14 input pixels x 5 kernel rows gathered (each row's last group 8 pixels)");
  CHECK(mapping[2]["packing"] == "4 pixels per vector, 8 input pixels x 5 kernel rows gathered (each row's last group 2 pixels)");
  // The short groups' matmuls give their figure: conv1 8 pixels x 25 taps x 1 x 6 = 1,200 a vector
  // (the tile's windows: 10 x 150 = 1,500), one per output row; conv2 2 x 25 x 6 x 16 = 4,800 (the
  // tile's 4 x 2,400 = 9,600), one per output row. The full groups count the tile's spans.
  const std::vector<isa::MatmulMacs> g = given(p, a);
  REQUIRE(g.size() == 28 + 10);
  for (size_t i = 0; i < g.size(); ++i) {
    CHECK(p.code[g[i].instruction].opcode == Opcode::matmul);
    CHECK(g[i].macs == (i < 28 ? 1200u : 4800u));
  }
  // conv1 28 rows x (1,500 + 1,500 + 1,200) = 117,600; conv2 10 rows x (9,600 + 9,600 + 4,800) =
  // 240,000; fc1 48,000 + fc2 10,080 + fc3 840: 416,520, the model's (the run counted 472,920:
  // 28 x 300 + 10 x 4,800 too many).
  const uint64_t model = 117'600 + 240'000 + 48'000 + 10'080 + 840;
  CHECK(p.meta["macs"] == model);
  for (const sim::Engine e : {sim::Engine::fast, sim::Engine::timing}) {
    const sim::RunResult r = sim::simulate(p, a, {e, 0});
    INFO(sim::engine_name(e));
    CHECK(r.macs == model);
    CHECK(r.matrix.useful_mac_cycles == Approx(double(model) / double(a.tile_bytes())));
  }
}

TEST_CASE("LeNet-5 on tpu-v1: conv2's short groups counted as the model's MACs at batch 1, and 7 on 256 KiB") {
  // 256 x 256: conv1 packs 28 pixels (no short group), conv2 4 of 10 = 4 + 4 + 2, forced
  // (LowerOptions::pack_pixels): the packing estimate chooses 10 pixels, no short group, since it
  // counts each tile's box and the weight FIFO's fetch-ahead (docs/compiler.md "Packing"; at
  // batch 1, 31,344 cycles with 4 pixels, fewer with 10: bench/packing_scan).
  compiler::LowerOptions four;
  four.pack_pixels = {{"conv2", 4}};
  for (const uint64_t batch : {1, 7}) {
    sim::Arch a;
    if (batch == 7) a.ub_bytes = 256 * 1024;
    const compiler::Compiled c = lenet5(a, batch, four);
    const isa::Program& p = c.program;
    INFO("batch " << batch);
    CHECK(p.meta["mapping"][0]["packing"] == "28 pixels per vector, 32 input pixels x 5 kernel rows gathered");
    CHECK(p.meta["mapping"][2]["packing"] == "4 pixels per vector, 8 input pixels x 5 kernel rows gathered (each row's last group 2 pixels)");
    // One matmul per conv2 output row and piece of the batch runs its short group (a vector per
    // sample of the piece): 2 x 25 x 6 x 16 = 4,800 a vector. (256 KiB: 7 pieces of 1.)
    const uint64_t piece = p.meta["batch_piece"].get<uint64_t>();
    CHECK(piece == 1);
    const std::vector<isa::MatmulMacs> g = given(p, a);
    REQUIRE(g.size() == 10 * batch / piece);
    for (const isa::MatmulMacs& m : g) CHECK(m.macs == 4800);
    // 416,520 a sample (the run counted 464,520 a sample: 10 rows x 4,800 too many).
    const uint64_t want = 416'520 * batch;
    CHECK(sim::simulate(p, a, {sim::Engine::timing, 0}).macs == want);
    CHECK(sim::simulate(p, a, {sim::Engine::fast, 0}).macs == want);
  }
}

// Every packed shape the enumeration reaches, on a 16 x 16 array: channels, filters, kernels,
// strides, padding, groups, widths and batches; each lowered and run, the run's MACs equal to the
// layer's (the manifest's) and to the model's: out pixels x kernel x (C / groups) x N x batch.
// Every engine (bit-exact against the reference) on one shape in five; the timing engine on all.
TEST_CASE("every packed convolution's run counts the model's MACs, short last groups included") {
  sim::Arch a = arch8x8();
  a.name = "test-16x16";
  a.array_rows = a.array_cols = 16;
  a.ub_bytes = 2048 * 16;
  uint64_t shapes = 0, packed = 0, grouped_packed = 0, short_groups = 0, given_matmuls = 0;
  for (const uint64_t c : {1, 2, 3})
    for (const uint64_t n : {2, 3, 5})
      for (const auto& [kh, kw] : {std::pair<uint64_t, uint64_t>{3, 3}, {1, 1}, {2, 3}, {5, 5}, {3, 1}})
        for (const uint64_t stride : {1, 2})
          for (const uint64_t w : {5, 7, 9}) {
            const uint64_t pad = (kh == 3 && stride == 1) ? 1 : 0, groups = (c == 3 && n == 3) ? 3 : 1;
            if (w + 2 * pad < kw || w + 2 * pad < kh) continue;
            const uint64_t oh = (w + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
            const uint64_t batch = 1 + shapes % 2;
            GraphBuilder b(batch);
            const int x = b.input(compiler::map_shape(w, w, c)), y = b.tensor("y", compiler::map_shape(oh, ow, n));
            compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), kh, kw);
            m.stride = stride;
            m.pad = pad;
            m.groups = groups;
            if (groups > 1)  // zero the weights across groups (graph.h MatmulOp::groups)
              for (uint64_t k = 0; k < kh * kw * c * n; ++k)
                if ((k / n) % c / (c / groups) != k % n / (n / groups)) m.weights[k] = 0;
            b.add(m, "conv");
            b.g.output = y;
            INFO(c << " -> " << n << " channels, " << kh << "x" << kw << " stride " << stride << " pad " << pad
                   << " groups " << groups << " on " << w << "x" << w << ", batch " << batch);
            const isa::Program p = (shapes % 5 == 0) ? lower_and_check(b.g, a) : compiler::lower(b.g, a);
            const uint64_t model = oh * ow * kh * kw * (c / groups) * n * batch;
            CHECK(p.meta["mapping"][0]["model_macs"] == model);
            CHECK(p.meta["macs"] == model);
            const std::string packing = p.meta["mapping"][0].value("packing", "");
            // (An unpacked grouped convolution's tiles across groups give their figure too:
            // grouped_macs_test.cpp.)
            CHECK(sim::simulate(p, a, {sim::Engine::timing, 0}).macs == model);
            packed += !packing.empty();
            grouped_packed += !packing.empty() && groups > 1;
            short_groups += packing.find("last group") != std::string::npos;
            given_matmuls += given(p, a).size();
            ++shapes;
          }
  // Not vacuous: most shapes pack, many with short groups, whose matmuls give their figure.
  INFO(shapes << " shapes, " << packed << " packed (" << grouped_packed << " grouped), " << short_groups << " with short groups, " << given_matmuls
              << " matmuls given");
  CHECK(shapes > 150);
  CHECK(packed > shapes / 2);
  CHECK(grouped_packed > 0);
  CHECK(short_groups > 20);
  CHECK(given_matmuls > 0);
}

TEST_CASE("meta.matmul_macs: what the machine reads, and a malformed list refused naming the entry") {
  sim::Arch a = arch8x8();
  a.name = "test-16x16";
  a.array_rows = a.array_cols = 16;
  a.ub_bytes = 2048 * 16;
  // The 3 x 3 on 7 x 7 of lower_test's packing case: 3 pixels a vector, rows of 5 = 3 + 2.
  GraphBuilder b(1);
  const int x = b.input(compiler::map_shape(7, 7, 1)), y = b.tensor("y", compiler::map_shape(5, 5, 5));
  b.add(b.matmul({whole(x)}, whole(y), 3, 3), "conv");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, a);
  // Each output row's last matmul: 2 pixels x 9 taps x 1 x 5 = 90 a vector (the tile's 3 x 45 = 135).
  const std::vector<isa::MatmulMacs> g = given(p, a);
  REQUIRE(g.size() == 5);
  for (const isa::MatmulMacs& m : g) CHECK(m.macs == 90);
  // 5 rows x (135 + 90) = 1,125 = 25 x 9 x 5, on every engine (run_all holds them equal).
  const EngineRuns r = run_all(p, a);
  CHECK(r.fast.macs == 25 * 9 * 5);
  // Without the list the machine counts the tile's windows for the short groups: 5 x 45 more.
  isa::Program bare = p;
  bare.meta.erase("matmul_macs");
  CHECK(sim::simulate(bare, a, {sim::Engine::timing, 0}).macs == 25 * 9 * 5 + 5 * 45);
  const auto refused = [&](nlohmann::json list, const std::string& why) {
    isa::Program bad = p;
    bad.meta["matmul_macs"] = std::move(list);
    CHECK_THROWS_WITH(sim::simulate(bad, a, {sim::Engine::timing, 0}), Catch::Contains(why));
  };
  const uint64_t mm = g[0].instruction;
  refused(nlohmann::json::object(), "meta.matmul_macs: expected an array of [instruction, macs]");
  const uint64_t ninety = 90;  // (JSON unsigned integers, as a program file's)
  const std::string expected = "meta.matmul_macs[0]: expected [instruction, macs <= 16 x 16] or [instruction, macs, "
                               "\"copy\"], got [";
  refused({{mm, ninety, ninety}}, expected);
  refused({{mm, ninety, "copies"}}, expected);
  refused({{mm, -90}}, expected);
  refused({{mm, uint64_t{257}}}, expected);
  refused({{mm, uint64_t{257}, "copy"}}, expected);
  refused({{mm, ninety}, {mm, ninety}}, "meta.matmul_macs[1]: instruction " + std::to_string(mm) + " after instruction");
  refused({{uint64_t{0}, ninety}}, "meta.matmul_macs[0]: instruction 0 is not a matmul");
  // A copy's figure counts as copy MACs, none as the run's useful MACs: the short groups' 5 x 90
  // a vector leave macs and go to copy_macs.
  isa::Program copies = p;
  for (nlohmann::json& e : copies.meta["matmul_macs"]) e.push_back("copy");
  const sim::RunResult rc = sim::simulate(copies, a, {sim::Engine::timing, 0});
  CHECK(rc.macs == 25 * 9 * 5 - 5 * 90);
  CHECK(rc.copy_macs == 5 * 90);
  refused({{uint64_t(p.code.size()), ninety}},
          "is not a matmul (the program has " + std::to_string(p.code.size()) + " instructions)");
}

}  // namespace tpusim::test
