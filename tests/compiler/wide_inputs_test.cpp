// 16-bit tensors as matmul inputs and as the model's output (docs/compiler.md "16-bit tensors"):
// the golden reference against a plain int64 loop, the lowering (setcfg mm_in_hi: both byte
// planes streamed, half speed) with exact stream cycles and bit-exact on every engine, the
// quantizer's choice (an lstm's h with its 16-bit precision, the output's width, the keys and
// the refusals) and its accumulator bound for 16-bit inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "compiler/quantize.h"
#include "e2e_support.h"
#include "graph_builder.h"
#include "isa/error.h"
#include "tools/source_dir.h"

namespace tpusim::test {

using Catch::Matchers::Contains;
using compiler::vector_shape;
using isa::Field;
using isa::Opcode;

namespace {

// x [20] (int8 input) -> fc1 -> y [12] (16-bit when `wide`) -> fc2 -> z [6] (16-bit when `wide_out`).
// fc1's requantization is 8 bits finer for a 16-bit y (its values then span about +-2^14),
// fc2's 8 bits coarser for a 16-bit input and 8 bits finer for a 16-bit output.
struct TwoLayers {
  GraphBuilder b;
  int x, y, z;
  TwoLayers(uint64_t batch, bool wide, bool wide_out) : b(batch) {
    x = b.input(vector_shape(20));
    y = b.tensor("y", vector_shape(12));
    z = b.tensor("z", vector_shape(6));
    b.g.tensors[size_t(y)].bits = wide ? 16 : 8;
    b.g.tensors[size_t(z)].bits = wide_out ? 16 : 8;
    compiler::MatmulOp m1 = b.matmul({whole(x)}, whole(y));
    if (wide) m1.shift[0] = uint8_t(m1.shift[0] - 8);
    compiler::MatmulOp m2 = b.matmul({whole(y)}, whole(z), 1, 1, true);
    for (uint8_t& s : m2.shift) s = uint8_t(s + (wide ? 8 : 0) - (wide_out ? 8 : 0));
    m2.func = isa::Func::identity;
    b.add(m1, "fc1");
    b.add(m2, "fc2");
    b.g.output = z;
  }
  const compiler::MatmulOp& fc2() const { return std::get<compiler::MatmulOp>(b.g.ops[1]); }
};

// The output's quantization error of c run on every engine, checked bit for bit.
compiler::OutputCheck run_checked(compiler::Compiled& c, const sim::Arch& arch) {
  const EngineRuns r = run_all(c.program, arch);
  for (const sim::HostBuffer& h : r.stepped.state->host)
    if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, arch).matches);
  for (const sim::HostBuffer& h : r.fast.state->host)
    if (h.name == "output") {
      compiler::OutputCheck check = compiler::check_output(c, h.bytes, arch);
      INFO(check.first_difference);
      CHECK(check.matches);
      return check;
    }
  FAIL("no output region");
  return {};
}

compiler::Model mlp(const std::string& quantization, const std::string& hidden_key = "") {
  return compiler::parse_model(
      fmt::format("[model]\nname = \"mlp\"\nbatch = 5\ninput = [24]\n{}\n[[layer]]\nname = \"hidden\"\n"
                  "type = \"dense\"\nunits = 16\nactivation = \"relu\"\n{}\n[[layer]]\nname = \"scores\"\n"
                  "type = \"dense\"\nunits = 7\n",
                  quantization, hidden_key),
      "mlp.toml", ".");
}

const compiler::QTensor& named(const compiler::QGraph& g, const std::string& name) {
  for (const compiler::QTensor& t : g.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return g.tensors.front();
}

uint64_t wide_matmuls(const compiler::QGraph& g) {
  uint64_t n = 0;
  for (const compiler::QOp& op : g.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op)) n += m->wide_weights();
  return n;
}

uint64_t wide_tensors(const compiler::QGraph& g) {
  return std::count_if(g.tensors.begin(), g.tensors.end(), [](const compiler::QTensor& t) { return t.bits == 16; });
}

}  // namespace

