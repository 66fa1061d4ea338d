// 16-bit layers (docs/compiler.md "16-bit layers"): the golden reference against a plain int64
// loop, the lowering (two tiles and two matmuls per tile, the low plane fetched unsigned) bit-exact
// on every engine, the quantizer's choice (automatic, per layer, overridden) and its bound on the
// accumulators, and the refusal of bad keys.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "compiler/quantize.h"
#include "e2e_support.h"
#include "graph_builder.h"
#include "isa/error.h"

namespace tpusim::test {

using Catch::Matchers::Contains;
using compiler::map_shape;
using compiler::vector_shape;
using isa::Field;
using isa::Opcode;

namespace {

// Gives m random 16-bit weights (both planes) and a requantization 8 bits coarser.
void widen(GraphBuilder& b, compiler::MatmulOp& m) {
  m.weights_hi = b.random(m.weights.size());
  for (uint8_t& s : m.shift) s = static_cast<uint8_t>(s + 8);
}

// A dense model of `k` inputs and `n` units whose weights are given by `w(k, j)`.
compiler::Model dense_model(uint64_t k, uint64_t n, uint64_t batch, const std::string& extra = "") {
  const std::string text = fmt::format(
      "[model]\nname = \"wide\"\nbatch = {}\ninput = [{}]\n{}\n[[layer]]\ntype = \"dense\"\nunits = {}\n"
      "activation = \"relu\"\n[[layer]]\ntype = \"dense\"\nunits = 10\n",
      batch, k, extra, n);
  return compiler::parse_model(text, "wide.toml", ".");
}

// A dead input feature with large weights: input channel 0 is 0 in every sample and its weights
// (row 0 of the first layer) are 40 times the others. Row 0 sets every column's int8 scale, the
// weights that matter round to a few steps: int8 loses ~8% of the layer's output, the
// energy-weighted error (docs/compiler.md) says so, and 16-bit weights fix it.
void dead_feature(compiler::Model& m, uint64_t k, uint64_t n) {
  m.layers[0].seeded_weights = false;  // no longer the seeded generator's (which auto keeps int8)
  for (uint64_t j = 0; j < n; ++j) m.layers[0].weights[j] *= 40.0f;
  for (size_t i = 0; i < m.inputs[0].data.size(); i += k) m.inputs[0].data[i] = 0.0f;
}

bool wide_op(const compiler::QGraph& g, size_t i) { return std::get<compiler::MatmulOp>(g.ops.at(i)).wide_weights(); }

// The output's quantization error (relative to the largest float output) of c run on the fast engine.
double output_error(compiler::Compiled& c, const sim::Arch& arch) {
  const sim::RunResult r = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
  for (const sim::HostBuffer& h : r.state->host)
    if (h.name == "output") {
      const compiler::OutputCheck check = compiler::check_output(c, h.bytes, arch);
      CHECK(check.matches);
      return check.error.relative;
    }
  FAIL("no output region");
  return 1;
}

}  // namespace

TEST_CASE("the golden reference computes 16-bit weights as a plain int64 loop does", "[wide]") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y));
  widen(b, m);
  m.func = isa::Func::identity;
  b.add(m, "fc");
  b.g.output = y;
  const auto golden = compiler::run_golden(b.g);
  for (uint64_t n = 0; n < 3; ++n)
    for (uint64_t j = 0; j < 12; ++j) {
      int64_t sum = 0;
      for (uint64_t k = 0; k < 20; ++k) {
        const int64_t w = int64_t{uint8_t(m.weights[k * 12 + j])} + 256 * int64_t{m.weights_hi[k * 12 + j]};
        sum += int64_t{b.g.input_data[0][n * 20 + k]} * w;
      }
      // |sum| <= 20 x 128 x 32768 < 2^31: no wrap. act: round_half_away(sum x 1 / 2^shift), saturated.
      const int64_t mag = ((sum < 0 ? -sum : sum) + (int64_t{1} << (m.shift[0] - 1))) >> m.shift[0];
      const int64_t want = std::clamp<int64_t>(sum < 0 ? -mag : mag, -128, 127);
      INFO("sample " << n << " column " << j << " sum " << sum);
      CHECK(golden[y][n * 12 + j] == want);
    }
}

