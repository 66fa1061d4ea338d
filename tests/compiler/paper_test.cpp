// The six TPU paper workloads end to end at a small batch: compile on tpu-v1, simulate on the fast
// and timing engines, compare the output with the golden reference. Paper-scale work (CNN1: 100M
// weights): labelled `slow` in CTest, run by the Release suite, skipped by scripts/test.sh --asan.
#include <catch2/catch.hpp>

#include <algorithm>

#include "e2e_support.h"

namespace tpusim::test {

TEST_CASE("the six TPU paper workloads compile and run bit-exact on the fast and timing engines at batch 2") {
  for (const char* w : {"tpu-v1/mlp0.toml", "tpu-v1/mlp1.toml", "tpu-v1/lstm0.toml", "tpu-v1/lstm1.toml",
                        "tpu-v1/cnn0.toml", "tpu-v1/cnn1.toml"}) {
    SECTION(w) { check_model(load(w, 2), sim::Arch{}, false); }
  }
}

namespace {

const char* const kApps[] = {"tpu-v1/mlp0.toml", "tpu-v1/mlp1.toml", "tpu-v1/lstm0.toml",
                             "tpu-v1/lstm1.toml", "tpu-v1/cnn0.toml", "tpu-v1/cnn1.toml"};

sim::Arch shaped(uint64_t rows, uint64_t cols, uint64_t ub_bytes = sim::Arch{}.ub_bytes) {
  sim::Arch a;
  a.array_rows = rows;
  a.array_cols = cols;
  a.ub_bytes = ub_bytes;
  sim::validate(a);
  return a;
}

uint64_t timing_cycles(compiler::Compiled& c, const sim::Arch& a) {
  compiler::lower_for(c, a);
  const sim::RunResult r = sim::simulate(c.program, a, {sim::Engine::timing, 0});
  CHECK(r.matrix.array_active > 0);
  return r.cycles;
}

}  // namespace

// The design points an architect sweeps: every app compiles (pieces of the batch where it does not
// fit) and runs, on the timing engine at batch 2 (parsed and quantized once per app).
TEST_CASE("the six TPU paper workloads run on square and non-square arrays and on 4 to 96 MiB of unified buffer") {
  const std::vector<sim::Arch> points = {shaped(512, 512),       shaped(128, 512),         shaped(512, 128),
                                         shaped(1024, 1024),     shaped(16, 16),           shaped(256, 256, 4 << 20),
                                         shaped(256, 256, 96 << 20)};
  for (const char* w : kApps) {
    compiler::LoadOptions o;
    o.batch = 2;
    compiler::Compiled c = compiler::prepare_file(kWorkloads / w, o);
    for (const sim::Arch& a : points) {
      INFO(w << " on " << a.array_rows << "x" << a.array_cols << ", ub_bytes " << a.ub_bytes);
      CHECK(timing_cycles(c, a) > 0);
    }
  }
}

// The aspect-ratio figures (tpu-v1 otherwise, the apps' own batches): a 64 x 256 array
// has 4x the MACs of 64 x 64 and K tiles of 64 side by side in its 256-byte rows.
TEST_CASE("a wider array pays: cnn0 on 64x256 takes at most half of 64x64's cycles, mlp0 is no slower") {
  compiler::Compiled cnn0 = compiler::prepare_file(kWorkloads / "tpu-v1/cnn0.toml");
  const uint64_t cnn_square = timing_cycles(cnn0, shaped(64, 64)), cnn_wide = timing_cycles(cnn0, shaped(64, 256));
  INFO("cnn0: " << cnn_square << " cycles on 64x64, " << cnn_wide << " on 64x256");
  CHECK(2 * cnn_wide <= cnn_square);
  compiler::Compiled mlp0 = compiler::prepare_file(kWorkloads / "tpu-v1/mlp0.toml");
  const uint64_t mlp_square = timing_cycles(mlp0, shaped(64, 64)), mlp_wide = timing_cycles(mlp0, shaped(64, 256));
  INFO("mlp0: " << mlp_square << " cycles on 64x64, " << mlp_wide << " on 64x256");
  CHECK(mlp_wide <= mlp_square);
}

// The six apps' cycles on tpu-v1 at their own batches, as `tpusim run APP.toml --engine timing`
// and `tpusim validate` (docs/validation.md) get them: a change is deliberate and shows here.
// Each weight-bound app cannot beat its weight memory: every 256 x 256 tile (65,536 bytes) takes
// ceil(65,536 x 700 / 34,000) = 1350 cycles on the bus, tiles = array_macs / (65,536 x batch)
// (a partial tile of R x C bytes ceil(R x C x 700 / 34,000)):
//   MLP0   304 tiles x 1350 =   410,400; + 44,358 (first tile's fetch and shift, input DMA,
//          the last layer's drain and activate, output DMA, the RAW waits between layers)
//   MLP1    76 tiles x 1350 =   102,600; + 18,159
// (MLP0 466,890 and MLP1 124,803, CNN0 483,763 and CNN1 10,743,354 before input streaming,
// docs/compiler.md: their inputs now stream into the first layer by slices or board rows; CNN0
// 472,283 before its board streamed into the second layer as well.)
//   LSTM0 2712 tiles x 1350 = 3,661,200; + 393,712 in segments (below). Its gate matmuls read a
//          16-bit h (and x widened to 16 bits): each streams its 64 vectors twice, 128 cycles a
//          tile, still under the 1,350 of the next tile's fetch (lstm0.toml's header: 4,000,488
//          with int8 h, before; 4,051,840 before its adds' rescale of h went int16 where h's
//          range does not fit at the sum's int8 scale).
//   LSTM1 2124 tile fetches of 600 x 600 matrices on 3 x 3 tiles (256, 256, 88 rows and columns),
//          97.56 MB a batch: 2,009,700 cycles on the bus; + 77,409 (mostly step 0's 29 input DMAs,
//          one per slice, that its first gate waits for one at a time: 3.7%). (1520 whole tiles x
//          1350 = 2,052,000 + 64,856 = 2,116,856 cycles as the 1024-unit reconstruction, before
//          600 x 600.)
// (LSTM0 3,719,534 and LSTM1 2,216,390 with their whole input loaded before the first gate,
// before the input was loaded step by step: docs/compiler.md, "Input streaming".)
// Both LSTMs run a program segment per layer-step, launched by the host (docs/compiler.md,
// "Host-driven loops"): LSTM0's 23 launches hold 183,617 cycles (7,000 driver + 700 + the next
// segment's download, 126 to 367 instructions x 16 bytes at 10.74 GB/s: 7,832 to 8,083 each),
// LSTM1's 11 hold 89,214; with the drained cell and the next segment's first tile fetched and
// shifted with the FIFO empty, LSTM0 3,693,570 -> 4,000,488 and LSTM1 2,087,109 -> 2,250,652
// (their cycles as one program, --mapper host_loop=off, above; LSTM0 with int8 h).
// CNN0 and CNN1 are bound by the array (CNN0's 124 passes of 2888 vectors stream 78.2% of the
// cycles; both are pinned in detail below).
// Since tpu-v1's shift is skewed by column (weight_shift_skewed, docs/timing.md "Shift into the
// shadow tile": a tile may start shifting at the previous switch, not 255 cycles after it) MLP0
// 454,758 -> 454,503, MLP1 120,759 -> 120,504, LSTM0 4,054,912 -> 4,054,657, LSTM1 2,250,652 ->
// 2,224,617 (its short partial-tile matmuls), CNN0 448,803 either way, CNN1 11,811,127 ->
// 11,810,107.
TEST_CASE("the six TPU paper workloads' cycles at their own batches on tpu-v1 (timing engine)") {
  const std::pair<const char*, uint64_t> pins[] = {
      {"tpu-v1/mlp0.toml", 454'503},   {"tpu-v1/mlp1.toml", 120'504}, {"tpu-v1/lstm0.toml", 4'054'657},
      {"tpu-v1/lstm1.toml", 2'224'617}, {"tpu-v1/cnn0.toml", 448'803}, {"tpu-v1/cnn1.toml", 11'810'107}};
  for (const auto& [w, cycles] : pins) {
    SECTION(w) {
      compiler::LoadOptions o;
      o.timing_only = true;
      const sim::Arch a;
      const compiler::Compiled c = compiler::compile_file(kWorkloads / w, a, o);
      CHECK(sim::simulate(c.program, a, {sim::Engine::timing, 0}).cycles == cycles);
    }
  }
}

// The reconstructed CNNs at their own batches on tpu-v1 (timing engine), pinned: a change to them is
// deliberate and shows here (docs/workloads.md says how each was reconstructed).
TEST_CASE("cnn0 (AlphaGo) takes its pinned cycles on tpu-v1: 124 full-array passes of 2888 vectors") {
  compiler::LoadOptions o;
  o.timing_only = true;
  compiler::Compiled c = compiler::prepare_file(kWorkloads / "tpu-v1/cnn0.toml", o);
  compiler::lower_for(c, sim::Arch{});
  const sim::RunResult r = sim::simulate(c.program, sim::Arch{}, {sim::Engine::timing, 0});
  // Every layer's output is 19 x 19 x batch 8 = 2888 accumulator rows, streamed in one matmul per
  // weight tile: conv1 (5 x 1 over 240 channels) 5 tiles, conv2..conv14 (3 x 3, 256 -> 256) 9 each,
  // conv15 and conv16 (1 x 1) 1 each: 5 + 117 + 2 = 124 tiles, 124 x 2888 = 358,112 active cycles.
  CHECK(r.matrix.array_active == 124 * 2888);
  // A tile takes 65,536 B / 34 GB/s = 1,349 cycles to fetch and 256 to shift, a pass 2,888 to
  // stream: the weight FIFO hides both, but for the first two layers, which the streamed board
  // (3 parts of 8, 8 and 7 board rows) cuts into chunks: conv1 into 4, 8 and 7 output rows (where
  // its rows reach a later part), conv2 into 3, 8 and 8 (where they reach a later chunk of
  // conv1), each run as soon as the rows it reads are in, and each fetching its layer's tiles
  // again (15 + 27 fetches instead of 5 + 9, made while the board arrives). conv2's first chunk
  // streams 3 x 152 = 456 vectors a tile, fewer than a fetch takes once the FIFO's 4 prefetched
  // tiles are used: its weight stall and shift cycles fall in the time part 1 of the board is
  // still on the host link (4,056 and 1,902 cycles before tpu-v1's shift was skewed by column,
  // which starts a shift at the previous switch).
  CHECK(r.matrix.weight_stall == 3911);
  CHECK(r.matrix.weight_shift == 1792);
  // conv15 and conv16 (one tile each: 1,349 and, one filter's 256 x 1 box, 6 cycles to fetch
  // again, against 1,444 rows of drain hidden) run in two chunks of 1,444 rows, the 3 x 3 layers
  // (9 tiles) in one pass of 2,888 (compiler::pass_budget): 2 fetches more.
  CHECK(c.program.meta.at("weight_fetches") == 124 + 10 + 18 + 2);
  // Idle cells: conv1's tiles use 240 of the 256 rows, conv16 (one filter) 1 of the 256 columns:
  // 5 x 2888 x 16 / 256 + 2888 x 255 / 256 = 902.5 + 2876.7 = 3779.2 unused-MAC cycles (0.78%).
  CHECK(r.matrix.array_active - r.matrix.useful_mac_cycles == Approx(3779.21875));
  // Non-matrix: the unfolded board (23 x 19 x 240 x 8 = 839,040 bytes, 54,686 cycles over the
  // host link and 3 DMA starts of 700) arriving in 3 parts while conv1 and conv2 run on the rows
  // already in (57,950 cycles of input stall when it was loaded whole: 483,763 cycles; 46,408
  // with conv1 alone streamed, in 4 parts: 472,283), each layer's first rows waiting for the
  // previous layer's activates (RAW), the last activates and the output's write to the host.
  // Each layer's padded output goes to UB rows never written (24 MiB holds all 16 maps), so no
  // border is zeroed: 100 `vec sub` (20 border runs a map) fewer than when each landed on the
  // rows of the map two layers back, 457,653 -> 450,453 cycles (raw stall 20,972 -> 22,542:
  // the activates the zeroing no longer queues behind). conv15 and conv16 in chunks of half: each
  // first chunk's activate drains while the second streams, 450,453 -> 448,803 cycles (raw stall
  // 22,542 -> 20,893).
  CHECK(count(c.program, isa::Opcode::vector) == 0);
  CHECK(r.matrix.input_stall == 27373);
  CHECK(r.matrix.raw_stall == 20893);
  CHECK(r.cycles == 448803);
}

// Zero borders ahead (the mapper's zero_ahead, off by default; docs/compiler.md "Zero borders
// ahead"): a padded map's border-zeroing vecs held until after the instruction the next sync on
// the activation unit guards, instead of ahead of that sync. Since padded maps go where their
// borders hold no data, CNN0 zeroes none (448,803 cycles either way; it was 457,653 -> 450,453 =
// 5 boundaries x 20 vecs x 1,440 cycles before); CNN1 keeps 1,940 vecs and runs 98,508 cycles
// fewer with them held. cifar_cnn at batch 1 on a 16 x 16 array with 64 KiB of UB (its maps in
// bands, 76 vecs): 538 fewer, the same vecs moved and 2 syncs fewer, bit-exact on every engine
// (389,284 cycles without; 393,477 before tpu-v1's shift was skewed by column; 397,004 and 11 syncs until input streaming counted the load's DMA
// starts, docs/compiler.md "Input streaming": its padded 32 x 32 input, 32 DMAs, now streams into
// conv1 in 32 parts, 31 syncs more).
TEST_CASE("zero_ahead: border-zeroing vecs after the next sync on the activation unit, bit-exact") {
  const auto cycles = [&](const char* w, const sim::Arch& a, bool on, std::optional<uint64_t> batch = std::nullopt) {
    compiler::LoadOptions lo;
    lo.timing_only = true;
    lo.batch = batch;
    compiler::Compiled c = compiler::prepare_file(kWorkloads / w, lo);
    compiler::lower_for(c, a, compiler::LowerOptions{.zero_ahead = on});
    if (on) CHECK(c.program.meta.at("mapper") == nlohmann::json{{"zero_ahead", true}});
    return std::pair{sim::simulate(c.program, a, {sim::Engine::timing, 0}).cycles, c.program.code};
  };
  const sim::Arch tpu_v1;
  CHECK(cycles("tpu-v1/cnn0.toml", tpu_v1, false).first == 448803);
  CHECK(cycles("tpu-v1/cnn0.toml", tpu_v1, true).first == 448803);
  CHECK(cycles("tpu-v1/cnn1.toml", tpu_v1, true).first == 11810107 - 98508);
  sim::Arch small;  // (tpu-v1 with a 16 x 16 array and 64 KiB of UB, as --set gives it)
  small.array_rows = small.array_cols = 16;
  small.ub_bytes = 65536;
  const auto [off, off_code] = cycles("small/cifar_cnn.toml", small, false, 1);
  const auto [on, on_code] = cycles("small/cifar_cnn.toml", small, true, 1);
  CHECK(off == 389284);
  CHECK(on == 389284 - 538);
  const auto count = [](const std::vector<isa::Instruction>& code, isa::Opcode op) {
    return std::count_if(code.begin(), code.end(), [&](const isa::Instruction& in) { return in.opcode == op; });
  };
  // The same 76 vecs; 2 of the 42 syncs gone (the held zeros waited for by syncs already there),
  // nothing else added or dropped.
  CHECK(count(on_code, isa::Opcode::vector) == 76);
  CHECK(count(off_code, isa::Opcode::vector) == 76);
  CHECK(count(off_code, isa::Opcode::sync) == 42);
  CHECK(count(on_code, isa::Opcode::sync) == 40);
  CHECK(on_code.size() == off_code.size() - 2);
  check_model(load("small/cifar_cnn.toml", 1), small, true, compiler::LowerOptions{.zero_ahead = true});
}

// CNN1 (Inception with joined branches, workloads/tpu-v1/cnn1.toml) at batch 32: its cycles and
// counters, pinned, both ways a batch in pieces can run (docs/compiler.md, "The piece schedule").
// Its concats are written in place (the mapper's concat_inplace: each branch writes its channels
// of the joined tensor; docs/compiler.md, "Concatenation"), and its widths were chosen for that
// (scripts/cnn1_widths.py; 11,356,980 cycles as the widths before, as parts, 10,836,238 in place).
// Stages 3 to 5 need 2 pieces of 16. tpu-v1's software (driver_piece_schedule = 0) runs the whole
// model once per piece, so each FC weight tile is fetched twice: fc1 9 x 34 (1152 inputs, the 3 x
// 3 x 128 head output, one K tile per pixel; 8600 columns: 34 N tiles), fc2 34 x 16, fc3 16 x 16,
// fc4 16 x 4 (1000 columns): 2 x (306 + 544 + 256 + 64) = 2,340 tiles, each streaming 16 vectors
// and then waiting for the next tile's fetch (1,349 cycles for a whole tile; partial tiles, such
// as fc1's last N tile of 152 columns, fetched as their boxes: rw tile_rows / tile_cols). The piece
// schedule (`--mapper pieces=on`) runs the head and FC layers over the whole batch, 1,170 FC tiles
// of 32 vectors each.
// The model's MACs are 32 x 5,468,084,544 = 174,978,705,408 a batch, and so are the run's; the two
// identity matmuls that copy the reductions' pool branches (inc3c: 640 channels at 14 x 14, inc4e:
// 1160 at 7 x 7) into their joined tensors are copy MACs, one per byte copied. The same vectors
// stream either way: 6,037,632 active cycles. The copies compute only the tiles of their identity
// blocks that hold ones (docs/compiler.md, "What a copy counts"): inc3c's pool (640 channels, K
// tiles 0-255, 256-511, 512-639) at channel 504 of its joined tensor, whose 256-channel slices cut
// its N tiles at columns 8, 264 and 520: 6 of 3 x 4 tiles; inc4e's (1160 channels, 5 K tiles) at
// channel 856, N tiles cut at 168, 424, 680 and 936: 9 of 5 x 5. Per piece of 16 that is 6 + 16
// tiles skipped, of 14 x 14 x 16 = 3,136 and 7 x 7 x 16 = 784 vectors: 2 x (6 x 3,136 + 16 x 784)
// = 62,720 active cycles fewer than the 6,100,352 with every tile computed, and as many cycles
// (the copies are array-bound: their tiles' fetches hide under the 3,136- and 784-vector passes).
namespace {

sim::RunResult cnn1_on_tpu_v1(const compiler::LowerOptions& mapper, uint64_t fc_tiles, uint64_t fc_piece) {
  compiler::LoadOptions o;
  o.timing_only = true;
  compiler::Compiled c = compiler::prepare_file(kWorkloads / "tpu-v1/cnn1.toml", o);
  compiler::lower_for(c, sim::Arch{}, mapper);
  const sim::RunResult r = sim::simulate(c.program, sim::Arch{}, {sim::Engine::timing, 0});
  uint64_t tiles = 0;
  for (const auto& l : c.program.meta.at("mapping"))
    if (l.at("layer").get<std::string>().rfind("fc", 0) == 0) {
      tiles += l.at("weight_tiles").get<uint64_t>();
      CHECK(l.at("piece").get<uint64_t>() == fc_piece);
    }
  CHECK(tiles == fc_tiles);
  // The array's useful MACs: the model's 32 x 5,468,084,544 (cnn1.toml's header), as the model's
  // MACs (compiler::model_macs, what validate, compare and the runners count) and the layers'
  // macs and model_macs. The identity copies that put the reductions' pools into their joined
  // tensors: one MAC per byte copied, 32 x (640 x 14 x 14 + 1160 x 7 x 7) = 32 x 182,280 =
  // 5,832,960, as the run's and the layers' copy_macs.
  // (The run counted the copies' diagonal boxes as useful MACs until meta.matmul_macs listed them
  // as copies: 174,978,705,408 + 1,354,450,944, and the layers their k x n pairs: + 4,678,912,000
  // = 32 x (640^2 x 196 + 1160^2 x 49). Before that, 18,284,544 more: stem_conv1's 3 x 3 rows of
  // 31 = 7 x 4 + 3 pixels ran their last group's vectors on the 4-pixel tile, counting its 12
  // windows a kernel row for the 3 pixels' 9, until the short groups counted their own pixels.)
  CHECK(r.macs == 174978705408);
  CHECK(r.copy_macs == 5832960);
  CHECK(compiler::model_macs(c.graph) == 174978705408);
  uint64_t layers_model_macs = 0, layers_macs = 0, layers_copy_macs = 0;
  for (const auto& l : c.program.meta.at("mapping")) {
    layers_model_macs += l.at("model_macs").get<uint64_t>();
    layers_macs += l.at("macs").get<uint64_t>();
    layers_copy_macs += l.value("copy_macs", uint64_t{0});
  }
  CHECK(layers_model_macs == 174978705408);
  CHECK(layers_macs == 174978705408);
  CHECK(layers_copy_macs == 5832960);
  CHECK(r.matrix.array_active == 6037632);
  return r;
}

}  // namespace

TEST_CASE("cnn1 (Inception, joined branches) takes its pinned cycles on tpu-v1, the whole model once per piece") {
  const sim::RunResult r = cnn1_on_tpu_v1({}, 2 * (306 + 544 + 256 + 64), 16);
  // The piece schedule's FC and head tiles fetched again (4,066 -> 5,360 fetches), their waits
  // exposed: weight stall 1,119,284 -> 2,301,774, shift 338,209 -> 668,904 (2,296,630 and 679,148
  // before tpu-v1's shift was skewed by column).
  CHECK(r.matrix.weight_stall == 2301774);
  CHECK(r.matrix.weight_shift == 668904);
  // (11,894,390 while padded maps went to written rows and had their borders zeroed: 31 more
  // `vec`s; then 11,893,415 with every tile of the copies computed: 62,720 more, above.)
  // (11,830,695 with every pass of more than half the accumulators in one: compiler::pass_budget;
  // 11,811,127 before tpu-v1's shift was skewed by column.)
  CHECK(r.cycles == 11810107);
}

TEST_CASE("cnn1 by the piece schedule (--mapper pieces=on) fetches each FC tile once") {
  const sim::RunResult r = cnn1_on_tpu_v1({.piece_schedule = true}, 306 + 544 + 256 + 64, 32);
  // (10,178,483 cycles as the widths before, as parts; 10,743,354 before input streaming,
  // docs/compiler.md; 10,699,156 before partial tiles were fetched as their boxes; 10,377,222
  // with 31 more border-zeroing `vec`s; 10,376,247 with every tile of the copies computed;
  // 10,313,527 with every pass of more than half the accumulators in one, 10,293,959 before tpu-v1's
  // shift was skewed by column.)
  CHECK(r.matrix.weight_stall == 1119284);
  CHECK(r.matrix.weight_shift == 338209);
  CHECK(r.cycles == 10292684);
}

}  // namespace tpusim::test
