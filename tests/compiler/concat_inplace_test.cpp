// Concats written in place (the mapper's concat_inplace, docs/compiler.md "Concatenation"): the
// joined tensor allocated before its first branch runs, each branch's activates writing its
// channels at their offset (N tiles cut at the joined tensor's slice boundaries), readers taking
// dense K tiles over the joined channels, no identity copies; a part that cannot be written so (a
// pool, the model's input, a tensor other layers read too, a sigmoid branch) copied in by an
// identity matmul of its own channels. Exact tile and MAC counts for a small case, bit-exact
// random models on every engine and on arrays of every shape, the timing-only compile's timing,
// small/inception.toml.
#include <catch2/catch.hpp>
#include <fstream>

#include <nlohmann/json.hpp>

#include "e2e_support.h"
#include "model_text.h"
#include "isa/error.h"
#include "isa/program.h"

namespace tpusim::test {

namespace {

compiler::LowerOptions inplace(bool on) {
  compiler::LowerOptions o;
  o.concat_inplace = on;
  return o;
}

compiler::Compiled compile(const std::string& text, const sim::Arch& arch, bool on, bool timing_only = false) {
  compiler::LoadOptions lo;
  lo.timing_only = timing_only;
  lo.mapper = inplace(on);
  compiler::Compiled c = prepare_text(text, lo);
  compiler::lower_for(c, arch, lo.mapper);
  return c;
}

// Four 1 x 1 branches of 5 channels over a 4 x 4 x 8 map (batch 2), joined (20 channels) and read
// by a 1 x 1 convolution to 16.
const char* kFourBranches = R"([model]
name = "four"
batch = 2
input = [4, 4, 8]
[[layer]]
name = "a"
type = "conv2d"
input = "input"
filters = 5
kernel = 1
activation = "relu"
[[layer]]
name = "b"
type = "conv2d"
input = "input"
filters = 5
kernel = 1
activation = "relu"
[[layer]]
name = "c"
type = "conv2d"
input = "input"
filters = 5
kernel = 1
activation = "relu"
[[layer]]
name = "d"
type = "conv2d"
input = "input"
filters = 5
kernel = 1
activation = "relu"
[[layer]]
name = "joined"
type = "concat"
inputs = ["a", "b", "c", "d"]
[[layer]]
name = "r"
type = "conv2d"
filters = 16
kernel = 1
)";

uint64_t setcfgs(const isa::Program& p, isa::ConfigReg reg, uint64_t value) {
  uint64_t n = 0;
  for (const isa::Instruction& in : p.code)
    n += in.opcode == isa::Opcode::set_config && in[isa::Field::reg] == uint64_t(reg) && in[isa::Field::value] == value;
  return n;
}

}  // namespace