TEST_CASE("a dense layer with 16-bit weights fetches two tiles per tile, runs two matmuls, bit-exact everywhere",
          "[wide]") {
  GraphBuilder b(3);
  const int x = b.input(vector_shape(20)), y = b.tensor("y", vector_shape(12));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 1, 1, true);
  widen(b, m);
  b.add(m, "fc");
  b.g.output = y;
  const isa::Program p = lower_and_check(b.g, arch8x8());
  // K = 20, N = 12 on 8 x 8: 3 x 2 = 6 tiles of 8-bit layers (lower_test.cpp), each two here.
  CHECK(count(p, Opcode::read_weights) == 12);
  CHECK(count(p, Opcode::read_weights, Field::unsigned_data, 1) == 6);  // the low planes
  CHECK(count(p, Opcode::matmul) == 12);
  CHECK(count(p, Opcode::matmul, Field::switch_weights, 1) == 12);
  // Per N tile: the first K tile's low plane overwrites, the other 5 matmuls accumulate.
  CHECK(count(p, Opcode::matmul, Field::accumulate, 1) == 10);
  // Each plane's tiles stored as their boxes (lower_test.cpp): 2 x (2 x 64 + 2 x 32 + 32 + 16).
  CHECK(p.weights.size() == 2 * (2 * 64 + 2 * 32 + 32 + 16));
  // mm_weight_hi goes 1 before every high plane's matmul and back to 0 before every low one's
  // but the first (reset 0): 6 + 5 setcfg.
  CHECK(count(p, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::mm_weight_hi)) == 11);
  uint64_t weight_hi = 0;
  bool low_first = true;
  for (const auto& in : p.code) {
    if (in.opcode == Opcode::set_config && in[Field::reg] == uint64_t(isa::ConfigReg::mm_weight_hi))
      weight_hi = in[Field::value];
    if (in.opcode == Opcode::matmul) {
      CHECK(weight_hi == (low_first ? 0u : 1u));
      low_first = !low_first;
    }
  }
  // The program ends with the registers as they were: an 8-bit layer after it needs no setcfg.
  CHECK(weight_hi == 1);
}

TEST_CASE("a padded 3x3 convolution with 16-bit weights is bit-exact on every engine, and not packed", "[wide]") {
  GraphBuilder b(2);
  const int x = b.input(map_shape(5, 5, 3)), y = b.tensor("y", map_shape(5, 5, 4));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(y), 3, 3, true);
  m.pad = 1;
  widen(b, m);
  b.add(m, "conv");
  b.g.output = y;
  // Loaded whole: input streaming's chunks would fetch the tiles again per chunk.
  const isa::Program p = lower_and_check(b.g, arch8x8(), whole_input());
  // 9 kernel positions x 1 K tile x 1 N tile, two planes each: 18 tiles (packing would gather).
  CHECK(count(p, Opcode::read_weights) == 18);
  // Streamed (the default), bit-exact as well: the padded input's 5 image rows are 5 DMAs, and
  // the output is cut into 4 chunks, each fetching the 18 tiles (2 chunks with every column
  // shifting at once, weight_shift_skewed = 0: a refetched tile's shift then shows).
  CHECK(count(lower_and_check(b.g, arch8x8()), Opcode::read_weights) == 4 * 18);
  sim::Arch unskewed = arch8x8();
  unskewed.weight_shift_skewed = 0;
  CHECK(count(lower_and_check(b.g, unskewed), Opcode::read_weights) == 2 * 18);
  REQUIRE(p.meta.contains("mapping"));
  CHECK_FALSE(p.meta["mapping"][0].contains("packing"));
  CHECK(p.meta["mapping"][0]["precision"] == "16-bit weights");
}

