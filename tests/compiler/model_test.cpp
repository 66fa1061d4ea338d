// Model descriptions (compiler/model.h, docs/model-format.md): shapes, names and inputs of whole
// models, the seeded generator against the documented algorithm, .npy parameters and inputs, and
// the exact message of every class of bad description.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "compiler/model.h"
#include "compiler/npy.h"
#include "compiler/seeded_draws.h"
#include "isa/error.h"
#include "tests/test_support.h"

using namespace tpusim;
using namespace tpusim::compiler;
using Catch::Matchers::Contains;

namespace {

Model parse(const std::string& text, const LoadOptions& options = {}) { return parse_model(text, "m.toml", ".", options); }

// The lines of a description, numbered from 1 as error messages count them.
const std::string kLeNet = R"([model]
name = "lenet5"
batch = 8
input = [28, 28, 1]

[[layer]]
type = "conv2d"
filters = 6
kernel = 5
padding = "same"
activation = "relu"

[[layer]]
type = "max_pool"
size = 2

[[layer]]
name = "c3"
type = "conv2d"
filters = 16
kernel = [5, 5]

[[layer]]
type = "avg_pool"
size = 2

[[layer]]
type = "flatten"

[[layer]]
type = "dense"
units = 120
activation = "relu"

[[layer]]
type = "dense"
units = 84
activation = "relu"

[[layer]]
type = "dense"
units = 10
bias = false
)";

// [model] and a first conv2d layer; tests append keys to the layer (line 9 onwards).
const std::string kHead = R"([model]
name = "t"
batch = 2
input = [8, 8, 4]

[[layer]]
type = "conv2d"
filters = 4
)";

// The documented generator: stream s of seed, the top 53 bits of each draw.
double first_draw(uint64_t seed, uint64_t stream) {
  std::mt19937_64 engine(seed + stream * 0x9E3779B97F4A7C15ull);
  return double(engine() >> 11) / 9007199254740992.0;  // 2^53
}

}  // namespace

TEST_CASE("model: LeNet-5 shapes, names, inputs and parameter sizes") {
  const Model m = parse(kLeNet);
  CHECK(m.name == "lenet5");
  CHECK(m.source == "m.toml");
  CHECK(m.batch == 8);
  CHECK(m.seed == 1);
  CHECK(m.per_channel);
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].name == "input");
  CHECK(m.inputs[0].shape == map_shape(28, 28, 1));
  CHECK(m.inputs[0].data.size() == 8 * 28 * 28);
  REQUIRE(m.layers.size() == 8);
  const std::vector<std::string> names = {"conv2d1", "max_pool2", "c3", "avg_pool4", "flatten5", "dense6", "dense7", "dense8"};
  const std::vector<std::string> shapes = {"[28, 28, 6]", "[14, 14, 6]", "[10, 10, 16]", "[5, 5, 16]",
                                           "[400]",       "[120]",       "[84]",         "[10]"};
  const std::vector<int> lines = {6, 13, 17, 23, 27, 30, 35, 40};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    INFO(i);
    CHECK(m.layers[i].name == names[i]);
    CHECK(m.layers[i].out.str() == shapes[i]);
    CHECK(m.layers[i].line == lines[i]);
    CHECK(m.layers[i].inputs == std::vector<int>{i == 0 ? model_input(0) : int(i - 1)});
  }
  const Layer& c1 = m.layers[0];
  CHECK(c1.type == LayerType::conv2d);
  CHECK((c1.units == 6 && c1.kernel_h == 5 && c1.kernel_w == 5 && c1.stride == 1 && c1.pad == 2));
  CHECK(c1.activation == Activation::relu);
  CHECK(c1.weights.size() == 5 * 5 * 1 * 6);
  CHECK(c1.bias.size() == 6);
  const Layer& pool = m.layers[1];
  CHECK((pool.type == LayerType::max_pool && pool.kernel_h == 2 && pool.kernel_w == 2 && pool.stride == 2));
  CHECK((pool.weights.empty() && pool.bias.empty()));
  CHECK(m.layers[2].pad == 0);
  CHECK(m.layers[2].weights.size() == 5 * 5 * 6 * 16);
  CHECK(m.layers[5].weights.size() == 400 * 120);
  CHECK(m.layers[5].bias.size() == 120);
  CHECK(m.layers[7].activation == Activation::none);
  CHECK(!m.layers[7].use_bias);
  CHECK(m.layers[7].bias.empty());
  CHECK(m.layers[7].out == vector_shape(10));
}

TEST_CASE("model: an LSTM description: stacked layers, sequences and dense per step") {
  const Model m = parse(R"([model]
name = "lstm"
batch = 4
seed = 7
input = [20, 64]
input_scale = 0.05

[quantization]
weights = "per_tensor"
elements = "int8"

[[layer]]
type = "lstm"
units = 128
stack = 2
return_sequences = true

[[layer]]
type = "dense"
units = 32
activation = "tanh"
scale = 0.1

[[layer]]
type = "lstm"
units = 16
)");
  CHECK(m.seed == 7);
  CHECK(!m.per_channel);
  CHECK(m.precision == Precision::int8);  // elements = "int8": the earlier spelling of precision = "int8"
  CHECK(m.wide_elements);
  CHECK(m.inputs[0].shape == sequence_shape(20, 64));
  CHECK(m.inputs[0].scale == 0.05);
  REQUIRE(m.layers.size() == 3);
  const Layer& l = m.layers[0];
  CHECK((l.type == LayerType::lstm && l.units == 128 && l.stack == 2 && l.return_sequences));
  CHECK(l.out.str() == "[20, 128]");
  CHECK(l.weights.size() == 4 * (64 + 128) * 128 + 4 * (128 + 128) * 128);
  CHECK(l.bias.size() == 2 * 4 * 128);
  CHECK(m.layers[1].out == sequence_shape(20, 32));
  CHECK(m.layers[1].weights.size() == 128 * 32);
  CHECK(m.layers[1].scale == 0.1);
  CHECK(m.layers[1].activation == Activation::tanh);
  CHECK(m.layers[2].out == vector_shape(16));
  CHECK(!m.layers[2].return_sequences);
  CHECK(m.layers[2].weights.size() == 4 * (32 + 16) * 16);
}

