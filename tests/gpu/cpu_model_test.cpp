// The CPU runner (gpu/cpu_model.h) on the models with element-wise steps, bit for bit against the
// golden reference executor in every instruction-set variant of its vectorized spans
// (gpu/cpu_kernels.h); and the benchmark's oneDNN reference (bench/onednn_network.h), which must
// compute the same model (up to oneDNN's own rounding) for its time to mean anything.
#include <catch2/catch.hpp>
#include <string>

#include "bench/onednn_network.h"
#include "compiler/compile.h"
#include "compiler/reference.h"
#include "gpu/cpu_kernels.h"
#include "gpu/cpu_model.h"
#include "gpu/plan.h"
#include "tools/source_dir.h"

using namespace tpusim;

namespace {

compiler::QGraph load(const std::string& name, uint64_t batch) {
  compiler::LoadOptions lo;
  lo.batch = batch;
  lo.precision = compiler::Precision::int8;  // the runners' kernels are int8
  lo.mapper.concat_inplace = false;  // the runners read a concat as its parts
  return compiler::prepare_file(std::string(tpusim::source_dir()) + "/workloads/small/" + name + ".toml", lo).graph;
}

}  // namespace

TEST_CASE("the CPU runner's element-wise steps match the golden reference in every variant", "[cpu]") {
  // lstm1_small: gates through the sigmoid and tanh tables, the cell's products and sums, tanh of
  // the cell as a pass, h written one time step at a time into a sequence; resblock: a residual
  // add with relu, a requantizing pass, a 2 x 2 average pool; inception: concatenated branches, 3 x 3
  // average pools (a window that is not a power of two), requantizing passes.
  for (const char* name : {"lstm1", "resblock", "inception"})
    for (uint64_t batch : {3, 8})
      for (int threads : {1, 2}) {
        const compiler::QGraph graph = load(name, batch);
        const std::vector<int8_t> golden = compiler::run_golden(graph)[size_t(graph.output)];
        const gpu::GpuPlan plan = gpu::make_plan(graph);
        gpu::CpuModel model(plan, threads);
        for (const char* isa : gpu::cpu_kernels_isas()) {
          INFO(name << " batch " << batch << " threads " << threads << " instruction set " << isa);
          REQUIRE(gpu::select_cpu_kernels(isa));
          REQUIRE(model.infer() == golden);
        }
        REQUIRE(gpu::select_cpu_kernels(gpu::cpu_kernels_isas().front()));
      }
}

TEST_CASE("an LSTM step's four gates share one gather", "[cpu]") {
  // lstm1_small: 8 time steps; each step's gates read the same [x_t, h_{t-1}], so 3 of the 4 gate
  // matmuls reuse the first one's X; at t = 0 there are 3 gates (f multiplies c_{-1} = 0: no f gate)
  // reading x_0 alone, 2 of them reusing: 7 x 3 + 2 = 23. The dense layer on the last h reads the
  // whole tensor in place (no gather).
  const compiler::QGraph graph = load("lstm1", 8);
  const gpu::GpuPlan plan = gpu::make_plan(graph);
  gpu::CpuModel model(plan, 1);
  REQUIRE(model.shared_gathers() == 23);
  // resblock's convolutions read their inputs in place: nothing to share.
  const gpu::GpuPlan res = gpu::make_plan(load("resblock", 8));
  REQUIRE(gpu::CpuModel(res, 1).shared_gathers() == 0);
}

TEST_CASE("the benchmark's oneDNN reference computes the same models", "[cpu][bench]") {
  // oneDNN rounds to nearest even in float, and its sigmoid and tanh are not the machine's integer
  // curves: its output is close to the golden reference's, not equal (measured 2026-11-25: largest
  // difference 0 to 5 on these models, 25% to 100% of the values equal). A reference running other
  // weights or inputs would be far off.
  for (const char* name : {"mnist_mlp", "tiny_cnn", "lenet5", "resblock", "inception", "lstm1"}) {
    INFO(name);
    const compiler::QGraph graph = load(name, 8);
    const std::vector<int8_t> golden = compiler::run_golden(graph)[size_t(graph.output)];
    bench::OneDnnNetwork onednn(gpu::make_plan(graph));
    onednn.run();
    const bench::OutputDifference d = bench::output_difference(onednn.output(), golden);
    CHECK(d.max_abs <= 8);
    CHECK(d.equal_share >= 0.2);
  }
  // lstm1_small's steps as primitives: 7 x 4 + 3 gate matmuls (no f gate at t = 0) and the dense
  // layer; a concat per step
  // after the first (x_0 alone needs none), shared by its four gates; the cell's binaries, 3 at t = 0
  // (i x g, tanh(c), o x tanh(c)) and 5 after (f x c, i x g, their sum, tanh(c), o x tanh(c)).
  bench::OneDnnNetwork lstm(gpu::make_plan(load("lstm1", 8)));
  REQUIRE(lstm.primitives() == "38 binary, 7 concat, 32 matmul");
}