TEST_CASE("random chains with 16-bit layers are bit-exact on every engine", "[wide]") {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GraphBuilder b(1 + seed % 3);
    b.rng.seed(uint32_t(seed));
    std::uniform_int_distribution<uint64_t> c(1, 19);
    int t = b.input(map_shape(4, 4, c(b.rng)));
    for (int layer = 0; layer < 3; ++layer) {
      const bool conv = (seed + layer) % 2 == 0;
      const int y = b.tensor(fmt::format("t{}", layer), map_shape(4, 4, c(b.rng)));
      compiler::MatmulOp m = b.matmul({whole(t)}, whole(y), conv ? 3 : 1, conv ? 3 : 1, layer % 2 == 1);
      if (conv) m.pad = 1;
      if ((seed + layer) % 3 != 0) widen(b, m);
      b.add(m, fmt::format("l{}", layer));
      t = y;
    }
    b.g.output = t;
    INFO("seed " << seed);
    lower_and_check(b.g, arch8x8());
  }
}

TEST_CASE("auto precision: 16-bit weights for a layer whose int8 weights lose too much, per layer", "[wide]") {
  compiler::Model m = dense_model(64, 32, 4);
  // Seeded Glorot-uniform weights round to int8 with about 0.45% relative RMS error: int8 (and
  // auto keeps seeded weights int8 without measuring them: Layer::seeded_weights).
  CHECK(m.layers[0].seeded_weights);
  compiler::QGraph g = compiler::quantize(m);
  CHECK_FALSE(wide_op(g, 0));
  CHECK_FALSE(wide_op(g, 1));
  // A dead feature with large weights (dead_feature): the first layer goes 16-bit, not the other.
  compiler::Model outlier = m;
  for (uint64_t j = 0; j < 32; ++j) outlier.layers[0].weights[j] *= 40.0f;
  outlier.layers[0].seeded_weights = false;
  CHECK_FALSE(wide_op(compiler::quantize(outlier), 0));  // the large weights meet live inputs: int8 keeps up
  dead_feature(m, 64, 32);
  g = compiler::quantize(m);
  CHECK(wide_op(g, 0));
  CHECK_FALSE(wide_op(g, 1));
  // The layer's weight_bits wins over the model's precision, which wins over the automatic choice.
  m.layers[0].weight_bits = 8;
  m.layers[1].weight_bits = 16;
  g = compiler::quantize(m);
  CHECK_FALSE(wide_op(g, 0));
  CHECK(wide_op(g, 1));
  m.layers[0].weight_bits.reset();
  m.layers[1].weight_bits.reset();
  m.precision = compiler::Precision::int8;
  CHECK_FALSE(wide_op(compiler::quantize(m), 0));
  m.precision = compiler::Precision::wide;
  g = compiler::quantize(m);
  CHECK(wide_op(g, 0));
  CHECK(wide_op(g, 1));
}

TEST_CASE("16-bit weights cut the error int8 loses to an outlier, at twice the matrix cycles", "[wide]") {
  compiler::Model m = dense_model(64, 32, 8);
  dead_feature(m, 64, 32);
  const sim::Arch arch = square(8);
  compiler::Model narrow = m;
  narrow.precision = compiler::Precision::int8;
  compiler::Compiled c8 = compiler::compile_model(narrow, arch);
  compiler::Compiled c16 = compiler::compile_model(m, arch);
  const double e8 = output_error(c8, arch), e16 = output_error(c16, arch);
  INFO("int8 error " << e8 << ", 16-bit " << e16);
  CHECK(e16 < e8 / 2);
  // Layer 1's 8 x 4 = 32 tiles become 64; layer 2's 4 x 2 = 8 stay.
  CHECK(count(c8.program, Opcode::read_weights) == 32 + 8);
  CHECK(count(c16.program, Opcode::read_weights) == 64 + 8);
  // Both bit-exact on every engine against the golden reference.
  check_model(narrow, arch, true);
  check_model(m, arch, true);
}

