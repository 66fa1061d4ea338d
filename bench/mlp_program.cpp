// MLP programs for the default tpu-v1 machine, scheduled as a TPU compiler would.
//
// LAYOUT
//   host memory   x: batch x widths[0] int8 at 0 (row-major, random from seed), y: batch x
//                 widths.back() int8 after it (4 KiB aligned)
//   weight image  layer after layer; inside a layer of K inputs and N outputs, the
//                 ceil(K/256) x ceil(N/256) tiles in the order the matmuls use them: output tile
//                 column n, then input tile k (tile index n * KT + k). Each tile is row-major
//                 256 x 256 bytes: byte r * 256 + c = W[k*256 + r][n*256 + c]. Cells outside K x N
//                 (a partial last tile) are zero, every other byte random (isa::fill_random).
//   UB            two activation regions (act_a, act_b) of batch x ceil(max width / 256) rows;
//                 layer l reads one and writes the other. A layer's 256-column slice s lives at
//                 region + s * batch.
//   accumulators  two blocks of batch rows (acc_a, acc_b); consecutive output tile columns
//                 alternate between them, so the matmuls of column n+1 overlap the act of column n
//                 (the hardware interlock makes a matmul wait for an act still reading its block).
//
// SCHEDULE
//   rw for tiles 0 .. kPrefetch-1; the input DMA (one rhm per 256-column slice of x, with
//   setcfg host_stride / host_row_bytes). Then, layer by layer: the rw of the layer's first tile
//   + kPrefetch, then a sync (layer 0: units=host, the input DMA; later layers: units=act, since
//   the layer's input rows are the previous layer's act outputs: RAW through the UB), and for
//   each output tile column n, for each input tile k: `rw` of the tile kPrefetch ahead in the
//   global tile order (so the next layer's first tiles are requested before the sync that ends
//   this layer), `matmul ub=<slice k> acc=<block> rows=batch switch` (+ accumulate for k > 0);
//   then `act` (relu; identity for the last layer, its logits) of the block into slice n of the
//   output region. At the end: sync units=act, whm of y (per 256-column slice), halt.
//
// PREFETCH DISTANCE
//   The rw of tile t + kPrefetch is issued before the matmul of tile t. An rw holds a FIFO slot
//   from its request until its tile shifts into the shadow slot, i.e. until the matmul of the
//   tile before it has switched; matmul t-1 is issued before rw t + kPrefetch, and once it has
//   switched the FIFO holds at most tiles t+1 .. t+kPrefetch-1, so the rw always proceeds
//   eventually: any kPrefetch <= 4 (the FIFO depth) is deadlock-free whatever the queue depths.
//   We use 4, the most the FIFO plus the shadow slot can hold: 5 tiles are on their way before
//   the first matmul (3 saves nothing measurable on weight-bound MLPs: the memory always has a
//   request queued; 4 is 0.2% faster on MLP0, it hides a little more of the input DMA).
#include "bench/mlp_program.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "isa/assembler.h"

namespace tpusim::bench {

namespace {

using isa::Field;
using isa::Instruction;
using isa::Opcode;

constexpr uint64_t kArray = 256;  // array rows = columns = UB row bytes (tpu-v1)
constexpr uint64_t kTileBytes = kArray * kArray;
constexpr uint64_t kUbRows = 25165824 / kArray;  // 24 MiB
constexpr uint64_t kAccRows = 4096;
#ifndef MLP_PREFETCH
#define MLP_PREFETCH 4  // -DMLP_PREFETCH=3 to compare
#endif
constexpr uint64_t kPrefetch =
    MLP_PREFETCH;  // tiles requested ahead of the matmul using them (<= 4, see above)

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Requantization shift keeping a layer's pre-activation standard deviation near 64 (so the ReLU
// outputs use the int8 range without saturating much): a sum of K products of inputs with rms
// `in_rms` (about 74 for the random int8 input, about 45 after a ReLU of values with standard
// deviation 64) and random int8 weights (rms about 74) has a standard deviation of about
// in_rms x 74 x sqrt(K). For K = 2048 after a ReLU that is shift 11 (8 + log2(K)/2 would make
// the values shrink about 4x per layer).
uint64_t layer_shift(uint64_t k, bool first_layer) {
  const double in_rms = first_layer ? 74.0 : 45.0;
  return static_cast<uint64_t>(
      std::lround(std::log2(in_rms * 74.0 * std::sqrt(static_cast<double>(k)) / 64.0)));
}

class Builder {
 public:
  explicit Builder(isa::Program& p) : p_(p) {}
  Instruction& add(Opcode op) { return p_.code.emplace_back(isa::make_instruction(op)); }
  void tag(uint64_t t) { add(Opcode::debug_tag)[Field::tag] = t; }
  void sync(uint64_t units) { add(Opcode::sync)[Field::units] = units; }
  void setcfg(isa::ConfigReg reg, uint64_t value) {
    Instruction& in = add(Opcode::set_config);
    in[Field::reg] = static_cast<uint64_t>(reg);
    in[Field::value] = value;
  }
  void rw(uint64_t waddr) {
    Instruction& in = add(Opcode::read_weights);
    in[Field::waddr] = waddr;
    in[Field::tiles] = 1;
  }
  // One host DMA per 256-column slice of a batch x width matrix at `host` (row stride = width).
  void host_dma(Opcode op, uint64_t host, uint64_t ub, uint64_t batch, uint64_t width) {
    setcfg(isa::ConfigReg::host_stride, width);
    uint64_t row_bytes = 0;
    for (uint64_t s = 0; s * kArray < width; ++s) {
      const uint64_t bytes = std::min(kArray, width - s * kArray);
      if (bytes != row_bytes) setcfg(isa::ConfigReg::host_row_bytes, row_bytes = bytes);
      Instruction& in = add(op);
      in[Field::host] = host + s * kArray;
      in[Field::ub] = ub + s * batch;
      in[Field::rows] = batch;
    }
  }

