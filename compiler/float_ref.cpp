// The float reference executor: what a model description means, in plain loops over floats
// (double accumulation). Used to calibrate the quantizer's scales and to report the quantized
// model's error. Each layer is checked before it runs (inputs, parameter sizes, the inferred
// output shape), so the quantizer can rely on a model that ran here.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/reference.h"
#include "isa/error.h"
#include "sim/parallel.h"
#include "sim/target_clones.h"

namespace tpusim::compiler {

std::string layer_context(const Model& model, const Layer& layer) {
  std::string where = model.source.empty() ? std::string() : model.source + ":";
  if (!model.source.empty() && layer.line > 0) where += fmt::format("{}:", layer.line);
  if (!where.empty()) where += " ";
  return where + "layer " + layer.name + ": ";
}

const Shape& source_shape(const Model& model, const Layer& layer, int entry) {
  const auto self = static_cast<int>(&layer - model.layers.data());
  if (is_model_input(entry)) {
    const int i = model_input_index(entry);
    if (i < static_cast<int>(model.inputs.size())) return model.inputs[static_cast<size_t>(i)].shape;
  } else if (entry < self) {
    return model.layers[static_cast<size_t>(entry)].out;
  }
  throw InputError(layer_context(model, layer) + fmt::format("input {} names no model input or earlier layer", entry));
}

namespace {

using Data = std::vector<float>;

// The inner loops, compiled for x86-64-v3 (AVX2, FMA) and baseline x86-64, chosen when the
// program loads (sim/target_clones.h).

// a[j] += v x row[j] for j < n, a product rounded and then a sum rounded on every target (no
// fused multiply-add), so calibrated scales and hence compiled programs do not depend on the host.
TPUSIM_CLONES_V3 __attribute__((optimize("fp-contract=off"))) void multiply_add(float* __restrict a, const float* __restrict row, float v, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) a[j] += v * row[j];
}

// One position's accumulators over a tap: acc[j] += v[t] x w[k[t]][j] for t < nonzero in turn
// (the tap's nonzero inputs, k ascending), for the columns of `vecs` vectors of kLanes floats:
// each element's products and sums in the same order as one multiply_add per input, each rounded
// alone (no fused multiply-add), so the floats are the same. The accumulators stay in registers
// over the whole tap (multiply_add reads and writes them once per input). Rows and accumulators
// are only float-aligned: vectors move in and out by memcpy (unaligned loads and stores; a cast to
// an under-aligned vector type is undefined behaviour, and UBSan under clang says so).
constexpr uint64_t kLanes = 16, kTapVecs = 8;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));

// (a macro, not a lambda or template: the loop must be inside the clones and fp-contract=off)
#define TPUSIM_TAP_LOOP(VECS)                                                                  \
  Floats a[VECS];                                                                              \
  for (uint64_t q = 0; q < VECS; ++q) __builtin_memcpy(&a[q], acc + q * kLanes, sizeof(Floats)); \
  for (uint64_t t = 0; t < nonzero; ++t) {                                                     \
    const float* row = w + k[t] * wld;                                                         \
    const Floats vb = Floats{} + v[t];                                                         \
    for (uint64_t q = 0; q < VECS; ++q) {                                                      \
      Floats wq;                                                                               \
      __builtin_memcpy(&wq, row + q * kLanes, sizeof(Floats));                                 \
      a[q] += vb * wq;                                                                         \
    }                                                                                          \
  }                                                                                            \
  for (uint64_t q = 0; q < VECS; ++q) __builtin_memcpy(acc + q * kLanes, &a[q], sizeof(Floats));

TPUSIM_CLONES __attribute__((optimize("fp-contract=off"))) void tap_wide(float* acc, const float* w, uint64_t wld,
                                                                         const uint32_t* k, const float* v,
                                                                         uint64_t nonzero) {
  TPUSIM_TAP_LOOP(kTapVecs)
}
TPUSIM_CLONES __attribute__((optimize("fp-contract=off"))) void tap_four(float* acc, const float* w, uint64_t wld,
                                                                         const uint32_t* k, const float* v,
                                                                         uint64_t nonzero) {
  TPUSIM_TAP_LOOP(4)
}
TPUSIM_CLONES __attribute__((optimize("fp-contract=off"))) void tap_one(float* acc, const float* w, uint64_t wld,
                                                                        const uint32_t* k, const float* v,
                                                                        uint64_t nonzero) {
  TPUSIM_TAP_LOOP(1)
}
#undef TPUSIM_TAP_LOOP