TEST_CASE("16-bit weights keep every accumulator below 2^31: the scale gives way where the reduction is long",
          "[wide]") {
  // 2048 inputs of even weights: at +-32767 a column's sum of |q| would be about 2048 x 16384 = 2^25,
  // x 128 (the largest int8 input) = 2^32: too much. The quantizer makes the scale coarser.
  compiler::Model m = dense_model(2048, 8, 2);
  m.layers[0].weight_bits = 16;
  const compiler::QGraph g = compiler::quantize(m);
  const auto& op = std::get<compiler::MatmulOp>(g.ops.at(0));
  REQUIRE(op.wide_weights());
  int32_t top = 0;
  for (uint64_t j = 0; j < op.n; ++j) {
    int64_t l1 = 0;
    for (uint64_t k = 0; k < op.k; ++k) l1 += std::abs(op.weight(k * op.n + j));
    INFO("column " << j);
    CHECK(l1 * 128 <= std::numeric_limits<int32_t>::max());
    CHECK(l1 * 128 > std::numeric_limits<int32_t>::max() / 2);  // and not needlessly coarse
    for (uint64_t k = 0; k < op.k; ++k) top = std::max(top, std::abs(op.weight(k * op.n + j)));
  }
  CHECK(top < 32767);  // the bound binds: the weights do not reach the 16-bit range
  // The worst input for column 0 (every x = +-128, the sign of its weight) gives the int64 sum
  // exactly: the golden reference (which wraps like the machine) never wraps.
  compiler::QGraph worst = g;
  worst.ops.resize(1);
  worst.op_layer.resize(1);
  auto& w0 = std::get<compiler::MatmulOp>(worst.ops[0]);
  w0.func = isa::Func::identity;
  w0.bias.clear();
  w0.mult = {1};
  w0.shift = {24};
  w0.output.tensor = worst.output = std::get<compiler::MatmulOp>(g.ops.at(0)).output.tensor;
  int64_t sum = 0;
  auto& in = worst.input_data[0];
  for (uint64_t n = 0; n < worst.batch; ++n)
    for (uint64_t k = 0; k < op.k; ++k) {
      const int32_t w = op.weight(k * op.n);
      in[n * op.k + k] = static_cast<int8_t>(n == 0 ? (w < 0 ? 127 : -128) : (w < 0 ? -128 : 127));
      if (n == 0) sum += int64_t{in[k]} * w;
    }
  const auto golden = compiler::run_golden(worst);
  const int64_t want = -((-sum + (int64_t{1} << 23)) >> 24);  // round half away, sum < 0
  CHECK(sum < std::numeric_limits<int32_t>::min() / 2);
  CHECK(golden[worst.output][0] == std::clamp<int64_t>(want, -128, 127));
}

TEST_CASE("wide_mlp.toml: the automatic precision gives fc1 16-bit weights, bit-exact on every engine", "[wide]") {
  compiler::Model m = load("small/wide_mlp.toml");
  const compiler::QGraph g = compiler::quantize(m);
  CHECK(wide_op(g, 0));
  CHECK_FALSE(wide_op(g, 1));
  check_model(m, square(16), true);
  const uint64_t wide = check_model(m, sim::Arch{}, false);
  // int8 throughout: still bit-exact against its golden reference, but 11.39% of the output lost
  // (check_model's bound for a healthy model is 10%).
  m.precision = compiler::Precision::int8;
  compiler::Compiled c8 = compiler::compile_model(m, sim::Arch{});
  CHECK(output_error(c8, sim::Arch{}) > 0.1);
  const uint64_t narrow = sim::simulate(c8.program, sim::Arch{}, {sim::Engine::timing, 0}).cycles;
  // tpu-v1, batch 16: fc1's one tile becomes two (each fetched, shifted in and streamed); the
  // run is mostly weight fetch and host transfer, so 3795 against 3538 cycles, not twice (4050
  // before tpu-v1's shift was skewed by column: the second tile's shift now starts at the first's
  // switch).
  CHECK(narrow == 3538);
  CHECK(wide == 3795);
}

