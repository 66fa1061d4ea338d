// The GPU plan (gpu/plan.h) and its host model (gpu/host_exec.h) on the CPU: packing, im2col
// against the plainest loops, padding, and the whole pipeline bit for bit against the golden
// reference executor on hand-built graphs (every op kind, view and function) and on the small
// workloads.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/quantize.h"
#include "compiler/reference.h"
#include "gpu/host_exec.h"
#include "gpu/plan.h"
#include "isa/error.h"
#include "tools/source_dir.h"
#include "../compiler/qgraph_builder.h"

using namespace tpusim;
using compiler::QGraph;
using compiler::Shape;
using compiler::View;

namespace {

// tests/compiler/qgraph_builder.h's graphs as the plan's tests name them: tensors t0, t1, ... in
// one layer, the last tensor made the graph's output; matmuls clipped at 40 with function `f`;
// ops in layers layer1, layer2, ...
struct Builder : test::GraphBuilder {
  explicit Builder(uint64_t batch) : GraphBuilder(batch, "gpu-test", 11) {}
  int tensor(Shape s) { return g.output = GraphBuilder::tensor(fmt::format("t{}", g.tensors.size()), s, "layer"); }
  int input(Shape s) { return input_tensor(tensor(s)); }
  compiler::MatmulOp matmul(std::vector<View> in, View out, uint64_t kh, uint64_t kw, bool perchan, isa::Func f) {
    compiler::MatmulOp m = GraphBuilder::matmul(std::move(in), out, kh, kw, perchan);
    m.func = f;
    m.clip = 40;
    return m;
  }
  void add(compiler::QOp op) { GraphBuilder::add(std::move(op), fmt::format("layer{}", g.ops.size() + 1)); }
};

using test::whole;

// The plan's host model and the golden reference agree on every tensor.
// The CUDA gather walks X by runs (gather_run), the host model too; every row's runs must cover
// columns [0, k) once each and read the byte gather_source names, on every gather of the plan.
void require_runs_match_sources(const gpu::GpuPlan& plan) {
  for (const gpu::Step& s : plan.steps) {
    const auto* m = std::get_if<gpu::MatmulStep>(&s);
    if (!m || m->direct) continue;
    const gpu::Im2colGeometry& g = m->gather;
    for (uint64_t row = 0; row < g.rows; ++row) {
      std::vector<int> seen(g.k, 0);
      for (uint64_t part = 0; part < gpu::gather_parts(g); ++part) {
        const gpu::GatherRun run = gpu::gather_run(g, row, part);
        for (uint64_t b = 0; b < run.length; ++b) {
          REQUIRE(run.col + b < g.k);
          ++seen[run.col + b];
          const gpu::GatherSource src = gpu::gather_source(g, row, run.col + b);
          REQUIRE(src.which == run.which);
          if (run.which >= 0) REQUIRE(src.offset == run.offset + b);
        }
      }
      REQUIRE(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(g.k));
    }
  }
}

void require_same_as_golden(const QGraph& g) {
  const gpu::GpuPlan plan = gpu::make_plan(g);
  require_runs_match_sources(plan);
  const auto host = gpu::run_plan_on_host(plan);
  const auto golden = compiler::run_golden(g);
  REQUIRE(host.size() == golden.size());
  for (size_t t = 0; t < host.size(); ++t) {
    INFO("tensor " << t << " (" << g.tensors[t].name << ")");
    REQUIRE(host[t] == golden[t]);
  }
}

}  // namespace

TEST_CASE("pack_weights transposes [rows][n] into zero-padded [n_pad][k_pad]", "[gpu][plan]") {
  // rows = 3, n = 2: w[r][j] = 10 r + j.
  const std::vector<int8_t> w = {0, 1, 10, 11, 20, 21};
  const std::vector<int8_t> packed = gpu::pack_weights(w, 3, 2, 4, 4);
  const std::vector<int8_t> want = {0, 10, 20, 0,   // column 0's weights, then a padding row
                                    1, 11, 21, 0,   // column 1
                                    0, 0,  0,  0,   // padded columns 2 and 3
                                    0, 0,  0,  0};
  REQUIRE(packed == want);
}

