// The model's MACs (compiler::model_macs, docs/report.md "The model's MACs"): each of the model's
// multiply-accumulates once, the same for every mapping (concats in place or as parts, int8 or
// automatic elements), while the GEMM count (MatmulWork::gemm_macs) adds the identity copies
// that join concats. Exact counts, worked out by hand, on small/inception.toml and on a small
// model whose concat has a part that cannot be written in place.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "compiler/graph.h"
#include "compiler/model.h"
#include "model_text.h"
#include "tools/source_dir.h"

namespace tpusim::test {
namespace {

const std::filesystem::path kWorkloads = std::filesystem::path(tpusim::source_dir()) / "workloads";

compiler::LoadOptions options(bool inplace, bool int8, bool timing_only) {
  compiler::LoadOptions lo;
  lo.mapper.concat_inplace = inplace;
  if (int8) lo.precision = compiler::Precision::int8;
  lo.timing_only = timing_only;
  return lo;
}

// A concat of a 1 x 1 convolution's 6 channels and the model input's 8 (4 x 4 pixels, batch 2),
// read by a 3 x 3 "same" convolution in 2 groups to 4 channels.
const char* kInputPart = R"([model]
name = "input_part"
batch = 2
input = [4, 4, 8]
[[layer]]
name = "a"
type = "conv2d"
input = "input"
filters = 6
kernel = 1
activation = "relu"
[[layer]]
name = "joined"
type = "concat"
inputs = ["a", "input"]
[[layer]]
name = "r"
type = "conv2d"
filters = 4
kernel = 3
padding = "same"
groups = 2
activation = "relu"
)";

}  // namespace

TEST_CASE("small/inception.toml: the model's MACs whatever the concats, the GEMMs' with the parts' copy") {
  // Per sample, output pixels x kernel x K x N (a 3 x 3 "same" convolution's border taps counted,
  // as a convolution's MACs usually are), on an 8 x 8 map (64 pixels):
  //   m1: 1x1 16->16 16,384; 3x3r 16->12 12,288; 3x3 12->16 64 x 9 x 192 = 110,592; d3r 16->8
  //       8,192; d3a 8->12 55,296; d3b 12->12 82,944; proj (1 x 1, padding 1: 8 x 8 out) 16->8
  //       8,192                                                        = 293,888
  //   m2 (reads m1's 52 channels): 1x1 52->24 79,872; 3x3r 52->16 53,248; 3x3 16->24 221,184;
  //       d3r 52->12 39,936; d3a 12->16 110,592; d3b 16->16 147,456; proj 52->8 26,624 = 678,912
  //   scores: 72 -> 10                                                 =     720
  //   973,520 x batch 4 = 3,894,080.
  // Concats as parts: m2_proj is padded, so it reads m2_pool joined (6 x 6 pixels x 52 x 52
  // identity = 97,344 a sample): the GEMMs compute 3,894,080 + 4 x 97,344 = 4,283,456. In place:
  // every branch writes its channels, no copy.
  // Weights: kernel x K x N of each: m1 256 + 192 + 1,728 + 128 + 864 + 1,296 + 128 = 4,592; m2
  // 1,248 + 832 + 3,456 + 624 + 1,728 + 2,304 + 416 = 10,608; scores 720: 15,920 (the copy's 52 x 52
  // = 2,704 besides).
  for (const bool timing_only : {false, true})
    for (const bool int8 : {false, true}) {
      const compiler::QGraph in_place =
          compiler::prepare_file(kWorkloads / "small/inception.toml", options(true, int8, timing_only)).graph;
      const compiler::QGraph parts =
          compiler::prepare_file(kWorkloads / "small/inception.toml", options(false, int8, timing_only)).graph;
      CAPTURE(timing_only, int8);
      CHECK(compiler::model_macs(in_place) == 3894080);
      CHECK(compiler::model_macs(parts) == 3894080);
      const compiler::MatmulWork a = compiler::graph_matmul_work(in_place), b = compiler::graph_matmul_work(parts);
      CHECK(a.gemm_macs == 3894080);
      CHECK(b.gemm_macs == 3894080 + 4 * 36 * 52 * 52);
      CHECK(a.model_weights == 15920);
      CHECK(b.model_weights == 15920);
      CHECK(a.gemm_weights == 15920);
      CHECK(b.gemm_weights == 15920 + 52 * 52);
    }
}

TEST_CASE("a concat part copied in, a grouped convolution: model MACs each once, GEMM MACs as computed") {
  // Per sample, 16 pixels: a 8 x 6 x 16 = 768 MACs; r 9 taps x (14 / 2 groups) x 4 = 252 weights x 16
  // = 4,032; batch 2: 2 x (768 + 4,032) = 9,600.
  // GEMMs: r dense, 9 x 14 x 4 = 504 weights x 16 x 2 = 16,128; in place the input's 8 channels
  // are copied into the joined tensor (8 x 8 identity x 16 pixels x 2 = 2,048): 1,536 + 16,128 +
  // 2,048 = 19,712; as parts r (3 x 3) reads the joined tensor built by a 14 x 14 identity (x 16
  // x 2 = 6,272): 1,536 + 16,128 + 6,272 = 23,936.
  for (const bool on : {true, false}) {
    CAPTURE(on);
    const compiler::LoadOptions lo = options(on, false, false);
    const compiler::QGraph g = prepare_text(kInputPart, lo).graph;
    const compiler::MatmulWork w = compiler::graph_matmul_work(g);
    CHECK(w.model_macs == 9600);
    CHECK(w.gemm_macs == (on ? 19712 : 23936));
    CHECK(w.model_weights == 8 * 6 + 252);
    CHECK(w.gemm_weights == 8 * 6 + 504 + (on ? 8 * 8 : 14 * 14));
  }
}

// scripts/cnn1_widths.py chose CNN1's widths by its own count of the weights and MACs (`count`:
// 100,007,232 weights, Table 1's 100M; 5,468,084,544 MACs a sample): the compiler must count the
// same, or the script's search kept Table 1 only by its own arithmetic.
TEST_CASE("tpu-v1/cnn1.toml: the compiler counts the weights and MACs scripts/cnn1_widths.py chose it by") {
  const compiler::MatmulWork w = compiler::graph_matmul_work(
      compiler::prepare_file(kWorkloads / "tpu-v1/cnn1.toml", options(true, false, true)).graph);
  CHECK(w.model_weights == 100007232);
  CHECK(w.model_macs == 32ull * 5468084544ull);
}

}  // namespace tpusim::test