TEST_CASE("a concat written in place: its branches' N tiles cut at the slice boundary, its reader's dense K tiles") {
  // On a 16 x 16 array (slices of 16 channels), a pass streams 4 x 4 pixels x batch 2 = 32 vectors.
  // Each branch reads 8 channels (one K tile) and writes 5 columns.
  // Off: each branch one N tile (4 tiles); r reads the four parts, one K tile each: 4 tiles.
  // In place: a, b, c write channels 0-4, 5-9, 10-14 of slice 0 (one N tile each, act_group_cols 5
  // at act_lane 0, 5, 10); d writes channel 15 (slice 0, lane 15) and 16-19 (slice 1, lane 0): 2 N
  // tiles of 1 and 4 columns. r reads 20 channels: ceil(20 / 16) = 2 K tiles.
  const sim::Arch arch = square(16);
  const compiler::Compiled off = compile(kFourBranches, arch, false), on = compile(kFourBranches, arch, true);
  const nlohmann::json& mo = off.program.meta["mapping"];
  const nlohmann::json& mi = on.program.meta["mapping"];
  REQUIRE(mo.size() == 5);  // a, b, c, d, r (the concat emits nothing)
  REQUIRE(mi.size() == 5);
  for (int l = 0; l < 3; ++l) {
    CHECK(mo[l]["weight_tiles"] == 1);
    CHECK(mi[l]["weight_tiles"] == 1);
  }
  CHECK(mo[3]["weight_tiles"] == 1);
  CHECK(mi[3]["weight_tiles"] == 2);
  CHECK(mo[4]["weight_tiles"] == 4);
  CHECK(mi[4]["weight_tiles"] == 2);
  // Array MACs: tiles x 32 vectors x 256 cells; useful ones unchanged (r: 20 x 16 x 32 = 10,240).
  CHECK(mo[4]["array_macs"] == 4 * 32 * 256);
  CHECK(mi[4]["array_macs"] == 2 * 32 * 256);
  CHECK(mi[3]["array_macs"] == 2 * 32 * 256);
  CHECK(mo[4]["macs"] == 20 * 16 * 32);
  CHECK(mi[4]["macs"] == 20 * 16 * 32);
  CHECK(off.program.meta["weight_tiles"] == 8);
  CHECK(on.program.meta["weight_tiles"] == 7);
  // The scattered writes (a setcfg only where the register changes): act_groups = 1 before a's
  // first activate, kept through d's (r's activates set it back to 0); act_group_cols 5 for a, b
  // and c, then 1 and 4 for d's two tiles.
  CHECK(setcfgs(off.program, isa::ConfigReg::act_groups, 1) == 0);
  CHECK(setcfgs(on.program, isa::ConfigReg::act_groups, 1) == 1);
  CHECK(setcfgs(on.program, isa::ConfigReg::act_groups, 0) == 1);
  CHECK(setcfgs(on.program, isa::ConfigReg::act_group_cols, 5) == 1);
  CHECK(setcfgs(on.program, isa::ConfigReg::act_group_cols, 1) == 1);
  CHECK(setcfgs(on.program, isa::ConfigReg::act_group_cols, 4) == 1);
  CHECK(off.program.meta["mapper"] == nlohmann::json{{"concat_inplace", false}});
  CHECK_FALSE(on.program.meta.contains("mapper"));  // (on by default)
  // The joined tensor is one tensor of the quantized graph, written by four ops at channels 0, 5, 10, 15.
  REQUIRE(on.graph.concat_inplace);
  std::vector<uint64_t> offsets;
  for (const compiler::QOp& op : on.graph.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op); m && m->n == 5) offsets.push_back(m->output.channel0);
  CHECK(offsets == std::vector<uint64_t>{0, 5, 10, 15});
  // Both bit-exact on every engine, in place faster.
  const uint64_t cycles_off = check_model(compiler::parse_model(kFourBranches, "f.toml", "."), arch, true, inplace(false));
  const uint64_t cycles_on = check_model(compiler::parse_model(kFourBranches, "f.toml", "."), arch, true, inplace(true));
  CHECK(cycles_on < cycles_off);
}

// A reduction's pool branch copied into its joined tensor at a channel inside a slice: a 2 x 2
// stride-2 convolution of 5 filters and a 2 x 2 stride-2 max pool of the 4 x 4 x 40 input (batch
// 2), joined (45 channels), read by a 1 x 1 convolution to 16.
const char* kReduction = R"([model]
name = "reduction"
batch = 2
input = [4, 4, 40]
[[layer]]
name = "a"
type = "conv2d"
input = "input"
filters = 5
kernel = 2
stride = 2
activation = "relu"
[[layer]]
name = "p"
type = "max_pool"
input = "input"
size = 2
stride = 2
[[layer]]
name = "joined"
type = "concat"
inputs = ["a", "p"]
[[layer]]
name = "r"
type = "conv2d"
filters = 16
kernel = 1
)";

