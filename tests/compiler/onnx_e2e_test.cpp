// ONNX models end to end: every operator's test model (tests/data/onnx) compiled, simulated on
// every engine and compared bit for bit with the golden reference; the trained digits models
// (workloads/trained, scripts/train_models.py) on their whole test split, with top-1 accuracy
// float against int8 as simulated.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiler/compile.h"
#include "compiler/npy.h"
#include "compiler/quantize.h"
#include "compiler/reference.h"
#include "e2e_support.h"
#include "tools/source_dir.h"

namespace tpusim::test {

namespace {

const fs::path kOnnx = fs::path(tpusim::source_dir()) / "tests" / "data" / "onnx";
const fs::path kTrained = kWorkloads / "trained";

compiler::Model load_onnx(const std::string& name) {
  compiler::LoadOptions o;
  o.input_file = kOnnx / ("x_" + name + ".npy");
  return compiler::load_model(kOnnx / (name + ".onnx"), o);
}

}  // namespace

TEST_CASE("onnx: each operator's model runs bit-exact on every engine") {
  for (const char* name :
       {"gemm", "matmul_add", "matmul_seq", "conv_pad_stride", "conv_group", "conv_same_bn_clip", "pools",
        "global_avg", "reshape", "add_mul_softmax", "lstm", "qdq", "qlinear", "concat", "lstm_export",
        "reshape_export", "pad_reduce_mean", "lstm_stack", "lstm_last_step", "conv1d", "conv1d_seq",
        "conv_dilated", "gru", "gru_stack", "conv_dilated3", "pools1d", "pools1d_pad", "pools1d_padop",
        "mean1d", "pools2d_pad", "pools2d_padop", "gap_long", "gap_rect", "gap_line", "pools2d_ceil",
        "pools1d_asym"})
    SECTION(name) { check_model(load_onnx(name), square(16), true); }
}

// The whole test split (250 images) through the machine on tpu-v1: bit-exact against the golden
// reference, the float model's top-1 as PyTorch measured it (float_accuracy.json), and the int8
// model within the bounds: at most 1 point lost (MLP, CNN), 2 points (LSTM).
// A timing-only compile (tpusim run --engine timing) quantizes without calibrating: the padded
// pools' vec passes and the averages' convolutions must come out the same, and so their time.
TEST_CASE("onnx: a timing-only compile of padded pools and long averages times them as the full one") {
  const sim::Arch a = sim::arch_preset("tpu-v1");
  for (const char* name : {"pools1d_pad", "pools1d_asym", "pools2d_pad", "pools2d_padop", "pools2d_ceil",
                           "gap_long", "gap_rect", "gap_line"})
    SECTION(name) {
      compiler::LoadOptions o;
      o.batch = 3;
      const compiler::Compiled full = compiler::compile_file(kOnnx / (std::string(name) + ".onnx"), a, o);
      o.timing_only = true;
      const compiler::Compiled timing = compiler::compile_file(kOnnx / (std::string(name) + ".onnx"), a, o);
      REQUIRE(full.program.code.size() == timing.program.code.size());
      for (size_t i = 0; i < full.program.code.size(); ++i) CHECK(full.program.code[i].opcode == timing.program.code[i].opcode);
      const sim::RunResult rf = sim::simulate(full.program, a, {sim::Engine::timing, 0});
      const sim::RunResult rt = sim::simulate(timing.program, a, {sim::Engine::timing, 0});
      CHECK(rf.cycles == rt.cycles);
      CHECK(rf.matrix == rt.matrix);
    }
}

TEST_CASE("onnx: the trained digits models keep their accuracy in int8") {
  std::ifstream f(kTrained / "float_accuracy.json");
  const nlohmann::json torch = nlohmann::json::parse(f);
  const compiler::NpyArray labels_npy = compiler::read_npy(kTrained / "test_labels.npy");
  std::vector<int64_t> labels;
  for (float v : labels_npy.to_float()) labels.push_back(int64_t(v));
  for (const auto& [name, points] : {std::pair{"mlp", 1.0}, std::pair{"cnn", 1.0}, std::pair{"lstm", 2.0}}) {
    SECTION(name) {
      compiler::LoadOptions o;
      o.input_file = kTrained / fmt::format("test_{}.npy", name);
      o.calibration_file = kTrained / fmt::format("calib_{}.npy", name);
      const sim::Arch arch;
      compiler::Compiled c = compiler::compile_file(kTrained / fmt::format("digits_{}.onnx", name), arch, o);
      REQUIRE(c.graph.batch == 250);
      const sim::RunResult r = sim::simulate(c.program, arch, {sim::Engine::fast, 0});
      const sim::HostBuffer* out = nullptr;
      for (const sim::HostBuffer& h : r.state->host)
        if (h.name == "output") out = &h;
      REQUIRE(out);
      const compiler::OutputCheck check = compiler::check_output(c, out->bytes, arch);
      INFO(check.first_difference);
      CHECK(check.matches);
      const compiler::Accuracy a = compiler::top1_accuracy(c, out->bytes, arch, labels);
      const double top1_float = double(a.correct_float) / 250, top1_int8 = double(a.correct_int8) / 250;
      INFO(name << ": float " << top1_float << ", int8 " << top1_int8);
      CHECK(top1_float == Approx(torch["top1"][name].get<double>()).margin(1e-9));
      CHECK(100 * (top1_float - top1_int8) <= points);
      // The output error (relative to the largest float output, and rms) as measured when this
      // test was written (README accuracy table); the bounds sit between that and what the model
      // gives with every tensor int8, so that turning the LSTM's 16-bit gates and cell off fails.
      INFO("relative error " << check.error.relative << ", rms " << check.error.rms);
      if (std::string(name) == "mlp") CHECK((check.error.relative < 0.0092 && check.error.rms < 0.075));
      if (std::string(name) == "cnn") CHECK((check.error.relative < 0.0128 && check.error.rms < 0.099));
      if (std::string(name) == "lstm") {
        // The line: the LSTM's output error within 2x the MLP's (0.91%, pinned above).
        // The automatic precision makes the LSTM 16-bit (gate weights and h: its int8 error on
        // the calibration images, 1.27% of its output, is more than twice its 16-bit one, 0.44%),
        // and the scores layer, reading a 16-bit h, writes 16-bit logits with headroom:
        // 1.58%, rms 0.0241 (3.49%, 0.0630 before).
        CHECK(check.error.relative < 2 * 0.0091);
        CHECK((check.error.relative < 0.0159 && check.error.rms < 0.0242));
        const compiler::QTensor& h = c.graph.tensors[size_t(std::get<compiler::MatmulOp>(c.graph.ops.back()).inputs[0].tensor)];
        CHECK(h.bits == 16);
        CHECK(c.graph.tensors[size_t(c.graph.output)].bits == 16);
        // All int8 (--precision int8): 3.72%, rms 0.1072, the int8 logits saturating on the test
        // split's largest logit; int8 gate weights and h but 16-bit gates and cell (the default
        // before): 3.49%, rms 0.0630.
        for (const bool cell16 : {false, true}) {
          compiler::Model m = c.model;
          if (cell16) m.layers[0].weight_bits = 8;
          else m.precision = compiler::Precision::int8;
          REQUIRE(m.layers[0].type == compiler::LayerType::lstm);
          const compiler::QGraph narrow = compiler::prepare_model(m).graph;  // calibrated as compile_file does
          const compiler::QTensor& out = narrow.tensors[size_t(narrow.output)];
          CHECK(out.bits == 8);
          const compiler::QuantError e = compiler::quant_error(
              compiler::run_float(m).back(), compiler::run_golden(narrow)[size_t(narrow.output)], out.scale);
          INFO("int8 gates and h, " << (cell16 ? "16-bit" : "int8") << " cell: relative error " << e.relative
                                    << ", rms " << e.rms);
          CHECK(e.relative > (cell16 ? 0.0340 : 0.0370));
          CHECK(e.rms > (cell16 ? 0.060 : 0.10));
        }
      }
    }
  }
}

}  // namespace tpusim::test