// An lstm layer's gates: 16-bit weights by its weight_bits key or the model's precision wide;
// the automatic choice keeps seeded gates int8 without measuring (file weights are measured:
// wide_inputs_test.cpp; docs/compiler.md "16-bit layers"). Stacked 2 deep over 4 steps
// of 6 features, 5 units: per stacked layer 4 x 4 - 1 = 15 gate matmuls (no f gate at step 0),
// the two stacked layers' 30 and the scores layer's 1.
TEST_CASE("an lstm layer's gate weights go 16-bit by weight_bits or precision, bit-exact on every engine", "[wide]") {
  const auto wide_gates = [](const compiler::Model& m) {
    const compiler::QGraph g = compiler::quantize(m);
    uint64_t gates = 0, wide = 0;
    for (size_t i = 0; i < g.ops.size(); ++i)
      if (std::holds_alternative<compiler::MatmulOp>(g.ops[i]) && g.op_layer[i] == "lstm")
        ++gates, wide += wide_op(g, i);
    CHECK(gates == 30);
    return wide;
  };
  const compiler::Model by_key = wide_lstm_model("", "weight_bits = 16"), by_precision = wide_lstm_model("[quantization]\nprecision = \"wide\"", "");
  CHECK(wide_gates(by_key) == 30);
  CHECK(wide_gates(by_precision) == 30);
  CHECK(wide_gates(wide_lstm_model("", "")) == 0);  // automatic: int8 gates
  CHECK(wide_gates(wide_lstm_model("[quantization]\nprecision = \"wide\"", "weight_bits = 8")) == 0);
  const uint64_t narrow_cycles = check_model(wide_lstm_model("", ""), square(8), false);
  const uint64_t wide_cycles = check_model(by_key, square(8), true);
  CHECK(wide_cycles > narrow_cycles);  // two matmuls per gate tile
}

TEST_CASE("weight_bits and precision keys: bad values are refused with the field named", "[wide]") {
  const auto refused = [](const std::string& extra, const std::string& layer_key, const std::string& what) {
    const std::string text =
        fmt::format("[model]\nname = \"w\"\nbatch = 1\ninput = [4]\n{}\n[[layer]]\ntype = \"dense\"\nunits = 2\n{}\n", extra, layer_key);
    REQUIRE_THROWS_WITH(compiler::parse_model(text, "w.toml", "."), Contains(what));
  };
  refused("", "weight_bits = 12", "layer dense1: weight_bits: 12: expected 8 or 16");
  refused("", "weight_bits = 4", "weight_bits");
  refused("[quantization]\nprecision = \"int16\"", "", "precision: \"int16\": expected one of");
  refused("[quantization]\nwide_error = -1", "", "wide_error");
  const std::string pool = "[model]\nname = \"w\"\nbatch = 1\ninput = [4, 4, 1]\n[[layer]]\ntype = \"max_pool\"\nsize = 2\n"
                           "weight_bits = 16\n";
  REQUIRE_THROWS_WITH(compiler::parse_model(pool, "w.toml", "."), Contains("unknown key"));
  const compiler::Model ok = compiler::parse_model(
      "[model]\nname = \"w\"\nbatch = 1\ninput = [4]\n[quantization]\nprecision = \"wide\"\nwide_error = 0.05\n"
      "[[layer]]\ntype = \"dense\"\nunits = 2\nweight_bits = 8\n",
      "w.toml", ".");
  CHECK(ok.precision == compiler::Precision::wide);
  CHECK(ok.wide_error == 0.05);
  CHECK(ok.layers[0].weight_bits == uint8_t{8});
}

}  // namespace tpusim::test