TEST_CASE("model: a GRU description: stacked layers, three gates, four biases, files, refusals") {
  const std::string text = R"([model]
name = "gru"
batch = 2
input = [6, 5]

[[layer]]
type = "gru"
units = 4
stack = 2
return_sequences = true

[[layer]]
type = "dense"
units = 3

[[layer]]
type = "gru"
units = 2
)";
  const Model m = parse(text);
  REQUIRE(m.layers.size() == 3);
  const Layer& g = m.layers[0];
  CHECK((g.type == LayerType::gru && g.name == "gru1" && g.units == 4 && g.stack == 2 && g.return_sequences));
  CHECK(g.out == sequence_shape(6, 4));
  // Gates r, z, n over [x_t, h_{t-1}]: 3 x (5 + 4) x 4 for the first stacked layer, 3 x (4 + 4) x 4
  // for the second; biases b_r, b_z, b_in, b_hn per stacked layer: 2 x 4 x 4.
  CHECK(g.weights.size() == 3 * 9 * 4 + 3 * 8 * 4);
  CHECK(g.bias.size() == 2 * 4 * 4);
  CHECK(m.layers[1].out == sequence_shape(6, 3));
  const Layer& top = m.layers[2];
  CHECK((top.type == LayerType::gru && top.stack == 1 && !top.return_sequences));
  CHECK(top.out == vector_shape(2));
  CHECK(top.weights.size() == 3 * (3 + 2) * 2);
  CHECK(top.bias.size() == 4 * 2);
  // Seeded as documented (docs/model-format.md): a gate of stacked layer l has fan_in = in_l +
  // units, fan_out = units; layer 1 draws its weights from stream 2, its biases from stream 3.
  const double bound0 = std::sqrt(6.0 / (9 + 4)), bound1 = std::sqrt(6.0 / (8 + 4));
  CHECK(g.weights[0] == float(bound0 * (2 * first_draw(1, 2) - 1)));
  CHECK(g.bias[0] == float(0.1 * (2 * first_draw(1, 3) - 1)));
  for (size_t i = 0; i < g.weights.size(); ++i) CHECK(std::abs(g.weights[i]) <= (i < 3 * 9 * 4 ? bound0 : bound1));
  for (float b : g.bias) CHECK(std::abs(b) <= 0.1f);

  // From files: one [3, in + units, units] weights file and one [4, units] bias file per stacked layer.
  test::ScratchDir dir;
  std::vector<float> w0(3 * 9 * 4), w1(3 * 8 * 4), b0(4 * 4), b1(4 * 4);
  for (size_t i = 0; i < w0.size(); ++i) w0[i] = float(i) / 128;
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = -float(i) / 128;
  for (size_t i = 0; i < b0.size(); ++i) b0[i] = float(i) / 16, b1[i] = -float(i) / 16;
  write_npy(dir / "w0.npy", npy_float32({3, 9, 4}, w0));
  write_npy(dir / "w1.npy", npy_float32({3, 8, 4}, w1));
  write_npy(dir / "b0.npy", npy_float32({4, 4}, b0));
  write_npy(dir / "b1.npy", npy_float32({4, 4}, b1));
  write_npy(dir / "lstm_shape.npy", npy_float32({4, 9, 4}, std::vector<float>(4 * 9 * 4)));
  const auto with = [&](const std::string& keys) {
    std::string t = text;
    return t.insert(t.find("return_sequences"), keys);
  };
  const Model f = parse_model(with("weights_file = [\"w0.npy\", \"w1.npy\"]\nbias_file = [\"b0.npy\", \"b1.npy\"]\n"),
                              "g.toml", dir.path());
  std::vector<float> w = w0, b = b0;
  w.insert(w.end(), w1.begin(), w1.end());
  b.insert(b.end(), b1.begin(), b1.end());
  CHECK(f.layers[0].weights == w);
  CHECK(f.layers[0].bias == b);
  // An LSTM's four gates where a GRU has three; one file for two stacked layers; a map input.
  CHECK_THROWS_WITH(parse_model(with("weights_file = [\"lstm_shape.npy\", \"w1.npy\"]\n"), "g.toml", dir.path()),
                    "g.toml:10: layer gru1: weights_file: \"lstm_shape.npy\": shape [4, 9, 4]; expected [3, 9, 4] "
                    "([3, in + units, units], gates r, z, n)");
  CHECK_THROWS_WITH(parse_model(with("weights_file = [\"w0.npy\"]\n"), "g.toml", dir.path()),
                    "g.toml:10: layer gru1: weights_file: [\"w0.npy\"]: expected an array of 2 .npy file names (one "
                    "per stacked layer)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\n[[layer]]\ntype = \"gru\"\nunits = 4\n"),
                    "m.toml:10: layer gru2: input: \"conv2d1\" [6, 6, 4]: gru reads a sequence [steps, c]");
}

TEST_CASE("model: add and mul read two named layers, or the model input") {
  const Model m = parse(kHead + R"(kernel = 3
padding = 1
name = "a"

[[layer]]
type = "conv2d"
input = "input"
filters = 4
kernel = 1
name = "b"

[[layer]]
type = "add"
inputs = ["a", "b"]
activation = "relu6"

[[layer]]
type = "mul"
inputs = ["input", "add3"]

[[layer]]
type = "activation"
activation = "sigmoid"
)");
  REQUIRE(m.layers.size() == 5);
  CHECK(m.layers[0].pad == 1);
  CHECK(m.layers[1].inputs == std::vector<int>{model_input(0)});
  CHECK(m.layers[2].inputs == std::vector<int>{0, 1});
  CHECK(m.layers[2].activation == Activation::relu6);
  CHECK(m.layers[2].out == map_shape(8, 8, 4));
  CHECK(m.layers[3].inputs == std::vector<int>{model_input(0), 2});
  CHECK(m.layers[4].inputs == std::vector<int>{3});
  CHECK(m.layers[4].activation == Activation::sigmoid);
  CHECK(m.layers[4].out == map_shape(8, 8, 4));
  CHECK((m.layers[2].weights.empty() && m.layers[4].bias.empty()));
}

