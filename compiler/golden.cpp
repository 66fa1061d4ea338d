// The golden reference executor: the QGraph in plain loops with the machine's integer semantics
// (docs/isa.md: matmul's int32 wrap-around accumulation, act's per-tensor or per-column
// requantization, vec, pool). The scalar arithmetic (rounding half away from zero, activation
// functions with saturation) is the simulator's own, sim::round_half_away_shift and
// sim::apply_func, so it is defined once. Every program the back end emits must reproduce these
// bytes.
//
// Speed (CNN1's golden run is 175 GMAC per batch): an int8 matmul's products go through the int8
// GEMM of sim/gemm.h, an exact int32 wrap-around product checked bit for bit against the plainest
// loops (gemm_reference, tests/sim/gemm_test.cpp); GoldenOptions::plain keeps every sum in this
// file's own loops, and tests hold the two equal. Output positions are cut into blocks spread
// over sim::parallel_for's threads, each block computed whole by one thread: the bytes do not
// depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "compiler/reference.h"
#include "isa/error.h"
#include "sim/gemm.h"
#include "sim/parallel.h"
#include "sim/state.h"
#include "sim/target_clones.h"

namespace tpusim::compiler {
namespace {

using Tensors = std::vector<std::vector<int8_t>>;

// The inner loops, compiled for x86-64-v3 (AVX2, FMA) and baseline x86-64, chosen when the
// program loads (sim/target_clones.h).

// a[j] += v x row[j] for j < n, in int32 with wrap-around.
TPUSIM_CLONES_V3 void multiply_add(uint32_t* __restrict a, const int8_t* __restrict row, int32_t v, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) a[j] += static_cast<uint32_t>(v * int32_t{row[j]});
}

// a[j] += v x row[j] for j < n, in int32 with wrap-around: 16-bit weights (|v x row[j]| <= 2^30).
TPUSIM_CLONES_V3 void multiply_add_wide(uint32_t* __restrict a, const int32_t* __restrict row, int32_t v, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) a[j] += static_cast<uint32_t>(v * row[j]);
}

// A view resolved against its tensor: which pixels of each sample it covers.
struct Span {
  int8_t* data;          // the tensor's data
  uint64_t pixels;       // pixels per sample in the tensor
  uint64_t c;            // channels
  uint64_t first, count;  // the view's pixels
  uint64_t high = 0;      // a 16-bit tensor: elements from a low byte to its high byte; 0: int8

  int8_t* at(uint64_t sample, uint64_t p) const { return data + ((sample * pixels) + first + p) * c; }
  // Element ch of (sample, p) as the machine reads it: int8, or int16 from the two planes.
  int32_t value(const int8_t* e) const {
    return high ? int32_t{static_cast<uint8_t>(*e)} + 256 * int32_t{e[high]} : int32_t{*e};
  }
  // Stores v (already saturated to the tensor's width).
  void store(int8_t* e, int32_t v) const {
    *e = static_cast<int8_t>(static_cast<uint8_t>(v));
    if (high) e[high] = static_cast<int8_t>(static_cast<uint16_t>(v) >> 8);
  }
  int32_t saturate(isa::Func f, int64_t y, int64_t clip) const {
    return high ? sim::apply_func16(f, y, clip) : sim::apply_func(f, y, clip, false);
  }
};

