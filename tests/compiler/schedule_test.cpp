// The piece schedule (compiler/schedule.h): a batch that does not fit runs only the layers that
// need pieces in pieces; the rest run over the whole batch and fetch their weights once.
#include <catch2/catch.hpp>

#include "compiler/schedule.h"
#include "graph_builder.h"

namespace tpusim::test {

using compiler::map_shape;
using isa::Field;
using isa::Opcode;

namespace {

// An 8 x 8 array (lanes of 8 channels, a weight tile of 64 bytes), `rows` UB rows, 256
// accumulator rows; slow weight memory (0.1 GB/s at 1000 MHz: 640 cycles a tile).
sim::Arch arch8(uint64_t rows) {
  sim::Arch a = small_arch();
  a.name = "test-8x8";
  a.array_rows = a.array_cols = 8;
  a.ub_bytes = rows * 8;
  a.acc_entries = 256;
  a.weight_mem_gbps = 0.1;
  return a;
}

// conv (1x1, 8 -> 8 on an 8 x 8 map) -> fc1 (8 x 8 kernel over the map: 64 tiles) -> fc2 (1 tile).
struct ConvFc {
  GraphBuilder b{4};
  int x, y, f1, f2;
  ConvFc() {
    x = b.input(map_shape(8, 8, 8));
    y = b.tensor("y", map_shape(8, 8, 8));
    f1 = b.tensor("f1", map_shape(1, 1, 8));
    f2 = b.tensor("f2", map_shape(1, 1, 8));
    b.add(b.matmul({whole(x)}, whole(y)), "conv");
    b.add(b.matmul({whole(y)}, whole(f1), 8, 8), "fc1");
    b.add(b.matmul({whole(f1)}, whole(f2)), "fc2");
    b.g.output = f2;
  }
};

}  // namespace

TEST_CASE("only the layer that needs pieces runs in pieces: the fc layers fetch their weights once") {
  // Rows per sample (8 channels: one 8-byte row per pixel): x 64, y 64, f1 1, f2 1. conv holds
  // x + y = 128 x 4 samples = 512 rows; fc1 y + f1 = 65 x 4 = 260; fc2 2 x 4 = 8.
  ConvFc m;
  SECTION("300 UB rows: conv in 2 pieces of 2, y staged through host memory") {
    // The single loop: 2 pieces (2 x 128 = 256 <= 300 < 512), each fetching conv's tile, fc1's
    // 64 (one per kernel position) and fc2's: 2 x 66 = 132 tiles, 640 cycles each (64 bytes at
    // 0.1 GB/s, 1 GHz) = 84,480 of its 84,542 cycles: weight-bound.
    // The schedule: y does not fit beside conv's pieces for the whole batch (128 + 256 > 300), so
    // it is staged: conv in 2 pieces, fc1 and fc2 over the batch (260 <= 300): 2 + 64 + 1 = 67
    // tiles. y goes out per pixel (the host copy holds the whole batch, TPU order: a piece's
    // samples of one pixel are 2 rows among 4): 2 pieces x 64 pixels = 128 whm, back in 1 rhm;
    // the input: 2 rhm; the output (host pieces of 2, layout.h): one whm per host piece.
    const isa::Program p = lower_and_check(m.b.g, arch8(300), whole_input());
    const isa::Program loop = lower_and_check(m.b.g, arch8(300), whole_input({.piece_schedule = false}));
    CHECK(loop.meta["weight_fetches"] == 132);
    CHECK(p.meta["weight_fetches"] == 67);
    CHECK(p.meta["batch_piece"] == 2);
    CHECK(p.meta["piece_segments"].dump() ==
          R"([{"first_layer":"conv","last_layer":"conv","piece":2,"pieces":2},)"
          R"({"first_layer":"fc1","last_layer":"fc2","piece":4,"pieces":1}])");
    CHECK(count(p, Opcode::write_host) == 128 + 2);
    CHECK(count(p, Opcode::read_host) == 2 + 1);
    CHECK(count(p, Opcode::vector) == 0);
    const auto& mapping = p.meta["mapping"];
    CHECK(mapping[0]["piece"] == 2);
    CHECK(mapping[0]["weight_tiles"] == 2);
    CHECK(mapping[1]["piece"] == 4);
    CHECK(mapping[1]["weight_tiles"] == 64);
    CHECK(mapping[2]["weight_tiles"] == 1);
    // 67 x 640 = 42,880 cycles of weights, + the 128 DMAs (10 + 2 rows x 8 bytes at 1 GB/s = 26
    // cycles each, 3,328) mostly not hidden.
    CHECK(run_all(loop, arch8(300)).timing.cycles == 84542);
    CHECK(run_all(p, arch8(300)).timing.cycles == 46772);
  }
  SECTION("450 UB rows: y kept in the UB for the whole batch, conv in 4 pieces of 1") {
    // The single loop: 2 pieces of 2 again (3 x 128 > 450): 132 tiles. Resident y (4 x 64 = 256
    // rows) leaves 194 for conv's pieces: 1 sample (128 rows); fc1 then reads y in place. 4 + 64
    // + 1 = 69 tiles; y copied by vec pass per piece and pixel: 4 x 64 = 256 (the estimate: 256 x
    // (2 + 2 rows x 2 cycles) against staging's 128 DMAs of 26 cycles and a read of 2,058).
    const isa::Program p = lower_and_check(m.b.g, arch8(450), whole_input());
    const isa::Program loop = lower_and_check(m.b.g, arch8(450), whole_input({.piece_schedule = false}));
    CHECK(loop.meta["weight_fetches"] == 132);
    CHECK(p.meta["weight_fetches"] == 69);
    CHECK(p.meta["piece_segments"][0]["pieces"] == 4);
    CHECK(p.meta["piece_segments"][1]["piece"] == 4);
    CHECK(count(p, Opcode::vector) == 256);
    CHECK(count(p, Opcode::read_host) == 4);   // the input, per piece
    CHECK(count(p, Opcode::write_host) == 4);  // the output, one per host piece of 1
    CHECK(run_all(loop, arch8(450)).timing.cycles == 84542);
    CHECK(run_all(p, arch8(450)).timing.cycles == 44274);
  }
}

TEST_CASE("a machine whose driver runs the whole model once per piece (tpu-v1's) gets the single loop unless a compile asks") {
  // The first case's model and machine (300 UB rows: 2 pieces of 2), the machine's software without
  // the piece schedule (driver_piece_schedule = 0, as tpu-v1's): the single loop, 2 x 66 = 132
  // fetches, no segments; `--mapper pieces=on` (given, so it wins) the schedule's 67, and the
  // program records the switch, since its default depends on the machine.
  ConvFc m;
  sim::Arch a = arch8(300);
  a.driver_piece_schedule = 0;
  const isa::Program loop = lower_and_check(m.b.g, a, whole_input());
  CHECK_FALSE(loop.meta.contains("piece_segments"));
  CHECK(loop.meta["mapper"] == nlohmann::json{{"stream", false}});  // (whole_input's)
  CHECK(loop.meta["batch_piece"] == 2);
  CHECK(loop.meta["weight_fetches"] == 132);
  CHECK(run_all(loop, a).timing.cycles == 84542);  // the single loop's, as on arch8(300) with pieces=off
  const isa::Program p = lower_and_check(m.b.g, a, whole_input({.piece_schedule = true}));
  CHECK(p.meta["weight_fetches"] == 67);
  CHECK(p.meta["piece_segments"].size() == 2);
  CHECK(p.meta["mapper"] == nlohmann::json{{"pieces", true}, {"stream", false}});
  CHECK(run_all(p, a).timing.cycles == 46772);
}

TEST_CASE("a second input read after a cut loads from its host pieces into the whole batch, bit-exact") {
  // conv (1x1 on 8 x 8 x 8) -> fc1 (4 x 4 kernel, stride 4: 2 x 2 x 8) -> add a second model input
  // (2 x 2 x 8) -> fc2 (2 x 2 kernel). The inputs' host regions hold pieces of the first segment's
  // size (meta.batch_piece); the add's segment runs the whole batch and reads the second input
  // from them: one rhm per pixel and host piece (4 pixels x 2 pieces = 8), against the single
  // loop's one per piece.
  GraphBuilder b(4);
  const int x = b.input(map_shape(8, 8, 8)), y = b.tensor("y", map_shape(8, 8, 8));
  const int f1 = b.tensor("f1", map_shape(2, 2, 8)), x2 = b.input(map_shape(2, 2, 8));
  const int s = b.tensor("s", map_shape(2, 2, 8)), f2 = b.tensor("f2", map_shape(1, 1, 8));
  b.add(b.matmul({whole(x)}, whole(y)), "conv");
  compiler::MatmulOp fc1 = b.matmul({whole(y)}, whole(f1), 4, 4);
  fc1.stride = 4;
  b.add(fc1, "fc1");
  compiler::VectorOp add;
  add.op = isa::VecOp::add;
  add.a = whole(f1);
  add.b = whole(x2);
  add.output = whole(s);
  add.shift = 1;
  b.add(add, "add");
  b.add(b.matmul({whole(s)}, whole(f2), 2, 2), "fc2");
  b.g.output = f2;
  const isa::Program p = lower_and_check(b.g, arch8(300), whole_input());
  REQUIRE(p.meta.contains("piece_segments"));
  CHECK(p.meta["batch_piece"] == 2);
  CHECK(p.meta["piece_segments"].back()["piece"] == 4);
  CHECK(p.meta["mapping"][2]["piece"] == 4);  // the add
  // rhm: x in 2 pieces + y staged back once + x2 per pixel and host piece 4 x 2 = 11; whm: y out
  // per pixel and piece 64 x 2 + the output per host piece 2 = 130 (as in the first case).
  CHECK(count(p, Opcode::read_host) == 2 + 1 + 8);
  CHECK(count(p, Opcode::write_host) == 128 + 2);
  CHECK(p.meta["weight_fetches"] <
        lower_and_check(b.g, arch8(300), whole_input({.piece_schedule = false})).meta["weight_fetches"]);
}

TEST_CASE("random models at batches that do not fit run by piece schedules, bit-exact on every engine") {
  // conv (k x k, padded) [-> max pool] -> conv 3x3 -> fc1 (a kernel the map's size) -> fc2, on
  // arrays of 4..16 rows and columns, square and not; the UB holds the first conv for about half
  // the batch. Slow weights (0.1 GB/s) make cuts pay where they can.
  std::mt19937 rng(2026);
  const auto pick = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  int segmented = 0, resident = 0;
  for (int trial = 0; trial < 24; ++trial) {
    GraphBuilder b(pick(3, 9));
    b.rng.seed(trial);
    sim::Arch a = small_arch();
    a.array_rows = pick(4, 16);
    a.array_cols = pick(4, 16);
    a.acc_entries = 512;
    a.weight_mem_gbps = 0.1;
    a.weight_mem_bytes = a.tile_bytes() * 4096;
    const uint64_t lanes = std::max(a.array_rows, a.array_cols);
    const uint64_t h = 2 * pick(2, 4), w = 2 * pick(2, 4), c = pick(1, 12), k = pick(0, 1) ? 3 : 1,
                   pad = k / 2;
    const uint64_t n1 = pick(2, 12), n2 = pick(2, 12), n3 = pick(2, 12), n4 = pick(2, 12);
    const bool pool = pick(0, 1);
    const int x = b.input(map_shape(h, w, c));
    const int y = b.tensor("y", map_shape(h, w, n1));
    compiler::MatmulOp conv = b.matmul({whole(x)}, whole(y), k, k, pick(0, 1));
    conv.pad = pad;
    b.add(conv, "conv1");
    int t = y;
    uint64_t mh = h, mw = w;
    if (pool) {
      mh /= 2, mw /= 2;
      t = b.tensor("p", map_shape(mh, mw, n1));
      b.add(compiler::PoolOp{whole(y), whole(t), isa::PoolKind::max, 2, 2}, "pool");
    }
    const int z = b.tensor("z", map_shape(mh, mw, n2));
    compiler::MatmulOp conv2 = b.matmul({whole(t)}, whole(z), 3, 3, pick(0, 1));
    conv2.pad = 1;
    b.add(conv2, "conv2");
    const int f1 = b.tensor("f1", map_shape(1, 1, n3)), f2 = b.tensor("f2", map_shape(1, 1, n4));
    b.add(b.matmul({whole(z)}, whole(f1), mh, mw, pick(0, 1)), "fc1");
    b.add(b.matmul({whole(f1)}, whole(f2)), "fc2");
    b.g.output = f2;
    const auto slices = [&](uint64_t ch) { return (ch + lanes - 1) / lanes; };
    const uint64_t first = ((h + 2 * pad) * (w + 2 * pad) * slices(c) + h * w * slices(n1)) * b.g.batch;
    const uint64_t rows = first * pick(55, 90) / 100 + 64;
    a.ub_bytes = rows * lanes;
    INFO("trial " << trial << ": " << a.array_rows << "x" << a.array_cols << ", batch " << b.g.batch << ", "
                  << h << "x" << w << "x" << c << " -> k" << k << " " << n1 << (pool ? " pool" : "") << " -> "
                  << n2 << " -> " << n3 << " -> " << n4 << ", " << rows << " UB rows");
    // (The UB is sized for one row per (pixel, sample): without dense layouts, which would fit
    // more samples per piece.)
    const isa::Program p = lower_and_check(b.g, a, {.dense = false});
    if (p.meta.contains("piece_segments")) {
      ++segmented;
      resident += count(p, Opcode::vector, Field::op, static_cast<int64_t>(isa::VecOp::pass)) > 0;
      // A layer over the whole batch fetches its tiles once: the single loop's per piece.
      const isa::Program loop = compiler::lower(b.g, a, {.piece_schedule = false, .dense = false});
      const uint64_t pieces = (b.g.batch + loop.meta["batch_piece"].get<uint64_t>() - 1) /
                              loop.meta["batch_piece"].get<uint64_t>();
      const auto& last = p.meta["mapping"].back();
      if (last["piece"] == b.g.batch)
        CHECK(last["weight_tiles"].get<uint64_t>() * pieces == loop.meta["mapping"].back()["weight_tiles"]);
      CHECK(p.meta["weight_fetches"] < loop.meta["weight_fetches"]);
    }
  }
  // With this seed the estimate cuts 20 of the 24 models, and keeps the tensor at the cut in the UB in 6
  // (21 and 7 until the packing estimate charged a first layer's first weight fetches, which at 0.1 GB/s unpacks
  // conv1 in trials 7, 10, 18 and 20, C rows a tile: trial 7 then fuses its pool and runs whole,
  // 16,770 -> 12,908 cycles; 10 16,660 -> 11,854; 20 7,095 -> 6,983; 18 19,750 -> 21,075, its
  // second piece's conv1 after a conv2 as bound by the weight memory, taken as hiding them).
  CHECK(segmented == 20);
  CHECK(resident == 6);
}

TEST_CASE("the estimate counts a host-driven loop's launches") {
  // tpu-v1's host: host_driver_us 10 us at 700 MHz = 7,000 cycles + host_latency_cycles 700 per `int`.
  const sim::Arch a;
  compiler::Emitter::Work w;
  CHECK(compiler::op_cycles(w, a) == 0);
  w.launches = 3;
  CHECK(compiler::op_cycles(w, a) == 3 * (7000 + 700));
  // The emitter counts each `int` it emits as a launch of the op it falls in.
  compiler::Emitter em(a, a.weight_fifo_tiles);
  em.interrupt();
  em.interrupt();
  CHECK(em.work().launches == 2);
  CHECK(em.host_segments() == 3);
}

}  // namespace tpusim::test