 private:
  isa::Program& p_;
};

constexpr uint64_t kSyncHost = 1, kSyncAct = 8;  // bits of the sync units mask

}  // namespace

uint64_t mlp_weights(const MlpSpec& spec) {
  uint64_t n = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) n += spec.widths[l] * spec.widths[l + 1];
  return n;
}

isa::Program make_mlp_program(const MlpSpec& spec) {
  const auto& w = spec.widths;
  const uint64_t B = spec.batch;
  if (w.size() < 2) throw std::invalid_argument("an MLP needs an input width and at least one layer");
  if (std::any_of(w.begin(), w.end(), [](uint64_t x) { return x == 0; }))
    throw std::invalid_argument("MLP widths must be positive");
  if (B == 0 || 2 * B > kAccRows)
    throw std::invalid_argument("batch must be 1..2048 (two accumulator blocks of batch rows)");
  const uint64_t slices = div_up(*std::max_element(w.begin(), w.end()), kArray);
  const uint64_t region_rows = B * slices;
  if (2 * region_rows > kUbRows)
    throw std::invalid_argument("two activation regions of batch x ceil(width/256) rows exceed the UB");
  const size_t layers = w.size() - 1;

  isa::Program p;
  p.model = spec.name;
  p.arch = {{"name", "tpu-v1"}};
  p.meta["batch"] = B;
  p.meta["layers"] = layers;
  p.meta["widths"] = w;
  p.meta["weights"] = mlp_weights(spec);
  p.meta["compiler"] = "bench/mlp_program.cpp";

  // Weight image: random, then the cells outside each layer's K x N zeroed.
  uint64_t total_tiles = 0;
  std::vector<uint64_t> first_tile(layers + 1);
  for (size_t l = 0; l < layers; ++l) {
    first_tile[l] = total_tiles;
    total_tiles += div_up(w[l], kArray) * div_up(w[l + 1], kArray);
  }
  first_tile[layers] = total_tiles;
  p.weights.resize(total_tiles * kTileBytes);
  isa::fill_random(p.weights, spec.seed * 2 + 1);
  for (size_t l = 0; l < layers; ++l) {
    const uint64_t K = w[l], N = w[l + 1], KT = div_up(K, kArray), NT = div_up(N, kArray);
    if (K % kArray == 0 && N % kArray == 0) continue;
    for (uint64_t n = 0; n < NT; ++n)
      for (uint64_t k = 0; k < KT; ++k) {
        uint8_t* tile = p.weights.data() + (first_tile[l] + n * KT + k) * kTileBytes;
        const uint64_t rows = std::min(kArray, K - k * kArray), cols = std::min(kArray, N - n * kArray);
        for (uint64_t r = 0; r < kArray; ++r)
          std::fill(tile + r * kArray + (r < rows ? cols : 0), tile + (r + 1) * kArray, uint8_t{0});
      }
  }

  // Host regions.
  isa::HostRegion x;
  x.name = "x";
  x.host_addr = 0;
  x.bytes = B * w.front();
  x.shape = {B, w.front()};
  x.init.resize(x.bytes);
  isa::fill_random(x.init, spec.seed * 2);
  isa::HostRegion y;
  y.name = "y";
  y.output = true;
  y.host_addr = div_up(x.bytes, 4096) * 4096;
  y.bytes = B * w.back();
  y.shape = {B, w.back()};
  const uint64_t y_addr = y.host_addr;
  p.host_regions = {std::move(x), std::move(y)};

  // Symbols, in canonical order (space, address, name).
  const uint64_t region[2] = {0, region_rows};
  p.symbols.push_back({"acc_a", "acc", 0, B});
  p.symbols.push_back({"acc_b", "acc", B, B});
  p.symbols.push_back({"act_a", "ub", region[0], region_rows});
  p.symbols.push_back({"act_b", "ub", region[1], region_rows});
  for (size_t l = 0; l < layers; ++l)
    p.symbols.push_back({"w" + std::to_string(l), "weights", first_tile[l] * kTileBytes,
                         (first_tile[l + 1] - first_tile[l]) * kTileBytes});
  std::sort(p.symbols.begin(), p.symbols.end(), isa::symbol_order);

  Builder b(p);
  b.tag(0);
  const uint64_t ahead = std::min(kPrefetch, total_tiles);
  for (uint64_t t = 0; t < ahead; ++t) b.rw(t * kTileBytes);
  b.host_dma(Opcode::read_host, 0, region[0], B, w.front());

  uint64_t tile = 0, column = 0;
  for (size_t l = 0; l < layers; ++l) {
    const uint64_t K = w[l], N = w[l + 1], KT = div_up(K, kArray), NT = div_up(N, kArray);
    const uint64_t in_base = region[l % 2], out_base = region[(l + 1) % 2];
    const bool last = l + 1 == layers;
    b.tag(l + 1);
    // The rw belonging to the layer's first matmul goes before the sync, which holds all issue.
    if (tile + kPrefetch < total_tiles) b.rw((tile + kPrefetch) * kTileBytes);
    b.sync(l == 0 ? kSyncHost : kSyncAct);  // layer 0: the input DMA; later: the previous acts
    for (uint64_t n = 0; n < NT; ++n, ++column) {
      const uint64_t acc = (column % 2) * B;
      for (uint64_t k = 0; k < KT; ++k, ++tile) {
        if (k + n > 0 && tile + kPrefetch < total_tiles) b.rw((tile + kPrefetch) * kTileBytes);
        Instruction& mm = b.add(Opcode::matmul);
        mm[Field::ub] = in_base + k * B;
        mm[Field::acc] = acc;
        mm[Field::rows] = B;
        mm[Field::switch_weights] = 1;
        mm[Field::accumulate] = k > 0;
      }
      Instruction& act = b.add(Opcode::activate);
      act[Field::func] = static_cast<uint64_t>(last ? isa::Func::identity : isa::Func::relu);
      act[Field::acc] = acc;
      act[Field::ub] = out_base + n * B;
      act[Field::rows] = B;
      act[Field::mult] = 1;
      act[Field::shift] = layer_shift(K, l == 0);
    }
  }
  b.tag(layers + 1);
  b.sync(kSyncAct);
  b.host_dma(Opcode::write_host, y_addr, region[layers % 2], B, w.back());
  b.add(Opcode::halt);
  return p;
}