TEST_CASE("model: generated values follow the documented algorithm") {
  const std::string text = kHead + "kernel = 3\n";
  const Model m = parse(text);
  // Glorot bound for a 3 x 3 conv from 4 to 4 channels: sqrt(6 / (36 + 36)).
  const double bound = std::sqrt(6.0 / (9 * 4 + 9 * 4));
  CHECK(m.layers[0].weights[0] == float(bound * (2 * first_draw(1, 2) - 1)));      // layer 1: stream 2
  CHECK(m.layers[0].bias[0] == float(0.1 * (2 * first_draw(1, 3) - 1)));           // stream 3
  CHECK(m.inputs[0].data[0] == float(2 * first_draw(1, (uint64_t{1} << 32)) - 1));  // input 0: stream 2^32
  for (float w : m.layers[0].weights) CHECK(std::abs(w) <= bound);
  for (float b : m.layers[0].bias) CHECK(std::abs(b) <= 0.1f);
  for (float x : m.inputs[0].data) CHECK(std::abs(x) <= 1.0f);

  const Model again = parse(text);
  CHECK(again.layers[0].weights == m.layers[0].weights);
  CHECK(again.inputs[0].data == m.inputs[0].data);
  const Model other = parse(std::string(text).replace(text.find("batch"), 0, "seed = 2\n"));
  CHECK(other.seed == 2);
  CHECK(other.layers[0].weights != m.layers[0].weights);
  CHECK(other.layers[0].bias != m.layers[0].bias);
  CHECK(other.inputs[0].data != m.inputs[0].data);
  CHECK(other.layers[0].weights[0] == float(bound * (2 * first_draw(2, 2) - 1)));
}

TEST_CASE("model: --batch overrides the description's batch") {
  LoadOptions o;
  o.batch = 3;
  const Model m = parse(kHead + "kernel = 3\n", o);
  CHECK(m.batch == 3);
  CHECK(m.inputs[0].data.size() == 3 * 8 * 8 * 4);
  o.batch = 0;
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\n", o), "--batch: 0: expected an integer 1..65535");
  // Only the batch that runs is held to 65535 (kMaxBatch): a description written for 70000 runs at
  // a batch given (--batch, a sweep's), and is refused at its own.
  const std::string big = std::string(kHead).replace(kHead.find("batch = 2"), 9, "batch = 70000") + "kernel = 3\n";
  o.batch = 3;
  CHECK(parse(big, o).batch == 3);
  CHECK_THROWS_WITH(parse(big), "m.toml:3: [model]: batch: 70000: expected an integer 1..65535");
}

TEST_CASE("model: weights, biases and inputs from .npy files") {
  test::ScratchDir dir;
  std::vector<float> w(4 * 3), b = {0.5f, -0.5f, 0.25f}, x(2 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) / 8;
  for (size_t i = 0; i < x.size(); ++i) x[i] = -float(i);
  write_npy(dir / "w.npy", npy_float32({4, 3}, w));
  write_npy(dir / "b.npy", npy_float32({3}, b));
  write_npy(dir / "x.npy", npy_int8({2, 4}, {0, -1, -2, -3, -4, -5, -6, -7}));
  std::vector<float> lw(4 * (4 + 2) * 2);
  for (size_t i = 0; i < lw.size(); ++i) lw[i] = float(i);
  write_npy(dir / "lw.npy", npy_float32({4, 6, 2}, lw));
  write_npy(dir / "lb.npy", npy_float32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  const std::string text = R"([model]
name = "files"
batch = 2
input = [4]
input_file = "x.npy"

[[layer]]
type = "dense"
units = 3
weights_file = "w.npy"
bias_file = "b.npy"
)";
  const Model m = parse_model(text, "f.toml", dir.path());
  CHECK(m.layers[0].weights == w);
  CHECK(m.layers[0].bias == b);
  CHECK(m.inputs[0].data == x);

  const Model l = parse_model(R"([model]
name = "l"
batch = 1
input = [5, 4]
[[layer]]
type = "lstm"
units = 2
weights_file = ["lw.npy"]
bias_file = "lb.npy"
)", "l.toml", dir.path());
  CHECK(l.layers[0].weights == lw);
  CHECK(l.layers[0].bias == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});

  // Only the weights from a file: the bias is generated.
  const Model g = parse_model(std::string(text).erase(text.find("bias_file")), "f.toml", dir.path());
  CHECK(g.layers[0].weights == w);
  CHECK(g.layers[0].bias.size() == 3);
  CHECK(g.layers[0].bias[0] == float(0.1 * (2 * first_draw(1, 3) - 1)));
}