class Golden {
 public:
  Golden(const QGraph& g, const GoldenOptions& o) : g_(g), o_(o), t_(g.tensors.size()) {
    for (size_t i = 0; i < g.tensors.size(); ++i)
      t_[i].assign(g.batch * g.tensors[i].shape.elements() * (g.tensors[i].bits == 16 ? 2 : 1), 0);
    if (g.input_data.size() != g.inputs.size()) fail("graph", "input data for {} of {} inputs", g.input_data.size(), g.inputs.size());
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      auto& d = t_.at(tensor_index(g.inputs[i], "graph"));
      if (g.input_data[i].size() != d.size()) fail("graph", "input {} has {} values, expected {}", i, g.input_data[i].size(), d.size());
      d = g.input_data[i];
    }
    if (o.output_only) {  // the last op that reads or writes each tensor, after which it goes
      last_use_.assign(g.tensors.size(), 0);
      for (size_t i = 0; i < g.ops.size(); ++i)
        std::visit([&](const auto& op) { for_views(op, [&](const View& v) { note_use(v.tensor, i); }); }, g.ops[i]);
      // (listed per op: a scan of every tensor after every op grew as ops x tensors)
      last_of_.resize(g.ops.size());
      for (size_t t = 0; t < g.tensors.size() && !g.ops.empty(); ++t) last_of_[last_use_[t]].push_back(t);
    }
  }

  Tensors run() && {
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      where_ = fmt::format("op {} ({})", i, i < g_.op_layer.size() ? g_.op_layer[i] : std::string("?"));
      std::visit([this](const auto& op) { exec(op); }, g_.ops[i]);
      if (o_.output_only)
        for (const size_t t : last_of_[i])
          if (static_cast<int>(t) != g_.output) std::vector<int8_t>().swap(t_[t]);
    }
    if (o_.output_only)  // tensors no op uses (the inputs of an empty graph), all but the output
      for (size_t t = 0; t < t_.size(); ++t)
        if (static_cast<int>(t) != g_.output) std::vector<int8_t>().swap(t_[t]);
    return std::move(t_);
  }

 private:
  const QGraph& g_;
  GoldenOptions o_;
  Tensors t_;
  std::string where_;
  std::vector<size_t> last_use_;  // output_only: index of the last op using each tensor
  std::vector<std::vector<size_t>> last_of_;  // output_only: the tensors each op uses last

  void note_use(int t, size_t op) {
    if (t >= 0 && static_cast<size_t>(t) < last_use_.size()) last_use_[static_cast<size_t>(t)] = op;
  }
  template <typename F>
  static void for_views(const MatmulOp& op, F f) {
    for (const View& v : op.inputs) f(v);
    f(op.output);
  }
  template <typename F>
  static void for_views(const PoolOp& op, F f) {
    f(op.input);
    f(op.output);
  }
  template <typename F>
  static void for_views(const VectorOp& op, F f) {
    f(op.a);
    f(op.b);
    f(op.output);
  }

  template <typename... A>
  [[noreturn]] void fail(const std::string& where, fmt::format_string<A...> f, A&&... a) const {
    throw InputError("quantized graph: " + where + ": " + fmt::format(f, std::forward<A>(a)...));
  }

  size_t tensor_index(int t, const std::string& where) const {
    if (t < 0 || static_cast<size_t>(t) >= g_.tensors.size()) fail(where, "tensor {} does not exist", t);
    return static_cast<size_t>(t);
  }

  Span span(const View& v, bool channels_from = false) {
    const size_t i = tensor_index(v.tensor, where_);
    if (v.channel0 && !channels_from) fail(where_, "only a matmul's output view may start at a channel ({})", v.channel0);
    const Shape& s = g_.tensors[i].shape;
    const uint64_t count = v.pixels ? v.pixels : s.pixels() - std::min(v.pixel0, s.pixels());
    if (v.pixel0 + count > s.pixels() || count == 0)
      fail(where_, "view of pixels {}..{} outside tensor {} ({} pixels)", v.pixel0, v.pixel0 + count,
           g_.tensors[i].name, s.pixels());
    const int bits = g_.tensors[i].bits;
    if (bits != 8 && bits != 16) fail(where_, "tensor {} has {} bits per element: expected 8 or 16", g_.tensors[i].name, bits);
    return {t_[i].data(), s.pixels(), s.c, v.pixel0, count, bits == 16 ? g_.batch * s.elements() : 0};
  }

  void exec(const MatmulOp& op);
  void exec(const PoolOp& op);
  void exec(const VectorOp& op);
  void check(const MatmulOp& op, const std::vector<Span>& in, const Span& out) const;
};