TEST_CASE("the golden reference computes 16-bit matmul inputs as a plain int64 loop does", "[wide]") {
  TwoLayers t(3, true, false);
  const auto golden = compiler::run_golden(t.b.g);
  const std::vector<int32_t> y = compiler::tensor_values(golden[size_t(t.y)], 16);
  REQUIRE(y.size() == 3 * 12);
  int32_t top = 0;
  for (int32_t v : y) top = std::max(top, std::abs(v));
  CHECK(top > 1000);  // y uses its high bytes
  const compiler::MatmulOp& m = t.fc2();
  for (uint64_t n = 0; n < 3; ++n)
    for (uint64_t j = 0; j < 6; ++j) {
      int64_t sum = m.bias[j];
      for (uint64_t k = 0; k < 12; ++k) sum += int64_t{y[n * 12 + k]} * m.weights[k * 6 + j];
      // |sum| <= 12 x 32768 x 128 + 5000 < 2^31: no wrap. act: round_half_away(sum x mult / 2^shift), int8.
      const int64_t p = sum * m.mult[j];
      const int64_t mag = ((p < 0 ? -p : p) + (int64_t{1} << (m.shift[j] - 1))) >> m.shift[j];
      const int64_t want = std::clamp<int64_t>(p < 0 ? -mag : mag, -128, 127);
      INFO("sample " << n << " column " << j << " sum " << sum);
      CHECK(golden[size_t(t.z)][n * 6 + j] == want);
    }
}

// 8x8 array (graph_builder.h arch8x8: N = M = 8): a matmul of B vectors streams B cycles and ends
// B + N + M - 1 = B + 15 after it starts; with 16-bit inputs it streams both byte planes, 2 B,
// and ends 2 B + 15 after it starts (docs/timing.md "16-bit operands").
TEST_CASE("a matmul reading a 16-bit tensor streams both byte planes: half speed, bit-exact on every engine",
          "[wide]") {
  for (const bool wide_out : {false, true}) {
    INFO("16-bit output: " << wide_out);
    TwoLayers narrow(3, false, wide_out), wide(3, true, wide_out);
    const isa::Program pn = lower_and_check(narrow.b.g, arch8x8());
    const isa::Program pw = lower_and_check(wide.b.g, arch8x8());
    const sim::RunResult rn = sim::simulate(pn, arch8x8(), {sim::Engine::fast, 0});
    const sim::RunResult rw = sim::simulate(pw, arch8x8(), {sim::Engine::fast, 0});
    // fc1: K = 20, N = 12 on 8 x 8: 3 K tiles x 2 N tiles x 3 samples = 18 vectors; fc2: K = 12,
    // N = 6: 2 K tiles x 3 = 6. 8-bit: 18 + 6 = 24 stream cycles; 16-bit y: fc2 streams each
    // vector twice, 18 + 12 = 30.
    CHECK(rn.matrix.array_active == 24);
    CHECK(rw.matrix.array_active == 30);
    CHECK(rw.array_macs == rn.array_macs + 2 * 3 * 64);  // fc2's second pass: 2 tiles x 3 vectors x 64 cells
    // y (12 channels in 8-byte UB rows: 2 slices of 1 pixel x 3 samples = 6 rows) has its high
    // plane 6 rows after its low one: one setcfg mm_in_hi = 6, before fc2's first matmul.
    CHECK(count(pw, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::mm_in_hi)) == 1);
    CHECK(count(pn, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::mm_in_hi)) == 0);
    uint64_t in_hi = 0, wide_matmuls = 0;
    for (size_t i = 0; i < pw.code.size(); ++i) {
      const isa::Instruction& in = pw.code[i];
      if (in.opcode == Opcode::set_config && in[Field::reg] == uint64_t(isa::ConfigReg::mm_in_hi)) {
        in_hi = in[Field::value];
        CHECK(in_hi == 6);
      }
      if (in.opcode != Opcode::matmul) continue;
      const sim::InstructionTiming& t = rw.timeline[i];
      const uint64_t vectors = in[Field::rows] * in[Field::repeat];
      CHECK(vectors == 3);
      CHECK(t.end - t.start == (in_hi ? 2 : 1) * vectors + 15);
      wide_matmuls += in_hi != 0;
    }
    CHECK(wide_matmuls == 2);  // fc2's two K tiles
    CHECK(pw.meta["mapping"][1]["precision"] == "16-bit inputs");
    // The mapping counts fc2's MACs as the machine does, each byte-plane pass: 2 tiles x 2 planes
    // x 3 vectors x 64 cells computed (fc2's 12 x 6 weights on 8 x 8 tiles: 8 x 6 + 4 x 6 useful
    // cells a vector, x 2 planes x 3 vectors = 432 useful).
    CHECK(pw.meta["mapping"][1]["array_macs"] == 2 * 2 * 3 * 64);
    CHECK(pw.meta["mapping"][1]["macs"] == (8 * 6 + 4 * 6) * 2 * 3);
    // The model's MACs, each once whatever the width: the 8-bit program's (216 = 72 cells x 3).
    CHECK(pw.meta["mapping"][1]["model_macs"] == (8 * 6 + 4 * 6) * 3);
    CHECK(pn.meta["mapping"][1]["model_macs"] == pn.meta["mapping"][1]["macs"]);
    CHECK(pn.meta["mapping"][1]["array_macs"] == 2 * 3 * 64);
    for (const auto& [p, r] : {std::pair{&pn, &rn}, std::pair{&pw, &rw}}) {
      uint64_t macs = 0, array_macs = 0;
      for (const auto& l : p->meta["mapping"]) macs += l["macs"].get<uint64_t>(), array_macs += l["array_macs"].get<uint64_t>();
      CHECK(macs == r->macs);
      CHECK(array_macs == r->array_macs);
      CHECK(p->meta["macs"] == r->macs);
    }
    // The output region holds both planes of a 16-bit output: 2 x 3 x 6 bytes.
    for (const isa::HostRegion& h : pw.host_regions)
      if (h.name == "output") CHECK(h.bytes == (wide_out ? 2u : 1u) * 3 * 6);
  }
}