TEST_CASE("model: .npy problems name the description, the layer and the file") {
  test::ScratchDir dir;
  write_npy(dir / "w.npy", npy_float32({3, 4}, std::vector<float>(12)));
  write_npy(dir / "x.npy", npy_float32({2, 4}, std::vector<float>(8)));
  write_npy(dir / "nan.npy", npy_float32({4, 3}, {0, 0, 0, 0, 0, NAN, 0, 0, 0, 0, 0, 0}));
  const std::string head = "[model]\nname = \"e\"\nbatch = 2\ninput = [4]\n";
  auto load = [&](const std::string& tail, const LoadOptions& o = {}) { return parse_model(head + tail, "e.toml", dir.path(), o); };
  CHECK_THROWS_WITH(load("[[layer]]\ntype = \"dense\"\nunits = 3\nweights_file = \"w.npy\"\n"),
                    "e.toml:8: layer dense1: weights_file: \"w.npy\": shape [3, 4]; expected [4, 3] ([in, units])");
  CHECK_THROWS_WITH(load("[[layer]]\ntype = \"dense\"\nunits = 3\nweights_file = \"none.npy\"\n"),
                    "e.toml:8: layer dense1: weights_file: \"none.npy\": " + (dir / "none.npy").string() +
                        ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(load("[[layer]]\ntype = \"dense\"\nunits = 3\nweights_file = \"nan.npy\"\n"),
                    "e.toml:8: layer dense1: weights_file: \"nan.npy\": element 5 is not a finite number");
  {
    std::string h = "{'descr': '<i2', 'fortran_order': False, 'shape': (4, 3), }";
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(h.size()), 0};
    bytes.insert(bytes.end(), h.begin(), h.end());
    bytes.resize(bytes.size() + 24);
    test::write_bytes(dir / "i2.npy", bytes);
  }
  CHECK_THROWS_WITH(load("[[layer]]\ntype = \"dense\"\nunits = 3\nweights_file = \"i2.npy\"\n"),
                    Contains("e.toml:8: layer dense1: weights_file: \"i2.npy\": ") && Contains("unsupported dtype '<i2'"));
  CHECK_THROWS_WITH(load("[[layer]]\ntype = \"lstm\"\nunits = 3\nstack = 2\nweights_file = [\"w.npy\"]\n"),
                    "e.toml:9: layer lstm1: weights_file: [\"w.npy\"]: expected an array of 2 .npy file names (one per stacked layer)");
  const std::string conv_head = "[model]\nname = \"c\"\nbatch = 1\ninput = [5, 5, 2]\n[[layer]]\ntype = \"conv2d\"\n"
                                "filters = 3\nkernel = [3, 2]\n";
  CHECK_THROWS_WITH(parse_model(conv_head + "bias_file = \"w.npy\"\n", "c.toml", dir.path()),
                    "c.toml:9: layer conv2d1: bias_file: \"w.npy\": shape [3, 4]; expected [3] ([filters])");
  write_npy(dir / "k.npy", npy_float32({3, 2, 2, 3}, std::vector<float>(36, 0.5f)));
  const Model conv = parse_model(conv_head + "weights_file = \"k.npy\"\n", "c.toml", dir.path());
  CHECK(conv.layers[0].weights == std::vector<float>(36, 0.5f));
  CHECK(conv.layers[0].out == map_shape(3, 4, 3));
  CHECK(conv.layers[0].bias.size() == 3);
  const std::string dense = "[[layer]]\ntype = \"dense\"\nunits = 3\n";
  CHECK(load("input_file = \"x.npy\"\n" + dense).inputs[0].data.size() == 8);
  CHECK_THROWS_WITH(load("input_file = \"w.npy\"\n" + dense),
                    "e.toml:5: [model]: input_file: \"w.npy\": shape [3, 4]; expected [2, 4] ([batch, ...input])");
  LoadOptions o;
  o.batch = 5;
  CHECK_THROWS_WITH(load("input_file = \"x.npy\"\n" + dense, o),
                    "e.toml:5: [model]: input_file: \"x.npy\": holds 2 samples (its first dimension) but --batch asks for 5");
}

// kFileKeys (model.h) is the one list of a description's file keys: parse_model reads a file under
// each of them (a missing one is reported under its key, on every layer type that takes it),
// model_files lists the file under each, and the parser takes no other `..._file` key in [model]
// or in any layer type (the keys a table allows, read from the message for an unknown key).
TEST_CASE("model: every key of kFileKeys is read by parse_model and listed by model_files") {
  test::ScratchDir dir;
  // A layer with parameters of each type, on an input it reads.
  struct Kind {
    const char* input;
    const char* layer;
  };
  const Kind kinds[] = {{"[4]", "type = \"dense\"\nunits = 2\n"},
                        {"[4, 4, 2]", "type = \"conv2d\"\nfilters = 2\nkernel = 1\n"},
                        {"[3, 4]", "type = \"lstm\"\nunits = 2\n"},
                        {"[3, 4]", "type = \"gru\"\nunits = 2\n"}};
  const auto description = [](const Kind& k, const std::string& model_keys, const std::string& layers) {
    return "[model]\nname = \"f\"\nbatch = 1\ninput = " + std::string(k.input) + "\n" + model_keys + layers;
  };
  const auto line = [](std::string_view key, const std::string& file) { return std::string(key) + " = \"" + file + "\"\n"; };
  for (const FileKey& f : kFileKeys) {
    REQUIRE((f.table == "model" || f.table == "layer"));
    REQUIRE(f.key.ends_with("_file"));
    for (const Kind& k : kinds) {
      if (f.table == "model" && &k != &kinds[0]) break;
      const std::string file = std::string(f.key) + ".npy";  // absent
      const std::string text = f.table == "model" ? description(k, line(f.key, file), std::string("[[layer]]\n") + k.layer)
                                                  : description(k, "", std::string("[[layer]]\n") + k.layer + line(f.key, file));
      INFO(text);
      CHECK_THROWS_WITH(parse_model(text, "f.toml", dir.path()),
                        Contains(std::string(f.key) + ": \"" + file + "\": " + (dir / file).string() + ": cannot open"));
    }
  }

  // Every key at once, in [model] and in two layers: model_files lists [model]'s files, then each
  // layer's, in kFileKeys' order.
  std::string model_keys, layer1 = "[[layer]]\n" + std::string(kinds[0].layer), layer2 = layer1;
  std::vector<std::string> want = {(dir / "f.toml").string()}, want1, want2;
  for (const FileKey& f : kFileKeys) {
    const std::string key(f.key);
    if (f.table == "model") {
      model_keys += line(key, key + ".npy");
      want.push_back((dir / (key + ".npy")).string());
    } else {
      layer1 += line(key, key + "1.npy");
      layer2 += line(key, key + "2.npy");
      want1.push_back((dir / (key + "1.npy")).string());
      want2.push_back((dir / (key + "2.npy")).string());
    }
  }
  want.insert(want.end(), want1.begin(), want1.end());
  want.insert(want.end(), want2.begin(), want2.end());
  test::write_text(dir / "f.toml", description(kinds[0], model_keys, layer1 + layer2));
  CHECK(model_files(dir / "f.toml") == want);

  // The parser's `..._file` keys: in [model], and in each layer type's table.
  const auto allowed = [&](const std::string& text) {
    std::vector<std::string> keys;
    try {
      parse(text);
    } catch (const InputError& e) {
      const std::string m = e.what();
      const std::string open = "(expected one of: ";
      const size_t at = m.find(open), end = m.rfind(')');
      INFO(m);
      REQUIRE(at != std::string::npos);
      std::istringstream list(m.substr(at + open.size(), end - at - open.size()));
      for (std::string k; std::getline(list >> std::ws, k, ',');) keys.push_back(k);
    }
    REQUIRE(!keys.empty());
    return keys;
  };
  const auto file_keys = [](const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    for (const std::string& k : keys)
      if (k.ends_with("_file")) out.push_back(k);
    return out;
  };
  const auto table_keys = [](std::string_view table) {
    std::vector<std::string> out;
    for (const FileKey& f : kFileKeys)
      if (f.table == table) out.emplace_back(f.key);
    return out;
  };
  const std::string unknown = "zzzzzzzzzz = 1\n";
  CHECK(file_keys(allowed(description(kinds[0], unknown, std::string("[[layer]]\n") + kinds[0].layer))) == table_keys("model"));
  // Every layer type, from the message for an unknown type.
  std::vector<std::string> types;
  try {
    parse(description(kinds[0], "", "[[layer]]\ntype = \"zzzzzzzzzz\"\n"));
  } catch (const InputError& e) {
    const std::string m = e.what(), open = "expected one of ";
    REQUIRE(m.find(open) != std::string::npos);
    std::istringstream list(m.substr(m.find(open) + open.size()));
    for (std::string t; std::getline(list >> std::ws, t, ',');) types.push_back(t);
  }
  REQUIRE(std::count(types.begin(), types.end(), "dense") == 1);
  int with_files = 0;
  for (const std::string& t : types) {
    const bool joins = t == "add" || t == "mul" || t == "concat";
    const std::vector<std::string> keys = file_keys(
        allowed(description(kinds[0], "", "[[layer]]\ntype = \"" + t + "\"\n" + (joins ? "inputs = [\"a\", \"b\"]\n" : "") + unknown)));
    INFO(t);
    CHECK((keys.empty() || keys == table_keys("layer")));
    with_files += !keys.empty();
  }
  CHECK(with_files == 4);  // the layers with parameters: dense, conv2d, lstm, gru
}