std::string dims(const Shape& s) { return fmt::format("{} x {} x {}", s.h, s.w, s.c); }

float activate(Activation a, double x) {
  switch (a) {
    case Activation::none: break;
    case Activation::relu: x = std::max(x, 0.0); break;
    case Activation::relu6: x = std::clamp(x, 0.0, 6.0); break;
    case Activation::sigmoid: x = 1.0 / (1.0 + std::exp(-x)); break;
    case Activation::tanh: x = std::tanh(x); break;
  }
  return static_cast<float>(x);
}

// One layer's run: its inputs' shapes and data, the checks, the loops.
struct LayerRun {
  const Model& model;
  const Layer& layer;
  std::vector<const Shape*> in;
  std::vector<const Data*> x;

  [[noreturn]] void fail(const std::string& what) const { throw InputError(layer_context(model, layer) + what); }

  void expect_inputs(size_t n) const {
    if (in.size() != n) fail(fmt::format("takes {} input(s), has {}", n, in.size()));
  }
  void expect_out(uint64_t h, uint64_t w, uint64_t c) const {
    const Shape& o = layer.out;
    if (o.h != h || o.w != w || o.c != c)
      fail(fmt::format("output shape {} does not match the inferred {} x {} x {}", dims(o), h, w, c));
  }
  void expect_size(const std::vector<float>& v, uint64_t n, const char* what) const {
    if (v.size() != n) fail(fmt::format("{} have {} values, expected {}", what, v.size(), n));
  }
  const float* bias_or_null(uint64_t n) const {
    if (!layer.use_bias) return nullptr;
    expect_size(layer.bias, n, "biases");
    return layer.bias.data();
  }
  uint64_t batch() const { return model.batch; }

  Data dense() const;
  Data conv2d() const;
  Data pool(bool avg) const;
  Data elementwise(bool mul) const;
  Data lstm(std::vector<double>& cell_max) const;
  Data gru(std::vector<double>& n_max) const;
  Data concat() const;
  // What an lstm (`gates` 4) and a gru (3) check alike: one [steps, c] input, units and stack of at
  // least 1, the output's shape, `gates` weight matrices [in_l + units][units] per stacked layer
  // and 4 biases of units per stacked layer (an lstm's gates; a gru's b_r, b_z, b_in, b_hn).
  // Returns steps.
  uint64_t recurrent_checks(const char* what, uint64_t gates) const;
  // The layer's output from its top layer's h sequence: every step's h, or the last step's.
  Data recurrent_output(Data seq, uint64_t steps) const;
};

// A convolution's geometry: input map h x w x c, kernel kh x kw, stride, zero padding; output
// oh x ow x n. A dense layer is the 1 x 1 case over every pixel.
struct ConvGeometry {
  uint64_t h, w, c, kh, kw, stride, pad, oh, ow, n;
};