TEST_CASE("im2col of a padded, strided convolution equals the plainest loops", "[gpu][plan]") {
  Builder b(2);
  const int in = b.input(compiler::map_shape(5, 6, 3));
  const int out = b.tensor(compiler::map_shape(3, 3, 5));  // 3 x 3 kernel, stride 2, pad 1: (5+2-3)/2+1 = 3, (6+2-3)/2+1 = 3
  compiler::MatmulOp m = b.matmul({whole(in)}, whole(out), 3, 3, true, isa::Func::relu);
  m.stride = 2;
  m.pad = 1;
  b.add(m);
  const gpu::GpuPlan plan = gpu::make_plan(b.g);
  const auto& step = std::get<gpu::MatmulStep>(plan.steps[0]);
  CHECK(step.k == 27);
  CHECK(step.k_pad == 28);
  CHECK(step.n == 5);
  CHECK(step.n_pad == 8);
  CHECK(step.m == 18);  // batch 2 x 9 output pixels
  CHECK_FALSE(step.direct);
  std::vector<std::vector<int8_t>> tensors(b.g.tensors.size());
  tensors[static_cast<size_t>(in)] = b.g.input_data[0];
  const std::vector<int8_t> x = gpu::gather_rows(step, tensors);
  const std::vector<int8_t>& data = b.g.input_data[0];
  for (uint64_t img = 0; img < 2; ++img)
    for (uint64_t oy = 0; oy < 3; ++oy)
      for (uint64_t ox = 0; ox < 3; ++ox)
        for (uint64_t r = 0; r < 3; ++r)
          for (uint64_t s = 0; s < 3; ++s)
            for (uint64_t c = 0; c < 3; ++c) {
              const int64_t iy = int64_t(oy * 2 + r) - 1, ix = int64_t(ox * 2 + s) - 1;
              const bool inside = iy >= 0 && iy < 5 && ix >= 0 && ix < 6;
              const int8_t want = inside ? data[((img * 5 + uint64_t(iy)) * 6 + uint64_t(ix)) * 3 + c] : 0;
              const uint64_t row = (img * 3 + oy) * 3 + ox, col = (r * 3 + s) * 3 + c;
              REQUIRE(x[row * 28 + col] == want);
            }
  for (uint64_t row = 0; row < 18; ++row) REQUIRE(x[row * 28 + 27] == 0);  // the padding column
  require_same_as_golden(b.g);
}

TEST_CASE("concatenated inputs and single-pixel views gather like an LSTM step", "[gpu][plan]") {
  Builder b(3);
  const int x = b.input(compiler::sequence_shape(4, 6));   // x_t: pixel t of a 4-step sequence
  const int h = b.input(compiler::sequence_shape(4, 5));   // h_{t-1}: another sequence
  const int gate = b.tensor(compiler::sequence_shape(4, 7));
  for (uint64_t t = 0; t < 4; ++t)
    b.add(b.matmul({{x, t, 1}, {h, (t + 3) % 4, 1}}, {gate, t, 1}, 1, 1, true,
                   t % 2 ? isa::Func::sigmoid : isa::Func::tanh));
  const gpu::GpuPlan plan = gpu::make_plan(b.g);
  const auto& step = std::get<gpu::MatmulStep>(plan.steps[1]);
  CHECK(step.k == 11);
  CHECK(step.k_pad == 12);
  CHECK(step.m == 3);
  CHECK(step.gather.inputs == 2);
  CHECK(step.gather.input[1].col0 == 6);
  CHECK_FALSE(step.direct);
  // Row 2 (sample 2), column 7 reads h's pixel (1 + 3) % 4 = 0, channel 1.
  const gpu::GatherSource s = gpu::gather_source(step.gather, 2, 7);
  CHECK(s.which == 1);
  CHECK(s.offset == (2 * 4 + 0) * 5 + 1);
  CHECK(gpu::gather_source(step.gather, 2, 11).which == -1);
  require_same_as_golden(b.g);
}