TEST_CASE("an identity copy computes only the tiles of its identity block that hold ones") {
  // On a 16 x 16 array (slices of 16 channels) the copy of p (40 channels) to channels 5..44 of
  // the joined tensor has K tiles of p's channels 0-15, 16-31, 32-39 and N tiles cut at the joined
  // tensor's slices (channels 5-15, 16-31, 32-44): columns 0-10, 11-26, 27-39. The tiles holding
  // ones: N 0-10 with K 0-15; N 11-26 with K 0-15 and 16-31; N 27-39 with K 16-31 and 32-39: 5 of
  // 3 x 3. Each streams 2 x 2 pixels x batch 2 = 8 vectors: 5 x 8 x 256 = 10,240 array MACs (18,432
  // with all 9), and the copy's 40 ones x 8 vectors = 320 copy MACs either way.
  const sim::Arch arch = square(16);
  const compiler::Compiled c = compile(kReduction, arch, true);
  REQUIRE(identity_copies(c.graph) == 1);
  const nlohmann::json* copy = nullptr;
  for (const nlohmann::json& l : c.program.meta["mapping"])
    if (l["layer"] == "joined") copy = &l;
  REQUIRE(copy);
  CHECK((*copy)["weight_tiles"] == 5);
  CHECK((*copy)["array_macs"] == 5 * 8 * 256);
  CHECK((*copy)["copy_macs"] == 40 * 8);
  CHECK((*copy)["macs"] == 0);
  CHECK(c.program.meta["copy_macs"] == 320);
  // The copy's matmuls: one per computed tile, each switching its tile in; each N tile's first
  // overwrites its accumulators, the second (N tiles 2 and 3) adds. meta.matmul_macs gives each
  // its ones a vector: 11; 5 and 11; 5 and 8 (the columns of the N tile that K tile's channels
  // reach). The model's other matmuls: a (2 x 2 kernel positions over one 40-channel input: K
  // tiles 0-15, 16-31, 32-39 each, 12 tiles, each in 2 matmuls, one per output row) and r (45
  // joined channels: 3 K tiles), none given. 20 tiles fetched (with all of the copy's, 24).
  std::vector<std::pair<uint64_t, bool>> copies;  // (ones a vector, accumulate)
  uint64_t matmuls = 0;
  for (const isa::MatmulMacs& m : isa::matmul_macs(c.program, 16, 16)) {
    REQUIRE(m.copy);
    copies.push_back({m.macs, c.program.code[m.instruction][isa::Field::accumulate] != 0});
    CHECK(c.program.code[m.instruction][isa::Field::switch_weights] == 1);
  }
  for (const isa::Instruction& in : c.program.code) matmuls += in.opcode == isa::Opcode::matmul;
  CHECK(copies == std::vector<std::pair<uint64_t, bool>>{{11, false}, {5, false}, {11, true}, {5, false}, {8, true}});
  CHECK(matmuls == 2 * 12 + 5 + 3);
  CHECK(c.program.meta["weight_fetches"] == 12 + 5 + 3);
  // Bit-exact against the golden reference on every engine, on this array and on others where
  // the pool lands elsewhere in the slices; the timing-only compile skips the same tiles.
  for (const sim::Arch& a : {arch, square(8), rect(8, 24), rect(24, 8), square(64)}) {
    INFO(a.array_rows << " x " << a.array_cols);
    check_model(compiler::parse_model(kReduction, "r.toml", "."), a, true, inplace(true));
    const compiler::Compiled full = compile(kReduction, a, true), timing = compile(kReduction, a, true, true);
    CHECK(full.program.code.size() == timing.program.code.size());
    CHECK(sim::simulate(full.program, a, {sim::Engine::timing, 0}).cycles ==
          sim::simulate(timing.program, a, {sim::Engine::timing, 0}).cycles);
  }
}

TEST_CASE("a concat written in place needs the same switch when quantized and when lowered") {
  compiler::LoadOptions off;
  off.mapper = inplace(false);
  compiler::Compiled c = prepare_text(kFourBranches, off);
  try {
    compiler::lower_for(c, square(16), inplace(true));
    FAIL("lowered a graph quantized with concat_inplace=off with concat_inplace=on");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("quantized with concat_inplace=off, lowered with concat_inplace=on") !=
          std::string::npos);
  }
  // Not given: the graph's.
  compiler::Compiled d = prepare_text(kFourBranches, off);
  compiler::lower_for(d, square(16));
  CHECK(d.program.meta["mapper"] == nlohmann::json{{"concat_inplace", false}});
  // On by default, in both halves.
  compiler::Compiled e = prepare_text(kFourBranches);
  REQUIRE(e.graph.concat_inplace);
  compiler::lower_for(e, square(16));
  CHECK_FALSE(e.program.meta.contains("mapper"));
}