// out[img][oy][ox][j] = act(b[j] + sum_{r,q,k} x[img][oy*stride + r - pad][ox*stride + q - pad][k]
// w[r][q][k][j]), zero outside the map, accumulated in float. Output positions go in blocks of
// kBlock that share each weight row while it is in cache (large layers would otherwise stream
// their weights once per position).
// `init` (when given): each position's accumulators start from its n values there instead of the
// bias (a sum continued over more inputs: the same floats as one sum over all of them).
Data convolve(const Data& x, const ConvGeometry& g, uint64_t batch, const float* w, const float* b,
              Activation act, const float* init = nullptr) {
  constexpr uint64_t kBlock = 16;
  const uint64_t n = g.n, per_image = g.oh * g.ow, positions = batch * per_image;
  Data out(positions * n);
  // Blocks on sim::parallel_for's threads, each computed whole by one: the same floats on any count.
  sim::parallel_for((positions + kBlock - 1) / kBlock, [&](uint64_t block) {
    thread_local std::vector<float> acc, vs;
    thread_local std::vector<uint32_t> ks;
    uint64_t nonzeros[kBlock];
    acc.resize(kBlock * n);
    vs.resize(kBlock * g.c), ks.resize(kBlock * g.c);
    const float* px[kBlock];
    const uint64_t p0 = block * kBlock, count = std::min(kBlock, positions - p0);
    for (uint64_t i = 0; i < count; ++i)
      for (uint64_t j = 0; j < n; ++j) acc[i * n + j] = init ? init[(p0 + i) * n + j] : b ? b[j] : 0.0f;
    for (uint64_t r = 0; r < g.kh; ++r)
      for (uint64_t q = 0; q < g.kw; ++q) {
        for (uint64_t i = 0; i < count; ++i) {  // each position's input pixel for this tap
          const uint64_t img = (p0 + i) / per_image, o = (p0 + i) % per_image;
          const uint64_t iy = o / g.ow * g.stride + r, ix = o % g.ow * g.stride + q;  // padded coordinates
          const bool inside = iy >= g.pad && ix >= g.pad && iy - g.pad < g.h && ix - g.pad < g.w;
          px[i] = inside ? &x[((img * g.h + iy - g.pad) * g.w + ix - g.pad) * g.c] : nullptr;
        }
        const float* tap = w + (r * g.kw + q) * g.c * n;
        // Per position, its nonzero inputs for this tap (zeros add nothing: skipped, as always);
        // then the columns in register blocks, the last n % kLanes columns with multiply_add, each
        // block for every position in turn: the block's weight rows (a few hundred KB) are read
        // from memory once for the positions, not once per position. (Each accumulator's products
        // and sums in the same order either way: the same floats.)
        const uint64_t wide = n - n % (kTapVecs * kLanes), whole = n - n % kLanes;
        for (uint64_t i = 0; i < count; ++i) {
          uint64_t& nonzero = nonzeros[i];
          nonzero = 0;
          uint32_t* ki = &ks[i * g.c];
          float* vi = &vs[i * g.c];
          if (px[i])
            for (uint64_t k = 0; k < g.c; ++k)
              if (px[i][k] != 0.0f) ki[nonzero] = uint32_t(k), vi[nonzero++] = px[i][k];
        }
        const auto each = [&](uint64_t j0, auto kernel) {
          for (uint64_t i = 0; i < count; ++i)
            if (nonzeros[i]) kernel(&acc[i * n] + j0, tap + j0, n, &ks[i * g.c], &vs[i * g.c], nonzeros[i]);
        };
        for (uint64_t j0 = 0; j0 < wide; j0 += kTapVecs * kLanes) each(j0, tap_wide);
        uint64_t j0 = wide;
        for (; j0 + 4 * kLanes <= whole; j0 += 4 * kLanes) each(j0, tap_four);
        for (; j0 < whole; j0 += kLanes) each(j0, tap_one);
        if (whole < n)
          for (uint64_t i = 0; i < count; ++i)
            for (uint64_t t = 0; t < nonzeros[i]; ++t)
              multiply_add(&acc[i * n] + whole, tap + ks[i * g.c + t] * n + whole, vs[i * g.c + t], n - whole);
      }
    for (uint64_t i = 0; i < count; ++i)
      for (uint64_t j = 0; j < n; ++j) out[(p0 + i) * n + j] = activate(act, acc[i * n + j]);
  });
  return out;
}

// out[p][j] = act(b[j] + sum_k x[p][k] w[k][j]) for every pixel p (a step of a sequence).
Data LayerRun::dense() const {
  expect_inputs(1);
  const Shape& s = *in[0];
  const uint64_t k = s.c, n = layer.units;
  expect_out(s.h, s.w, n);
  expect_size(layer.weights, k * n, "weights");
  const float* b = bias_or_null(n);
  const ConvGeometry g{s.pixels(), 1, k, 1, 1, 1, 0, s.pixels(), 1, n};
  return convolve(*x[0], g, batch(), layer.weights.data(), b, layer.activation);
}