TEST_CASE("a dense layer over a whole tensor with K a multiple of 4 reads its input in place", "[gpu][plan]") {
  Builder b(5);
  const int in = b.input(compiler::vector_shape(16));
  const int hid = b.tensor(compiler::vector_shape(9));
  const int out = b.tensor(compiler::vector_shape(3));
  b.add(b.matmul({whole(in)}, whole(hid), 1, 1, false, isa::Func::relu));     // K 16: direct
  b.add(b.matmul({whole(hid)}, whole(out), 1, 1, true, isa::Func::identity));  // K 9: gathered, padded to 12
  const gpu::GpuPlan plan = gpu::make_plan(b.g);
  CHECK(std::get<gpu::MatmulStep>(plan.steps[0]).direct);
  CHECK_FALSE(std::get<gpu::MatmulStep>(plan.steps[1]).direct);
  CHECK(plan.gemm_macs == 5 * (16 * 9 + 9 * 3));
  CHECK(plan.model_macs == plan.gemm_macs);
  CHECK(plan.weight_bytes == 16 * 9 + 9 * 3);
  require_same_as_golden(b.g);
}

TEST_CASE("pools, every vector op and relux follow the golden reference", "[gpu][plan]") {
  Builder b(2);
  const int in = b.input(compiler::map_shape(7, 7, 4));
  const int c1 = b.tensor(compiler::map_shape(7, 7, 6));
  compiler::MatmulOp conv = b.matmul({whole(in)}, whole(c1), 3, 3, true, isa::Func::relux);
  conv.pad = 1;
  b.add(conv);
  const int mx = b.tensor(compiler::map_shape(3, 3, 6));
  b.add(compiler::PoolOp{whole(c1), whole(mx), isa::PoolKind::max, 3, 2});
  const int av = b.tensor(compiler::map_shape(3, 3, 6));
  b.add(compiler::PoolOp{whole(c1), whole(av), isa::PoolKind::avg, 2, 2});
  int prev = mx;
  for (isa::VecOp op : {isa::VecOp::add, isa::VecOp::sub, isa::VecOp::mul, isa::VecOp::max, isa::VecOp::min,
                        isa::VecOp::pass}) {
    const int o = b.tensor(compiler::map_shape(3, 3, 6));
    compiler::VectorOp v;
    v.op = op;
    v.a = whole(prev);
    v.b = whole(av);
    v.output = whole(o);
    v.mult = op == isa::VecOp::mul ? 3 : 5;
    v.shift = op == isa::VecOp::mul ? 6 : 2;
    v.func = op == isa::VecOp::pass ? isa::Func::sigmoid : isa::Func::identity;
    b.add(v);
    prev = o;
  }
  require_same_as_golden(b.g);
}

TEST_CASE("malformed graphs are refused with the op named", "[gpu][plan]") {
  Builder b(1);
  const int in = b.input(compiler::vector_shape(4));
  const int out = b.tensor(compiler::vector_shape(2));
  compiler::MatmulOp m = b.matmul({whole(in)}, whole(out), 1, 1, false, isa::Func::relu);
  m.weights.pop_back();
  b.add(m);
  REQUIRE_THROWS_WITH(gpu::make_plan(b.g), Catch::Contains("op 0 (layer1): 7 weights, expected 1 x 1 x 4 x 2"));
  std::get<compiler::MatmulOp>(b.g.ops[0]).output.tensor = 9;
  REQUIRE_THROWS_WITH(gpu::make_plan(b.g), Catch::Contains("tensor 9 does not exist"));
  Builder many(1);
  std::vector<View> nine;
  for (int i = 0; i < 9; ++i) nine.push_back(whole(many.input(compiler::vector_shape(1))));
  many.add(many.matmul(nine, whole(many.tensor(compiler::vector_shape(2))), 1, 1, false, isa::Func::relu));
  REQUIRE_THROWS_WITH(gpu::make_plan(many.g), Catch::Contains("9 inputs, the GPU runner takes at most 8"));
}