// A concat nested in another whose scale is given: whether it is written into the outer's joined
// tensor must not hang on the calibration data, or a timing-only compile (placeholder
// calibration) and the full compile map it differently. Over given scales on both sides of the
// calibrated one, the two compiles give the same program length and the same cycles, and the
// nested concat is copied in (an identity matmul more than with no scale given).
TEST_CASE("a nested concat under a given scale maps alike in the timing-only and the full compile") {
  auto text = [](const std::string& outer_scale) {
    return std::string(R"([model]
name = "nested"
batch = 2
input = [4, 4, 8]
[[layer]]
name = "a"
type = "conv2d"
input = "input"
filters = 5
kernel = 1
activation = "relu"
[[layer]]
name = "b"
type = "conv2d"
input = "input"
filters = 6
kernel = 1
activation = "relu"
[[layer]]
name = "inner"
type = "concat"
inputs = ["a", "b"]
[[layer]]
name = "c"
type = "conv2d"
input = "input"
filters = 7
kernel = 1
activation = "relu"
[[layer]]
name = "outer"
type = "concat"
inputs = ["inner", "c"]
)") + outer_scale + R"(
[[layer]]
name = "r"
type = "conv2d"
filters = 16
kernel = 1
)";
  };
  const sim::Arch a = square(16);
  const compiler::Compiled free_full = compile(text(""), a, true);
  const int free_copies = identity_copies(free_full.graph);
  for (const char* s : {"0.0001", "0.003", "0.008", "0.01", "0.02", "0.05", "0.1", "1.0"}) {
    INFO("outer scale " << s);
    const std::string t = text(std::string("scale = ") + s);
    compiler::Compiled full = compile(t, a, true);
    const compiler::Compiled timing = compile(t, a, true, true);
    CHECK(full.program.code.size() == timing.program.code.size());
    CHECK(sim::simulate(full.program, a, {sim::Engine::timing, 0}).cycles ==
          sim::simulate(timing.program, a, {sim::Engine::timing, 0}).cycles);
    // The nested concat goes to a tensor of its own and is copied into the outer one.
    CHECK(identity_copies(full.graph) == free_copies + 1);
    // Bit-exact against the golden reference on every engine (not close to the float model: the
    // given scales are far from the data's on purpose).
    EngineRuns r = run_all(full.program, a);
    for (const sim::HostBuffer& h : r.fast.state->host)
      if (h.name == "output") CHECK(compiler::check_output(full, h.bytes, a).matches);
    for (const sim::HostBuffer& h : r.stepped.state->host)
      if (h.name == "output") CHECK(compiler::check_output(full, h.bytes, a).matches);
  }
}

TEST_CASE("random concat models run bit-exact on every engine with concats in place and as parts, on arrays of every shape") {
  std::mt19937 rng(1313);
  std::uniform_int_distribution<uint64_t> side(4, 64);
  int copies = 0, cut = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string text = random_concat_description(rng, i);
    sim::Arch a = i % 5 == 4 ? rect(64, 64) : rect(side(rng), side(rng));
    a.weight_fifo_tiles = 1 + i % 4;
    INFO("model " << i << " on " << a.array_rows << " x " << a.array_cols << ":\n" << text);
    const compiler::Model m = parse_generated(text);
    check_model(m, a, true, inplace(false));
    check_model(m, a, true, inplace(true));
    // The timing-only compile times it exactly as the full one.
    const compiler::Compiled full = compile(text, a, true), timing = compile(text, a, true, true);
    const sim::RunResult rf = sim::simulate(full.program, a, {sim::Engine::timing, 0});
    const sim::RunResult rt = sim::simulate(timing.program, a, {sim::Engine::timing, 0});
    CHECK(rf.cycles == rt.cycles);
    CHECK(rf.matrix == rt.matrix);
    CHECK(full.program.code.size() == timing.program.code.size());
    copies += identity_copies(full.graph);
    for (const compiler::QOp& op : full.graph.ops)
      if (const auto* mm = std::get_if<compiler::MatmulOp>(&op))
        cut += mm->output.channel0 % a.ub_row_bytes() + mm->n > a.ub_row_bytes();
  }
  // The generator reaches both kinds of part and branches that straddle a slice boundary.
  CHECK(copies > 0);
  CHECK(cut > 0);
}

TEST_CASE("small/inception.toml in place: bit-exact on every engine, its pool branches' copies gone") {
  const std::string text = [] {
    std::ifstream f(kWorkloads / "small/inception.toml");
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }();
  const sim::Arch arch = square(16);
  const compiler::Compiled off = compile(text, arch, false), on = compile(text, arch, true);
  CHECK(identity_copies(off.graph) == 1);  // m2_pool's parts joined for its padded projection
  CHECK(identity_copies(on.graph) == 0);
  CHECK(on.program.meta["weight_tiles"] < off.program.meta["weight_tiles"]);
  check_model(load("small/inception.toml"), arch, true, inplace(true));
  check_model(load("small/inception.toml", 2), sim::Arch{}, false, inplace(true));
  check_model(load("small/inception.toml"), rect(8, 24), true, inplace(true));
}