TEST_CASE("16-bit inputs with 16-bit weights: quarter speed, bit-exact on every engine", "[wide]") {
  TwoLayers t(2, true, true);
  auto& m = std::get<compiler::MatmulOp>(t.b.g.ops[1]);
  m.weights_hi = t.b.random(m.weights.size(), -2, 1);  // small high bytes: the sums stay in int32
  for (uint8_t& s : m.shift) s = uint8_t(s + 8);
  const isa::Program p = lower_and_check(t.b.g, arch8x8());
  const sim::RunResult r = sim::simulate(p, arch8x8(), {sim::Engine::fast, 0});
  // fc1: 3 K tiles x 2 N tiles x 2 vectors = 12; fc2: 2 K tiles x 2 weight planes x 2 input
  // planes x 2 vectors = 16.
  CHECK(r.matrix.array_active == 12 + 16);
  CHECK(p.meta["mapping"][1]["precision"] == "16-bit weights and inputs");
  CHECK(p.meta["mapping"][1]["array_macs"] == 16 * 64);  // every pass counted, as the machine's
  // The model's MACs once: a quarter of the four passes' useful MACs.
  CHECK(p.meta["mapping"][1]["model_macs"].get<uint64_t>() * 4 == p.meta["mapping"][1]["macs"].get<uint64_t>());
  CHECK(p.meta["macs"] == r.macs);
}