Data LayerRun::conv2d() const {
  expect_inputs(1);
  const Shape& s = *in[0];
  const uint64_t kh = layer.kernel_h, kw = layer.kernel_w, st = layer.stride, pad = layer.pad, c = s.c;
  const uint64_t n = layer.units;
  if (kh == 0 || kw == 0 || st == 0 || s.h + 2 * pad < kh || s.w + 2 * pad < kw)
    fail(fmt::format("kernel {} x {} (stride {}, pad {}) does not fit the {} input", kh, kw, st, pad, dims(s)));
  const uint64_t oh = (s.h + 2 * pad - kh) / st + 1, ow = (s.w + 2 * pad - kw) / st + 1;
  expect_out(oh, ow, n);
  expect_size(layer.weights, kh * kw * c * n, "weights");
  const float* b = bias_or_null(n);
  const ConvGeometry g{s.h, s.w, c, kh, kw, st, pad, oh, ow, n};
  return convolve(*x[0], g, batch(), layer.weights.data(), b, layer.activation);
}

Data LayerRun::pool(bool avg) const {
  expect_inputs(1);
  const Shape& s = *in[0];
  // Square windows, or 1 x k over a map of height 1 (a 1-D pool, ONNX's over a line), over the
  // input padded by pool_pads (top, left, bottom, right; less than the window on each side):
  // never the maximum; zeros in an average that counts them (count_pad), else left out of it.
  const uint64_t kh = layer.kernel_h, kw = layer.kernel_w, st = layer.stride;
  const auto [pt, pl, pb, pr] = layer.pool_pads;
  const bool line = kh == 1 && s.h == 1;
  const uint64_t ph = s.h + pt + pb, pw = s.w + pl + pr;
  if (kh == 0 || st == 0 || (kw != kh && !line) || pt >= kh || pb >= kh || pl >= kw || pr >= kw || ph < kh || pw < kw)
    fail(fmt::format("window {} x {} (stride {}, pads {} {} {} {}) does not fit the {} input", kh, kw, st, pt, pl, pb,
                     pr, dims(s)));
  const uint64_t oh = (ph - kh) / st + 1, ow = (pw - kw) / st + 1, c = s.c;
  expect_out(oh, ow, c);
  Data out(batch() * oh * ow * c);
  for (uint64_t img = 0; img < batch(); ++img)
    for (uint64_t oy = 0; oy < oh; ++oy)
      for (uint64_t ox = 0; ox < ow; ++ox)
        for (uint64_t k = 0; k < c; ++k) {
          double v = avg ? 0.0 : -INFINITY;
          uint64_t count = 0;  // the window's values within the map
          for (uint64_t r = 0; r < kh; ++r) {
            const uint64_t row = oy * st + r;  // in the padded map
            if (row < pt || row - pt >= s.h) continue;
            for (uint64_t q = 0; q < kw; ++q) {
              const uint64_t col = ox * st + q;
              if (col < pl || col - pl >= s.w) continue;
              const double e = (*x[0])[((img * s.h + row - pt) * s.w + col - pl) * c + k];
              v = avg ? v + e : std::max(v, e);
              ++count;
            }
          }
          const double size = double(layer.count_pad ? kh * kw : count);
          out[((img * oh + oy) * ow + ox) * c + k] = static_cast<float>(avg ? v / size : v);
        }
  return out;
}

Data LayerRun::elementwise(bool mul) const {
  expect_inputs(2);
  if (in[0]->h != in[1]->h || in[0]->w != in[1]->w || in[0]->c != in[1]->c)
    fail(fmt::format("inputs have different shapes ({} and {})", dims(*in[0]), dims(*in[1])));
  expect_out(in[0]->h, in[0]->w, in[0]->c);
  Data out(x[0]->size());
  for (size_t i = 0; i < out.size(); ++i) {
    const double a = (*x[0])[i], b = (*x[1])[i];
    out[i] = activate(layer.activation, mul ? a * b : a + b);
  }
  return out;
}

