// SCALE-Sim topology import (compiler/scalesim.h): rows to conv2d layers, chaining by shape, the
// format's habits tolerated, bad numbers named by line and column.
#include <catch2/catch.hpp>

#include <string>

#include "compiler/model.h"
#include "compiler/scalesim.h"
#include "isa/error.h"

using namespace tpusim;
using namespace tpusim::compiler;

namespace {

const std::string kHeader =
    "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n";

}  // namespace

TEST_CASE("scalesim: rows become conv2d layers, a row chains when its input map is the previous output") {
  // Conv1: (224 - 7) / 2 + 1 = 109; Conv2 reads 109 x 109 x 64 = Conv1's output: chained;
  // FC reads 7 x 7 x 512: a model input of its own.
  const std::string csv = kHeader +
                          "Conv1, 224, 224, 7, 7, 3, 64, 2,\r\n"
                          "\r\n"
                          "Conv2,109,109,3,3,64,128,1\n"
                          "FC, 7, 7, 7, 7, 512, 1000, 1,  \n";
  const Model m = import_scalesim(csv, "nets/resnet_part.csv");
  CHECK(m.name == "resnet_part");
  CHECK(m.source == "nets/resnet_part.csv");
  CHECK(m.batch == 1);
  REQUIRE(m.layers.size() == 3);
  REQUIRE(m.inputs.size() == 2);
  CHECK(m.inputs[0].name == "Conv1_in");
  CHECK(m.inputs[0].shape == map_shape(224, 224, 3));
  CHECK(m.inputs[0].data.size() == 224 * 224 * 3);
  CHECK(m.inputs[1].name == "FC_in");
  CHECK(m.inputs[1].shape == map_shape(7, 7, 512));

  const Layer& c1 = m.layers[0];
  CHECK(c1.name == "Conv1");
  CHECK(c1.type == LayerType::conv2d);
  CHECK(c1.line == 2);
  CHECK((c1.units == 64 && c1.kernel_h == 7 && c1.kernel_w == 7 && c1.stride == 2 && c1.pad == 0));
  CHECK((!c1.use_bias && c1.bias.empty() && c1.activation == Activation::none));
  CHECK(c1.inputs == std::vector<int>{model_input(0)});
  CHECK(c1.out == map_shape(109, 109, 64));
  CHECK(c1.weights.size() == 7 * 7 * 3 * 64);
  CHECK(c1.weights == generate_weights(c1, map_shape(224, 224, 3), 1, 1));

  CHECK(m.layers[1].line == 4);
  CHECK(m.layers[1].inputs == std::vector<int>{0});
  CHECK(m.layers[1].out == map_shape(107, 107, 128));
  CHECK(m.layers[2].line == 5);
  CHECK(m.layers[2].inputs == std::vector<int>{model_input(1)});
  CHECK(m.layers[2].out == map_shape(1, 1, 1000));
  CHECK(m.layers[2].weights.size() == 7 * 7 * 512 * 1000);
  CHECK(m.inputs[1].data == generate_input(map_shape(7, 7, 512), 1, 1, 1));

  LoadOptions o;
  o.batch = 4;
  const Model b = import_scalesim(csv, "x.csv", o);
  CHECK(b.batch == 4);
  CHECK(b.inputs[0].data.size() == 4 * 224 * 224 * 3);
}

TEST_CASE("scalesim: names are sanitized and made unique, the header is optional") {
  const Model m = import_scalesim("conv 1, 8, 8, 3, 3, 2, 2, 1\n"
                                  "conv 1, 6, 6, 3, 3, 2, 2, 1\n"
                                  ", 4, 4, 1, 1, 2, 2, 1\n"
                                  "conv_1, 9, 9, 1, 1, 2, 2, 1\n",
                                  "t.csv");
  REQUIRE(m.layers.size() == 4);
  CHECK(m.layers[0].name == "conv_1");
  CHECK(m.layers[1].name == "conv_1_2");
  CHECK(m.layers[2].name == "layer3");
  CHECK(m.layers[3].name == "conv_1_3");
  CHECK(m.layers[1].inputs == std::vector<int>{0});
  CHECK(m.layers[2].inputs == std::vector<int>{1});
  CHECK(m.inputs.size() == 2);
  CHECK(m.inputs[1].name == "conv_1_3_in");
}

TEST_CASE("scalesim: notes after the eighth column and empty rows are ignored, as SCALE-Sim does") {
  // As in SCALE-Sim's own Resnet50.csv and mobilnet_paper.csv.
  const Model m = import_scalesim(
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,,,Eh,Ew,e2\n"
      ",,,,,,,,,,,,\n"
      "Conv1,224,224,7,7,3,64,2,,,110,110,12100\n"
      "\tConv2_dw, 109, 109, 3, 3, 64, 64, 1,#dw\n"
      "FC6,1,1,1,1,2048,1000,1",
      "resnet.csv");
  REQUIRE(m.layers.size() == 3);
  CHECK(m.layers[0].line == 3);
  CHECK(m.layers[1].name == "Conv2_dw");
  CHECK(m.layers[1].inputs == std::vector<int>{0});
  CHECK(m.layers[2].out == map_shape(1, 1, 1000));
  CHECK(m.inputs.size() == 2);
}

