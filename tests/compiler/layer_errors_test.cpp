// Per-layer quantization error (compiler::layer_errors, `tpusim run --layer-errors`): exact values
// on a two-layer model worked by hand, and which layers a model with concats, flattens and a GRU
// reports.
#include <catch2/catch.hpp>

#include <cmath>

#include "compiler/compile.h"
#include "e2e_support.h"
#include "tools/source_dir.h"

namespace tpusim::test {

TEST_CASE("layer errors: each layer's quantized output against the float model's, exact on a small model") {
  // x = [1, -0.5]; d1 = x0 + x1 = 0.5; d2 = 2 d1 = 1.0 (no biases, no activations).
  compiler::Model m = compiler::parse_model(
      "[model]\nname = \"errs\"\nbatch = 1\ninput = [2]\n"
      "[[layer]]\nname = \"d1\"\ntype = \"dense\"\nunits = 1\nbias = false\n"
      "[[layer]]\nname = \"d2\"\ntype = \"dense\"\nunits = 1\nbias = false\n",
      "errs.toml", ".");
  m.inputs[0].data = {1.0f, -0.5f};
  m.layers[0].weights = {1.0f, 1.0f};
  m.layers[1].weights = {2.0f};
  for (compiler::Layer& l : m.layers) l.seeded_weights = false;
  compiler::Compiled c = compiler::compile_model(m, square(8));
  // Input scale 1/127 (max |x| = 1): x -> [127, -64] (-63.5 rounds away from zero).
  // d1: weights 127 at accumulator scale (1/127) / 127; sum 127 x 127 - 127 x 64 = 8001; output
  //     scale 0.5 / 127 (max |d1| = 0.5): 8001 x 2/127 = 126.0 -> 126, i.e. 0.49606, error 0.5/127.
  // d2: weight 127 at (2 x 0.5/127) / 127; sum 126 x 127 = 16002; output scale 1/127:
  //     16002 / 127 = 126.0 -> 126, i.e. 0.99213, error 1/127.
  // Each: rms = max error (one value), rms / range = 1/127, SQNR = 20 log10(127) = 42.0761 dB.
  const std::vector<compiler::LayerError> e = compiler::layer_errors(c);
  REQUIRE(e.size() == 2);
  const double sqnr = 20 * std::log10(127.0);
  for (int i = 0; i < 2; ++i) {
    INFO(e[i].layer);
    const double range = i == 0 ? 0.5 : 1.0;
    CHECK(e[i].layer == (i == 0 ? "d1" : "d2"));
    CHECK(e[i].bits == 8);
    CHECK(e[i].elements == 1);
    CHECK(e[i].scale == Approx(range / 127).epsilon(1e-12));
    CHECK(e[i].max_float == range);
    CHECK(e[i].max_abs == Approx(range / 127).epsilon(1e-9));
    CHECK(e[i].rms == Approx(range / 127).epsilon(1e-9));
    CHECK(e[i].rms_relative == Approx(1.0 / 127).epsilon(1e-9));
    CHECK(e[i].sqnr_db == Approx(sqnr).epsilon(1e-9));
  }
  // The model's output error is the last layer's.
  const compiler::OutputCheck check = compiler::check_output(c, compiler::golden_output_bytes(c, square(8)), square(8));
  CHECK(check.error.max_abs == Approx(e[1].max_abs).epsilon(1e-12));
}

TEST_CASE("layer errors: layers without a tensor of their own are left out, a GRU is one layer") {
  const fs::path onnx = fs::path(tpusim::source_dir()) / "tests" / "data" / "onnx";
  compiler::LoadOptions o;
  o.input_file = onnx / "x_gru_stack.npy";
  compiler::Compiled c = compiler::compile_file(onnx / "gru_stack.onnx", square(16), o);
  std::vector<std::string> names;
  for (const compiler::LayerError& e : compiler::layer_errors(c)) {
    names.push_back(e.layer);
    INFO(e.layer << ": rms/range " << e.rms_relative << ", SQNR " << e.sqnr_db);
    CHECK(e.elements == 3 * (e.layer == "_fc_Gemm" ? 3 : e.layer == "_g_GRU" ? 5 * 6 : 6));  // batch 3
    CHECK(e.rms_relative < 0.02);
    CHECK(e.sqnr_db > 30);
  }
  CHECK(names == std::vector<std::string>{"_g_GRU", "_g_GRU_1", "_fc_Gemm"});
  // Concats written in place (concat.onnx): branch_a, branch_b (each read by join alone) and mix
  // (read by join2 alone) write into their concat's tensor and have none of their own; join, read
  // by mix and join2, has its own; the flatten has none.
  o.input_file = onnx / "x_concat.npy";
  compiler::Compiled cc = compiler::compile_file(onnx / "concat.onnx", square(16), o);
  names.clear();
  for (const compiler::LayerError& e : compiler::layer_errors(cc)) names.push_back(e.layer);
  CHECK(names == std::vector<std::string>{"join", "join2", "gap", "head"});
}

}  // namespace tpusim::test