// Along channels: output pixel p of sample n is input 0's channels of (n, p), then input 1's, ...
Data LayerRun::concat() const {
  if (in.size() < 2) fail(fmt::format("joins two or more inputs, has {}", in.size()));
  uint64_t c = 0;
  for (const Shape* s : in) {
    if (s->h != in[0]->h || s->w != in[0]->w)
      fail(fmt::format("inputs of different maps ({} and {}): concat joins along channels", dims(*in[0]),
                       dims(*s)));
    c += s->c;
  }
  expect_out(in[0]->h, in[0]->w, c);
  Data out(batch() * in[0]->pixels() * c);
  uint64_t c0 = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint64_t ci = in[i]->c;
    for (uint64_t p = 0; p < batch() * in[0]->pixels(); ++p)
      std::copy_n(&(*x[i])[p * ci], ci, &out[p * c + c0]);
    c0 += ci;
  }
  return out;
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

uint64_t LayerRun::recurrent_checks(const char* what, uint64_t gates) const {
  expect_inputs(1);
  const Shape& s = *in[0];
  const uint64_t steps = s.pixels(), u = layer.units, stack = layer.stack;
  if (u == 0 || stack == 0) fail(fmt::format("{} needs units >= 1 and stack >= 1", what));
  if (layer.return_sequences) expect_out(steps, 1, u);
  else expect_out(1, 1, u);
  uint64_t weights = 0;
  for (uint64_t l = 0; l < stack; ++l) weights += gates * ((l == 0 ? s.c : u) + u) * u;
  expect_size(layer.weights, weights, "weights");
  if (!layer.bias.empty()) expect_size(layer.bias, stack * 4 * u, "biases");
  return steps;
}

Data LayerRun::recurrent_output(Data seq, uint64_t steps) const {
  if (layer.return_sequences) return seq;
  const uint64_t u = layer.units;
  Data last(batch() * u);
  for (uint64_t img = 0; img < batch(); ++img)
    std::copy_n(&seq[(img * steps + steps - 1) * u], u, &last[img * u]);
  return last;
}

// Stacked LSTM layers over a [steps, c] sequence: gates i, f, g, o as fully connected layers over
// [x_t, h_{t-1}], c_t = f c_{t-1} + i g, h_t = o tanh(c_t), h_{-1} = c_{-1} = 0.
Data LayerRun::lstm(std::vector<double>& cell_max) const {
  const uint64_t steps = recurrent_checks("an lstm", 4), u = layer.units, stack = layer.stack;
  cell_max.assign(stack * steps, 0.0);

  Data seq = *x[0];
  uint64_t in_c = in[0]->c, offset = 0;
  const uint64_t n = batch();
  for (uint64_t l = 0; l < stack; ++l) {
    const uint64_t rows = in_c + u;
    // A gate's sum over [x_t, h_{t-1}] is its sum over x_t (the bias, then the x rows in order),
    // continued over h_{t-1}: the x parts of every step and sample are known before the steps run,
    // so they go first, as one layer over all of them (its weight rows read once, not once per
    // step), then each step continues them over its h. The same products and sums in the same
    // order as one sum per step: the same floats.
    const ConvGeometry x_part{n * steps, 1, in_c, 1, 1, 1, 0, n * steps, 1, u};  // positions (sample, step)
    const ConvGeometry h_part{n, 1, u, 1, 1, 1, 0, n, 1, u};                     // every sample's h_{t-1}
    Data zx[4];
    for (uint64_t g = 0; g < 4; ++g)
      zx[g] = convolve(seq, x_part, 1, &layer.weights[offset + g * rows * u],
                       layer.bias.empty() ? nullptr : &layer.bias[(l * 4 + g) * u], Activation::none);
    Data next(n * steps * u), h(n * u, 0.0f), z[4], from(n * u);
    std::vector<double> c(n * u, 0.0);
    for (uint64_t t = 0; t < steps; ++t) {
      for (uint64_t g = 0; g < 4; ++g) {
        for (uint64_t img = 0; img < n; ++img) std::copy_n(&zx[g][(img * steps + t) * u], u, &from[img * u]);
        z[g] = convolve(h, h_part, 1, &layer.weights[offset + g * rows * u + in_c * u], nullptr, Activation::none,
                        from.data());
      }
      for (uint64_t img = 0; img < n; ++img)
        for (uint64_t j = 0; j < u; ++j) {
          const uint64_t e = img * u + j;
          const double i = sigmoid(z[0][e]), f = sigmoid(z[1][e]), g = std::tanh(z[2][e]), o = sigmoid(z[3][e]);
          const double fc = f * c[e], ig = i * g;
          c[e] = fc + ig;
          const auto ht = static_cast<float>(o * std::tanh(c[e]));
          double& top = cell_max[l * steps + t];
          top = std::max({top, std::abs(c[e]), std::abs(fc), std::abs(ig)});
          next[(img * steps + t) * u + j] = ht;
          h[img * u + j] = ht;  // h_{t-1} of the next step
        }
    }
    seq = std::move(next);
    offset += 4 * rows * u;
    in_c = u;
  }
  return recurrent_output(std::move(seq), steps);
}