TEST_CASE("the mapping's model_macs and macs add up to the model's MACs, the copies in copy_macs only") {
  // small/inception.toml, batch 4: the model's 3,894,080 MACs (model_macs_test.cpp) either way.
  // As parts, the 52 x 52 identity that joins m2_pool's parts for its padded projection (6 x 6
  // pixels x batch 4, recorded under m2_pool): on tpu-v1 one tile, 144 vectors x its 52 ones =
  // 7,488 copy MACs (its 52 x 52 box, 389,376, counted as useful MACs before), none in macs or
  // model_macs; in place no copy.
  const std::string text = [] {
    std::ifstream f(kWorkloads / "small/inception.toml");
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }();
  for (const bool on : {true, false}) {
    CAPTURE(on);
    const compiler::Compiled c = compile(text, sim::Arch{}, on);
    uint64_t model = 0, array = 0, pool = 0, copies = 0;
    for (const nlohmann::json& l : c.program.meta["mapping"]) {
      model += l["model_macs"].get<uint64_t>();
      array += l["macs"].get<uint64_t>();
      copies += l.value("copy_macs", uint64_t{0});
      if (l["layer"] == "m2_pool") pool = l.value("copy_macs", uint64_t{0});
    }
    CHECK(compiler::model_macs(c.graph) == 3894080);
    CHECK(model == 3894080);
    CHECK(array == 3894080);
    CHECK(copies == (on ? 0 : 7488));
    CHECK(pool == (on ? 0 : 7488));
  }
}

}  // namespace tpusim::test

namespace tpusim::test {

// A branch with output_bits = 16 cannot join a concat (16-bit tensors, docs/model-format.md); the
// user's --precision int8 sets that key aside (compiler::apply_precision), and the branch is then
// an 8-bit dense writer like the others: written in place, no identity copy (review31 #3: the reset
// of a layer's output_bits under int8 had no test; writes_in_place reads the key itself).
TEST_CASE("the user's precision int8 sets a branch's output_bits = 16 aside: the concat is written in place") {
  std::string text = kFourBranches;
  const std::string a = "name = \"a\"\ntype = \"conv2d\"\ninput = \"input\"\nfilters = 5\nkernel = 1\n";
  REQUIRE(text.find(a) != std::string::npos);
  text.replace(text.find(a), a.size(), a + "output_bits = 16\n");
  CHECK_THROWS(prepare_text(text, {}));  // as described: a 16-bit tensor a concat reads
  compiler::Model m = compiler::parse_model(text, "model.toml", ".", {});
  compiler::apply_precision(m, compiler::Precision::int8, std::nullopt, "model.toml");
  const compiler::Compiled c = compiler::prepare_model(m);
  CHECK(identity_copies(c.graph) == 0);
  for (const compiler::QTensor& t : c.graph.tensors) CHECK(t.bits == 8);
}

// small/inception.toml at batch 1 on a 64 x 64 array with 16 KiB of UB (256 rows of 64 bytes): one
// sample does not fit, so the lowering holds tensors in host memory and runs their ops in bands of
// rows; the group it holds takes every tensor of every op that touches one it holds (lower.cpp
// hold_in_host), m1's joined tensor among them, which several layers write and so cannot be
// streamed in bands. Without the switch the compile keeps m1 as parts and places again: m2's
// joined tensor is then held the same way, and m2 is kept as parts too (compile.h place_concats).
TEST_CASE("concats that would be held in host memory in place are kept as parts unless concat_inplace=on is given") {
  sim::Arch arch = sim::arch_preset("tpu-v1");  // (as `--set array_rows=64 --set array_cols=64`)
  arch.array_rows = arch.array_cols = 64;
  arch.ub_bytes = 16384;
  const std::string path = (kWorkloads / "small" / "inception.toml").string();
  compiler::LoadOptions lo;
  lo.batch = 1;
  compiler::Compiled c = compiler::compile_file(path, arch, lo);
  REQUIRE(c.graph.concat_inplace);
  CHECK(c.graph.concats_as_parts == std::vector<std::string>{"m1", "m2"});
  // (As parts, one identity matmul joins m2_pool's 52 channels of parts for m2_proj's padded 1 x 1.)
  CHECK(identity_copies(c.graph) == 1);
  CHECK_FALSE(c.program.meta.contains("mapper"));  // (no switch given)
  const nlohmann::json& warnings = c.program.meta["mapping_warnings"];
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "concat m1 kept as parts (mapper switch concat_inplace): written in place, its joined tensor "
                       "would be held in host memory and streamed in bands, which a tensor several layers write "
                       "cannot be");
  CHECK(warnings[1].get<std::string>().starts_with("concat m2 kept as parts (mapper switch concat_inplace): "));
  // Both concats as parts make the quantized graph the switch-off one: the program is
  // --mapper concat_inplace=off's, instruction for instruction, with the same weight image.
  compiler::LoadOptions off = lo;
  off.mapper = inplace(false);
  const compiler::Compiled o = compiler::compile_file(path, arch, off);
  CHECK(c.program.code == o.program.code);
  CHECK(c.program.weights == o.program.weights);
  // Bit-exact against the golden reference on every engine, in 226,285 cycles: the switch-off
  // program's, run in bands from host memory (with 24 MiB the model runs in place in 10,549
  // cycles; 233,467 and 10,805 before tpu-v1's shift was skewed by column).
  EngineRuns r = run_all(c.program, arch);
  CHECK(r.fast.cycles == 226285);
  for (const sim::RunResult* run : {&r.fast, &r.stepped})
    for (const sim::HostBuffer& h : run->state->host)
      if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, arch).matches);
  // The timing-only compile (a sweep's) places the concats alike.
  compiler::LoadOptions timing = lo;
  timing.timing_only = true;
  const compiler::Compiled t = compiler::compile_file(path, arch, timing);
  CHECK(t.graph.concats_as_parts == c.graph.concats_as_parts);
  CHECK(sim::simulate(t.program, arch, {sim::Engine::timing, 0}).cycles == 226285);
  // With 24 MiB nothing is kept as parts: the same description in place, as before.
  sim::Arch large = arch;
  large.ub_bytes = 24 << 20;
  const compiler::Compiled in_place = compiler::compile_file(path, large, timing);
  CHECK(in_place.graph.concats_as_parts.empty());
  CHECK_FALSE(in_place.program.meta.contains("mapping_warnings"));
  CHECK(sim::simulate(in_place.program, large, {sim::Engine::timing, 0}).cycles == 10549);
  // Given on, the user asked for it in place: refused, naming the concat and both ways out.
  compiler::LoadOptions on = lo;
  on.mapper = inplace(true);
  try {
    compiler::compile_file(path, arch, on);
    FAIL("compiled inception in place with 16 KiB of UB");
  } catch (const compiler::ConcatInHost& e) {
    CHECK(e.concat == "m1");
    CHECK(std::string(e.what()) ==
          path + ": model inception: concat m1 is written in place (mapper concat_inplace=on) and would be held in "
                 "host memory and streamed in bands, which a tensor written by several layers cannot be; compile "
                 "with --mapper concat_inplace=off, or without the switch (the compiler then keeps such a concat "
                 "as parts)");
  }
}