TEST_CASE("scalesim: bad topologies name the file, line, column and value") {
  CHECK_THROWS_WITH(import_scalesim(kHeader + "Conv1, 224, x, 7, 7, 3, 64, 2,\n", "t.csv"),
                    "t.csv:2: IFMAP Width: \"x\": expected an integer 1..65535");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "Conv1, 224, 224, 7, 7, 0, 64, 2,\n", "t.csv"),
                    "t.csv:2: Channels: \"0\": expected an integer 1..65535");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "Conv1, 224, 224, 7, 7, 3, -64, 2,\n", "t.csv"),
                    "t.csv:2: Num Filter: \"-64\": expected an integer 1..65535");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "Conv1, 224, 224, 7, 7, 3, 64, 2.5,\n", "t.csv"),
                    "t.csv:2: Strides: \"2.5\": expected an integer 1..65535");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "\nConv1, 4, 4, 5, 3, 3, 64, 1,\n", "t.csv"),
                    "t.csv:3: Filter Height: 5: larger than IFMAP Height 4");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "Conv1, 4, 4, 3, 3, 3, 64,\n", "t.csv"),
                    "t.csv:2: 7 columns; expected 8 (Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                    "Channels, Num Filter, Strides)");
  CHECK_THROWS_WITH(import_scalesim("Layer, Height, N, K,\nfc1, 10, 20, 30,\n", "gemm.csv"),
                    "gemm.csv:1: header: expected the SCALE-Sim conv topology columns (Layer name, IFMAP Height, IFMAP "
                    "Width, Filter Height, Filter Width, Channels, Num Filter, Strides) or the GEMM columns (Layer, M, N, K)");
  // A first row whose second cell is meant as a number is data with a bad value, not a header.
  CHECK_THROWS_WITH(import_scalesim("Conv1, 16.5, 16, 3, 3, 3, 8, 1,\n", "t.csv"),
                    "t.csv:1: IFMAP Height: \"16.5\": expected an integer 1..65535");
  CHECK_THROWS_WITH(import_scalesim("Layer, M, N, K\nfc, 4, 0, 8\n", "g.csv"), "g.csv:2: N: \"0\": expected an integer 1..2147483648");
  CHECK_THROWS_WITH(import_scalesim("Layer, M, N, K\nfc, 4, 8\n", "g.csv"), "g.csv:2: 3 columns; expected 4 (Layer, M, N, K)");
  CHECK_THROWS_WITH(import_scalesim("Layer, M, N, K\nfc, 65536, 65536, 8\n", "g.csv"),
                    "g.csv:2: M x K and M x N must each be at most 2^31 elements (2^40 with --engine timing, which does "
                    "not generate them), K x N at most 2^31 (M 65536, N 65536, K 8)");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "DP1, 8, 8, 3, 3, 300, 300, 1,\n", "t.csv"),
                    "t.csv:2: Num Filter: 300: a depthwise layer (\"DP\" in its name) has 300 x 300 output channels, more "
                    "than 65535");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "\n\n", "t.csv"),
                    "t.csv: no layers: expected rows of Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                    "Channels, Num Filter, Strides (conv) or of Layer, M, N, K (GEMM)");
  CHECK_THROWS_WITH(import_scalesim("", "t.csv"), Catch::Matchers::Contains("t.csv: no layers"));
  LoadOptions small;
  small.max_values = 1000;
  CHECK_THROWS_WITH(import_scalesim(kHeader + "c, 4, 4, 3, 3, 8, 64, 1,\n", "t.csv", small),
                    "t.csv:2: the model has more than 1000 weights up to this layer");
  CHECK_THROWS_WITH(import_scalesim(kHeader + "c, 40, 40, 3, 3, 8, 2, 1,\n", "t.csv", small),
                    "t.csv:2: the model's inputs have more than 1000 values");
}

TEST_CASE("scalesim: files as SCALE-Sim ships them: a byte-order mark, tab-separated columns") {
  // UNet_2d.csv starts with a UTF-8 BOM; UNet_maestro.csv separates its columns with tabs.
  const Model bom = import_scalesim("\xEF\xBB\xBF" + kHeader + "Conv1a,20,20,3,3,1,4,1,\n", "unet.csv");
  REQUIRE(bom.layers.size() == 1);
  CHECK(bom.layers[0].out == map_shape(18, 18, 4));
  const Model tabs = import_scalesim("Layer name\t IFMAP Height\t IFMAP Width\t Filter Height\t Filter Width\t Channels\t "
                                     "Num Filter\t Strides\t \nConv1_1\t12\t12\t3\t3\t1\t4\t1\t\nConv1_2\t10\t10\t3\t3\t4\t4\t1\t\n",
                                     "maestro.csv");
  REQUIRE(tabs.layers.size() == 2);
  CHECK(tabs.layers[0].name == "Conv1_1");
  CHECK(tabs.layers[1].inputs == std::vector<int>{0});  // 12 - 3 + 1 = 10: chained
  CHECK(tabs.layers[1].out == map_shape(8, 8, 4));
}

