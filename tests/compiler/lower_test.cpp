// The back end on hand-built quantized graphs: the exact tiling, schedule and memory layout, and
// every program run on every engine with the output compared to the golden reference.
#include <catch2/catch.hpp>

#include "graph_builder.h"
#include "isa/error.h"

namespace tpusim::test {

using compiler::map_shape;
using compiler::sequence_shape;
using compiler::vector_shape;
using isa::Field;
using isa::Opcode;

namespace {

// An 8 x 8 array (lanes of 8 channels) with 2048 UB rows and 256 accumulator rows.
sim::Arch arch8() {
  sim::Arch a = small_arch();
  a.name = "test-8x8";
  a.array_rows = a.array_cols = 8;
  a.ub_bytes = 2048 * 8;
  a.acc_entries = 256;
  return a;
}

const isa::Instruction& nth(const isa::Program& p, Opcode op, size_t n) {
  for (const auto& in : p.code)
    if (in.opcode == op && n-- == 0) return in;
  FAIL("no such instruction");
  return p.code.front();
}

}  // namespace

TEST_CASE("a dense layer of K x N takes ceil(K/8) x ceil(N/8) tiles, one read_weights and one switching matmul each") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8());
  // K = 20: 3 K tiles; N = 12: 2 N tiles -> 6 tiles, all different.
  CHECK(count(p, Opcode::read_weights) == 6);
  CHECK(count(p, Opcode::matmul) == 6);
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 6);
  CHECK(count(p, Opcode::matmul, Field::accumulate, 1) == 4);  // K tiles 2 and 3 of each N tile
  CHECK(count(p, Opcode::activate) == 2);
  CHECK(p.weights.size() == 6 * 64);
  // Each matmul streams the batch: 3 rows.
  CHECK(nth(p, Opcode::matmul, 0)[Field::rows] == 3);
  // The input DMA (host) must land before the first matmul: one sync on host (mask bit 0).
  CHECK(count(p, Opcode::sync, Field::units, 1) == 1);
}

TEST_CASE("a 3x3 convolution with padding streams each output row group as one matmul, R x S passes") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(6, 6, 5)), y = b.tensor("y", map_shape(6, 6, 7));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3, true);
  m.pad = 1;
  b.add(m, "conv");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8());
  CHECK(count(p, Opcode::matmul) == 9);  // one per kernel position (1 K tile, 1 N tile, 1 chunk)
  CHECK(count(p, Opcode::read_weights) == 9);
  const isa::Instruction& first = nth(p, Opcode::matmul, 0);
  CHECK(first[Field::rows] == 6 * 2);      // one output row: 6 pixels x batch 2
  CHECK(first[Field::repeat] == 6);        // all 6 output rows
  CHECK(first[Field::stride] == 8 * 2);    // one stored row: (6 + 2 padding) pixels x batch 2
  // The input is stored with a 1-pixel border: 8 x 8 x 2 rows; kernel (0, 0) starts at its corner.
  CHECK(nth(p, Opcode::matmul, 4)[Field::ub] == first[Field::ub] + (8 + 1) * 2);  // kernel (1, 1)
  // Padded input rows come from the host one image row at a time: 6 DMAs.
  CHECK(count(p, Opcode::read_host) == 1 + 6);  // the per-column table, then the rows
  CHECK(count(p, Opcode::vector) == 0);          // fresh rows are zero: no border to clear
}

TEST_CASE("a strided convolution uses one matmul per output row and kernel position") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(7, 7, 3)), y = b.tensor("y", map_shape(4, 4, 4));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3);
  m.pad = 1;
  m.stride = 2;
  b.add(m, "conv");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8());
  CHECK(count(p, Opcode::matmul) == 9 * 4);
  const isa::Instruction& first = nth(p, Opcode::matmul, 0);
  CHECK(first[Field::rows] == 2);          // one pixel x batch 2
  CHECK(first[Field::repeat] == 4);        // 4 output pixels per row
  CHECK(first[Field::stride] == 2 * 2);    // stride 2 pixels x batch 2
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 9);
}

TEST_CASE("outputs larger than the accumulators are chunked, and each chunk fetches the tiles again") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(6, 6, 4)), y = b.tensor("y", map_shape(6, 6, 10));
  b.add(b.matmul({whole(x)}, whole(y), 1, 1), "pointwise");
  b.g.output = y;
  sim::Arch a = arch8();
  a.acc_entries = 32;  // 72 output rows > 32: chunks of half the accumulators, 16 rows = 8 pixels
  const isa::Program p = lower_and_check(b.g, a);
  // 36 pixels / 8 = 5 chunks (4 of 8 pixels, one of 4); 2 N tiles: 10 passes of 1 tile each.
  CHECK(count(p, Opcode::matmul) == 10);
  CHECK(count(p, Opcode::read_weights) == 10);
  CHECK(p.weights.size() == 2 * 64);  // the two tiles stored once
}

TEST_CASE("identical weight tiles are stored once and fetched for every use") {
  GraphBuilder b(1);
  const int x = b.input(vector_shape(8)), h = b.tensor("h", vector_shape(8)), y = b.tensor("y", vector_shape(8));
  compiler::MatmulOp m1 = b.matmul({whole(x)}, whole(h));
  compiler::MatmulOp m2 = m1;
  m2.inputs = {whole(h)};
  m2.output = whole(y);
  b.add(m1, "a");
  b.add(m2, "b");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8());
  CHECK(p.weights.size() == 64);
  CHECK(count(p, Opcode::read_weights) == 2);
  // The syncs, in order (mask bits: host 1, matrix 4, act 8): layer a's matmul reads the input
  // DMA's rows (RAW on host); layer b's matmul reads layer a's activate output (RAW on act);
  // layer b's activate writes y into the rows x had, which layer a's matmul read (WAR on matrix);
  // the output DMA reads y (RAW on act).
  std::vector<uint64_t> masks;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::sync) masks.push_back(in[Field::units]);
  CHECK(masks == std::vector<uint64_t>{1, 8, 4, 8});
}