TEST_CASE("model: unknown keys, wrong types and out-of-range values") {
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nfilter = 6\n"),
                    "m.toml:10: layer conv2d1: filter: 6: unknown key for a conv2d layer (did you mean filters?)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nunits = 6\n"),
                    "m.toml:10: layer conv2d1: units: 6: unknown key for a conv2d layer (expected one of: type, name, "
                    "scale, input, filters, kernel, stride, padding, groups, activation, bias, weights_file, bias_file, "
                    "weight_bits, output_bits)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = \"3\"\n"),
                    "m.toml:9: layer conv2d1: kernel: \"3\": expected an integer 1..65535 or [kh, kw] of integers 1..65535");
  CHECK_THROWS_WITH(parse(kHead), "m.toml:6: layer conv2d1: kernel: required (an integer 1..65535 or [kh, kw] of integers 1..65535)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nstride = 0\n"), "m.toml:10: layer conv2d1: stride: 0: expected an integer 1..65535");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nactivation = \"Relu\"\n"),
                    "m.toml:10: layer conv2d1: activation: \"Relu\": expected one of none, relu, relu6, sigmoid, tanh (did you mean relu?)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 4\npadding = \"same\"\n"),
                    "m.toml:10: layer conv2d1: padding: \"same\": \"same\" needs an odd square kernel (this one is 4 x 4); give the padding in pixels");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nscale = -1.0\n"), "m.toml:10: layer conv2d1: scale: -1.0: expected a number > 0");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nbias = false\nbias_file = \"b.npy\"\n"),
                    "m.toml:11: layer conv2d1: bias_file: \"b.npy\": given, but bias = false");
  CHECK_THROWS_WITH(parse(std::string(kHead).replace(kHead.find("batch = 2"), 9, "batch = 0") + "kernel = 3\n"),
                    "m.toml:3: [model]: batch: 0: expected an integer 1..65535");
  CHECK_THROWS_WITH(parse(std::string(kHead).replace(kHead.find("[8, 8, 4]"), 9, "[8, 8, 4, 1]") + "kernel = 3\n"),
                    "m.toml:4: [model]: input: [8, 8, 4, 1]: expected an array of 1 to 3 integers 1..65535: [features], "
                    "[steps, features] or [height, width, channels]");
  CHECK_THROWS_WITH(parse(std::string(kHead).replace(kHead.find("name"), 4, "nmae") + "kernel = 3\n"),
                    "m.toml:2: [model]: nmae: \"t\": unknown key for [model] (did you mean name?)");
  CHECK_THROWS_WITH(parse(std::string(kHead).replace(kHead.find("conv2d"), 6, "conv2") + "kernel = 3\n"),
                    "m.toml:7: layer #1: type: \"conv2\": expected one of dense, conv2d, max_pool, avg_pool, flatten, add, mul, "
                    "activation, lstm, concat, gru (did you mean conv2d?)");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\n[quantization]\nweights = \"per_layer\"\n"),
                    "m.toml:11: [quantization]: weights: \"per_layer\": expected one of per_channel, per_tensor");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\n[quantization]\nelements = \"int16\"\n"),
                    "m.toml:11: [quantization]: elements: \"int16\": expected one of mixed, int8 (did you mean int8?)");
  CHECK(parse(kHead + "kernel = 3\n[quantization]\nelements = \"mixed\"\n").wide_elements);
  CHECK(parse(kHead + "kernel = 3\n").wide_elements);
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\n[layers]\n"),
                    "m.toml:10: layers: unknown table or key (did you mean layer?); a description has [model], [quantization] and [[layer]]");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\nname = \"input\"\n"),
                    "m.toml:10: layer input: name: \"input\": reserved for the model's input; choose another name");
}