// Stacked GRU layers over a [steps, c] sequence (graph.h: gates r, z, n, PyTorch's formula):
// r = sigmoid(W_r [x_t, h] + b_r), z = sigmoid(W_z [x_t, h] + b_z), a = W_n,x x_t + b_in,
// b = W_n,h h + b_hn, n = tanh(a + r b), h_t = (1 - z) n + z h, h_{-1} = 0. n_max: per stacked
// layer and step, the largest |a| and |r b|, then the largest |b| (reference.h).
Data LayerRun::gru(std::vector<double>& n_max) const {
  const uint64_t steps = recurrent_checks("a gru", 3), u = layer.units, stack = layer.stack;
  n_max.assign(stack * steps * 2, 0.0);

  Data seq = *x[0];
  uint64_t in_c = in[0]->c, offset = 0;
  const uint64_t n = batch();
  const auto bias = [&](uint64_t l, uint64_t k) { return layer.bias.empty() ? nullptr : &layer.bias[(l * 4 + k) * u]; };
  for (uint64_t l = 0; l < stack; ++l) {
    const uint64_t rows = in_c + u;
    const float* w[3] = {&layer.weights[offset], &layer.weights[offset + rows * u], &layer.weights[offset + 2 * rows * u]};
    // The x parts of every step first (as in lstm above): r and z continue over h; a is n's x part.
    const ConvGeometry x_part{n * steps, 1, in_c, 1, 1, 1, 0, n * steps, 1, u};
    const ConvGeometry h_part{n, 1, u, 1, 1, 1, 0, n, 1, u};
    Data zx[3];
    for (uint64_t g = 0; g < 3; ++g) zx[g] = convolve(seq, x_part, 1, w[g], bias(l, g), Activation::none);
    Data next(n * steps * u), h(n * u, 0.0f), z[2], from(n * u), hb;
    for (uint64_t t = 0; t < steps; ++t) {
      for (uint64_t g = 0; g < 2; ++g) {
        for (uint64_t img = 0; img < n; ++img) std::copy_n(&zx[g][(img * steps + t) * u], u, &from[img * u]);
        z[g] = convolve(h, h_part, 1, w[g] + in_c * u, nullptr, Activation::none, from.data());
      }
      hb = convolve(h, h_part, 1, w[2] + in_c * u, bias(l, 3), Activation::none);
      double* top = &n_max[(l * steps + t) * 2];
      for (uint64_t img = 0; img < n; ++img)
        for (uint64_t j = 0; j < u; ++j) {
          const uint64_t e = img * u + j;
          const double r = sigmoid(z[0][e]), zz = sigmoid(z[1][e]), a = zx[2][(img * steps + t) * u + j];
          const double rb = r * hb[e], nn = std::tanh(a + rb);
          const auto ht = static_cast<float>((1 - zz) * nn + zz * h[e]);
          top[0] = std::max({top[0], std::abs(a), std::abs(rb)});
          top[1] = std::max(top[1], std::abs(double{hb[e]}));
          next[(img * steps + t) * u + j] = ht;
        }
      for (uint64_t img = 0; img < n; ++img) std::copy_n(&next[(img * steps + t) * u], u, &h[img * u]);
    }
    seq = std::move(next);
    offset += 3 * rows * u;
    in_c = u;
  }
  return recurrent_output(std::move(seq), steps);
}

}  // namespace