void Golden::check(const MatmulOp& op, const std::vector<Span>& in, const Span& out) const {
  uint64_t k = 0;
  for (const Span& s : in) k += s.c;
  if (in.empty() || k != op.k) fail(where_, "inputs have {} channels, K is {}", k, op.k);
  // (A concat written in place: the output view is channels [channel0, channel0 + N) of the joined tensor;
  // otherwise the output is the whole tensor, from channel 0.)
  const uint64_t c0 = op.output.channel0;
  if (c0 + op.n > out.c || (!g_.concat_inplace && (c0 != 0 || out.c != op.n)))
    fail(where_, "output has {} channels from channel {}, N is {}", out.c - std::min(c0, out.c), c0, op.n);
  if (op.weights.size() != op.kernel_h * op.kernel_w * op.k * op.n)
    fail(where_, "{} weights, expected {} x {} x {} x {}", op.weights.size(), op.kernel_h, op.kernel_w, op.k, op.n);
  if (op.wide_weights() && op.weights_hi.size() != op.weights.size())
    fail(where_, "{} high weight bytes for {} weights", op.weights_hi.size(), op.weights.size());
  if (!op.bias.empty() && op.bias.size() != op.n) fail(where_, "{} biases for {} columns", op.bias.size(), op.n);
  if ((op.mult.size() != 1 && op.mult.size() != op.n) || op.shift.size() != op.mult.size())
    fail(where_, "{} multipliers and {} shifts for {} columns", op.mult.size(), op.shift.size(), op.n);
  for (uint8_t s : op.shift)
    if (s > 63) fail(where_, "shift {} above 63", s);
}