TEST_CASE("model: grouped convolutions: groups divide channels and filters, weights are block-diagonal") {
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\ngroups = 3\n"),
                    "m.toml:10: layer conv2d1: groups: 3: filters = 4 is not a multiple of it");
  CHECK_THROWS_WITH(parse(std::string(kHead).replace(kHead.find("filters = 4"), 11, "filters = 6") + "kernel = 3\ngroups = 3\n"),
                    "m.toml:10: layer conv2d1: groups: 3: the input's 4 channels ([8, 8, 4]) are not a multiple of it");
  // 4 input channels, 4 filters, 2 groups: filters 0..1 read channels 0..1, filters 2..3 read 2..3.
  const Model m = parse(kHead + "kernel = 3\ngroups = 2\n");
  const Layer& l = m.layers.at(0);
  CHECK(l.groups == 2);
  REQUIRE(l.weights.size() == 3 * 3 * 4 * 4);
  // The seeded generator draws the grouped layout g[3][3][2][4] with fan_in = fan_out = 3 * 3 * 2,
  // then spreads it: dense[p][k][j] = g[p][k % 2][j] when k / 2 == j / 2, else 0.
  SeededUniform rng(m.seed, weight_stream(1));
  const double bound = std::sqrt(6.0 / (18 + 18));
  std::vector<float> g(3 * 3 * 2 * 4);
  for (float& v : g) v = rng.uniform(bound);
  for (uint64_t p = 0; p < 9; ++p)
    for (uint64_t k = 0; k < 4; ++k)
      for (uint64_t j = 0; j < 4; ++j)
        CHECK(l.weights[(p * 4 + k) * 4 + j] == (k / 2 == j / 2 ? g[(p * 2 + k % 2) * 4 + j] : 0.0f));
  CHECK(expand_groups({1, 2}, 1, 1, 2, 2, 2) == std::vector<float>{1, 0, 0, 2});  // [1][1][1][2] -> [1][1][2][2]
}

TEST_CASE("model: layer inputs resolve by name") {
  const std::string two = kHead + "kernel = 3\nname = \"a\"\n\n[[layer]]\ntype = \"max_pool\"\nsize = 2\n";
  CHECK_THROWS_WITH(parse(two + "input = \"aa\"\n"),
                    "m.toml:15: layer max_pool2: input: \"aa\": no such layer (did you mean a?); expected the name of a layer above or \"input\"");
  CHECK_THROWS_WITH(parse(two + "input = \"max_pool2\"\n"), "m.toml:15: layer max_pool2: input: \"max_pool2\": a layer cannot read itself");
  CHECK_THROWS_WITH(parse(kHead + "kernel = 3\ninput = \"p\"\n\n[[layer]]\ntype = \"max_pool\"\nsize = 2\nname = \"p\"\n"),
                    "m.toml:10: layer conv2d1: input: \"p\": names a later layer (line 12); a layer reads only layers above it");
  CHECK_THROWS_WITH(parse(two + "name = \"a\"\n"), "m.toml:15: layer a: name: \"a\": another layer has this name (line 6)");
  CHECK_THROWS_WITH(parse(two + "inputs = [\"a\"]\n"),
                    "m.toml:15: layer max_pool2: inputs: [\"a\"]: only add, mul and concat layers take inputs; give input = \"name\"");
  CHECK_THROWS_WITH(parse(two + "\n[[layer]]\ntype = \"add\"\ninput = \"a\"\n"),
                    "m.toml:18: layer add3: input: \"a\": add layers read two layers: give inputs = [\"a\", \"b\"]");
  CHECK_THROWS_WITH(parse(two + "\n[[layer]]\ntype = \"mul\"\ninputs = [\"a\"]\n"),
                    "m.toml:18: layer mul3: inputs: [\"a\"]: expected two layer names, [\"a\", \"b\"]");
  CHECK_THROWS_WITH(parse(two + "\n[[layer]]\ntype = \"mul\"\n"),
                    "m.toml:16: layer mul3: inputs: required (two layer names, [\"a\", \"b\"])");
}

TEST_CASE("model: concat joins two or more layers along channels") {
  const std::string two = kHead + "kernel = 3\nname = \"a\"\n\n[[layer]]\ntype = \"conv2d\"\nfilters = 5\nkernel = 1\n"
                                  "input = \"a\"\nname = \"b\"\n\n[[layer]]\ntype = \"concat\"\n";
  const Model m = parse(two + "inputs = [\"a\", \"b\", \"a\"]\n");
  REQUIRE(m.layers.size() == 3);
  CHECK(m.layers[2].name == "concat3");
  CHECK(m.layers[2].inputs == std::vector<int>{0, 1, 0});
  CHECK(m.layers[2].out == map_shape(6, 6, 13));
  CHECK((m.layers[2].weights.empty() && m.layers[2].bias.empty()));
  CHECK_THROWS_WITH(parse(two + "inputs = [\"a\"]\n"),
                    "m.toml:21: layer concat3: inputs: [\"a\"]: expected two or more layer names, [\"a\", \"b\", ...]");
  CHECK_THROWS_WITH(parse(two + "input = \"a\"\n"),
                    "m.toml:21: layer concat3: input: \"a\": concat layers join two or more layers: give inputs = [\"a\", \"b\", ...]");
  CHECK_THROWS_WITH(parse(two + "inputs = [\"a\", \"input\"]\n"),
                    "m.toml:21: layer concat3: inputs: [\"a\", \"input\"]: concat joins tensors along channels, so all but the "
                    "channels must agree; a is [6, 6, 4] and input is [8, 8, 4]");
  CHECK_THROWS_WITH(parse(two + "inputs = [\"a\", \"b\"]\nactivation = \"relu\"\n"),
                    "m.toml:22: layer concat3: activation: \"relu\": unknown key for a concat layer (expected one of: "
                    "type, name, scale, inputs)");
}