FloatRun run_float_detailed(const Model& model, const std::function<void(size_t layer, bool done)>& around) {
  if (model.inputs.empty()) throw InputError(model.source + ": the model has no input");
  for (const ModelInput& input : model.inputs)
    if (input.data.size() != model.batch * input.shape.elements())
      throw InputError(fmt::format("{}: input {}: {} values, expected {} (batch {} x {})", model.source, input.name,
                                   input.data.size(), model.batch * input.shape.elements(), model.batch,
                                   dims(input.shape)));
  FloatRun run;
  run.outputs.resize(model.layers.size());
  run.lstm_cell_max.resize(model.layers.size());
  for (size_t li = 0; li < model.layers.size(); ++li) {
    if (around) around(li, false);
    const Layer& layer = model.layers[li];
    LayerRun r{model, layer, {}, {}};
    for (int entry : layer.inputs) {
      r.in.push_back(&source_shape(model, layer, entry));
      r.x.push_back(is_model_input(entry) ? &model.inputs[static_cast<size_t>(model_input_index(entry))].data
                                          : &run.outputs[static_cast<size_t>(entry)]);
    }
    Data& out = run.outputs[li];
    switch (layer.type) {
      case LayerType::dense: out = r.dense(); break;
      case LayerType::conv2d: out = r.conv2d(); break;
      case LayerType::max_pool: out = r.pool(false); break;
      case LayerType::avg_pool: out = r.pool(true); break;
      case LayerType::add: out = r.elementwise(false); break;
      case LayerType::mul: out = r.elementwise(true); break;
      case LayerType::lstm: out = r.lstm(run.lstm_cell_max[li]); break;
      case LayerType::gru: out = r.gru(run.lstm_cell_max[li]); break;
      case LayerType::flatten:
        r.expect_inputs(1);
        r.expect_out(1, 1, r.in[0]->elements());
        out = *r.x[0];  // NHWC data is already in (h, w, c) order
        break;
      case LayerType::concat: out = r.concat(); break;
      case LayerType::activation:
        r.expect_inputs(1);
        r.expect_out(r.in[0]->h, r.in[0]->w, r.in[0]->c);
        out.resize(r.x[0]->size());
        for (size_t i = 0; i < out.size(); ++i) out[i] = activate(layer.activation, (*r.x[0])[i]);
        break;
    }
    if (around) around(li, true);
  }
  return run;
}

std::vector<std::vector<float>> run_float(const Model& model) { return run_float_detailed(model).outputs; }

QuantError quant_error(const std::vector<float>& reference, const std::vector<int8_t>& golden, double scale) {
  return quant_error(reference, std::vector<int32_t>(golden.begin(), golden.end()), scale);
}

std::vector<int32_t> tensor_values(const std::vector<int8_t>& data, int bits) {
  if (bits != 16) return {data.begin(), data.end()};
  if (data.size() % 2) throw std::logic_error("tensor_values: a 16-bit tensor of an odd number of bytes");
  const size_t n = data.size() / 2;
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t{static_cast<uint8_t>(data[i])} + 256 * int32_t{data[n + i]};
  return v;
}

QuantError quant_error(const std::vector<float>& reference, const std::vector<int32_t>& golden, double scale) {
  if (reference.size() != golden.size())
    throw InputError(fmt::format("quantization error: {} float values against {} quantized", reference.size(),
                                 golden.size()));
  QuantError e;
  double sum_sq = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double d = std::abs(golden[i] * scale - double{reference[i]});
    e.max_abs = std::max(e.max_abs, d);
    e.max_float = std::max(e.max_float, std::abs(double{reference[i]}));
    sum_sq += d * d;
  }
  e.relative = e.max_float > 0 ? e.max_abs / e.max_float : 0.0;
  e.rms = reference.empty() ? 0.0 : std::sqrt(sum_sq / double(reference.size()));
  return e;
}

}  // namespace tpusim::compiler