TEST_CASE("scalesim: the GEMM format is one dense layer over an M x K sequence per row") {
  // As SCALE-Sim's topologies/GEMM_mnk/*.csv: "Layer,M,N,K," with CRLF line ends.
  const Model m = import_scalesim("Layer,M,N,K,\r\n1,64,32,16,\r\nQKT,64,48,32,\r\nTest 1, 8, 4, 2,\r\n", "gpt.csv");
  REQUIRE(m.layers.size() == 3);
  const Layer& a = m.layers[0];
  CHECK(a.name == "1");
  CHECK(a.type == LayerType::dense);
  CHECK((a.units == 32 && !a.use_bias && a.bias.empty()));
  CHECK(a.out == sequence_shape(64, 32));
  CHECK(a.weights.size() == 16 * 32);  // K x N
  REQUIRE(m.inputs.size() == 2);
  CHECK(m.inputs[0].shape == sequence_shape(64, 16));  // M x K
  CHECK(m.inputs[0].data.size() == 64 * 16);
  // QKT reads [64, 32] = the first layer's output: chained, as conv rows are.
  CHECK(m.layers[1].inputs == std::vector<int>{0});
  CHECK(m.layers[1].out == sequence_shape(64, 48));
  CHECK(m.layers[2].name == "Test_1");
  CHECK(m.layers[2].inputs == std::vector<int>{model_input(1)});
  CHECK(m.inputs[1].shape == sequence_shape(8, 2));
  // Without a header, a first row of four cells is GEMM.
  const Model h = import_scalesim("fc, 10, 20, 30\n", "g.csv");
  CHECK(h.layers.at(0).type == LayerType::dense);
  CHECK(h.inputs.at(0).shape == sequence_shape(10, 30));
}

TEST_CASE("scalesim: a DP row is a depthwise convolution, grouped by channel") {
  // SCALE-Sim runs "DP" rows as C one-channel layers of Num Filter filters each: here C = 3,
  // 2 filters per channel, 6 output channels; filter j reads channel j / 2 only.
  const Model m = import_scalesim(kHeader + "Conv2_DP, 6, 6, 3, 3, 3, 2, 1,\n", "mb.csv");
  REQUIRE(m.layers.size() == 1);
  const Layer& l = m.layers[0];
  CHECK(l.groups == 3);
  CHECK(l.units == 6);
  CHECK(l.out == map_shape(4, 4, 6));
  REQUIRE(l.weights.size() == 3 * 3 * 3 * 6);
  for (uint64_t p = 0; p < 9; ++p)
    for (uint64_t k = 0; k < 3; ++k)
      for (uint64_t j = 0; j < 6; ++j) {
        const float w = l.weights[(p * 3 + k) * 6 + j];
        if (j / 2 != k) CHECK(w == 0.0f);
        else CHECK(w != 0.0f);
      }
}

// A topology's compile memory is estimated by the rule descriptions and ONNX models follow
// (compile_memory.h), before any input or weight is generated: refused with the figures above
// --max-memory, and the values generated after the check are the seed's as before.
TEST_CASE("scalesim: the compile memory estimate counts a topology as a description's") {
  // One row: 8 x 8 x 2 in, 3 x 3 kernel, 4 filters: 72 weights (no biases), 6 x 6 x 4 = 144 out.
  const std::string csv = kHeader + "Conv1, 8, 8, 3, 3, 2, 4, 1,\n";
  LoadOptions o;
  o.batch = 100;
  // 72 float weights x 4 = 288; quantized 72 x 1; the weight image 72; the inputs 100 x 128 x 6
  // (float, int8, TPU order) = 76,800; the calibration run over 4 samples x (144 outputs + 128
  // inputs) x 4 = 4,352: 81,584 bytes.
  o.max_memory = 81583;
  CHECK_THROWS_WITH(import_scalesim(csv, "t.csv", o),
                    "t.csv: compiling model t needs about 81584 bytes (288 for 72 float parameters, 72 for "
                    "their quantized weights and biases, 72 for the weight image, 76800 for batch 100 x 128 input "
                    "values, 4352 for a calibration run over 4 samples x 144 layer output values), more than the 81583 "
                    "bytes allowed by --max-memory; lower the batch or the layer sizes or raise --max-memory");
  o.max_memory = 81584;
  const Model m = import_scalesim(csv, "t.csv", o);
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].data == generate_input(map_shape(8, 8, 2), 100, m.seed, 0));
  REQUIRE(m.layers.size() == 1);
  CHECK(m.layers[0].weights == generate_weights(m.layers[0], map_shape(8, 8, 2), m.seed, 1));
  // Timing-only: nothing generated, nothing held (seeded weights, no biases): passes any limit.
  o.timing_only = true;
  o.max_memory = 1;
  CHECK(import_scalesim(csv, "t.csv", o).inputs.at(0).data.empty());
}