TEST_CASE("model: shape errors name the layer") {
  CHECK_THROWS_WITH(parse(kHead + "kernel = 9\n"),
                    "m.toml:9: layer conv2d1: kernel: 9: 9 x 9 is larger than the input map [8, 8, 4] padded by 0 (8 x 8)");
  CHECK(parse(kHead + "kernel = 9\npadding = 1\n").layers[0].out == map_shape(2, 2, 4));
  const std::string conv = kHead + "kernel = 3\n\n[[layer]]\n";
  CHECK_THROWS_WITH(parse(conv + "type = \"dense\"\nunits = 10\n"),
                    "m.toml:11: layer dense2: input: \"conv2d1\" [6, 6, 4]: dense reads a vector [c] or a sequence [steps, c], "
                    "not a map; put a flatten layer before it");
  CHECK_THROWS_WITH(parse(conv + "type = \"flatten\"\n"),
                    "m.toml:11: layer flatten2: type: \"flatten\": flatten must feed a dense layer; here it is the model's output");
  CHECK_THROWS_WITH(parse(conv + "type = \"flatten\"\n[[layer]]\ntype = \"activation\"\nactivation = \"relu\"\n"),
                    "m.toml:11: layer flatten2: type: \"flatten\": flatten must feed a dense layer, but activation layer activation3 (line 13) reads it");
  CHECK_THROWS_WITH(parse(conv + "type = \"max_pool\"\nsize = 7\n"),
                    "m.toml:13: layer max_pool2: size: 7: the window is larger than the input map [6, 6, 4]");
  CHECK_THROWS_WITH(parse(conv + "type = \"add\"\ninputs = [\"input\", \"conv2d1\"]\n"),
                    "m.toml:13: layer add2: inputs: [\"input\", \"conv2d1\"]: add needs two equal shapes; input is [8, 8, 4] "
                    "and conv2d1 is [6, 6, 4]");
  CHECK_THROWS_WITH(parse(conv + "type = \"lstm\"\nunits = 4\n"),
                    "m.toml:11: layer lstm2: input: \"conv2d1\" [6, 6, 4]: lstm reads a sequence [steps, c]");
  CHECK_THROWS_WITH(parse("[model]\nname = \"v\"\nbatch = 1\ninput = [10]\n[[layer]]\ntype = \"conv2d\"\nfilters = 2\nkernel = 1\n"),
                    "m.toml:5: layer conv2d1: input: \"input\" [10]: conv2d reads a map [h, w, c]");
  CHECK_THROWS_WITH(parse("[model]\nname = \"v\"\nbatch = 1\ninput = [10]\n[[layer]]\ntype = \"flatten\"\n"),
                    "m.toml:5: layer flatten1: input: \"input\" [10]: flatten reads a map [h, w, c] or a sequence [steps, c]; "
                    "this input is already a vector");
}

TEST_CASE("model: syntax errors, missing tables and size limits") {
  CHECK_THROWS_WITH(parse("[model]\nname = \n"), "m.toml:2:8: Error while parsing key-value pair: expected value, saw '\\n'");
  CHECK_THROWS_WITH(parse("[[layer]]\ntype = \"flatten\"\n"),
                    "m.toml:1: [model]: missing: a description needs a [model] table (name, batch, input)");
  CHECK_THROWS_WITH(parse("[model]\nname = \"t\"\nbatch = 1\ninput = [3]\n"),
                    "m.toml:1: [[layer]]: missing: a description needs at least one [[layer]] table");
  CHECK_THROWS_WITH(parse("[model]\nname = \"t\"\nbatch = 1\ninput = [3]\n[layer]\ntype = \"dense\"\n"),
                    "m.toml:5: layer: expected [[layer]] tables (an array of tables), not [layer]");
  LoadOptions small;
  small.max_values = 1000;
  CHECK_THROWS_WITH(parse("[model]\nname = \"t\"\nbatch = 1\ninput = [30]\n[[layer]]\ntype = \"dense\"\nunits = 40\n", small),
                    "m.toml:5: layer dense1: the model has more than 1000 parameters (weights and biases) up to this layer");
  CHECK_THROWS_WITH(parse("[model]\nname = \"t\"\nbatch = 100\ninput = [30]\n[[layer]]\ntype = \"dense\"\nunits = 4\n", small),
                    "m.toml:4: [model]: input: [30]: batch 100 x 30 = 3000 input values; at most 1000");
  CHECK_THROWS_WITH(parse("[model]\nname = \"t\"\nbatch = 1\ninput = [65535, 65535, 65535]\n[[layer]]\ntype = \"flatten\"\n"),
                    "m.toml:4: [model]: input: [65535, 65535, 65535]: more than 2^31 elements per sample");
}

TEST_CASE("model: a bad description never crashes") {
  // Every prefix of a valid description, and single-byte corruptions of it, parse or throw
  // InputError; nothing else.
  const std::string text = kLeNet;
  auto attempt = [](const std::string& t) {
    try {
      LoadOptions o;
      o.max_values = 1 << 20;
      parse_model(t, "f.toml", "/nonexistent", o);
    } catch (const InputError&) {
    }
  };
  for (size_t n = 0; n <= text.size(); ++n) REQUIRE_NOTHROW(attempt(text.substr(0, n)));
  std::mt19937 rng(12345);
  const std::string alphabet = "[]=\"',.#\n 0123456789-+abcdefghijklmnopqrstuvwxyz_{}";
  for (int i = 0; i < 2000; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = alphabet[rng() % alphabet.size()];
    REQUIRE_NOTHROW(attempt(t));
  }
}