TEST_CASE("the model's output at 16 bits: twice the calibrated range, bit-exact on every engine", "[wide]") {
  compiler::Model eight = mlp(""), sixteen = mlp("[quantization]\noutput_bits = 16");
  CHECK(sixteen.output_bits == 16);
  compiler::Compiled c8 = compiler::compile_model(eight, square(8)), c16 = compiler::compile_model(sixteen, square(8));
  const compiler::QTensor& o8 = c8.graph.tensors[size_t(c8.graph.output)];
  const compiler::QTensor& o16 = c16.graph.tensors[size_t(c16.graph.output)];
  CHECK(o8.bits == 8);
  CHECK(o16.bits == 16);
  // int8: max |y| / 127; int16: 2 x max |y| / 32767 (headroom), the same calibrated max |y|.
  CHECK(o16.scale == Approx(o8.scale * 127 * 2 / 32767).epsilon(1e-12));
  // The hidden layer is 8-bit either way: only the output widens.
  CHECK(named(c16.graph, "hidden").bits == 8);
  const compiler::OutputCheck e8 = run_checked(c8, square(8)), e16 = run_checked(c16, square(8));
  INFO("8-bit output " << e8.error.relative << ", 16-bit " << e16.error.relative);
  CHECK(e16.error.rms < e8.error.rms);
  CHECK(e16.elements == 5 * 7);
  // --output-bits (LoadOptions::output_bits) replaces the description's.
  compiler::Model over = mlp("[quantization]\noutput_bits = 16");
  over.output_bits = 8;
  CHECK(compiler::prepare_model(over).graph.tensors.back().bits == 8);
}

// An add of two 16-bit tensors at different scales brings the finer to the coarser scale first
// (a vec pass into NAME.rescale), at 16 bits: in int8, a 16-bit scale (2 x the range / 32767)
// holds 1/258 of the range, and the finer operand saturated there (LSTM0 with 16-bit residual
// adds lost 87% of its largest output that way; docs/validation.md).
TEST_CASE("an add of two 16-bit tensors at different scales rescales at 16 bits, bit-exact on every engine",
          "[wide]") {
  const compiler::Model m = compiler::parse_model(
      "[model]\nname = \"res\"\nbatch = 4\ninput = [24]\n"
      "[[layer]]\nname = \"a\"\ntype = \"dense\"\nunits = 16\nactivation = \"tanh\"\noutput_bits = 16\n"
      "[[layer]]\nname = \"b\"\ntype = \"dense\"\nunits = 16\noutput_bits = 16\n"
      "[[layer]]\nname = \"sum\"\ntype = \"add\"\ninputs = [\"a\", \"b\"]\noutput_bits = 16\n"
      "[[layer]]\nname = \"scores\"\ntype = \"dense\"\nunits = 7\n",
      "res.toml", ".");
  compiler::Compiled c = compiler::compile_model(m, square(8));
  const compiler::QTensor &a = named(c.graph, "a"), &b = named(c.graph, "b");
  REQUIRE(a.bits == 16);
  REQUIRE(b.bits == 16);
  REQUIRE(a.scale != b.scale);
  // tanh's a (|a| < 1) is the finer: b, linear over a, spans several times a's range.
  CHECK(named(c.graph, "sum.rescale").bits == 16);
  const compiler::OutputCheck e = run_checked(c, square(8));
  INFO("output error " << e.error.relative);
  CHECK(e.error.relative < 0.05);
}

TEST_CASE("a layer's output_bits = 16: its readers' matmuls read both planes, bit-exact on every engine", "[wide]") {
  compiler::Compiled c = compiler::compile_model(mlp("", "output_bits = 16"), square(8));
  const compiler::QTensor& hidden = named(c.graph, "hidden");
  CHECK(hidden.bits == 16);
  CHECK(hidden.scale > 0);
  // The output layer reads a 16-bit tensor: the automatic output width is 16.
  CHECK(c.graph.tensors[size_t(c.graph.output)].bits == 16);
  CHECK(count(c.program, Opcode::set_config, Field::reg, int64_t(isa::ConfigReg::mm_in_hi)) >= 1);
  run_checked(c, square(8));
  // ... unless the model says 8.
  compiler::Model m = mlp("[quantization]\noutput_bits = 8", "output_bits = 16");
  CHECK(compiler::prepare_model(m).graph.tensors.back().bits == 8);
}

