// SCALE-Sim's formats and grouped convolutions end to end: compiled, simulated on every engine and
// compared bit for bit with the golden reference (e2e_support.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "compiler/scalesim.h"
#include "e2e_support.h"
#include "tools/source_dir.h"

namespace tpusim::test {

namespace {

const std::string kConvHeader =
    "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n";

compiler::Model grouped_cnn(int groups_a, int groups_b) {
  return compiler::parse_model(fmt::format(R"(
[model]
name = "grouped"
input = [7, 6, 8]
batch = 3
[[layer]]
type = "conv2d"
name = "g"
filters = 12
kernel = 3
padding = 1
groups = {}
activation = "relu"
[[layer]]
type = "conv2d"
name = "dw"
filters = 12
kernel = [3, 2]
stride = 2
groups = {}
)",
                                           groups_a, groups_b),
                               "grouped.toml", ".");
}

}  // namespace

TEST_CASE("grouped and depthwise convolutions run bit-exact on every engine") {
  // 8 -> 12 channels in 4 groups (2 inputs, 3 filters each), then depthwise 12 -> 12.
  check_model(grouped_cnn(4, 12), square(16), true);
  check_model(grouped_cnn(2, 6), square(8), true);
  check_model(grouped_cnn(4, 12), sim::Arch{}, false);
}

TEST_CASE("SCALE-Sim GEMM topologies run bit-exact on every engine") {
  // M x K times K x N per row; the second row chains ([40, 24] is the first's output), the third
  // does not (its own input).
  const compiler::Model m =
      compiler::import_scalesim("Layer,M,N,K,\r\nfc1,40,24,20,\r\nfc2,40,10,24,\r\nqk,9,33,17,\r\n", "gemm.csv");
  check_model(m, square(16), true);
  check_model(m, sim::Arch{}, false);
}

TEST_CASE("SCALE-Sim conv topologies with depthwise rows run bit-exact on every engine") {
  const compiler::Model m = compiler::import_scalesim("\xEF\xBB\xBF" + kConvHeader +
                                                          "Conv1, 11, 11, 3, 3, 3, 8, 2,\n"
                                                          "Conv2_DP, 5, 5, 3, 3, 8, 1, 1,\n"
                                                          "Conv3, 3, 3, 1, 1, 8, 16, 1, # pointwise\n",
                                                      "mobile.csv");
  REQUIRE(m.layers.size() == 3);
  CHECK(m.layers[1].groups == 8);
  CHECK(m.layers[1].inputs == std::vector<int>{0});  // (11 - 3) / 2 + 1 = 5: chained
  check_model(m, square(8), true);
  check_model(m, sim::Arch{}, false);
}

}  // namespace tpusim::test

namespace tpusim::test {

TEST_CASE("SCALE-Sim's YOLO-tiny first layer runs in bands of output rows, bit-exact") {
  // 416 x 416 x 3 -> 414 x 414 x 16 (3 x 3, valid): 173,056 input rows, more than tpu-v1's
  // 98,304. Its 7 table rows leave 98,297; a band of n output rows reads n + 2 input rows of 416
  // pixels and writes n of 414: 830 n + 832 rows, two bands at once: n = 58 (97,944 rows; 59
  // would need 99,604): ceil(414 / 58) = 8 bands.
  const fs::path topology = fs::path(tpusim::source_dir()) / "tests/data/scalesim/yolo_tiny_layer1.csv";
  const sim::Arch arch;
  compiler::Compiled c = compiler::compile_file(topology, arch);
  CHECK(c.program.meta["bands"] == 8);
  const sim::RunResult fast = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
  for (const sim::HostBuffer& h : fast.state->host)
    if (h.name == "output") CHECK(compiler::check_output(c, h.bytes, arch).matches);
  // The timing-only compile (no input generated, no calibration) times the same.
  compiler::LoadOptions timing;
  timing.timing_only = true;
  const compiler::Compiled t = compiler::compile_file(topology, arch, timing);
  CHECK(t.program.meta["bands"] == 8);
  CHECK(sim::simulate(t.program, arch, {sim::Engine::timing, 0}).cycles == fast.cycles);
}

}  // namespace tpusim::test