TEST_CASE("the small workloads run bit for bit as the golden reference", "[gpu][plan][workloads]") {
  const std::filesystem::path dir = std::filesystem::path(tpusim::source_dir()) / "workloads" / "small";
  for (const char* name : {"mnist_mlp.toml", "tiny_cnn.toml", "lenet5.toml", "resblock.toml", "lstm1.toml"}) {
    INFO(name);
    compiler::LoadOptions o;
    o.batch = 4;
    o.precision = compiler::Precision::int8;  // the runners' kernels are int8
    // (a concat as its parts: the plan has no output at a channel)
    require_same_as_golden(compiler::quantize(compiler::load_model(dir / name, o), false));
  }
  // With 16-bit elements (an LSTM's gates and cell), the plan refuses the graph.
  compiler::LoadOptions o;
  o.batch = 4;
  REQUIRE_THROWS_WITH(gpu::make_plan(compiler::quantize(compiler::load_model(dir / "lstm1.toml", o))),
                      Catch::Contains("is 16-bit: the runners' kernels are int8"));
}

TEST_CASE("the graph's GEMM MACs are what the plan computes", "[gpu][plan]") {
  Builder b(3);
  const int x = b.input(compiler::sequence_shape(4, 6));
  const int y = b.tensor(compiler::sequence_shape(4, 8));
  for (uint64_t t = 0; t < 4; ++t) b.add(b.matmul({{x, t, 1}}, {y, t, 1}, 1, 1, false, isa::Func::relu));
  const int map = b.input(compiler::map_shape(5, 5, 2));
  const int conv = b.tensor(compiler::map_shape(3, 3, 4));
  b.add(b.matmul({whole(map)}, whole(conv), 3, 3, false, isa::Func::relu));
  const compiler::MatmulWork w = compiler::graph_matmul_work(b.g);
  // 4 steps x batch 3 x 6 x 8, then batch 3 x 9 pixels x 3 x 3 x 2 x 4.
  CHECK(w.gemm_macs == 4 * 3 * 6 * 8 + 3 * 9 * 3 * 3 * 2 * 4);
  CHECK(w.model_macs == w.gemm_macs);  // no copies, no groups
  CHECK(w.gemm_weights == 4 * 6 * 8 + 3 * 3 * 2 * 4);
  const gpu::GpuPlan plan = gpu::make_plan(b.g);
  CHECK(plan.gemm_macs == w.gemm_macs);
  CHECK(plan.weight_bytes == w.gemm_weights);
}

TEST_CASE("the runners count the model's MACs, their GEMMs the parts' copies besides", "[gpu][plan]") {
  // small/inception.toml as the runners load it (concats as parts, int8): the model's 3,894,080
  // MACs (tests/compiler/model_macs_test.cpp), and the GEMMs compute the identity copy that joins
  // m2_pool's parts for the padded m2_proj besides (batch 4 x 6 x 6 pixels x 52 x 52 = 389,376).
  const auto path = std::filesystem::path(tpusim::source_dir()) / "workloads/small/inception.toml";
  const gpu::GpuPlan plan = gpu::make_plan(compiler::prepare_file(path, gpu::runner_load_options(std::nullopt)).graph);
  CHECK(plan.model_macs == 3894080);
  CHECK(plan.gemm_macs == 3894080 + 4 * 36 * 52 * 52);
  CHECK(plan.weight_bytes == 15920 + 52 * 52);
}

