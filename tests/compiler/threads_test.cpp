// The full check on several threads (sim/parallel.h): the golden reference through the int8 GEMM
// equals its plain loops, and both, like the fast engine, give the same bytes on 1 and 3 threads.
#include <catch2/catch.hpp>

#include "e2e_support.h"
#include "sim/parallel.h"

namespace tpusim::test {

namespace {

struct Threads {  // the thread count for one scope, then the default again
  explicit Threads(unsigned n) { sim::set_threads(n); }
  ~Threads() { sim::set_threads(0); }
};

// Convolutions (padded, strided, packed), concat parts, pools, an LSTM with 16-bit gates, a
// residual add, 16-bit weights.
constexpr const char* kModels[] = {"small/lenet5.toml", "small/inception.toml", "small/lstm1.toml",
                                   "small/resblock.toml", "small/wide_mlp.toml"};

}  // namespace

TEST_CASE("golden: the GEMM path equals the plain loops, on 1 and 3 threads, and output_only keeps the output") {
  for (const char* w : kModels) {
    INFO(w);
    const compiler::Compiled c = compiler::prepare_file(kWorkloads / w);
    std::vector<std::vector<int8_t>> plain;
    {
      const Threads one(1);
      compiler::GoldenOptions o;
      o.plain = true;
      plain = compiler::run_golden(c.graph, o);
    }
    for (unsigned t : {1u, 3u}) {
      const Threads threads(t);
      INFO(t << " threads");
      CHECK(compiler::run_golden(c.graph) == plain);
      compiler::GoldenOptions o;
      o.plain = true;
      CHECK(compiler::run_golden(c.graph, o) == plain);
      o = {};
      o.output_only = true;
      const std::vector<std::vector<int8_t>> out = compiler::run_golden(c.graph, o);
      REQUIRE(out.size() == plain.size());
      for (size_t i = 0; i < out.size(); ++i)
        CHECK(out[i] == (int(i) == c.graph.output ? plain[i] : std::vector<int8_t>{}));
    }
  }
}

TEST_CASE("fast engine: 1 and 3 threads give the same cycles and memories") {
  // lenet5: gathering (packed) convolutions; cifar_cnn at batch 8: matmuls of more than 128 vectors
  // (several row blocks per matmul).
  for (const auto& [w, batch] : {std::pair{"small/lenet5.toml", 0}, std::pair{"small/cifar_cnn.toml", 8}}) {
    INFO(w);
    compiler::LoadOptions lo;
    if (batch) lo.batch = uint64_t(batch);
    const sim::Arch arch;
    compiler::Compiled c = compiler::compile_file(kWorkloads / w, arch, lo);
    sim::RunResult one, three;
    {
      const Threads t(1);
      one = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
    }
    {
      const Threads t(3);
      three = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
    }
    CHECK(one.cycles == three.cycles);
    CHECK(one.timeline == three.timeline);
    REQUIRE(one.state);
    REQUIRE(three.state);
    std::string why;
    const bool same = sim::same_memories(*one.state, *three.state, &why);
    INFO(why);
    CHECK(same);
    const sim::HostBuffer* out = nullptr;
    for (const sim::HostBuffer& h : three.state->host)
      if (h.name == "output") out = &h;
    REQUIRE(out);
    CHECK(compiler::check_output(c, out->bytes, arch).matches);
  }
}

}  // namespace tpusim::test