TEST_CASE("an lstm with 16-bit precision gives its h 16 bits: the gates and the next layer read it at half speed",
          "[wide]") {
  const compiler::Model wide = wide_lstm_model("", "weight_bits = 16");
  compiler::Compiled c = compiler::compile_model(wide, square(8));
  // Stacked layer 0's h sequence (read by its own gates and by layer 1), layer 1's steps 0..2 and
  // its last h (the lstm's output), read by scores: all 16-bit, scale 1/32767.
  for (const char* t : {"lstm.l0.h", "lstm.l1.h", "lstm"}) {
    INFO(t);
    CHECK(named(c.graph, t).bits == 16);
    CHECK(named(c.graph, t).scale == Approx(1.0 / 32767));
  }
  CHECK(c.graph.tensors[size_t(c.graph.output)].bits == 16);  // scores reads 16-bit h
  // The int8 input x takes h's width first (a gate adds x_t's and h_{t-1}'s rows at one scale):
  // one vec pass, x 256 exactly, into lstm.l0.x.
  const compiler::QTensor& x16 = named(c.graph, "lstm.l0.x");
  CHECK(x16.bits == 16);
  CHECK(x16.scale == Approx(c.graph.tensors[size_t(c.graph.inputs[0])].scale / 256));
  // Every gate matmul reads 16-bit tensors: x_t in all 4 x 4 - 1 = 15 of a stacked layer, h_{t-1}
  // in the 12 after step 0; layer 1's x is layer 0's h. scores reads lstm: 2 x (15 + 12) + 1 views.
  uint64_t reads16 = 0, reads8 = 0;
  for (const compiler::QOp& op : c.graph.ops)
    if (const auto* m = std::get_if<compiler::MatmulOp>(&op))
      for (const compiler::View& v : m->inputs) (c.graph.tensors[size_t(v.tensor)].bits == 16 ? reads16 : reads8)++;
  CHECK(reads16 == 2 * (15 + 12) + 1);
  CHECK(reads8 == 0);
  run_checked(c, square(8));
  // precision int8 keeps the automatic choices int8 (gates, cell), the layer's key still widens
  // its weights and h; the runners' hard int8 (Model::wide_elements false) keeps every tensor int8.
  compiler::Model int8 = wide_lstm_model("[quantization]\nprecision = \"int8\"", "weight_bits = 16");
  const compiler::QGraph g8 = compiler::prepare_model(int8).graph;
  CHECK(named(g8, "lstm.l0.h").bits == 16);
  CHECK(named(g8, "lstm.l0.t1.f").bits == 8);
  CHECK(named(g8, "lstm.l0.t1.c").bits == 8);
  int8.wide_elements = false;
  for (const compiler::QTensor& t : compiler::prepare_model(int8).graph.tensors) CHECK(t.bits == 8);
}

TEST_CASE("16-bit inputs keep every accumulator below 2^31: int8 weights give way where the reduction is long",
          "[wide]") {
  // hidden: 600 units at 16 bits; scores reads them: 600 x 127 x 32768 = 2.5e9 > 2^31 at full int8
  // weights, so its scales coarsen until sum_k |q[k][j]| x 32768 < 2^31.
  compiler::Model m = compiler::parse_model(
      "[model]\nname = \"long\"\nbatch = 2\ninput = [8]\n[[layer]]\nname = \"hidden\"\ntype = \"dense\"\n"
      "units = 600\noutput_bits = 16\n[[layer]]\nname = \"scores\"\ntype = \"dense\"\nunits = 3\n",
      "long.toml", ".");
  compiler::Model flat = m;
  for (float& w : flat.layers[1].weights) w = w < 0 ? -0.1f : 0.1f;  // every |w| the column's max
  for (compiler::Model* model : {&m, &flat}) {
    const compiler::QGraph g = compiler::quantize(*model);
    const auto& op = std::get<compiler::MatmulOp>(g.ops.back());
    for (uint64_t j = 0; j < op.n; ++j) {
      int64_t l1 = 0;
      for (uint64_t k = 0; k < op.k; ++k) l1 += std::abs(int64_t{op.weights[k * op.n + j]});
      CHECK(l1 * 32768 < (int64_t{1} << 31));
    }
  }
  compiler::Compiled c = compiler::compile_model(flat, square(16));
  run_checked(c, square(16));
}