TEST_CASE("matmuls that gather the same rows share one GEMM, bit for bit", "[gpu][plan]") {
  // Four gates of an LSTM step over [x_t, h_(t-1)] (n = 7, 5, 9, 6: n_pad 8, 8, 12, 8), then a
  // layer over the first gate (another input: a group of its own), then two layers over x_t's
  // step 0 whose outputs are one tensor (the second writes the first's tensor: no group).
  Builder b(3);
  const int x = b.input(compiler::sequence_shape(2, 6));
  const int h = b.input(compiler::sequence_shape(2, 5));
  std::vector<int> gates;
  for (uint64_t n : {7, 5, 9, 6}) {
    gates.push_back(b.tensor(compiler::sequence_shape(2, n)));
    b.add(b.matmul({{x, 1, 1}, {h, 0, 1}}, {gates.back(), 1, 1}, 1, 1, true,
                   n % 2 ? isa::Func::sigmoid : isa::Func::tanh));
  }
  const int y = b.tensor(compiler::sequence_shape(2, 4));
  b.add(b.matmul({{gates[0], 1, 1}}, {y, 1, 1}, 1, 1, true, isa::Func::relu));
  const int z = b.tensor(compiler::sequence_shape(2, 3));
  b.add(b.matmul({{x, 0, 1}}, {z, 0, 1}, 1, 1, true, isa::Func::relu));
  b.add(b.matmul({{x, 0, 1}}, {z, 1, 1}, 1, 1, false, isa::Func::identity));  // same output tensor
  const gpu::GpuPlan plan = gpu::make_plan(b.g);
  const std::vector<gpu::GemmGroup> groups = gpu::gemm_groups(plan);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].first == 0);
  CHECK(groups[0].count == 4);
  CHECK(groups[0].col0 == std::vector<uint64_t>{0, 8, 16, 28});
  CHECK(groups[0].n_total == 36);  // 8 + 8 + 12 + 8
  CHECK(groups[0].weights.size() == 36 * 12);  // k = 6 + 5 = 11, k_pad 12
  // Gate 2's row 3 (its fourth column) sits at stacked row 16 + 3.
  const auto& gate2 = std::get<gpu::MatmulStep>(plan.steps[2]);
  CHECK(std::equal(gate2.weights.begin() + 3 * 12, gate2.weights.begin() + 4 * 12,
                   groups[0].weights.begin() + (16 + 3) * 12));
  CHECK(groups[1].first == 4);
  CHECK(groups[1].count == 1);
  CHECK(groups[1].weights.empty());
  CHECK(groups[2].first == 5);
  CHECK(groups[2].count == 1);  // step 6 writes step 5's tensor
  CHECK(groups[3].first == 6);
  require_same_as_golden(b.g);
}

TEST_CASE("an LSTM's gates and an inception module's branches fuse, pools and vectors stand alone",
          "[gpu][plan][workloads]") {
  // lstm1_small (8 steps): step 0's three gates (no f gate: c0 = 0) and steps 1-7's four over
  // [x_t, h_(t-1)]; the cells' vector steps and the head alone. inception: two pairs of 1 x 1
  // branches over one input. mnist_mlp: three dense layers, each over the last one's output.
  const std::filesystem::path dir = std::filesystem::path(tpusim::source_dir()) / "workloads" / "small";
  const std::vector<std::pair<const char*, std::map<size_t, size_t>>> want = {
      {"lstm1.toml", {{1, 39}, {3, 1}, {4, 7}}},
      {"inception.toml", {{1, 21}, {2, 2}}},
      {"mnist_mlp.toml", {{1, 3}}}};
  for (const auto& [name, sizes] : want) {
    INFO(name);
    const gpu::GpuPlan plan = gpu::make_plan(compiler::prepare_file(dir / name, gpu::runner_load_options(4)).graph);
    std::map<size_t, size_t> got;  // members -> groups
    size_t steps = 0;
    for (const gpu::GemmGroup& g : gpu::gemm_groups(plan)) {
      REQUIRE(g.first == steps);
      steps += g.count;
      ++got[g.count];
    }
    CHECK(steps == plan.steps.size());
    CHECK(got == sizes);
  }
}