// MLP0 (TPU-V1.md, paper Table 1: 5 FC layers, 20M weights, batch 200, ReLU). Shapes are not
// published; we take 2560 -> 2048 -> 2048 -> 2048 -> 2048 -> 1024:
//   2560*2048 + 3 * 2048*2048 + 2048*1024 = 5.24M + 12.58M + 2.10M = 19.92M weights (304 tiles),
// every width a multiple of 256 (no padded cells). MACs per weight byte = batch = 200, as the
// table says for any FC network.
MlpSpec mlp0_spec() { return {"mlp0", {2560, 2048, 2048, 2048, 2048, 1024}, 200, 1}; }

// MLP1 (TPU-V1.md, paper Table 1: 4 FC layers, 5M weights, batch 168, ReLU). We take
// 1024 -> 1536 -> 1024 -> 1024 -> 768:
//   1024*1536 + 1536*1024 + 1024*1024 + 1024*768 = 1.57M + 1.57M + 1.05M + 0.79M = 4.98M
// weights (76 tiles); MACs per weight byte = batch = 168.
MlpSpec mlp1_spec() { return {"mlp1", {1024, 1536, 1024, 1024, 768}, 168, 2}; }

// About 100 MB of weights (the size of the paper's largest app, CNN1), for the memory test:
// 4 layers of 5120 x 5120 = 104.9 MB (1600 tiles), batch 32.
MlpSpec big_mlp_spec() { return {"mlp-big", {5120, 5120, 5120, 5120, 5120}, 32, 3}; }

}  // namespace tpusim::bench