// For every output position (sample, pixel): acc[j] = sum over taps and channels k of
// x[k] w[row][j] in int32 with wrap-around, where a tap is one input (a 1 x 1 kernel over views)
// or one kernel position (a convolution, zero outside the map); then per column
// y = round_half_away((acc + bias) x mult / 2^shift) in 64 bits and func with saturation (act;
// per tensor when bias is empty and mult has one entry, which is the same arithmetic with
// bias 0). Positions go in blocks that share each weight row while it is in cache.
void Golden::exec(const MatmulOp& op) {
  const uint64_t c0 = op.output.channel0;
  std::vector<Span> in;
  for (const View& v : op.inputs) in.push_back(span(v));
  const Span out = span(op.output, true);
  check(op, in, out);
  // 16-bit inputs (setcfg mm_in_hi on the machine): each element read from its two byte planes.
  const bool wide_in = std::any_of(in.begin(), in.end(), [](const Span& s) { return s.high != 0; });
  const uint64_t n = op.n, k = op.k, kh = op.kernel_h, kw = op.kernel_w, st = op.stride, pad = op.pad;
  const bool pointwise = kh == 1 && kw == 1 && st == 1 && pad == 0;
  std::vector<uint64_t> tap_c, tap_row;  // channels and first weight row of each tap
  std::vector<const Span*> tap_in;       // the input each tap reads
  if (pointwise) {
    for (const Span& s : in) {
      if (s.count != out.count) fail(where_, "an input view has {} pixels, the output {}", s.count, out.count);
      tap_row.push_back(tap_c.empty() ? 0 : tap_row.back() + tap_c.back());
      tap_c.push_back(s.c);
      tap_in.push_back(&s);
    }
  } else {
    if (in.size() != 1) fail(where_, "a {} x {} kernel needs exactly one input", kh, kw);
    for (uint64_t t = 0; t < kh * kw; ++t) tap_c.push_back(k), tap_row.push_back(t * k), tap_in.push_back(&in[0]);
  }
  const Shape& is = g_.tensors[static_cast<size_t>(op.inputs[0].tensor)].shape;
  const Shape& os = g_.tensors[static_cast<size_t>(op.output.tensor)].shape;
  if (!pointwise && (in[0].count != is.pixels() || out.count != os.pixels() || st == 0 || is.h + 2 * pad < kh ||
                     is.w + 2 * pad < kw || (is.h + 2 * pad - kh) / st + 1 != os.h ||
                     (is.w + 2 * pad - kw) / st + 1 != os.w))
    fail(where_, "a {} x {} kernel (stride {}, pad {}) does not map the {} x {} input onto the {} x {} output", kh,
         kw, st, pad, is.h, is.w, os.h, os.w);
  // The pixel tap t of output position (img, p) reads, or null (padding).
  const auto source = [&](uint64_t img, uint64_t p, uint64_t t) -> const int8_t* {
    if (pointwise) return in[t].at(img, p);
    const uint64_t iy = p / os.w * st + t / kw, ix = p % os.w * st + t % kw;  // padded coordinates
    if (iy < pad || ix < pad || iy - pad >= is.h || ix - pad >= is.w) return nullptr;
    return in[0].at(img, (iy - pad) * is.w + ix - pad);
  };

  // 16-bit weights (both byte planes) as integers; int8 weights are read as they are.
  const bool gemm = !o_.plain && !op.wide_weights() && !wide_in;
  std::vector<int32_t> wide;
  if (op.wide_weights()) {
    wide.resize(op.weights.size());
    for (uint64_t i = 0; i < wide.size(); ++i) wide[i] = op.weight(i);
  }
  // The GEMM path: every tap's weight rows at once ([rows][n]: the taps' rows are consecutive),
  // packed once; a position's input row is its taps' inputs side by side (zero for padding).
  const uint64_t all_rows = tap_c.empty() ? 0 : tap_row.back() + tap_c.back();
  const sim::PackedWeights packed =
      gemm ? sim::PackedWeights(reinterpret_cast<const uint8_t*>(op.weights.data()), n, all_rows, n, false)
           : sim::PackedWeights();

  // Blocks of output positions: the plain loops share each weight row over a block while it is in
  // cache; the GEMM takes a block's input rows as one matrix.
  const uint64_t block = gemm ? 64 : 16;
  const uint64_t positions = g_.batch * out.count, blocks = (positions + block - 1) / block;
  // Positions [p0, p0 + count) into acc ([count][n], int32 with wrap-around).
  const auto plain_block = [&](uint64_t p0, uint64_t count, uint32_t* acc) {
    std::fill(acc, acc + count * n, 0u);
    std::vector<const int8_t*> px(count);
    for (uint64_t t = 0; t < tap_c.size(); ++t) {
      for (uint64_t i = 0; i < count; ++i) px[i] = source((p0 + i) / out.count, (p0 + i) % out.count, t);
      for (uint64_t c = 0; c < tap_c[t]; ++c) {
        const uint64_t w0 = (tap_row[t] + c) * n;
        for (uint64_t i = 0; i < count; ++i) {
          const int32_t v = px[i] ? tap_in[t]->value(px[i] + c) : 0;
          if (v == 0) continue;
          if (wide.empty()) multiply_add(&acc[i * n], &op.weights[w0], v, n);
          else multiply_add_wide(&acc[i * n], &wide[w0], v, n);
        }
      }
    }
  };
  const auto gemm_block = [&](uint64_t p0, uint64_t count, uint32_t* acc, std::vector<uint8_t>& rows) {
    rows.resize(count * all_rows);
    for (uint64_t i = 0; i < count; ++i)
      for (uint64_t t = 0; t < tap_c.size(); ++t) {
        const int8_t* x = source((p0 + i) / out.count, (p0 + i) % out.count, t);
        uint8_t* row = &rows[i * all_rows + tap_row[t]];
        if (x) std::memcpy(row, x, tap_c[t]);
        else std::memset(row, 0, tap_c[t]);  // padding
      }
    packed.multiply(rows.data(), all_rows, false, count, reinterpret_cast<int32_t*>(acc), n, false);
  };
  sim::parallel_for(blocks, [&](uint64_t b) {
    thread_local std::vector<uint32_t> acc;
    thread_local std::vector<uint8_t> rows;
    const uint64_t p0 = b * block, count = std::min(block, positions - p0);
    acc.resize(count * n);
    if (gemm) gemm_block(p0, count, acc.data(), rows);
    else plain_block(p0, count, acc.data());
    // (the op's fields in locals: the int8 stores could alias them, so they would be reloaded)
    const int32_t* bias = op.bias.empty() ? nullptr : op.bias.data();
    const uint16_t* mult = op.mult.data();
    const uint8_t* shift = op.shift.data();
    const bool per_column = op.mult.size() != 1;
    const isa::Func func = op.func;
    const int64_t clip = op.clip;
    for (uint64_t i = 0; i < count; ++i) {
      int8_t* o = out.at((p0 + i) / out.count, (p0 + i) % out.count) + c0;
      const uint32_t* row = &acc[i * n];
      for (uint64_t j = 0; j < n; ++j) {
        const size_t q = per_column ? j : 0;
        const int64_t x = static_cast<int32_t>(row[j]) + int64_t{bias ? bias[j] : 0};
        const int64_t y = sim::round_half_away_shift(x * mult[q], shift[q]);
        out.store(o + j, out.saturate(func, y, clip));
      }
    }
  });
}