// Random models with 16-bit tensors where matmuls read them: LSTMs of 16-bit precision (h at 16
// bits, stacked or not, every h or the last), MLPs and CNNs (padded 3 x 3 convolutions reading a
// 16-bit map: both planes' zero borders) with output_bits on hidden layers and on the model, on
// random small arrays: bit-exact on every engine against the golden reference.
TEST_CASE("random models feeding 16-bit tensors to matmuls run bit-exact on every engine", "[wide]") {
  std::mt19937 rng(1914);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const uint64_t sizes[][2] = {{4, 4}, {8, 8}, {8, 4}, {16, 16}, {4, 8}};
  const char* acts[] = {"none", "relu", "sigmoid", "tanh"};
  for (int i = 0; i < 15; ++i) {
    std::ostringstream d;
    d << "[model]\nname = \"w16_" << i << "\"\nbatch = " << pick(1, 4) << "\nseed = " << pick(1, 1000) << "\n";
    const int kind = i % 3;
    if (kind == 0) {
      d << "input = [" << pick(1, 5) << ", " << pick(1, 24) << "]\n[quantization]\nprecision = \""
        << (pick(0, 1) ? "wide" : "auto") << "\"\n[[layer]]\ntype = \"lstm\"\nunits = " << pick(1, 24)
        << "\nstack = " << pick(1, 2) << "\nweight_bits = 16\nreturn_sequences = " << (pick(0, 1) ? "true" : "false")
        << "\n[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 10) << "\nweight_bits = " << (pick(0, 1) ? 16 : 8)
        << "\n";
    } else if (kind == 1) {
      d << "input = [" << pick(1, 30) << "]\n[quantization]\noutput_bits = " << (pick(0, 1) ? 16 : 8) << "\n";
      for (int l = pick(1, 3); l > 0; --l)
        d << "[[layer]]\ntype = \"dense\"\nunits = " << pick(1, 30) << "\nactivation = \"" << acts[pick(0, 3)]
          << "\"\noutput_bits = " << (pick(0, 1) ? 16 : 8) << "\nweight_bits = " << (pick(0, 2) == 0 ? 16 : 8) << "\n";
    } else {
      d << "input = [" << pick(3, 7) << ", " << pick(3, 7) << ", " << pick(1, 6) << "]\n";
      if (pick(0, 1)) d << "[quantization]\noutput_bits = 16\n";
      for (int l = pick(1, 3); l > 0; --l)
        d << "[[layer]]\ntype = \"conv2d\"\nfilters = " << pick(1, 12) << "\nkernel = " << (pick(0, 1) ? 3 : 1)
          << "\npadding = \"same\"\nactivation = \"" << acts[pick(0, 1)] << "\"\noutput_bits = "
          << (pick(0, 2) ? 16 : 8) << "\n";
    }
    const auto& s = sizes[i % 5];
    const sim::Arch a = rect(s[0], s[1]);
    INFO("model " << i << ":\n" << d.str());
    compiler::Model m = compiler::parse_model(d.str(), "random.toml", ".");
    compiler::Compiled c = compiler::compile_model(m, a);
    run_checked(c, a);
  }
}

TEST_CASE("output_bits: bad values and impossible widths are refused, naming the layer and key", "[wide]") {
  const std::string head = "[model]\nname = \"w\"\nbatch = 1\ninput = [4, 4, 2]\n";
  REQUIRE_THROWS_WITH(compiler::parse_model(head + "[quantization]\noutput_bits = 12\n[[layer]]\ntype = \"conv2d\"\n"
                                                   "filters = 2\nkernel = 1\n",
                                            "w.toml", "."),
                      Contains("output_bits: 12: expected 8 or 16"));
  REQUIRE_THROWS_WITH(compiler::parse_model(head + "[[layer]]\ntype = \"max_pool\"\nsize = 2\noutput_bits = 16\n",
                                            "w.toml", "."),
                      Contains("unknown key"));
  // A pool reads the conv's output: 8-bit only.
  const compiler::Model pooled = compiler::parse_model(
      head + "[[layer]]\nname = \"conv\"\ntype = \"conv2d\"\nfilters = 2\nkernel = 1\noutput_bits = 16\n"
             "[[layer]]\ntype = \"max_pool\"\nsize = 2\n",
      "w.toml", ".");
  REQUIRE_THROWS_WITH(compiler::quantize(pooled),
                      Contains("layer conv: output_bits = 16: a layer that reads it (a pool, concat or flatten)"));
  // The model's output written by a pool.
  compiler::Model last_pool = compiler::parse_model(
      head + "[[layer]]\ntype = \"conv2d\"\nfilters = 2\nkernel = 1\n[[layer]]\nname = \"pool\"\ntype = \"max_pool\"\n"
             "size = 2\n",
      "w.toml", ".");
  last_pool.output_bits = 16;
  REQUIRE_THROWS_WITH(compiler::quantize(last_pool),
                      Contains("layer pool: the model's output_bits = 16: its last operation writes 8 bits"));
}