TEST_CASE("time steps read and write pixels of sequences through views") {
  // h_t = relu(W [x_t, h_{t-1}]) over 3 steps, h_{-1} left out at t = 0.
  GraphBuilder b(2);
  const int x = b.input(sequence_shape(3, 5)), h = b.tensor("h", sequence_shape(3, 6));
  for (uint64_t t = 0; t < 3; ++t) {
    std::vector<compiler::View> in{{x, t, 1}};
    if (t) in.push_back({h, t - 1, 1});
    b.add(b.matmul(in, {h, t, 1}), "rnn");
  }
  b.g.output = h;
  const isa::Program p = lower_and_check(b.g, arch8());
  CHECK(count(p, Opcode::matmul) == 1 + 2 + 2);
  CHECK(count(p, Opcode::activate) == 3);
}

TEST_CASE("pooling, element-wise ops and a padded consumer share the unified buffer correctly") {
  // conv (pad 1) -> max pool 2 -> conv (pad 1, so the pool writes padded rows one by one) ->
  // add with the pooled map -> avg pool. Buffers are reused, so borders must be cleared.
  GraphBuilder b(2);
  const int x = b.input(map_shape(8, 8, 3));
  const int c1 = b.tensor("c1", map_shape(8, 8, 8)), p1 = b.tensor("p1", map_shape(4, 4, 8));
  const int c2 = b.tensor("c2", map_shape(4, 4, 8)), s = b.tensor("s", map_shape(4, 4, 8));
  const int out = b.tensor("out", map_shape(2, 2, 8));
  compiler::MatmulOp m1 = b.matmul({whole(x)}, whole(c1), 3, 3, true);
  m1.pad = 1;
  b.add(m1, "conv1");
  b.add(compiler::PoolOp{whole(c1), whole(p1), isa::PoolKind::max, 2, 2}, "pool1");
  compiler::MatmulOp m2 = b.matmul({whole(p1)}, whole(c2), 3, 3);
  m2.pad = 1;
  b.add(m2, "conv2");
  compiler::VectorOp add{isa::VecOp::add, whole(c2), whole(p1), whole(s), 1, 1, isa::Func::identity};
  b.add(add, "add");
  b.add(compiler::PoolOp{whole(s), whole(out), isa::PoolKind::avg, 2, 2}, "pool2");
  b.g.output = out;
  const isa::Program p = lower_and_check(b.g, arch8());
  CHECK(count(p, Opcode::pool) == 4 + 1);  // pool1 one output row at a time (padded), pool2 whole
}

TEST_CASE("dead tensors give their rows back: a deep chain runs in a buffer that holds three of its tensors") {
  // Six dense layers of 64 channels (8 slices of 8) at batch 4: every tensor takes 32 UB rows,
  // seven tensors take 224; the UB has 100 rows.
  GraphBuilder b(4);
  int x = b.input(vector_shape(64));
  for (int l = 0; l < 6; ++l) {
    const std::string n = std::to_string(l);  // (GCC 12 warns falsely on "y" + std::to_string)
    const int y = b.tensor(std::string("y").append(n), vector_shape(64));
    b.add(b.matmul({whole(x)}, whole(y)), std::string("fc").append(n));
    x = y;
  }
  b.g.output = x;
  sim::Arch a = arch8();
  a.ub_bytes = 100 * 8;
  const isa::Program p = lower_and_check(b.g, a);
  CHECK(count(p, Opcode::matmul) == 6 * 64);  // 8 K tiles x 8 N tiles per layer
}

TEST_CASE("a model that does not fit the unified buffer is refused, naming the layer and the tensor") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(40, 40, 8)), y = b.tensor("big", map_shape(40, 40, 8));
  b.add(b.matmul({whole(x)}, whole(y)), "conv_big");
  b.g.output = y;
  // 40 x 40 x 2 = 3200 rows each: the input alone exceeds 2048 UB rows.
  sim::Arch a = arch8();
  CHECK_THROWS_WITH(compiler::lower(b.g, a), Catch::Contains("the model's input: tensor input0") &&
                                                 Catch::Contains("does not fit in the unified buffer"));
  a.ub_bytes = 4096 * 8;
  CHECK_THROWS_WITH(compiler::lower(b.g, a), Catch::Contains("layer conv_big: tensor big (2 x [40, 40, 8], 3200 UB rows)"));
}

TEST_CASE("a batch larger than half the accumulators is refused") {
  GraphBuilder b(40);
  const int x = b.input(vector_shape(8)), y = b.tensor("y", vector_shape(8));
  b.add(b.matmul({whole(x)}, whole(y)), "fc");
  b.g.output = y;
  sim::Arch a = arch8();
  a.acc_entries = 64;
  CHECK_THROWS_WITH(compiler::lower(b.g, a), Catch::Contains("batch 40 must be 1 to 32 (half the accumulators, acc_entries = 64)"));
}

}  // namespace tpusim::test