// max, or the window's sum divided by window^2 rounded half away from zero; int8 throughout.
void Golden::exec(const PoolOp& op) {
  const Span in = span(op.input), out = span(op.output);
  if (in.high || out.high) fail(where_, "a pool reads or writes a 16-bit tensor: pools are int8");
  const Shape& is = g_.tensors[static_cast<size_t>(op.input.tensor)].shape;
  const Shape& os = g_.tensors[static_cast<size_t>(op.output.tensor)].shape;
  const uint64_t win = op.window, st = op.stride, c = is.c;
  if (in.count != is.pixels() || out.count != os.pixels() || win == 0 || st == 0 || is.h < win || is.w < win ||
      (is.h - win) / st + 1 != os.h || (is.w - win) / st + 1 != os.w || os.c != c)
    fail(where_, "a {} x {} window (stride {}) does not map the {} x {} x {} input onto the {} x {} x {} output",
         win, win, st, is.h, is.w, c, os.h, os.w, os.c);
  const auto size = static_cast<int64_t>(win * win);
  const bool avg = op.kind == isa::PoolKind::avg;
  std::vector<const int8_t*> window(win * win);
  std::vector<int64_t> v(c);
  for (uint64_t img = 0; img < g_.batch; ++img)
    for (uint64_t oy = 0; oy < os.h; ++oy)
      for (uint64_t ox = 0; ox < os.w; ++ox) {
        for (uint64_t r = 0; r < win; ++r)
          for (uint64_t q = 0; q < win; ++q) window[r * win + q] = in.at(img, (oy * st + r) * is.w + ox * st + q);
        std::fill(v.begin(), v.end(), avg ? 0 : -128);
        for (const int8_t* e : window)
          for (uint64_t ch = 0; ch < c; ++ch) v[ch] = avg ? v[ch] + e[ch] : std::max(v[ch], int64_t{e[ch]});
        int8_t* o = out.at(img, oy * os.w + ox);
        for (uint64_t ch = 0; ch < c; ++ch) {
          int64_t x = v[ch];
          if (avg) {
            const int64_t q = (2 * (x < 0 ? -x : x) + size) / (2 * size);  // |x| / size, half away
            x = x < 0 ? -q : q;
          }
          o[ch] = static_cast<int8_t>(x);
        }
      }
}

// r = op(a, b) on int8 or int16 values in int32 (|a b| <= 2^30), y = round_half_away(r x mult /
// 2^shift) in 64 bits, func, saturated to int8 or int16.
void Golden::exec(const VectorOp& op) {
  const Span a = span(op.a), out = span(op.output);
  const Span b = op.op == isa::VecOp::pass ? a : span(op.b);
  if (a.c != out.c || b.c != out.c || a.count != out.count || b.count != out.count)
    fail(where_, "operands of {} x {}, {} x {} and output {} x {} differ", a.count, a.c, b.count, b.c, out.count,
         out.c);
  if (op.shift > 63) fail(where_, "shift {} above 63", op.shift);
  for (uint64_t img = 0; img < g_.batch; ++img)
    for (uint64_t p = 0; p < out.count; ++p) {
      const int8_t *x = a.at(img, p), *y = b.at(img, p);
      int8_t* o = out.at(img, p);
      for (uint64_t ch = 0; ch < out.c; ++ch) {
        const int32_t r = sim::vec_combine(op.op, a.value(x + ch), b.value(y + ch));
        const int64_t q = sim::round_half_away_shift(int64_t{r} * op.mult, op.shift);
        out.store(o + ch, out.saturate(op.func, q, 127));
      }
    }
}

}  // namespace

std::vector<std::vector<int8_t>> run_golden(const QGraph& graph, const GoldenOptions& options) {
  return Golden(graph, options).run();
}

}  // namespace tpusim::compiler