// A concat kept as parts by name (what the fallback asks of the quantizer) while another stays in
// place: kFourBranches' concat and a second one over r's output and the input (nothing is held in
// host memory here: the quantizer's per-concat choice itself, bit-exact on every engine).
TEST_CASE("the quantizer keeps a named concat as parts and writes the others in place") {
  const std::string text = std::string(kFourBranches) + R"(activation = "relu"
[[layer]]
name = "s"
type = "conv2d"
input = "input"
filters = 6
kernel = 1
activation = "relu"
[[layer]]
name = "second"
type = "concat"
inputs = ["r", "s"]
[[layer]]
name = "t"
type = "conv2d"
filters = 8
kernel = 3
padding = "same"
)";
  const sim::Arch arch = square(16);
  compiler::LoadOptions lo;
  lo.mapper.concats_as_parts = {"joined"};
  compiler::Compiled c = prepare_text(text, lo);
  compiler::lower_for(c, arch, lo.mapper);
  CHECK(c.graph.concats_as_parts == std::vector<std::string>{"joined"});
  // joined as parts: a, b, c, d write tensors of their own (channel0 0, N 5), which r reads as four
  // inputs; second in place: r (16 channels) and s (6) write its 22 channels at 0 and 16.
  std::vector<std::pair<uint64_t, uint64_t>> writes;  // (channel0, N) of the ops writing a tensor in part
  uint64_t four_inputs = 0;
  for (const compiler::QOp& op : c.graph.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op)) {
      if (m->output.channel0 || c.graph.tensors[m->output.tensor].shape.c != m->n)
        writes.push_back({m->output.channel0, m->n});
      four_inputs += m->inputs.size() == 4;
    }
  CHECK(writes == std::vector<std::pair<uint64_t, uint64_t>>{{0, 16}, {16, 6}});
  CHECK(four_inputs == 1);
  CHECK(c.program.meta["mapping_warnings"].size() == 1);
  check_model(compiler::parse_model(text, "k.toml", "."), arch, true, lo.mapper);
}

}  // namespace tpusim::test