TEST_CASE("a precision the user chose sets the description's keys aside: --precision, precision=, compare --int8",
          "[wide]") {
  // The description: lstm weight_bits = 16 (2 stacked layers x (4 x 4 - 1) gate matmuls = 30 with
  // 16-bit weights, h 16-bit), scores weight_bits = 8.
  const compiler::Model m = wide_lstm_model("", "weight_bits = 16");
  const auto with = [&](std::optional<compiler::Precision> p, std::optional<uint8_t> out = std::nullopt) {
    compiler::Model c = m;
    compiler::apply_precision(c, p, out, "wide_lstm.toml");
    return compiler::prepare_model(c).graph;
  };
  const compiler::QGraph keys = with(std::nullopt);
  CHECK(wide_matmuls(keys) == 30);
  CHECK(named(keys, "lstm.l0.h").bits == 16);
  CHECK(named(keys, "lstm.l0.t1.c").bits == 16);
  // int8: every weight and tensor int8 (before, the keys kept the 30 16-bit matmuls and h).
  const compiler::QGraph int8 = with(compiler::Precision::int8);
  CHECK(wide_matmuls(int8) == 0);
  CHECK(wide_tensors(int8) == 0);
  // wide: every layer's weights 16-bit, scores' weight_bits = 8 set aside too: 30 + 1.
  CHECK(wide_matmuls(with(compiler::Precision::wide)) == 31);
  // auto replaces [quantization] precision only: the keys still decide their layers.
  CHECK(wide_matmuls(with(compiler::Precision::automatic)) == 30);
  // A description's own precision = "int8" is the default for its layers without keys: the keys win.
  const compiler::QGraph own = compiler::prepare_model(wide_lstm_model("[quantization]\nprecision = \"int8\"",
                                                                       "weight_bits = 16")).graph;
  CHECK(wide_matmuls(own) == 30);
  CHECK(named(own, "lstm.l0.h").bits == 16);
  CHECK_THROWS_WITH(with(compiler::Precision::int8, uint8_t{16}),
                    "wide_lstm.toml: --output-bits 16 and --precision int8 (every weight and tensor int8) contradict "
                    "each other");
  // load_model applies LoadOptions::precision (tpusim run/compile --precision, Python's precision=,
  // compare --int8, the GPU and CPU runners) so: wide16.toml's keys (its lstm weight_bits = 16, its
  // hidden layer's output_bits = 16, its [quantization] output_bits = 16) are set aside.
  const std::filesystem::path wide16 = std::filesystem::path(tpusim::source_dir()) / "tests/data/models/wide16.toml";
  const compiler::QGraph described = compiler::prepare_file(wide16).graph;
  CHECK(wide_matmuls(described) == 30);
  CHECK(named(described, "hidden").bits == 16);
  CHECK(described.tensors[size_t(described.output)].bits == 16);
  compiler::LoadOptions o;
  o.precision = compiler::Precision::int8;
  const compiler::QGraph user = compiler::prepare_file(wide16, o).graph;
  CHECK(wide_matmuls(user) == 0);
  CHECK(wide_tensors(user) == 0);
}

}  // namespace tpusim::test