TEST_CASE("model: load_model dispatches on the extension") {
  test::ScratchDir dir;
  test::write_text(dir / "lenet.toml", kLeNet);
  test::write_text(dir / "topo.csv", "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
                                     "c1, 8, 8, 3, 3, 2, 4, 1,\n");
  CHECK(load_model(dir / "lenet.toml").layers.size() == 8);
  CHECK(load_model(dir / "lenet.toml").source == (dir / "lenet.toml").string());
  const Model t = load_model(dir / "topo.csv");
  CHECK(t.name == "topo");
  CHECK(t.layers[0].out == map_shape(6, 6, 4));
  CHECK_THROWS_WITH(load_model(dir / "missing.toml"),
                    (dir / "missing.toml").string() + ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(load_model(dir / "prog.tpu"),
                    (dir / "prog.tpu").string() + ": not a model (expected a .toml description, a .csv SCALE-Sim topology or an .onnx model)");
  CHECK(is_model_path("a/b.toml"));
  CHECK(is_model_path("B.CSV"));
  CHECK(is_model_path("m.onnx"));
  CHECK(!is_model_path("p.tpu"));
  CHECK(!is_model_path("toml"));
}

TEST_CASE("model: the committed workload descriptions load") {
  // Every model description under workloads/ must load (other .toml files there, such as sweep
  // specs, have no [model] table).
  size_t count = 0;
  const auto root = test::source_dir() / "workloads";
  if (!std::filesystem::exists(root)) return;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".toml" || test::read_text(e.path()).find("[model]") == std::string::npos) continue;
    INFO(e.path().string());
    CHECK_NOTHROW(load_model(e.path()));
    ++count;
  }
  SUCCEED(count << " descriptions");
}

// model.cpp draws the seeded parameters in bulk (SeededDraws): the same floats as SeededUniform
// (std::mt19937_64) draw by draw, across state refills (312 draws), with the bound changing
// between fills as a stacked LSTM's layers change it, on several seeds and streams.
TEST_CASE("model: bulk seeded draws equal SeededUniform's, bit for bit") {
  const uint64_t sizes[] = {1, 5, 311, 312, 313, 1000, 0, 624, 7, 4096};
  for (const uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{5489}, uint64_t{0xFFFFFFFFFFFFFFFF}})
    for (const uint64_t stream : {uint64_t{0}, uint64_t{3}, input_stream(2)}) {
      SeededUniform one(seed, stream);
      SeededDraws bulk(seed, stream);
      uint64_t differ = 0, drawn = 0;
      double bound = 0.05;
      for (const uint64_t n : sizes) {
        std::vector<float> got(n + 1, 42.0f);
        bulk.fill(bound, got.data(), n);
        for (uint64_t i = 0; i < n; ++i) {
          const float want = one.uniform(bound);
          differ += std::memcmp(&got[i], &want, sizeof want) != 0;
        }
        CHECK(got[n] == 42.0f);  // nothing written past n
        drawn += n;
        bound = bound * 3 + 0.01;
      }
      INFO("seed " << seed << ", stream " << stream << ", " << drawn << " draws");
      CHECK(differ == 0);
    }
}

// The compile's memory estimate (check_compile_memory) counts what the compile holds, in bytes by
// the sizes the code stores: a full compile its parameters (float, quantized, the weight image),
// the batch's inputs and the calibration run's outputs; a timing-only one no data unless it must
// calibrate (tests/CMakeLists.txt runs such a batch under a 256 MiB address-space limit).
TEST_CASE("the compile memory estimate counts what a timing-only compile computes, not the batch's values", "[model]") {
  const std::string head = "[model]\nname = \"c\"\nbatch = 60000\ninput = [12, 12, 3]\n"
                           "[[layer]]\nname = \"c1\"\ntype = \"conv2d\"\nfilters = 16\nkernel = 3\npadding = \"same\"\n";
  LoadOptions o;
  o.max_memory = 64 << 20;
  // Full: 432 weights + 16 biases = 448 floats x 4 = 1792; quantized 432 x 1 + 16 x 4 (int32) =
  // 496; the weight image 432; the inputs 60000 x 432 x 6 (float, int8, TPU order) = 155,520,000;
  // the calibration run over 4 samples x (2304 outputs + 432 inputs) x 4 = 43,776: 155,566,496.
  REQUIRE_THROWS_WITH(parse(head, o), Contains("needs about 155566496 bytes (148.4 MiB) (1792 for 448 float parameters, "
                                               "496 for their quantized weights and biases, 432 for the weight image, "
                                               "155520000 for batch 60000 x 432 input values, 43776 for a calibration "
                                               "run over 4 samples x 2304 layer output values)"));
  o.timing_only = true;
  CHECK(parse(head, o).batch == 60000);  // 16 biases x 8 (float and int32) = 128 bytes
  o.max_memory = 127;
  REQUIRE_THROWS_WITH(parse(head, o), Contains("needs about 128 bytes (128 for a timing-only compile: 16 biases and "
                                               "weights from files), more than the 127 bytes allowed"));
  // An add makes it calibrate: 32 biases x 8 = 256; its inputs generated for the batch, 60000 x 432
  // x 5 (float, int8) = 129,600,000; the float run over calibration_samples = 4 samples x (3 x 2304
  // outputs + 432 inputs) x 4 = 117,504 and c2's 2304 seeded weights (the largest layer's) x 4 =
  // 9,216: 129,726,976 bytes.
  const std::string adds = head + "[[layer]]\nname = \"c2\"\ntype = \"conv2d\"\nfilters = 16\nkernel = 3\n"
                                  "padding = \"same\"\n[[layer]]\nname = \"s\"\ntype = \"add\"\ninputs = [\"c1\", \"c2\"]\n";
  o.max_memory = 64 << 20;
  REQUIRE_THROWS_WITH(parse(adds, o),
                      Contains("needs about 129726976 bytes (123.7 MiB) (256 for a timing-only compile: 32 biases and "
                               "weights from files, 129600000 for batch 60000 x 432 input values, 126720 for a "
                               "calibration run over 4 samples x 6912 layer output values and 2304 seeded weights of a "
                               "layer)"));
}
