// QGraph -> program. The schedule, op by op in graph order:
//
//   dense / conv2d / LSTM gate (MatmulOp): the output's channels are cut into N tiles of
//     array_cols columns, the inputs' channels into K tiles of array_rows rows, side by side in
//     UB slices of the row width (layout.h LaneTile: a matmul reads its K tile from byte `lane`
//     of each row, an activate writes its N tile from byte act_lane). For each N
//     tile, the output pixels x batch rows go to one accumulator block (a chunk of output rows
//     when they do not fit); for each input, kernel position (r, s) and K tile, one weight tile
//     is switched in and streamed over the chunk (the paper's convolution: input channels on
//     rows, output channels on columns, R x S passes accumulating), then one activate per
//     contiguous run of output rows writes the N tile's slice. Blocks alternate between the two
//     halves of the accumulators so the activate of one N tile overlaps the matmuls of the next
//     (the hardware interlocks the accumulators). A stride-1 convolution streams a chunk's
//     output rows as one matmul (`repeat` = rows, `stride` = one stored image row); a strided
//     one uses one matmul per output row (`repeat` = pixels, `stride` = stride x batch).
//   pool (PoolOp): one pool per slice (per output row when the output is stored padded).
//   conv + pool (fusion, as the paper's Activate with its Normalize/Pool stage): a convolution
//     whose output only a pool reads is chunked in whole bands of pooled rows, and its activates
//     pool as they write (setcfg act_pool): the pooled map is the only one written to the UB,
//     the full-size map is never allocated and the pool emits nothing (fusion_for says when).
//   element-wise (VectorOp): one vec per slice and contiguous run.
//
// Memory: every tensor gets UB rows when its first producer runs and gives them back after its
// last reader (first fit); maps read by a padded convolution are stored with a zero border,
// zeroed by vec when the rows were written before. Per-column requantization tables (bias,
// multiplier, shift: docs/isa.md act) live at the bottom of the UB, loaded once from the host.
// Weight tiles are laid out in weight memory in first-use order, identical tiles stored once
// (an LSTM's gates are fetched again every time step from the same addresses).
//
// A sample whose tensors do not fit the UB keeps them in host memory and runs the ops that touch
// them in bands of output rows (lower_in_bands); grouped convolutions skip the tiles their groups
// leave all zero, identity copies the tiles off their diagonal (zero_tile), widened kernels the
// positions that are none of the model's taps (computed_tiles; packed: only tap rows gathered).
#include "compiler/lower.h"
#include "compiler/weight_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "compiler/emitter.h"
#include "compiler/held_bytes.h"
#include "compiler/layout.h"
#include "compiler/packing.h"
#include "compiler/schedule.h"
#include "isa/error.h"

namespace tpusim::compiler {

using isa::Field;
using isa::Opcode;

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Whether a tensor of c channels can be stored dense (layout.h): at least two samples' fields per
// UB row, and one K tile and one N tile (read and written from byte 0 of its field).
bool narrow(uint64_t c, const sim::Arch& arch) {
  return c > 0 && 2 * c <= slice_width(arch) && c <= arch.array_rows && c <= arch.array_cols;
}

// Whether a matmul's activate requantizes per column (bias, or one multiplier per channel): it
// then reads its N tile's table from the UB (table_row) instead of the instruction's fields.
// The N tiles of a matmul of n columns writing channels [channel0, channel0 + n) of a concat's
// joined tensor (slices of `lanes`): at most `cols` columns each, cut where the joined tensor's
// slices end, so that each tile's columns go to one slice, from byte (channel0 + first column) mod
// lanes (LaneTile::cols).
std::vector<LaneTile> joined_n_tiles(uint64_t n, uint64_t channel0, uint64_t lanes, uint64_t cols) {
  std::vector<LaneTile> out;
  for (uint64_t a = 0; a < n;) {
    const uint64_t w = std::min({cols, lanes - (channel0 + a) % lanes, n - a});
    out.push_back({a / lanes, a % lanes, a % lanes, w, w});
    a += w;
  }
  return out;
}

bool per_column(const MatmulOp& m) { return !m.bias.empty() || m.mult.size() > 1; }

// Allocation of UB rows from either end: first fit from the bottom, or last fit from the top.
// The back end puts a layer's output at the end away from its input, so a chain of layers
// ping-pongs between the two ends and the free rows stay one block in the middle.
// It also keeps which rows may hold data (dirty: rows allocated, less the zero borders of padded
// maps), so that a padded map can go where its border is zero already (allocate_clean).
class RowAllocator {
 public:
  RowAllocator(uint64_t first, uint64_t end) : first_(first), end_(end) { free_[first] = end - first; }
  bool allocate(uint64_t rows, bool from_top, uint64_t& at) {
    const auto fits = [&](const auto& block) { return block.second >= rows; };
    std::pair<uint64_t, uint64_t> block;
    if (from_top) {
      const auto it = std::find_if(free_.rbegin(), free_.rend(), fits);
      if (it == free_.rend()) return false;
      block = *it;
      at = block.first + block.second - rows;
    } else {
      const auto it = std::find_if(free_.begin(), free_.end(), fits);
      if (it == free_.end()) return false;
      block = *it;
      at = block.first;
    }
    take(block.first, block.second, at, rows);
    return true;
  }
  // Like allocate, from the same end, but only at a place where clean(at) holds (the rows that
  // must be zero there are not dirty): a free block's end, or where dirty rows inside it end
  // (from the bottom) or begin (from the top), the first such place from that end. False,
  // nothing taken, when there is none.
  template <class Clean>
  bool allocate_clean(uint64_t rows, bool from_top, uint64_t& at, Clean clean) {
    std::vector<std::pair<uint64_t, uint64_t>> blocks(free_.begin(), free_.end());
    if (from_top) std::reverse(blocks.begin(), blocks.end());
    for (const auto& [start, size] : blocks) {
      if (size < rows) continue;
      const uint64_t end = start + size;
      std::vector<uint64_t> places{from_top ? end - rows : start};  // first rows of the candidates
      auto it = dirty_.upper_bound(start);
      if (it != dirty_.begin()) --it;
      for (; it != dirty_.end() && it->first < end; ++it) {
        if (!from_top && it->second > start && it->second + rows <= end) places.push_back(it->second);
        if (from_top && it->first > start && it->first >= start + rows) places.push_back(it->first - rows);
      }
      if (from_top) std::sort(places.rbegin(), places.rend());
      else std::sort(places.begin(), places.end());
      for (const uint64_t place : places)
        if (clean(place)) {
          at = place;
          take(start, size, at, rows);
          return true;
        }
    }
    return false;
  }
  // Whether any row of [at, at + rows) may hold data.
  bool dirty(uint64_t at, uint64_t rows) const {
    auto it = dirty_.upper_bound(at);
    if (it != dirty_.begin() && std::prev(it)->second > at) return true;
    return it != dirty_.end() && it->first < at + rows;
  }
  // Rows that are zero now (a padded map's border: zero already, or zeroed when it was placed).
  void zeroed(uint64_t at, uint64_t rows) { mark(at, rows, false); }
  bool in_lower_half(uint64_t row) const { return row - first_ < (end_ - first_) / 2; }
  void release(uint64_t at, uint64_t rows) {
    auto next = free_.lower_bound(at);
    if (next != free_.end() && at + rows == next->first) {
      rows += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += rows;
        return;
      }
    }
    free_[at] = rows;
  }
  uint64_t used() const {
    uint64_t free = 0;
    for (const auto& [at, rows] : free_) free += rows;
    return end_ - first_ - free;
  }
  uint64_t largest() const {
    uint64_t m = 0;
    for (const auto& [at, rows] : free_) m = std::max(m, rows);
    return m;
  }
  bool operator==(const RowAllocator&) const = default;

 private:
  // Takes [at, at + rows) out of the free block [start, start + size), marking it dirty.
  void take(uint64_t start, uint64_t size, uint64_t at, uint64_t rows) {
    free_.erase(start);
    if (at > start) free_[start] = at - start;
    if (at + rows < start + size) free_[at + rows] = start + size - at - rows;
    mark(at, rows, true);
  }
  // Adds [at, at + rows) to the dirty rows, or takes it out.
  void mark(uint64_t at, uint64_t rows, bool dirty) {
    if (rows == 0) return;
    uint64_t lo = at, hi = at + rows;
    auto it = dirty_.upper_bound(at);
    if (it != dirty_.begin() && std::prev(it)->second >= at) --it;
    std::vector<std::pair<uint64_t, uint64_t>> keep;  // (pieces of removed intervals outside the span)
    while (it != dirty_.end() && it->first <= hi) {
      if (dirty) {
        lo = std::min(lo, it->first), hi = std::max(hi, it->second);
      } else {
        if (it->first < at) keep.emplace_back(it->first, at);
        if (it->second > at + rows) keep.emplace_back(at + rows, it->second);
      }
      it = dirty_.erase(it);
    }
    if (dirty) dirty_[lo] = hi;
    for (const auto& [f, e] : keep) dirty_[f] = e;
  }

  uint64_t first_, end_;
  std::map<uint64_t, uint64_t> free_;   // first row -> rows
  std::map<uint64_t, uint64_t> dirty_;  // first row -> end row: rows that may hold data
};

// A stretch of a pass's output pixels contiguous in the accumulators and in the output's
// unpadded pixel numbering.
struct Segment {
  uint64_t pixel, pixels, acc_offset;  // acc_offset in rows from the block's base
};

struct MatmulStep {
  uint64_t ub, rows, repeat, stride, acc_offset;
};

// A tensor that does not fit the unified buffer, with the numbers for choosing a smaller piece.
struct DoesNotFit : InputError {
  DoesNotFit(const std::string& what, uint64_t needed_rows, uint64_t largest_free, int tensor_index)
      : InputError(what), needed(needed_rows), largest(largest_free), tensor(tensor_index) {}
  uint64_t needed, largest;
  int tensor;
};

// Whether the graph's seeded weights have no values (a timing-only compile): its weight image
// then has no bytes (weight_image.h).
// The switches a lowering of g runs with: concat_inplace is the graph's (the quantizer's choice,
// QGraph::concat_inplace); given otherwise, it is an error.
LowerOptions with_graph(LowerOptions o, const QGraph& g) {
  if (o.concat_inplace && *o.concat_inplace != g.concat_inplace)
    throw InputError(fmt::format("model {}: quantized with concat_inplace={}, lowered with concat_inplace={}: the "
                                 "switch changes the quantized graph; give it when the model is compiled",
                                 g.name, g.concat_inplace ? "on" : "off", *o.concat_inplace ? "on" : "off"));
  o.concat_inplace = g.concat_inplace;  // (recorded in meta.mapper when not the default)
  return o;
}

bool without_values(const QGraph& g) {
  return std::any_of(g.ops.begin(), g.ops.end(), [](const QOp& op) {
    const auto* m = std::get_if<MatmulOp>(&op);
    return m && m->no_values;
  });
}

// A tile of a matmul op: the op and the numbers that name the tile within it.
struct TileKey {
  const MatmulOp* op;
  std::array<uint64_t, 7> at;
  bool operator==(const TileKey&) const = default;
};
struct TileKeyHash {
  size_t operator()(const TileKey& k) const {
    // Each number mixed in whole (splitmix64's finaliser): keys differ in small numbers only.
    const auto mix = [](uint64_t x) {
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      return x ^ (x >> 31);
    };
    uint64_t h = mix(reinterpret_cast<uintptr_t>(k.op));
    for (uint64_t v : k.at) h = mix(h + 0x9E3779B97F4A7C15ull + v);
    return size_t(h);
  }
};

// The tiles of compiler-built weights (MatmulOp::weight_id < 0: weights from a file, a concat's
// identity weights) that lower()'s tries have built: their bytes depend on the op, the tile and
// the machine, not on the schedule, so every try of one compile shares them (weight_image.h
// ContentTiles), the plain tiles and the packed ones (packing.h) by their keys.
struct BuiltTiles {
  explicit BuiltTiles(const sim::Arch& arch) : tiles(arch.array_rows, arch.array_cols) {}
  uint64_t held_bytes() const { return tiles.held_bytes() + hash_bytes(plain) + hash_bytes(packed); }
  ContentTiles tiles;
  std::unordered_map<TileKey, size_t, TileKeyHash> plain, packed;  // -> the tile's number
};

class Lowering {
 public:
  // Lowers the graph's batch by `schedule` (schedule.h: segments of ops, each in pieces).
  // Tensors marked in `in_host` live in host memory and are streamed in bands (only with pieces
  // of one sample, one segment). `code` false: a measuring try (Emitter): the same fit, work and
  // estimate, but no instructions stored (run()'s program has no code).
  // `reserve`: the instructions a measuring try of the same schedule counted.
  // `built`: the compile's compiler-built tiles, shared by its tries.
  Lowering(const QGraph& g, const sim::Arch& arch, BuiltTiles& built, PieceSchedule schedule,
           const LowerOptions& options, std::vector<bool> in_host = {}, bool code = true, uint64_t reserve = 0)
      : g_(g),
        arch_(arch),
        options_(resolve(with_graph(options, g), arch)),
        lanes_(slice_width(arch)),
        piece_(schedule.io_piece),
        batch_(schedule.io_piece),
        sched_(std::move(schedule)),
        em_(arch, arch.weight_fifo_tiles, code, reserve ? reserve + arch.weight_fifo_tiles : 0),
        alloc_(0, 1),
        // (a measuring try lays the image out without its bytes: only the program made with code
        // holds them, built once, after lower()'s memory check)
        image_(arch.array_rows, arch.array_cols, !without_values(g) && code, *options_.partial_tiles),
        built_(built),
        in_host_(std::move(in_host)) {
    in_host_.resize(g.tensors.size(), false);
    sched_.resident.resize(g.tensors.size(), false);
    em_.zero_ahead(*options_.zero_ahead);
  }
  isa::Program run();
  // Whether the schedule fits the unified buffer, as run() would find, without lowering the ops:
  // every tensor allocated and released where run() does it (loads, transfers, the ops' outputs,
  // the pools that refuse a piece), the ops' matmuls, activates and vecs not emitted. Throws
  // DoesNotFit (segment() then names where) exactly when run() would. (Ops in bands, which
  // allocate as they go, and a chain, which allocates op i + 1's output early, are lowered as
  // run() lowers them.) Construct with code false.
  void check_fit() {
    fit_only_ = true;
    run();
  }
  // What the planner needs (schedule.h), after run(): the work each op emitted (the last entry:
  // everything outside ops: loads, copies, output), and the problem for plan_pieces.
  const std::vector<Emitter::Work>& op_work() const { return op_work_; }
  ScheduleProblem problem() const;
  size_t segment() const { return segment_; }
  uint64_t instructions() const { return em_.instructions(); }
  // The weight image as laid out so far: the bytes its tiles' stored boxes take (with bytes or not).
  uint64_t image_bytes() const { return image_.bytes(); }
  // Room for an image of `bytes` (a measuring try's image_bytes(), of the same schedule).
  void reserve_image(uint64_t bytes) { image_.reserve(bytes); }
  // The bytes this try holds besides the program it makes (its code, the image's bytes, the
  // tables' copy in the program): the lowering's working state, from its containers' sizes
  // (held_bytes.h). The tries' shared tiles are BuiltTiles::held_bytes.
  uint64_t held_bytes() const;
  double estimate() const {
    double c = 0;
    for (const Emitter::Work& w : op_work_) c += op_cycles(w, arch_);
    return c;
  }

 private:
  [[noreturn]] void fail(size_t op, const std::string& what) const {
    throw InputError(fmt::format("model {}: layer {}: {}", g_.name, g_.op_layer.at(op), what));
  }
  // A view's pixels; a whole tensor's are its storage's (a band's rows while it is lowered in bands).
  uint64_t pixels(const View& v) const { return v.pixels ? v.pixels : storage_[v.tensor].shape.pixels(); }
  void plan_storage();
  void tie_dense();
  void allocate(int t, size_t op);
  void lower(size_t i, const MatmulOp& m);
  void lower(size_t i, const PoolOp& p);
  void lower(size_t i, const VectorOp& v);
  // The activates after a pass's matmuls: plain ones for `segments`, or with `pooled` (a pool
  // op and pooled rows [oy0, oy1)) ones that pool as they write.
  struct PooledBands {
    const PoolOp* pool = nullptr;
    uint64_t oy0 = 0, oy1 = 0;
  };
  // A chunk of a matmul's output pixels (one pass per N tile): its matmul steps per weight tile,
  // its segments and accumulator rows; a convolution's chunk covers output rows [y0, y1).
  struct PassChunk {
    std::vector<std::vector<MatmulStep>> steps;
    std::vector<Segment> segments;
    uint64_t rows = 0, y0 = 0, y1 = 0;
  };
  void check_steps(size_t i, const std::vector<PassChunk>& chunks) const;
  void check_matmul(size_t i, const MatmulOp& m) const;
  // Input streaming into the next layer as well (docs/compiler.md, "Input streaming"): whether
  // op i + 1 is a convolution that can run its chunks interleaved with op i's (shapes only), and
  // the lowering of the two; lower_chain returns false (nothing emitted) when op i's chunks are
  // not cut by the stream or chaining would not end the two layers sooner (chain_end).
  // `enter(op)` is called before each run of one op's instructions (its layer's tag,
  // the work counted per op).
  bool chain_candidate(size_t i) const;
  bool lower_chain(size_t i, const std::function<void(size_t)>& enter);
  std::pair<uint64_t, uint64_t> conv_budget(const MatmulOp& m) const;
  uint64_t pass_budget(const MatmulOp& m) const;
  // A convolution's view of the input streamed into it (part_cuts): the output rows from which
  // it reads a later part (from 0), the part each kernel row of each output row reads in each K
  // tile (-1: none, or arrived), and each part's DMA in cycles (host_latency_cycles + its bytes at
  // host_gbps).
  struct StreamRows {
    std::vector<uint64_t> rows;
    std::vector<int64_t> need;  // [(y x kernel_h + r) x K tiles + k]: output row y's kernel row r in K tile k
    std::vector<double> dma;
  };
  std::vector<uint64_t> part_cuts(const MatmulOp& m, StreamRows* stream = nullptr) const;
  std::vector<uint64_t> chunk_starts(const MatmulOp& m, const std::vector<uint64_t>& cuts) const;
  double tile_fetch_cycles(const MatmulOp& m) const;
  // What StreamClock asks of a convolution on every chunk, computed once per op: its tiles' mean
  // fetch (tile_fetch_cycles) and each N tile's computed tiles (computed_tiles, n_tiles order).
  struct StreamTiles {
    double fetch = 0;
    std::vector<std::vector<bool>> computed;
  };
  const StreamTiles& stream_tiles(const MatmulOp& m) const;
  mutable std::unordered_map<const MatmulOp*, StreamTiles> stream_tiles_;
  // (`next`, where given: the later layers' first tiles (StreamClock::next_tiles) in, and their
  // lateness out.)
  struct NextTiles {
    std::vector<std::pair<double, double>> later;
    double late = 0;
  };
  double stream_end(const MatmulOp& m, const std::vector<uint64_t>& cuts, const StreamRows& stream,
                    NextTiles* next = nullptr) const;
  struct PackedChunk {
    uint64_t y0, y1, g0, g1;  // output rows [y0, y1), groups [g0, g1) of each
  };
  static std::vector<PackedChunk> packed_chunks(uint64_t oh, uint64_t groups, uint64_t batch, uint64_t budget);
  double packed_end(const MatmulOp& m, const Packing& pk, const StreamRows& stream,
                    NextTiles* next = nullptr) const;
  StreamRows whole_load(const MatmulOp& m, int t) const;
  bool beats_whole(size_t i, const MatmulOp& m, int t, uint64_t parts) const;
  uint64_t part_rows(int t, uint64_t parts) const;
  class StreamClock;
  std::vector<size_t> chain_needs(const MatmulOp& a, const MatmulOp& b, const std::vector<uint64_t>& starts) const;
  double chain_end(const MatmulOp& a, const MatmulOp& b, const StreamRows& stream, bool chained) const;
  double dma_cycles(uint64_t bytes) const;
  bool stream_pays(const MatmulOp& m, int t, uint64_t parts, std::map<uint64_t, bool>& memo) const;
  double refetch_cycles(double vectors) const;
  double unhidden_shift(double vectors) const;
  double refetch_cycles(const MatmulOp& m, double chunks) const;
  uint64_t layer_tiles(const MatmulOp& m) const;
  std::vector<bool> computed_tiles(const MatmulOp& m, const LaneTile& n) const;
  std::vector<PassChunk> conv_chunks(const MatmulOp& m, const std::vector<uint64_t>& cuts) const;
  void pass(size_t i, const MatmulOp& m, const LaneTile& n, const std::vector<std::vector<MatmulStep>>& steps,
            const std::vector<Segment>& segments, uint64_t acc_rows, const PooledBands* pooled = nullptr);
  // plane: 0 the int8 weights (or a 16-bit layer's low byte plane), 1 a 16-bit layer's high plane.
  TileFetch tile_address(const MatmulOp& m, const LaneTile& n, size_t input, uint64_t r, uint64_t s,
                        const LaneTile& k, int plane = 0);
  uint64_t table_row(const MatmulOp& m, const LaneTile& n, uint64_t groups = 1);
  void activate(const MatmulOp& m, const LaneTile& n, uint64_t base, const std::vector<Segment>& segments);
  void emit_activate(const MatmulOp& m, uint64_t qtable, uint64_t acc, uint64_t ub, uint64_t rows, RowSpan written,
                     uint64_t lane);
  void lower_packed(size_t i, const MatmulOp& m, const Packing& pk, uint64_t budget);
  // Fusion of the pool after convolution i into its activates: the pool op and the pooled rows
  // per chunk, when the shapes allow (see the definition).
  struct Fusion {
    size_t pool = 0;
    uint64_t bands = 0;
  };
  std::optional<Fusion> fusion_for(size_t i) const;
  void lower_fused(size_t i, const MatmulOp& m, const Fusion& f);
  void activate_pooled(const MatmulOp& m, const PoolOp& p, const LaneTile& n, uint64_t base, uint64_t oy0,
                       uint64_t oy1);
  // Input streaming: `steps` cut where their groups (rows, for a step of one group) reach into a
  // later part of the input being streamed (emitter.h), so that each matmul waits only for the
  // parts it reads; unchanged when nothing is streamed or the steps gather (packed, dense).
  // (`steps` itself when unchanged, else `out` filled.)
  const std::vector<MatmulStep>& stream_split(const std::vector<MatmulStep>& steps, const sim::PackRegs& regs,
                                              std::vector<MatmulStep>& out) const;
  std::vector<std::vector<MatmulStep>> conv_steps(const MatmulOp& m, uint64_t y0, uint64_t y1, uint64_t x0,
                                                  uint64_t x1) const;
  std::optional<Packing> packing_for(const MatmulOp& m, uint64_t batch) const;
  TileFetch packed_tile(const MatmulOp& m, const LaneTile& n, const Packing& pk, uint64_t r0, uint64_t kh);
  // The fetch of a tile stored at `at` (a whole tile's box as 0 x 0).
  TileFetch fetch_of(const WeightImage::Stored& at) const {
    if (at.rows == arch_.array_rows && at.cols == arch_.array_cols) return {at.waddr, 0, 0};
    return {at.waddr, at.rows, at.cols};
  }
  // (Asked for per pass: each channel count's tiles computed once.)
  const std::vector<LaneTile>& k_tiles(const View& v) const {
    return tiles_of(g_.tensors[v.tensor].shape.c, arch_.array_rows);
  }
  const std::vector<LaneTile>& n_tiles(const MatmulOp& m) const {
    if (!joined_.at(m.output.tensor)) return tiles_of(m.n, arch_.array_cols);
    auto [it, added] = joined_tiles_.try_emplace(&m);
    if (added) it->second = joined_n_tiles(m.n, m.output.channel0, lanes_, arch_.array_cols);
    return it->second;
  }
  mutable std::unordered_map<const MatmulOp*, std::vector<LaneTile>> joined_tiles_;
  // The columns N tile n of m holds: array_cols, fewer for the last or a tile cut at a joined
  // tensor's slice boundary.
  uint64_t tile_cols(const MatmulOp& m, const LaneTile& n) const {
    const uint64_t n0 = n.slice * lanes_ + n.lane, c = std::min(arch_.array_cols, m.n - n0);
    return n.cols ? std::min(c, n.cols) : c;
  }
  const std::vector<LaneTile>& tiles_of(uint64_t channels, uint64_t side) const {
    auto [it, added] = lane_tiles_.try_emplace({channels, side});
    if (added) it->second = lane_tiles(channels, lanes_, side);
    return it->second;
  }
  mutable std::map<std::pair<uint64_t, uint64_t>, std::vector<LaneTile>> lane_tiles_;  // (channels, side) ->
  // Dense layouts (layout.h): the 1 x 1 dense gather a matmul reads K tile k of `st` with (the
  // caller sets a packed convolution's gather over it), none when `st` is not dense; and the
  // act_dense registers for activates writing `st`.
  sim::PackRegs dense_read(const Storage& st, const LaneTile& k) const {
    sim::PackRegs r;
    if (st.q <= 1) return r;
    r.gather_bytes = k.count;
    r.dense_rows = st.q;
    r.dense_bytes = st.shape.c;
    return r;
  }
  void dense_write(const Storage& st) { em_.dense_out(st.q, st.shape.c); }
  uint64_t store(std::vector<uint8_t>& image, std::unordered_multimap<uint64_t, uint64_t>& index,
                 const std::vector<uint8_t>& item);
  uint64_t next_block(uint64_t rows);
  // Banding (a sample whose tensors do not fit): op i over bands of its output rows, each band's
  // input rows (with the kernel's halo) read from host memory and its output rows written back.
  void lower_in_bands(size_t i);
  void refuse_pool_bands(size_t i) const;
  void check_pool_fields(size_t i, const PoolOp& p) const;
  uint64_t band_rows_needed(size_t i, uint64_t out_rows) const;
  std::vector<std::pair<int, Storage>> band_storages(size_t i, uint64_t y0, uint64_t y1) const;
  void band_io(int t, const Storage& band, uint64_t first_row, bool write);
  // Piece schedules: samples [n0, n0 + batch_) of tensor t between its piece storage and the whole
  // batch's copy, in host memory at `host` (TPU order in pieces of `layout` samples) or (whole
  // given) a UB storage of the whole batch.
  void transfer(int t, uint64_t n0, bool out, uint64_t host, uint64_t layout, const Storage* whole = nullptr);
  // Input streaming (docs/compiler.md): the parts model input t's load is cut into for its first
  // reader, op i (1: loaded whole, not streamed).
  uint64_t stream_parts(size_t i, int t) const;
  uint64_t load_dmas(int t) const;
  std::vector<uint64_t> paying_cuts(const MatmulOp& m, const StreamRows& stream,
                                    std::optional<double> below = std::nullopt) const;
  StreamRows load_parts(const MatmulOp& m, int t, uint64_t rows) const;
  // Whether model input t, first read by op i, is loaded step by step (op i reads one time step of
  // it, a range of its pixels: an LSTM's input sequence).
  bool stream_by_steps(size_t i, int t) const;
  uint64_t stream_pixels_ = 0;  // while loading a streamed input: the most pixels per DMA (0: no cap)
  void release(int t) {
    if (!live_[t]) return;
    alloc_.release(storage_[t].base, storage_[t].ub_rows());
    live_[t] = false;
  }
  // The tensors op i reads and writes.
  std::vector<int> touched(size_t i) const;

  const QGraph& g_;
  const sim::Arch& arch_;
  const LowerOptions options_;  // every switch resolved for arch_ (lower_options.h)
  const uint64_t lanes_, piece_;
  uint64_t batch_;  // samples in the piece being lowered
  PieceSchedule sched_;
  std::vector<size_t> seg_of_;  // each op's segment of the schedule
  size_t segment_ = 0;          // the segment being lowered (segment())
  bool loop_started_ = false;   // a step of a host-driven loop was lowered (the next one interrupts)
  std::vector<bool> live_;      // tensors holding UB rows now (released at their last use)
  std::vector<std::optional<Storage>> whole_;  // resident tensors' whole-batch storage, while held
  std::vector<Emitter::Work> op_work_;         // per op, then the rest (op_work())
  Emitter em_;
  RowAllocator alloc_;
  std::vector<Storage> storage_;
  std::vector<bool> placed_;
  std::vector<bool> dense_;  // tensors stored dense when the piece's batch allows (plan_storage)
  // Concats' joined tensors: written by matmuls at a channel offset (View::channel0) or of fewer
  // channels than the tensor's (a concat written in place; plan_storage).
  std::vector<bool> joined_;
  std::vector<int64_t> first_def_, last_use_;
  WeightImage image_;
  BuiltTiles& built_;
  std::vector<uint8_t> tables_;
  std::unordered_multimap<uint64_t, uint64_t> table_index_;
  // Packed tiles built so far, by (op, and the numbers that name the tile within it).
  std::unordered_map<TileKey, TileFetch, TileKeyHash> packed_cache_;
  std::unordered_map<TileKey, uint64_t, TileKeyHash> table_cache_;  // table_row's answers
  // The tiles of each op and N tile, by the pass's tile number and plane: its passes (one per
  // chunk of rows, the chunks' passes taken N tile by N tile or chunk by chunk, and again in every
  // piece of the batch) fetch the same tiles, found here without a search per tile.
  // Kept for the whole lowering (a tile's number within a pass depends on the op, the N tile and
  // the machine only): tile_address is asked once per tile.
  using PassFetches = std::map<std::pair<uint64_t, uint64_t>, std::vector<std::optional<TileFetch>>>;
  std::vector<std::optional<TileFetch>>& pass_fetches(const MatmulOp& m, const LaneTile& n) {
    if (pass_op_ != &m) {
      pass_op_ = &m;
      pass_op_fetches_ = &pass_fetches_[&m];  // (node-based: stays valid as the map grows)
    }
    return (*pass_op_fetches_)[{n.slice, n.lane}];
  }
  const MatmulOp* pass_op_ = nullptr;
  PassFetches* pass_op_fetches_ = nullptr;
  std::unordered_map<const MatmulOp*, PassFetches> pass_fetches_;
  uint64_t table_rows_ = 0, table_base_ = 0, block_ = 0, macs_ = 0, copy_macs_ = 0;
  std::vector<std::pair<int, size_t>> perchan_;  // (op, n) pairs needing a table, in order
  // How well each layer (meta.layers index) maps: the manifest's meta.mapping.
  struct LayerStats {
    uint64_t macs = 0, array_macs = 0, tiles = 0, ub_rows = 0;
    uint64_t copy_macs = 0;  // an identity copy's MACs: one per byte it copies (isa::MatmulMacs)
    std::string packing;  // how its convolution packs (packing.h), empty when it does not
    std::string precision;  // "16-bit weights" for a layer with 16-bit weights, else empty
    std::string fusion;   // the pool fused into its activates, or the layer its pool is fused into
    uint64_t piece = 0;   // samples per piece it runs in (its segment's, schedule.h)
  };
  std::vector<bool> fused_away_;  // pool ops whose work a convolution's activates do (this piece)
  std::vector<LayerStats> stats_;
  size_t layer_ = 0;
  std::vector<bool> in_host_;      // tensors held in host memory (banded ops read and write them)
  std::vector<uint64_t> host_of_;  // their host addresses for the piece being lowered
  uint64_t bands_ = 0;             // bands lowered (meta.bands)
  bool fit_only_ = false;          // check_fit(): allocations only
  // A pool's input stored with more UB rows per pixel than the pool instruction takes (a dense
  // layout's rows per pixel: a smaller piece may fit).
  void check_pool_rows(size_t i, const PoolOp& p) const;
};

// The (input channel, output channel) pairs of K channels [k0, k0 + kn) and N channels [n0, n0 +
// nn) that are in the same group of m (MatmulOp::groups): kn x nn without groups, 0 for a tile
// that a grouped convolution's weights leave all zero.
uint64_t group_pairs(const MatmulOp& m, uint64_t k0, uint64_t kn, uint64_t n0, uint64_t nn) {
  if (m.groups <= 1) return kn * nn;
  const uint64_t gk = m.k / m.groups, gn = m.n / m.groups;
  uint64_t pairs = 0;
  for (uint64_t g = std::max(k0 / gk, n0 / gn); g <= std::min((k0 + kn - 1) / gk, (n0 + nn - 1) / gn); ++g) {
    const uint64_t ks = std::min(k0 + kn, (g + 1) * gk) - std::max(k0, g * gk);
    const uint64_t ns = std::min(n0 + nn, (g + 1) * gn) - std::max(n0, g * gn);
    pairs += ks * ns;
  }
  return pairs;
}

// The channels in both [k0, k0 + kn) and [n0, n0 + nn): the ones of an identity copy's tile.
uint64_t overlap(uint64_t k0, uint64_t kn, uint64_t n0, uint64_t nn) {
  const uint64_t a = std::max(k0, n0), b = std::min(k0 + kn, n0 + nn);
  return a < b ? b - a : 0;
}

// Whether the tile of K channels [k0, k0 + kn) and N columns [n0, n0 + nn) of m is all zero by
// m's structure (not its values: a timing-only compile, whose weights are placeholders, must skip
// the same tiles): its K rows and N columns in different groups, or an identity copy's K channels
// none of its columns (its ones lie on the diagonal). Such a tile adds nothing to any accumulator:
// pass() does not compute it (nor the tiles of a kernel position that is no tap: computed_tiles),
// and the pass's first computed tile overwrites the accumulators.
bool zero_tile(const MatmulOp& m, uint64_t k0, uint64_t kn, uint64_t n0, uint64_t nn) {
  return group_pairs(m, k0, kn, n0, nn) == 0 || (m.copy && overlap(k0, kn, n0, nn) == 0);
}

// The columns [j0, j1) of N channels [n0, n0 + nn) that input channel k's weights reach (its
// group's, MatmulOp::groups), relative to n0; j0 >= j1 when none.
std::pair<uint64_t, uint64_t> group_columns(const MatmulOp& m, uint64_t k, uint64_t n0, uint64_t nn) {
  if (m.groups <= 1) return {0, nn};
  const uint64_t g = k / (m.k / m.groups), gn = m.n / m.groups;
  const uint64_t a = std::max(n0, g * gn), b = std::min(n0 + nn, (g + 1) * gn);
  return a < b ? std::pair{a - n0, b - n0} : std::pair{uint64_t{0}, uint64_t{0}};
}

// ---- banding: the operands of an op and the input rows a band of its output rows reads ----------

// The distinct tensors op reads (as views), and the one it writes.
std::vector<View> op_reads(const QOp& op) {
  std::vector<View> v;
  std::visit([&](const auto& o) {
    using T = std::decay_t<decltype(o)>;
    if constexpr (std::is_same_v<T, MatmulOp>) v = o.inputs;
    else if constexpr (std::is_same_v<T, PoolOp>) v = {o.input};
    else v = o.op == isa::VecOp::pass || o.b.tensor == o.a.tensor ? std::vector<View>{o.a} : std::vector<View>{o.a, o.b};
  }, op);
  return v;
}
View op_writes(const QOp& op) {
  return std::visit([](const auto& o) { return o.output; }, op);
}

// The input rows a band of output rows [y0, y1) of op reads: `first` and `rows` in the rows of the
// input stored with `pad` zero rows above and below (a padded convolution's band carries the
// map's border where it reaches it). Kernel windows overlap: consecutive bands share kh - stride
// rows (the halo), read again from host memory by each.
struct BandInput {
  uint64_t first = 0, rows = 0, pad = 0;
  // The map's rows a band stores for its input, its borders left out: a kernel smaller than twice
  // the padding (2 x 2, padding 1) reads fewer rows than the borders take, and the band then holds
  // a row more than it reads (never rows - 2 x pad below one).
  uint64_t map_rows() const { return std::max(rows, 2 * pad + 1) - 2 * pad; }
};
BandInput band_input(const QOp& op, uint64_t y0, uint64_t y1) {
  return std::visit([&](const auto& o) -> BandInput {
    using T = std::decay_t<decltype(o)>;
    if constexpr (std::is_same_v<T, MatmulOp>) {
      if (o.kernel_h == 1 && o.kernel_w == 1 && o.stride == 1 && o.pad == 0) return {y0, y1 - y0, 0};
      return {y0 * o.stride, (y1 - y0 - 1) * o.stride + o.kernel_h, o.pad};
    } else if constexpr (std::is_same_v<T, PoolOp>) {
      return {y0 * o.stride, (y1 - y0 - 1) * o.stride + o.window, 0};
    } else {
      return {y0, y1 - y0, 0};
    }
  }, op);
}

// The rows of an input band (a padded storage whose stored row j is the map's padded row `first`
// + j) that lie in the map's zero padding but not in the band's own border (border_ranges): a band
// taller than it reads (band_storages: a kernel smaller than twice the padding, such as a 1 x 1
// convolution with padding 1) that reaches the map's bottom holds padding rows inside it, which
// no DMA writes (band_io) and which must read as zeros, not as what the rows held before. The
// rows (first UB row, count) of each such stored row's pixels, slice by slice.
std::vector<std::pair<uint64_t, uint64_t>> band_padding_rows(const Storage& band, uint64_t first, uint64_t map_h) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const uint64_t p = band.pad;
  for (uint64_t j = p; j + p < band.stored_h(); ++j) {
    const uint64_t y = first + j;  // in the map's padded rows
    if (y >= p && y - p < map_h) continue;
    for (uint64_t s = 0; s < band.slices(); ++s)
      out.emplace_back(band.stored_row(s, j, p), band.shape.w * band.pixel_rows());
  }
  return out;
}

// Marks tensor t as held in host memory, and with it every tensor of every op that reads or
// writes a tensor so marked (a banded op streams all its operands).
// (Each op's tensors listed once, each op visited once: a scan of every op for every tensor
// marked grew as ops x tensors, 14 s for a padded average pool of count_include_pad = 0 over a
// 16 x 2000 map, whose thousands of edge windows are two tensors and several ops each.)
void hold_in_host(const QGraph& g, int t, std::vector<bool>& in_host) {
  std::vector<std::vector<int>> tensors(g.ops.size());  // each op's operands
  std::vector<std::vector<size_t>> ops_of(g.tensors.size());  // the ops touching each tensor
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (const View& v : op_reads(g.ops[i])) tensors[i].push_back(v.tensor);
    tensors[i].push_back(op_writes(g.ops[i]).tensor);
    for (const int u : tensors[i]) ops_of.at(size_t(u)).push_back(i);
  }
  std::vector<bool> visited(g.ops.size(), false);
  std::vector<int> work{t};
  in_host.at(t) = true;
  while (!work.empty()) {
    const int u = work.back();
    work.pop_back();
    for (const size_t i : ops_of[size_t(u)]) {
      if (visited[i]) continue;
      visited[i] = true;
      for (const int v : tensors[i])
        if (!in_host.at(v)) in_host[v] = true, work.push_back(v);
    }
  }
}

// Appends `item` to `image` unless an identical item is already there; returns its offset.
uint64_t Lowering::store(std::vector<uint8_t>& image, std::unordered_multimap<uint64_t, uint64_t>& index,
                         const std::vector<uint8_t>& item) {
  const uint64_t h = bytes_hash(item);
  for (auto [it, end] = index.equal_range(h); it != end; ++it)
    if (std::memcmp(image.data() + it->second, item.data(), item.size()) == 0) return it->second;
  const uint64_t at = image.size();
  image.insert(image.end(), item.begin(), item.end());
  index.emplace(h, at);
  return at;
}

// Tile row i is input channel k.slice * lanes + k.lane + i (only the K tile's own channels, the
// rest zero); column j is output channel n.slice * lanes + n.lane + j (every one that exists).
// A 16-bit layer's tile is two: its weights' low bytes (plane 0) and high bytes (plane 1).
TileFetch Lowering::tile_address(const MatmulOp& m, const LaneTile& n, size_t input, uint64_t r, uint64_t s,
                                const LaneTile& k, int plane) {
  // Every piece of the batch uses the same tiles: built and looked up in the image once (asked
  // once per tile: pass_fetches keeps the answers).
  uint64_t k_offset = 0;
  for (size_t j = 0; j < input; ++j) k_offset += g_.tensors[m.inputs[j].tensor].shape.c;
  const uint64_t n0 = n.slice * lanes_ + n.lane, cols = tile_cols(m, n);
  const uint64_t k0 = k.slice * lanes_ + k.lane, row0 = k.first - k.lane, M = arch_.array_cols;
  const auto fill = [&](uint8_t* tile) {
    for (uint64_t row = row0; row < row0 + k.count; ++row) {
      const int8_t* w = (plane ? m.weights_hi : m.weights).data() + ((r * m.kernel_w + s) * m.k + k_offset + k0 + row) * m.n + n0;
      std::memcpy(tile + row * M, w, cols);
    }
  };
  if (m.weight_id < 0) {
    const TileKey key{&m, {n.slice, n.lane, input * 2 + size_t(plane), r, s, k.slice, k.lane}};
    auto [at, added] = built_.plain.try_emplace(key, 0);
    if (added) {
      std::vector<uint8_t> tile(arch_.tile_bytes(), 0);
      fill(tile.data());
      at->second = built_.tiles.number(std::move(tile));
    }
    return fetch_of(image_.content(built_.tiles, at->second));
  }
  // Seeded weights: tile row `row` holds weight row k_offset + k0 + row of kernel position (r, s),
  // columns n0 .. n0 + cols - 1, a group's channels only (group_pairs).
  const auto use = [&] {
    isa::WeightTileUse u;
    for (uint64_t row = row0; row < row0 + k.count; ++row) {
      const auto [j0, j1] = group_columns(m, k_offset + k0 + row, n0, cols);
      if (j0 >= j1) continue;
      u.rows = uint32_t(row + 1);
      u.cols = std::max(u.cols, uint32_t(j1));
      u.spans += j1 - j0;
    }
    return u;
  };
  const WeightImage::Key id{0, uint64_t(m.weight_id), uint64_t(plane), r, s, k_offset + k0, row0, k.count, n0, cols};
  return fetch_of(image_.seeded(id, fill, use));
}

// The UB row of N tile n's per-column table (bias, multiplier, shift for array_cols columns).
// With `groups` > 1 (a packed convolution, packing.h), column c is channel c % N for c < groups x N.
uint64_t Lowering::table_row(const MatmulOp& m, const LaneTile& n, uint64_t groups) {
  const uint64_t cols = arch_.array_cols, row_bytes = arch_.ub_row_bytes();
  const uint64_t rows = div_up(7 * cols, row_bytes), n0 = n.slice * lanes_ + n.lane;
  // (Built once per N tile, in run()'s first loop; every activate after looks it up.)
  const TileKey key{&m, {n0, groups, 0, 0, 0, 0, 0}};
  if (const auto it = table_cache_.find(key); it != table_cache_.end()) return it->second;
  std::vector<uint8_t> t(rows * row_bytes, 0);
  const uint64_t used = groups > 1 ? groups * m.n : tile_cols(m, n);
  for (uint64_t c = 0; c < used; ++c) {
    const uint64_t j = groups > 1 ? c % m.n : n0 + c;
    const uint32_t bias = m.bias.empty() ? 0 : static_cast<uint32_t>(m.bias[j]);
    const uint16_t mult = m.mult.size() == 1 ? m.mult[0] : m.mult[j];
    const uint8_t shift = m.shift.size() == 1 ? m.shift[0] : m.shift[j];
    for (int b = 0; b < 4; ++b) t[4 * c + b] = static_cast<uint8_t>(bias >> (8 * b));
    t[4 * cols + 2 * c] = static_cast<uint8_t>(mult);
    t[4 * cols + 2 * c + 1] = static_cast<uint8_t>(mult >> 8);
    t[6 * cols + c] = shift;
  }
  const uint64_t at = table_base_ + store(tables_, table_index_, t) / row_bytes;
  // After run() has placed the tables (table_rows_), a table first asked for now would lie in UB
  // rows the tensors hold (review30 #3: today every table is built before; this keeps it so).
  if (table_rows_ && tables_.size() / row_bytes > table_rows_)
    throw std::logic_error("table_row: a per-column table asked for after the tables were placed");
  return table_cache_[key] = at;
}

// Accumulator base for a pass of `rows` rows: alternating halves; a pass larger than half
// takes the whole accumulator from row 0.
uint64_t Lowering::next_block(uint64_t rows) {
  const uint64_t half = arch_.acc_entries / 2;
  if (rows > half) return 0;
  return (block_++ % 2) * half;
}

void Lowering::plan_storage() {
  const size_t nt = g_.tensors.size();
  storage_.resize(nt);
  placed_.assign(nt, false);
  first_def_.assign(nt, -1);
  last_use_.assign(nt, -1);
  for (size_t t = 0; t < nt; ++t) {
    storage_[t] = Storage{g_.tensors[t].shape, batch_, lanes_, 0, 0};
    if (g_.tensors[t].bits != 8 && g_.tensors[t].bits != 16)
      throw InputError(fmt::format("model {}: tensor {} has {} bits per element: expected 8 or 16", g_.name,
                                   g_.tensors[t].name, g_.tensors[t].bits));
    storage_[t].planes = g_.tensors[t].bits == 16 ? 2 : 1;
  }
  // 16-bit tensors: written by activates or vecs, read by vecs and matmuls (graph.h QTensor),
  // never a pool's operand nor the model's input; the model's output may be one.
  const auto wide = [&](const View& v) { return v.tensor >= 0 && size_t(v.tensor) < nt && storage_[v.tensor].planes > 1; };
  for (int t : g_.inputs)
    if (wide(View{t})) throw InputError(fmt::format("model {}: input tensor {} is 16-bit: inputs are int8", g_.name, g_.tensors[t].name));
  const auto use = [&](const View& v, size_t i) {
    if (v.tensor < 0 || static_cast<size_t>(v.tensor) >= nt) fail(i, "reads a tensor that does not exist");
    last_use_[v.tensor] = static_cast<int64_t>(i);
  };
  joined_.assign(nt, false);
  const auto unsplit = [&](const View& v, size_t i) {
    if (v.channel0) fail(i, "only a matmul's output may start at a channel");
  };
  const auto def = [&](const View& v, size_t i) {
    if (v.tensor < 0 || static_cast<size_t>(v.tensor) >= nt) fail(i, "writes a tensor that does not exist");
    if (first_def_[v.tensor] < 0) first_def_[v.tensor] = static_cast<int64_t>(i);
    last_use_[v.tensor] = std::max(last_use_[v.tensor], static_cast<int64_t>(i));
  };
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    std::visit(
        [&](const auto& op) {
          using T = std::decay_t<decltype(op)>;
          if constexpr (std::is_same_v<T, MatmulOp>) {
            for (const View& v : op.inputs) use(v, i);
            if (op.pad) storage_[op.inputs.at(0).tensor].pad = std::max(storage_[op.inputs[0].tensor].pad, op.pad);
            def(op.output, i);
            if (op.output.channel0 || g_.tensors[op.output.tensor].shape.c != op.n) {
              if (!g_.concat_inplace) fail(i, "writes part of a tensor's channels in a graph not written in place");
              joined_[op.output.tensor] = true;
            }
            for (const View& v : op.inputs) unsplit(v, i);
          } else if constexpr (std::is_same_v<T, PoolOp>) {
            if (wide(op.input) || wide(op.output)) fail(i, "a pool reads or writes a 16-bit tensor: pools are int8");
            use(op.input, i);
            unsplit(op.input, i);
          } else {
            use(op.a, i);
            if (op.op != isa::VecOp::pass) use(op.b, i);
            unsplit(op.a, i);
            unsplit(op.b, i);
          }
          if constexpr (!std::is_same_v<T, MatmulOp>) {
            def(op.output, i);
            unsplit(op.output, i);
          }
        },
        g_.ops[i]);
  }
  // A joined tensor's writers cover its channels once each (every pixel they write: a concat's
  // branches write whole maps), so no channel is left unwritten or written twice. The quantizer
  // builds them so: a failure is the compiler's bug, not the model's.
  {
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> spans(nt);
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (const auto* m = std::get_if<MatmulOp>(&g_.ops[i]); m && joined_[m->output.tensor])
        spans[m->output.tensor].push_back({m->output.channel0, m->output.channel0 + m->n});
    for (size_t t = 0; t < nt; ++t) {
      if (!joined_[t]) continue;
      std::sort(spans[t].begin(), spans[t].end());
      uint64_t next = 0;
      for (const auto& [a, b] : spans[t]) next = a == next ? b : UINT64_MAX;
      if (next != g_.tensors[t].shape.c)
        throw std::logic_error(fmt::format("model {}: tensor {}: its writers do not cover its {} channels once each",
                                           g_.name, g_.tensors[t].name, g_.tensors[t].shape.c));
    }
  }
  // Dense layouts (layout.h) for every tensor narrow enough (a field of c <= lanes / 2 bytes; one
  // K and one N tile, so that matmuls read it from byte 0 and activates write it from byte 0) that
  // is not held in host memory (bands) and is 8-bit (16-bit results are not written dense); pool and vec work on whole rows, so their operands are
  // dense together or not at all.
  dense_.assign(nt, false);
  for (size_t t = 0; t < nt; ++t) {
    const uint64_t c = g_.tensors[t].shape.c;
    dense_[t] = *options_.dense && !in_host_[t] && narrow(c, arch_) && storage_[t].planes == 1 &&  // (8-bit only)
                !joined_[t];
    // (A compile meets it only where the user gave concat_inplace=on: without the switch, it keeps
    // such a concat as parts, compile.h place_concats.)
    if (joined_[t] && in_host_[t])
      throw ConcatInHost(fmt::format("model {}: concat {} is written in place (mapper concat_inplace=on) and would be "
                                     "held in host memory and streamed in bands, which a tensor written by several "
                                     "layers cannot be; compile with --mapper concat_inplace=off, or without the "
                                     "switch (the compiler then keeps such a concat as parts)",
                                     g_.name, g_.tensors[t].name),
                         g_.tensors[t].layer);
  }
  tie_dense();
}

// Pool and vec work on whole rows: their operands are dense together or not at all.
void Lowering::tie_dense() {
  for (bool changed = true; changed;) {
    changed = false;
    const auto tie = [&](std::initializer_list<int> ts) {
      bool all = true;
      for (const int t : ts) all = all && dense_[t];
      for (const int t : ts)
        if (!all && dense_[t]) dense_[t] = false, changed = true;
    };
    for (const QOp& op : g_.ops) {
      if (const auto* p = std::get_if<PoolOp>(&op)) tie({p->input.tensor, p->output.tensor});
      if (const auto* v = std::get_if<VectorOp>(&op))
        tie({v->a.tensor, v->op != isa::VecOp::pass ? v->b.tensor : v->a.tensor, v->output.tensor});
    }
  }
}

void Lowering::allocate(int t, size_t op) {
  Storage& st = storage_[t];
  // Away from the op's first input (the model's inputs go to the bottom).
  bool from_top = false;
  if (op < g_.ops.size()) {
    const int in = std::visit(
        [](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, MatmulOp>) return o.inputs.at(0).tensor;
          else if constexpr (std::is_same_v<T, PoolOp>) return o.input.tensor;
          else return o.a.tensor;
        },
        g_.ops[op]);
    from_top = placed_.at(in) && alloc_.in_lower_half(storage_[in].base);
  }
  // A padded map goes, from the same end, where its border rows hold no data (never written, or
  // zeroed since) if it fits such a place: no zeroing, and no sync on a station that may still
  // read the rows it lands on (docs/compiler.md, "Unified buffer allocation").
  const auto clean = [&](uint64_t at) {
    Storage there = st;
    there.base = at;
    for (uint64_t p = 0; p < st.planes; ++p)
      for (const auto& [first, rows] : border_ranges(there))
        if (alloc_.dirty(first + p * st.high(), rows)) return false;
    return true;
  };
  const bool padded = st.pad > 0;
  if (!(padded && alloc_.allocate_clean(st.ub_rows(), from_top, st.base, clean)) &&
      !alloc_.allocate(st.ub_rows(), from_top, st.base) && !alloc_.allocate(st.ub_rows(), !from_top, st.base))
    throw DoesNotFit(
        fmt::format("model {}: {}: tensor {} ({} x {}, {} UB rows) does not fit in the unified buffer: the "
                    "largest free block is {} rows of {} ({} bytes per row); use a larger ub_bytes",
                    g_.name, op < g_.op_layer.size() ? "layer " + g_.op_layer[op] : "the model's input",
                    g_.tensors[t].name, batch_, g_.tensors[t].shape.str(), st.ub_rows(), alloc_.largest(),
                    arch_.ub_rows(), arch_.ub_row_bytes()),
        st.ub_rows(), alloc_.largest(), t);
  placed_[t] = true;
  live_[t] = true;
  for (uint64_t p = 0; p < st.planes; ++p)  // (a 16-bit tensor's high plane has the same border)
    for (const auto& [first, rows] : border_ranges(st)) {
      em_.zero({first + p * st.high(), rows});
      alloc_.zeroed(first + p * st.high(), rows);
    }
}

// One pass: N tile n over one chunk of output pixels. steps[t] are the matmuls of the pass's
// t-th weight tile (the tile is switched in by the first of them).
void Lowering::pass(size_t i, const MatmulOp& m, const LaneTile& n, const std::vector<std::vector<MatmulStep>>& steps,
                    const std::vector<Segment>& segments, uint64_t acc_rows, const PooledBands* pooled) {
  (void)i;
  const uint64_t base = next_block(acc_rows);
  std::vector<std::optional<TileFetch>>& memos = pass_fetches(m, n);
  std::vector<MatmulStep> split;  // (stream_split's, when it cuts)
  const std::vector<bool> computes = computed_tiles(m, n);
  size_t t = 0, computed = 0;  // weight tiles of the pass, and those computed (not all zero)
  uint64_t k_offset = 0;        // the input's first channel among the K (inputs concatenated)
  for (size_t input = 0; input < m.inputs.size(); k_offset += g_.tensors[m.inputs[input++].tensor].shape.c) {
    const std::vector<LaneTile>& kt = k_tiles(m.inputs[input]);
    for (uint64_t r = 0; r < m.kernel_h; ++r)
      for (uint64_t s = 0; s < m.kernel_w; ++s)
        for (const LaneTile& k : kt) {
          // A tile all zero by m's structure is not computed (computed_tiles).
          const uint64_t k_first = k_offset + k.slice * lanes_ + k.first;
          if (!computes[t]) {
            ++t;
            continue;
          }
          // Useful MACs a vector: the same-group (input, output) channel pairs of the tile's own
          // channels, none at a kernel position that is not one of the model's taps (a dilated
          // kernel's gaps: MatmulOp::taps); an identity copy's: the channels it copies (its ones;
          // no model MACs).
          const uint64_t n_first = n.slice * lanes_ + n.first;
          const uint64_t useful = m.copy       ? overlap(k_first, k.count, n_first, n.count)
                                  : m.tap(r, s) ? group_pairs(m, k_first, k.count, n_first, n.count)
                                                : 0;
          // 16-bit weights: the low plane's tile (fetched unsigned), then the high plane's with
          // setcfg mm_weight_hi = 1, accumulating (docs/timing.md, "16-bit operands").
          const int planes = m.wide_weights() ? 2 : 1;
          for (int plane = 0; plane < planes; ++plane) {
            if (memos.size() <= 2 * t + size_t(plane)) memos.resize(2 * t + size_t(plane) + 1);
            std::optional<TileFetch>& memo = memos[2 * t + size_t(plane)];
            if (!memo) memo = tile_address(m, n, input, r, s, k, plane);
            const TileFetch waddr = *memo;
            sim::PackRegs regs = dense_read(storage_[m.inputs[input].tensor], k);
            regs.mm_weight_hi = uint64_t(plane);
            // A 16-bit input: both byte planes streamed, half speed (docs/timing.md).
            regs.mm_in_hi = storage_[m.inputs[input].tensor].high();
            // The machine counts the tile's box (its useful cells, meta.tile_uses): where that is
            // not `useful` (a tile across groups holds the zero blocks between them; a last N tile
            // shifted back holds channels the tile before computes; weights from a file that are
            // zero at its edge) or for a copy, the matmul gives its figure (meta.matmul_macs).
            const isa::WeightTileUse& tu = image_.use_at(waddr.waddr);
            const uint64_t counted = regs.segments() > 1 ? tu.spans : uint64_t{tu.rows} * tu.cols;
            const std::optional<uint64_t> given =
                m.copy || useful != counted ? std::optional<uint64_t>(useful) : std::nullopt;
            bool first = true;
            for (const MatmulStep& st : stream_split(steps[t], regs, split)) {
              isa::Instruction in = isa::make_instruction(Opcode::matmul);
              in[Field::ub] = st.ub;
              in[Field::acc] = base + st.acc_offset;
              in[Field::rows] = st.rows;
              in[Field::repeat] = st.repeat;
              in[Field::stride] = st.repeat > 1 ? st.stride : 0;
              in[Field::lane] = k.lane;
              in[Field::switch_weights] = first;
              in[Field::accumulate] = computed > 0 || plane > 0;
              em_.matmul(in, first, waddr, regs, planes == 2 && plane == 0, given, m.copy);
              // Counted as the machine counts them (docs/report.md): 8-bit multiply-accumulates,
              // each byte-plane pass of a 16-bit input streamed.
              const uint64_t vectors = st.rows * st.repeat * (regs.mm_in_hi ? 2 : 1);
              (m.copy ? copy_macs_ : macs_) += vectors * useful;
              (m.copy ? stats_[layer_].copy_macs : stats_[layer_].macs) += vectors * useful;
              stats_[layer_].array_macs += vectors * arch_.tile_bytes();
              stats_[layer_].tiles += first;
              first = false;
            }
          }
          ++t;
          ++computed;
        }
  }
  if (pooled) activate_pooled(m, *pooled->pool, n, base, pooled->oy0, pooled->oy1);
  else activate(m, n, base, segments);
}

const std::vector<MatmulStep>& Lowering::stream_split(const std::vector<MatmulStep>& steps,
                                                      const sim::PackRegs& regs, std::vector<MatmulStep>& out) const {
  if (!em_.streaming() || regs.gathers() || regs.dense_rows > 1 || regs.mm_in_hi) return steps;
  out.clear();
  for (const MatmulStep& st : steps) {
    // Units: the step's groups, or its rows when it has one group; each unit's latest part.
    const bool by_rows = st.repeat <= 1;
    const uint64_t units = by_rows ? st.rows : st.repeat;
    const auto part = [&](uint64_t u) {
      return by_rows ? em_.stream_part({st.ub + u, 1}) : em_.stream_part({st.ub + u * st.stride, st.rows});
    };
    uint64_t u0 = 0;
    int64_t need = part(0);
    const auto cut = [&](uint64_t u1) {
      MatmulStep s = st;
      if (by_rows) {
        s.ub += u0, s.rows = u1 - u0, s.acc_offset += u0;
      } else {
        s.ub += u0 * st.stride, s.repeat = u1 - u0, s.acc_offset += u0 * st.rows;
      }
      out.push_back(s);
      u0 = u1;
    };
    for (uint64_t u = 1; u < units; ++u) {
      const int64_t p = part(u);
      if (p > need) {
        cut(u);
        need = p;
      }
    }
    cut(units);
  }
  return out;
}

// Activates a pass's rows (accumulator block `base`) into N tile n's slice of the output.
// Into a concat's joined tensor (joined_), the tile's `cols` columns go to channel channel0 + its
// first column: one slice (the tiles are cut at its boundaries), written with act_groups = 1 and
// act_group_cols = cols from that channel's byte, keeping the other branches' bytes.
void Lowering::activate(const MatmulOp& m, const LaneTile& n, uint64_t base, const std::vector<Segment>& segments) {
  const Storage& out = storage_[m.output.tensor];
  const bool perchan = per_column(m);
  const uint64_t qtable = perchan ? table_row(m, n) : 0;
  const uint64_t channel = m.output.channel0 + n.slice * lanes_ + n.lane;
  const uint64_t slice = n.cols ? channel / lanes_ : n.slice, lane = n.cols ? channel % lanes_ : n.lane;
  dense_write(out);
  if (n.cols) em_.scatter(1, n.cols);
  for (const Segment& seg : segments)
    for (const Run& run : runs(out, slice, m.output.pixel0 + seg.pixel, seg.pixels)) {
      emit_activate(m, qtable, base + seg.acc_offset + (run.pixel - m.output.pixel0 - seg.pixel) * batch_, run.row,
                    run.pixels * batch_, {run.row, run.pixels * batch_}, lane);
    }
  if (n.cols) em_.scatter(0, 0);
}

// One activate of `rows` accumulator rows from `acc` into UB row `ub` with m's function and
// requantization (the per-column table at UB row `qtable` where m has one), writing `written`
// from byte `lane` of each row.
void Lowering::emit_activate(const MatmulOp& m, uint64_t qtable, uint64_t acc, uint64_t ub, uint64_t rows,
                             RowSpan written, uint64_t lane) {
  const bool perchan = per_column(m);
  isa::Instruction in = isa::make_instruction(Opcode::activate);
  in[Field::func] = static_cast<uint64_t>(m.func);
  in[Field::clip] = m.clip;
  in[Field::acc] = acc;
  in[Field::ub] = ub;
  in[Field::rows] = rows;
  if (perchan) {
    in[Field::per_channel] = 1;
    in[Field::qtable] = qtable;
  } else {
    in[Field::mult] = m.mult.at(0);
    in[Field::shift] = m.shift.at(0);
  }
  Emitter::Spans reads;
  if (perchan) reads.push_back({qtable, div_up(7 * arch_.array_cols, arch_.ub_row_bytes())});
  em_.planes({storage_[m.output.tensor].high(), 0, 0, 0});
  em_.activation(in, reads, written, lane);
}

// A matmul's weights, requantization and groups against its inputs and output.
void Lowering::check_matmul(size_t i, const MatmulOp& m) const {
  if (m.inputs.empty()) fail(i, "a matmul needs an input");
  const Shape& os = storage_[m.output.tensor].shape;
  uint64_t ksum = 0;
  for (const View& v : m.inputs) ksum += g_.tensors[v.tensor].shape.c;
  const bool fits = joined_.at(m.output.tensor) ? m.output.channel0 + m.n <= os.c : os.c == m.n;
  if (ksum != m.k || !fits ||
      (!m.no_values && (m.weights.size() != m.kernel_h * m.kernel_w * m.k * m.n ||
                        (m.wide_weights() && m.weights_hi.size() != m.weights.size()))))
    fail(i, fmt::format("weights of {} x {} x {} x {} do not match inputs of {} channels and an output of {}",
                        m.kernel_h, m.kernel_w, m.k, m.n, ksum, os.c));
  if (m.mult.empty() || m.mult.size() != m.shift.size() || (m.mult.size() != 1 && m.mult.size() != m.n) ||
      (!m.bias.empty() && m.bias.size() != m.n))
    fail(i, "requantization parameters must have 1 or N entries");
  if (m.groups == 0 || m.k % m.groups || m.n % m.groups)
    fail(i, fmt::format("{} groups for {} input and {} output channels (both must be multiples of it)", m.groups,
                        m.k, m.n));
}

void Lowering::lower(size_t i, const MatmulOp& m) {
  check_matmul(i, m);
  const Shape& os = storage_[m.output.tensor].shape;
  {
    const bool wide_in = std::any_of(m.inputs.begin(), m.inputs.end(),
                                     [&](const View& v) { return storage_[v.tensor].planes > 1; });
    if (m.wide_weights() || wide_in)
      stats_[layer_].precision = m.wide_weights() && wide_in ? "16-bit weights and inputs"
                                 : m.wide_weights()          ? "16-bit weights"
                                                             : "16-bit inputs";
  }
  const bool linear = m.kernel_h == 1 && m.kernel_w == 1 && m.stride == 1 && m.pad == 0;
  std::vector<PassChunk> chunks;
  if (linear) {
    const uint64_t count = pixels(m.output);
    for (const View& v : m.inputs)
      if (pixels(v) != count) fail(i, fmt::format("inputs of {} pixels for an output of {}", pixels(v), count));
    const uint64_t per = pass_budget(m) / batch_;
    for (uint64_t p0 = 0; p0 < count; p0 += per) {
      PassChunk c;
      const uint64_t np = std::min(per, count - p0);
      c.rows = np * batch_;
      c.segments.push_back({p0, np, 0});
      for (const View& v : m.inputs) {
        const Storage& st = storage_[v.tensor];
        for (const LaneTile& k : k_tiles(v)) {
          std::vector<MatmulStep> steps;
          for (const Run& run : runs(st, k.slice, v.pixel0 + p0, np))
            steps.push_back({run.row, run.pixels * batch_, 1, 0, (run.pixel - v.pixel0 - p0) * batch_});
          c.steps.push_back(std::move(steps));
        }
      }
      chunks.push_back(std::move(c));
    }
  } else {
    if (m.inputs.size() != 1) fail(i, "a convolution reads exactly one input");
    const View& v = m.inputs[0];
    const Storage& in = storage_[v.tensor];
    if (v.pixel0 != 0 || pixels(v) != in.shape.pixels() || m.output.pixel0 != 0 || pixels(m.output) != os.pixels())
      fail(i, "a convolution reads and writes whole maps");
    const uint64_t oh = os.h, ow = os.w, st = m.stride;
    if (m.stride == 0 || (oh - 1) * st + m.kernel_h > in.shape.h + 2 * m.pad ||
        (ow - 1) * st + m.kernel_w > in.shape.w + 2 * m.pad)
      fail(i, "the output map does not fit the input map, kernel, stride and padding");
    // Kernel positions and output pixels packed per vector where that pays (packing.h).
    if (const auto pk = packing_for(m, batch_)) {
      lower_packed(i, m, *pk, acc_budget(oh * ow * batch_, arch_));
      return;
    }
    StreamRows stream;
    part_cuts(m, &stream);
    chunks = conv_chunks(m, paying_cuts(m, stream));
  }
  check_steps(i, chunks);
  for (const LaneTile& n : n_tiles(m))
    for (const PassChunk& c : chunks) pass(i, m, n, c.steps, c.segments, c.rows);
}

// The matmul's fields bound a step: rows, repeat < 2^16.
void Lowering::check_steps(size_t i, const std::vector<PassChunk>& chunks) const {
  for (const PassChunk& c : chunks)
    for (const auto& steps : c.steps)
      for (const MatmulStep& s : steps)
        if (s.rows > 65535 || s.repeat > 65535) fail(i, "a matmul would stream more than 65535 rows; use a smaller batch");
}

// Convolution m's output rows per chunk when a row fits the accumulator budget (0: chunks of
// pixels within a row), and that budget (pass_budget).
std::pair<uint64_t, uint64_t> Lowering::conv_budget(const MatmulOp& m) const {
  const Shape& os = storage_[m.output.tensor].shape;
  const uint64_t budget = pass_budget(m);
  return {budget / (os.w * batch_), budget};
}

// The accumulator rows one pass of unpacked matmul m may use (compiler::pass_budget, with m's
// computed tiles, its N tiles' activation cycles a row, and a tile switched in again costing its
// stored box's fetch (tile_fetch_cycles) and the shift its matmul leaves unhidden).
uint64_t Lowering::pass_budget(const MatmulOp& m) const {
  uint64_t drain = 0;
  for (const LaneTile& n : n_tiles(m)) drain += div_up(tile_cols(m, n), arch_.activation_lanes);
  const double fetch = tile_fetch_cycles(m);
  return compiler::pass_budget(pixels(m.output) * batch_, layer_tiles(m), drain,
                               [&](double v) { return fetch + unhidden_shift(v); }, arch_);
}

// Reading an input being streamed (emitter.h), a convolution's chunks also end where its output
// rows reach into a later part of it, so that each chunk, all its kernel positions, runs as soon
// as its rows have arrived instead of the first kernel position waiting for the last part. The
// output rows where the part needed grows (from 0); {0} when nothing is streamed into it. With
// `stream`: those rows, the part each kernel row of each output row reads, and the parts' DMAs.
std::vector<uint64_t> Lowering::part_cuts(const MatmulOp& m, StreamRows* stream) const {
  const View& v = m.inputs[0];
  const Storage& in = storage_[v.tensor];
  const uint64_t oh = storage_[m.output.tensor].shape.h, st = m.stride, off = in.pad - m.pad;
  const uint64_t row_rows = in.stored_w() * in.pixel_rows();
  StreamRows s{{0}, {}, {}};
  if (em_.streaming() && conv_budget(m).first > 0) {
    for (const uint64_t bytes : em_.stream_bytes()) s.dma.push_back(dma_cycles(bytes));
    int64_t most = -1;
    for (uint64_t y = 0; y < oh; ++y) {
      int64_t p = -1;
      for (uint64_t r = 0; r < m.kernel_h; ++r)
        for (const LaneTile& k : k_tiles(v)) {
          s.need.push_back(em_.stream_part({in.stored_row(k.slice, y * st + off + r, 0), row_rows}));
          p = std::max(p, s.need.back());
        }
      if (y > 0 && p > most) s.rows.push_back(y);
      most = std::max(most, p);
    }
  }
  if (stream) *stream = std::move(s);
  return stream ? stream->rows : s.rows;
}

// One DMA of `bytes` over the host link: its start and its bytes (docs/timing.md, "Host interface").
double Lowering::dma_cycles(uint64_t bytes) const {
  return double(arch_.host_latency_cycles + sim::transfer_cycles(bytes, arch_.host_gbps, arch_.clock_mhz));
}

// The mean cycles one of convolution m's computed tiles takes to cross the weight memory: its
// stored box (a partial tile's used rows x columns, fetch_of) at weight_mem_gbps.
double Lowering::tile_fetch_cycles(const MatmulOp& m) const {
  double cycles = 0, tiles = 0;
  for (const LaneTile& n : n_tiles(m)) {
    const std::vector<bool> computed = computed_tiles(m, n);
    size_t at = 0;
    for (const View& v : m.inputs)
      for (uint64_t rs = 0; rs < m.kernel_h * m.kernel_w; ++rs)
        for (const LaneTile& k : k_tiles(v))
          if (computed[at++]) {
            cycles += double(sim::transfer_cycles((k.first - k.lane + k.count) * tile_cols(m, n), arch_.weight_mem_gbps,
                                                  arch_.clock_mhz));
            tiles += 1;
          }
  }
  return tiles > 0 ? cycles / tiles : 0.0;
}

// The estimate of when streamed convolution m's last matmul ends, in cycles from its input's
// first DMA start, cut into chunks at `cuts` (and where the accumulator budget cuts: conv_chunks),
// reading the parts `stream` gives (part_cuts).
//
// The matrix unit: each of the layer's computed tiles is one switching matmul of its chunk's V
// vectors (output rows x width x batch), in pass() order (N tile, chunk, kernel row, kernel
// column, K tile), starting at
//   t0 = max(t0_before + D(V_before), when the part it reads has arrived),
//   D(V) = max(V + S(V), F, (F + W + R) / Q_w):
// the matmul before it streams its V vectors and, where they are too few to hide the next tile's
// shift, S(V) more (unhidden_shift); the weight memory delivers a tile every F cycles at most (its
// stored box at weight_mem_gbps: tile_fetch_cycles); and each of the FIFO's Q_w =
// weight_fifo_tiles slots holds a tile from its request (when the tile Q_w before it shifts in)
// through its fetch F, the memory's latency W (weight_mem_latency_cycles) and its shift of R =
// array_rows cycles. The layer's first tile waits F + W + R from the start; a tile that waits for
// its part has shifted in meanwhile. A tile of kernel row r reads, in its chunk's last output row,
// input row (y1 - 1) x stride + r - pad: the rows above arrive first, so a chunk's first kernel
// rows run before its last part arrives. The layer ends at the last t0 + its V.
//
// The host link: part 0 starts at 0, and each part's DMA starts once the one before it has
// arrived and the emitter's instruction for it has issued (emitter.h, "Input streaming"): the
// parts a matmul needs beyond the next one are emitted just before it, so they issue with the
// matmul before it; the next part is emitted right after the first matmul that needs the latest
// one, so it issues with that matmul, once that part has arrived (its sync). Issue holds while the
// matrix unit's queue is full: matmul n issues once matmul n - Q (Q = station_queue_depth) has
// started. So long chunks hold later parts back.
//
// A cut moves a chunk's work before the last part's arrival (and its parts' DMAs earlier), and
// costs its tiles again, D(V) each, at a smaller V; paying_cuts weighs the two by this end.
// The machine as stream_end estimates it: the matrix unit's switching matmuls in order and the
// host link's parts (see there). chunk() adds the computed tiles of one chunk of output rows
// [y0, y1) of a convolution's N tile, none starting before `after`; those of the layer being
// streamed (`streamed`) wait for the parts their kernel rows read.
class Lowering::StreamClock {
 public:
  StreamClock(const Lowering& l, const StreamRows& s)
      : l_(l), s_(s), arrive_(s.dma.size(), 0.0), depth_(int64_t(std::max<uint64_t>(l.arch_.station_queue_depth, 1))) {
    if (!s.dma.empty()) issued_ = 0, link_ = arrive_[0] = s.dma[0];
  }
  // (N tile `ni` of n_tiles(m).)
  double chunk(const MatmulOp& m, size_t ni, uint64_t y0, uint64_t y1, double after, bool streamed) {
    const sim::Arch& a = l_.arch_;
    const uint64_t kt = l_.k_tiles(m.inputs[0]).size();
    const StreamTiles& tiles = l_.stream_tiles(m);
    const LaneTile& nt = l_.n_tiles(m)[ni];
    const double fetch = tiles.fetch, first = fetch + double(a.weight_mem_latency_cycles + a.array_rows);
    const double queued = first / double(std::max<uint64_t>(a.weight_fifo_tiles, 1));
    const double v = double((y1 - y0) * l_.storage_[m.output.tensor].shape.w * l_.batch_);
    const double d = std::max({v + l_.unhidden_shift(v), fetch, queued});
    const std::vector<bool>& computed = tiles.computed[ni];
    for (size_t i = 0; i < computed.size(); ++i) {
      if (!computed[i]) continue;
      const size_t r = i / (m.kernel_w * kt), k = i % kt;
      const int64_t need = !streamed || s_.need.empty() ? -1 : s_.need[((y1 - 1) * m.kernel_h + r) * kt + k];
      matmul(v, d, need, after, first, true);
    }
    // Its activates: one per output row where the output is stored padded (a run per row), else
    // one; each the activation unit's latency and its vectors x ceil(N / activation_lanes).
    const uint64_t acts = l_.storage_[m.output.tensor].pad > 0 ? y1 - y0 : 1;
    activates(acts, double(a.activation_latency_cycles) +
                        v / double(acts) * double(div_up(l_.tile_cols(m, nt), a.activation_lanes)));
    return end();
  }
  // One matmul of v vectors reading part `need` (-1: none), starting no sooner than `after`, its
  // successor `gap` cycles after its start at the soonest; `first`: when the program's first matmul
  // may start (its tile's fetch, the weight memory's latency and its shift); `switches`: it
  // switches to a tile of its own (one fetch).
  void matmul(double v, double gap, int64_t need, double after, double first, bool switches) {
    const auto n = int64_t(t0s_.size());
    if (issued_ < need) {
      const double before = std::max(t0_of(n - 1 - depth_), gate_);  // (when the one before issues)
      while (issued_ < need) issue(before);
    }
    const double ready = need < 0 ? 0.0 : arrive_[size_t(need)];
    t0_ = std::max({t0s_.empty() ? first : t0_ + gap_, ready, after, gate_});
    t0s_.push_back(t0_);
    gap_ = gap;
    v_ = v;
    first_ = first;
    // (A switch's rw goes before the sync for its part, emitter.h; the matmul issues after it.)
    if (switches) switches_.push_back({std::max(ctl_, gate_), t0_});
    ctl_ = std::max({ctl_, t0_of(n - 1 - depth_), gate_, ready});
    if (need >= 0 && need == issued_ && size_t(issued_) + 1 < s_.dma.size())
      issue(std::max({ready, t0_of(n - depth_), gate_}));
  }
  // The next layers' first tiles' lateness: the latest of when each has shifted in, less the
  // later layers' vectors before it (`later`: each tile's fetch cycles on the weight memory and
  // its matmuls' vectors, in fetch order, the next layer's first tile first). The weight FIFO as
  // docs/timing.md has it, fetch after fetch (this layer's S switches' tiles, F cycles each, then
  // those): fetch f < Q_w (weight_fifo_tiles) is requested at the start; fetch f >= Q_w is the
  // emitter's for switch f - Q_w (emitter.h: its rw placed before that matmul's sync), so it is
  // requested once that rw has issued (behind the DMAs emitted before it: the host station's
  // queue) and fetch f - Q_w's slot has freed; it crosses the weight memory after the fetch
  // before it, is usable W later, and shifts in (R cycles; its slot then frees) once the shadow
  // tile is free: the tile before it shifted in and its switch started. (Loaded whole, issue waits
  // behind the host DMAs: LeNet-5 at batch 1 on tpu-v1 with W = 10,000 and Q_w = 1 issued
  // conv2's rw at 17,441 behind its 28 image rows' DMAs; streamed at 14, its request waiting for
  // conv1's slot until 10,811: its tile shifted in 6,631 cycles later loaded whole.)
  double next_tiles(const std::vector<std::pair<double, double>>& later) const {
    const sim::Arch& a = l_.arch_;
    const auto qw = size_t(std::max<uint64_t>(a.weight_fifo_tiles, 1)), S = switches_.size();
    const double rows = double(a.array_rows), W = double(a.weight_mem_latency_cycles);
    const double fetch = std::max(0.0, first_ - W - rows);  // (this layer's F: first_ = F + W + R)
    std::vector<double> freed;                               // each fetch's slot frees (shifted in)
    double bus = 0, late = 0, work = 0;
    for (size_t f = 0; f < S + std::min(qw, later.size()); ++f) {
      const double request = f < qw ? 0.0 : std::max(switches_[f - qw].issue, freed[f - qw]);
      const double cycles = f < S ? fetch : later[f - S].first;
      bus = std::max(bus, request) + cycles;
      double shift = bus + W;
      if (f > 0) shift = std::max(shift, freed[f - 1]);
      if (f > 0 && S > 0) shift = std::max(shift, switches_[std::min(f, S) - 1].t0);
      freed.push_back(shift + rows);
      if (f >= S) {
        late = std::max(late, freed.back() - work);
        work += later[f - S].second + l_.unhidden_shift(later[f - S].second);
      }
    }
    return late;
  }
  // `count` activates of `each` cycles after the matmuls so far: each starts when they have ended
  // and the one before it is done, and the instruction after them issues once the activate depth_
  // before the last has started.
  void activates(uint64_t count, double each) {
    for (uint64_t j = 0; j < count; ++j) {
      act_free_ = std::max(act_free_, end()) + each;
      acts_.push_back(act_free_ - each);
    }
    if (acts_.size() > size_t(depth_)) gate_ = std::max(gate_, acts_[acts_.size() - 1 - size_t(depth_)]);
  }
  double end() const { return t0_ + v_; }

 private:
  double t0_of(int64_t n) const { return n < 0 ? 0.0 : t0s_[size_t(n)]; }
  void issue(double at) {
    ++issued_;
    // (The control unit issues DMA j once DMA j - depth_ has started: the host station's queue.)
    const int64_t ahead = issued_ - depth_;
    ctl_ = std::max({ctl_, at, ahead < 0 ? 0.0 : arrive_[size_t(ahead)] - s_.dma[size_t(ahead)]});
    arrive_[size_t(issued_)] = link_ = std::max(link_, at) + s_.dma[size_t(issued_)];
  }
  const Lowering& l_;
  const StreamRows& s_;
  std::vector<double> arrive_;  // when each part issued so far arrives
  int64_t depth_, issued_ = -1;
  double link_ = 0, t0_ = 0, gap_ = 0, v_ = 0;
  std::vector<double> acts_;       // each activate's start so far
  double act_free_ = 0, gate_ = 0;  // when the activation unit is free; issue held until then
  std::vector<double> t0s_;  // each matmul's start so far
  // The control unit's issue so far (next_tile's only: the DMAs' and matmuls' starts above do not
  // wait for it), and each switching matmul's issue and start.
  double ctl_ = 0, first_ = 0;
  struct Switch {
    double issue, t0;
  };
  std::vector<Switch> switches_;
};

const Lowering::StreamTiles& Lowering::stream_tiles(const MatmulOp& m) const {
  auto [it, added] = stream_tiles_.try_emplace(&m);
  if (added) {
    it->second.fetch = tile_fetch_cycles(m);
    for (const LaneTile& n : n_tiles(m)) it->second.computed.push_back(computed_tiles(m, n));
  }
  return it->second;
}

double Lowering::stream_end(const MatmulOp& m, const std::vector<uint64_t>& cuts, const StreamRows& stream,
                            NextTiles* next) const {
  const std::vector<uint64_t> starts = chunk_starts(m, cuts);
  StreamClock clock(*this, stream);
  for (size_t nt = 0; nt < n_tiles(m).size(); ++nt)
    for (size_t c = 0; c + 1 < starts.size(); ++c) clock.chunk(m, nt, starts[c], starts[c + 1], 0, true);
  if (next) next->late = clock.next_tiles(next->later);
  return clock.end();
}

// The estimate of when packed convolution m (lower_packed, packing pk) ends, in cycles from its
// input's first DMA start, reading the parts `stream` gives (load_parts), by StreamClock's rules:
// per N tile (one where P > 1), chunk and row tile of kh kernel rows, one switching matmul and one
// more per output row, each of its groups x batch vectors, ceil(U x kh / gather_rows_per_cycle)
// cycles each, waiting for the part that holds its last kernel row; a row tile's switch follows
// the one before by at least D = max(its run + S(run), F, (F + W + R) / Q_w) (F: its stored box
// at weight_mem_gbps; W: weight_mem_latency_cycles), the first at F + W + R; then the chunk's
// activates (one per output row and group of B rows where P > 1, else as an unpacked chunk's).
double Lowering::packed_end(const MatmulOp& m, const Packing& pk, const StreamRows& stream,
                            NextTiles* next) const {
  const sim::Arch& a = arch_;
  const Storage& out = storage_[m.output.tensor];
  const uint64_t oh = out.shape.h, ow = out.shape.w, B = batch_, P = pk.p, full = ow / P, tail = ow % P;
  const uint64_t G = full + (tail != 0), kt = k_tiles(m.inputs[0]).size();
  const std::vector<LaneTile> nts = P == 1 ? n_tiles(m) : std::vector<LaneTile>{{0, 0, 0, m.n}};
  const uint64_t u_tail = tail ? (tail - 1) * m.stride + m.kernel_w : 0;
  StreamClock clock(*this, stream);
  for (const LaneTile& n : nts) {
    const uint64_t cols = P > 1 ? P * m.n : tile_cols(m, n);
    for (const PackedChunk& c : packed_chunks(oh, G, B, acc_budget(oh * ow * B, a))) {
      const double groups = double(c.g1 - c.g0);
      for (uint64_t j0 = 0; j0 < pk.kernel_rows; j0 += pk.rows) {
        const uint64_t kh = std::min(pk.rows, pk.kernel_rows - j0), r0 = pk.first_row + j0 * pk.row_step;
        const double fetch = double(sim::transfer_cycles(pk.u * kh * m.k * cols, a.weight_mem_gbps, a.clock_mhz));
        const double first = fetch + double(a.weight_mem_latency_cycles + a.array_rows);
        const double queued = first / double(std::max<uint64_t>(a.weight_fifo_tiles, 1));
        const uint64_t fulls = c.g1 <= full ? c.g1 - c.g0 : (c.g0 < full ? full - c.g0 : 0);
        const double v = double(B * (fulls * div_up(pk.u * kh, a.gather_rows_per_cycle) +
                                     (fulls < c.g1 - c.g0 ? div_up(u_tail * kh, a.gather_rows_per_cycle) : 0)));
        const double run = v * double(c.y1 - c.y0);
        const double d = std::max({run + unhidden_shift(run), fetch, queued});
        for (uint64_t y = c.y0; y < c.y1; ++y) {
          int64_t need = -1;
          for (uint64_t rr = 0; rr < kh && !stream.need.empty(); ++rr)
            for (uint64_t k = 0; k < kt; ++k)
              need = std::max(need, stream.need[(y * m.kernel_h + r0 + rr * pk.row_step) * kt + k]);
          clock.matmul(v, y + 1 < c.y1 ? v : std::max(v, d - run + v), need, 0, first, y == c.y0);
        }
      }
      const uint64_t acts = P > 1 ? (c.y1 - c.y0) * (c.g1 - c.g0) : (out.pad > 0 ? c.y1 - c.y0 : 1);
      clock.activates(acts, double(a.activation_latency_cycles) +
                                double(c.y1 - c.y0) * groups * double(B) / double(acts) *
                                    double(div_up(cols, a.activation_lanes)));
    }
  }
  if (next) next->late = clock.next_tiles(next->later);
  return clock.end();
}

// Streaming into the next layer (lower_chain): for each output row of b, the chunk of a (its
// chunks starting at `starts`, chunk_starts) after which the rows it reads are complete. Output
// row y of b reads a's rows up to y x stride + kernel_h - 1 - pad (below: its zero border).
std::vector<size_t> Lowering::chain_needs(const MatmulOp& a, const MatmulOp& b,
                                          const std::vector<uint64_t>& starts) const {
  const uint64_t h = g_.tensors[a.output.tensor].shape.h;
  std::vector<size_t> chunk_of(h, 0);
  for (size_t c = 0; c + 1 < starts.size(); ++c)
    for (uint64_t y = starts[c]; y < starts[c + 1]; ++y) chunk_of[y] = c;
  std::vector<size_t> need;
  for (uint64_t y = 0; y < g_.tensors[b.output.tensor].shape.h; ++y) {
    const uint64_t last = y * b.stride + b.kernel_h - 1;
    need.push_back(last < b.pad ? size_t{0} : chunk_of[std::min(h - 1, last - b.pad)]);
  }
  return need;
}

// The estimate (stream_end) of when convolution b, reading only streamed convolution a's output,
// ends: `chained`, as lower_chain emits them (a cut at every row where a reads a later part, each
// of b's chunks after the chunk of a that completes the rows it reads); else a with the cuts that
// pay (paying_cuts), then b. A chunk of b starts after the activates that write its rows: the
// last of a's matmuls it waits for ends, then the activation unit's latency and the chunk's rows,
// ceil(N / activation_lanes) cycles each ("Activation unit", docs/timing.md).
double Lowering::chain_end(const MatmulOp& a, const MatmulOp& b, const StreamRows& stream, bool chained) const {
  const auto act = [&](uint64_t rows) {
    return double(arch_.activation_latency_cycles) +
           double(rows * storage_[a.output.tensor].shape.w * batch_) *
               double(div_up(std::min<uint64_t>(a.n, arch_.array_cols), arch_.activation_lanes));
  };
  StreamClock clock(*this, stream);
  const std::vector<uint64_t> first = chunk_starts(a, chained ? stream.rows : paying_cuts(a, stream));
  if (!chained) {
    for (size_t nt = 0; nt < n_tiles(a).size(); ++nt)
      for (size_t c = 0; c + 1 < first.size(); ++c) clock.chunk(a, nt, first[c], first[c + 1], 0, true);
    const double after = clock.end() + act(first[first.size() - 1] - first[first.size() - 2]);
    const std::vector<uint64_t> second = chunk_starts(b, {});
    for (size_t nt = 0; nt < n_tiles(b).size(); ++nt)
      for (size_t c = 0; c + 1 < second.size(); ++c) clock.chunk(b, nt, second[c], second[c + 1], after, false);
    return clock.end();
  }
  const std::vector<size_t> need = chain_needs(a, b, first);
  std::vector<uint64_t> cuts{0};
  for (uint64_t y = 1; y < need.size(); ++y)
    if (need[y] > need[y - 1]) cuts.push_back(y);
  const std::vector<uint64_t> second = chunk_starts(b, cuts);
  size_t next = 0;
  for (size_t c = 0; c + 1 < first.size(); ++c) {
    double done = 0;
    for (size_t nt = 0; nt < n_tiles(a).size(); ++nt) done = clock.chunk(a, nt, first[c], first[c + 1], 0, true);
    const double after = done + act(first[c + 1] - first[c]);
    for (; next + 1 < second.size() && need[second[next + 1] - 1] <= c; ++next)
      for (size_t nt = 0; nt < n_tiles(b).size(); ++nt) clock.chunk(b, nt, second[next], second[next + 1], after, false);
  }
  return clock.end();
}

// The cuts among stream.rows (part_cuts) that convolution m streaming its input pays for: of c = 2
// .. all of them, evenly spread, the c whose chunks end the layer soonest by stream_end (the most
// where two end alike), when that is sooner than with no cut (the layer's chunks as the
// accumulator budget makes them, each still waiting for the parts it reads), else none. The net
// saving of c cuts is that difference: the work their chunks do before the last part arrives, less
// their tiles fetched and shifted in again. (Keeping the most cuts whose refetched tiles, counted
// as whole tiles, took less time than the transfer broke "a faster link never slower", docs/
// compiler.md "Which cuts pay": resblock at batch 17 on 32 x 128 with 96 KiB and 5 GB/s of weight
// memory ran 59,683 cycles at 10 GB/s of host link in 2 chunks and 65,143 at 20, not streamed,
// where its 16 x 16 tile boxes take 36 cycles to fetch, not 573; now 4 chunks, 58,052 and 57,281.)
// Counts whose chunks (chunk_starts: the cuts with the accumulator budget's) are those of a count
// already tried end alike and are not estimated again (where the budget cuts a chunk at every
// row, none is). `below` given: the first cuts found to end before it (stream_pays asks only
// whether some do).
std::vector<uint64_t> Lowering::paying_cuts(const MatmulOp& m, const StreamRows& stream,
                                            std::optional<double> below) const {
  std::vector<uint64_t> best;
  const double none = below ? *below : stream_end(m, {}, stream);
  double end = none;
  std::set<std::vector<uint64_t>> tried{chunk_starts(m, {})};
  for (size_t c = 2; c <= stream.rows.size(); ++c) {
    std::vector<uint64_t> cuts;
    for (size_t j = 0; j < c; ++j) cuts.push_back(stream.rows[j * stream.rows.size() / c]);
    if (!tried.insert(chunk_starts(m, cuts)).second) continue;
    if (const double e = stream_end(m, cuts, stream); e < none && e <= end) {
      end = e, best = std::move(cuts);
      if (below) break;
    }
  }
  return best;
}

// The DMAs that load tensor t whole (transfer(): one per slice, or per image row of each slice
// where it is stored padded), at least 1.
uint64_t Lowering::load_dmas(int t) const {
  const Storage& st = storage_[t];
  uint64_t dmas = 0;
  for (uint64_t s = 0; s < st.slices(); ++s) dmas += runs(st, s, 0, st.shape.pixels()).size();
  return std::max<uint64_t>(dmas, 1);
}

// What one more whole weight tile costs, in cycles: its fetch from weight memory, and its shift
// into the array, which the matrix unit waits for unless the matmul before it streams at least
// array_rows + Arch::shift_after_switch() vectors (docs/timing.md, "Matrix unit"). Input streaming's extra
// chunks are short: CNN0 on 64 x 256 in pieces of 1 (350 MHz, 34 GB/s) showed its 20 extra tiles a
// piece as weight shift, 0 -> 2.6% of the cycles (263 of the 319 a piece's tile can wait), and ran
// 1.9% slower than loaded whole; counting fetches alone (9,637 against the transfer's 9,765 bytes
// per GB/s) had let it stream.
// `vectors`: what the matmul before a switch streams.
double Lowering::refetch_cycles(double vectors) const {
  return double(arch_.tile_bytes()) * arch_.clock_mhz / (arch_.weight_mem_gbps * 1000.0) + unhidden_shift(vectors);
}

// The cycles of a tile's shift into the array that a matmul of `vectors` vectors before it does
// not hide: the matrix unit waits for them whatever else is waiting (docs/timing.md "Matrix unit").
double Lowering::unhidden_shift(double vectors) const {
  return std::max(0.0, double(arch_.array_rows + arch_.shift_after_switch()) - vectors);
}

// A tile of convolution m cut into `chunks` chunks of output rows (a chunk's matmul streams its
// share of the output's vectors).
double Lowering::refetch_cycles(const MatmulOp& m, double chunks) const {
  return refetch_cycles(double(pixels(m.output) * batch_) / chunks);
}

// The weight tiles one pass over all N tiles of an unpacked matmul switches in (computed_tiles).
uint64_t Lowering::layer_tiles(const MatmulOp& m) const {
  uint64_t tiles = 0;
  for (const LaneTile& n : n_tiles(m)) {
    const std::vector<bool> c = computed_tiles(m, n);
    tiles += uint64_t(std::count(c.begin(), c.end(), true));
  }
  return tiles;
}

// Which weight tiles a pass of N tile n of unpacked matmul m computes, in pass() order (input,
// kernel position (r, s), K tile): not those all zero by m's structure, never by its values (a
// timing-only compile has none): a tile zero_tile skips (its K rows and N columns in different
// groups; an identity copy's off its diagonal), and every tile of a kernel position that is
// none of the model's taps (MatmulOp::taps: a dilated kernel's gaps, a padded Conv1d's zero
// rows). The first computed tile overwrites the accumulators; a pass that would compute none (an
// op without taps: a GRU's b at t = 0, only its bias) computes its first tile, whose zero weights
// clear them for the bias.
std::vector<bool> Lowering::computed_tiles(const MatmulOp& m, const LaneTile& n) const {
  std::vector<bool> out;
  const uint64_t n0 = n.slice * lanes_ + n.lane, cols = tile_cols(m, n);
  uint64_t k_offset = 0;
  for (const View& v : m.inputs) {
    for (uint64_t r = 0; r < m.kernel_h; ++r)
      for (uint64_t s = 0; s < m.kernel_w; ++s)
        for (const LaneTile& k : k_tiles(v))
          out.push_back(m.tap(r, s) && !zero_tile(m, k_offset + k.slice * lanes_ + k.first, k.count, n0, cols));
    k_offset += g_.tensors[v.tensor].shape.c;
  }
  if (!out.empty() && std::none_of(out.begin(), out.end(), [](bool c) { return c; })) out[0] = true;
  return out;
}

// Op i + 1 can stream with op i (lower_chain): both convolutions (not 1 x 1 stride-1 unpadded,
// not packed, their pools not fused, 8-bit, whole maps in the UB, a row within the accumulator
// budget) in one segment of the piece schedule, op i + 1 reading only op i's output, which only
// op i writes. Shapes only (a timing-only compile decides as a full one).
bool Lowering::chain_candidate(size_t i) const {
  if (!*options_.stream_input || i + 1 >= g_.ops.size() || seg_of_.at(i) != seg_of_.at(i + 1)) return false;
  const auto* a = std::get_if<MatmulOp>(&g_.ops[i]);
  const auto* b = std::get_if<MatmulOp>(&g_.ops[i + 1]);
  if (!a || !b) return false;
  const auto conv = [&](const MatmulOp& m) {
    if (m.inputs.size() != 1 || m.stride == 0 || (m.kernel_h == 1 && m.kernel_w == 1 && m.stride == 1 && m.pad == 0))
      return false;
    const View &v = m.inputs[0], &o = m.output;
    const Shape &is = g_.tensors[v.tensor].shape, &os = g_.tensors[o.tensor].shape;
    return os.h > 0 && os.w > 0 && v.pixel0 == 0 && pixels(v) == is.pixels() && o.pixel0 == 0 &&
           pixels(o) == os.pixels() && (os.h - 1) * m.stride + m.kernel_h <= is.h + 2 * m.pad &&
           (os.w - 1) * m.stride + m.kernel_w <= is.w + 2 * m.pad && !m.wide_weights() &&
           storage_[v.tensor].planes == 1 && storage_[o.tensor].planes == 1 && !in_host_[v.tensor] &&
           !in_host_[o.tensor] && !joined_[o.tensor] && conv_budget(m).first > 0 && !packing_for(m, batch_);
  };
  const int t = a->output.tensor;
  if (!conv(*a) || !conv(*b) || b->inputs[0].tensor != t || b->output.tensor == t ||
      first_def_[t] != static_cast<int64_t>(i) || first_def_[b->output.tensor] != static_cast<int64_t>(i + 1) ||
      fusion_for(i) || fusion_for(i + 1))
    return false;
  size_t writers = 0;
  for (const QOp& op : g_.ops) writers += op_writes(op).tensor == t;
  return writers == 1;
}

// Streaming into the second layer as well: op i's chunks end where its rows reach a later part
// of the input being streamed (part_cuts), and op i + 1's chunks end where the rows they read
// reach a later chunk of op i; each chunk of op i + 1 is emitted right after the chunk of op i
// that writes the last rows it reads, so that it runs while the host link still moves the
// input's later parts. Each extra chunk of either layer fetches its tiles again: chained only
// where the estimate has the two layers end sooner so than op i streamed alone with its cuts that
// pay and op i + 1 after it (chain_end; LowerOptions::stream_chain_always chains regardless).
bool Lowering::lower_chain(size_t i, const std::function<void(size_t)>& enter) {
  if (!em_.streaming() || !options_.stream_chain || !chain_candidate(i)) return false;
  const MatmulOp &a = std::get<MatmulOp>(g_.ops[i]), &b = std::get<MatmulOp>(g_.ops[i + 1]);
  check_matmul(i, a);
  check_matmul(i + 1, b);
  StreamRows stream;
  const std::vector<uint64_t> by_parts = part_cuts(a, &stream);
  if (by_parts.size() < 2) return false;
  const std::vector<PassChunk> first = conv_chunks(a, by_parts);
  const std::vector<size_t> need = chain_needs(a, b, chunk_starts(a, by_parts));
  std::vector<uint64_t> cuts{0};
  for (uint64_t y = 1; y < need.size(); ++y)
    if (need[y] > need[y - 1]) cuts.push_back(y);
  const std::vector<PassChunk> second = conv_chunks(b, cuts);
  // Chained only where the two layers end sooner so than the first streamed alone (its cuts that
  // pay, paying_cuts) and the second after it, by the estimate (chain_end).
  if (cuts.size() < 2 ||
      (!options_.stream_chain_always && chain_end(a, b, stream, true) >= chain_end(a, b, stream, false)))
    return false;
  check_steps(i, first);
  check_steps(i + 1, second);
  if (!placed_[b.output.tensor]) allocate(b.output.tensor, i + 1);
  size_t next = 0;
  for (size_t c = 0; c < first.size(); ++c) {
    enter(i);
    for (const LaneTile& n : n_tiles(a)) pass(i, a, n, first[c].steps, first[c].segments, first[c].rows);
    for (bool entered = false; next < second.size() && need[second[next].y1 - 1] <= c; ++next) {
      if (!entered) enter(i + 1), entered = true;
      for (const LaneTile& n : n_tiles(b))
        pass(i + 1, b, n, second[next].steps, second[next].segments, second[next].rows);
    }
  }
  return true;
}

// The first output row of each of convolution m's chunks (conv_chunks), and its height last.
std::vector<uint64_t> Lowering::chunk_starts(const MatmulOp& m, const std::vector<uint64_t>& cuts) const {
  const uint64_t oh = storage_[m.output.tensor].shape.h, row_step = std::max<uint64_t>(conv_budget(m).first, 1);
  std::vector<uint64_t> starts;
  for (uint64_t y = 0, start = 0, next = 1; y < oh; ++y) {
    const bool at_cut = next < cuts.size() && cuts[next] == y;
    if (at_cut) ++next;
    if (y == 0 || y - start >= row_step || at_cut) starts.push_back(y), start = y;
  }
  starts.push_back(oh);
  return starts;
}

// Convolution m's chunks of output rows: one starting at each of `cuts` (sorted, from 0) and
// wherever the accumulator budget would be exceeded; chunks of pixels within a row when one
// row does not fit.
std::vector<Lowering::PassChunk> Lowering::conv_chunks(const MatmulOp& m, const std::vector<uint64_t>& cuts) const {
  const Shape& os = storage_[m.output.tensor].shape;
  const uint64_t ow = os.w;
  const auto [rows_per, budget] = conv_budget(m);
  const uint64_t cols_per = rows_per ? ow : budget / batch_;
  const std::vector<uint64_t> starts = chunk_starts(m, cuts);
  std::vector<PassChunk> chunks;
  for (size_t c0 = 0; c0 + 1 < starts.size(); ++c0)
    for (uint64_t x0 = 0, y0 = starts[c0]; x0 < ow; x0 += cols_per) {
      const uint64_t y1 = starts[c0 + 1], x1 = std::min(ow, x0 + cols_per), nx = x1 - x0;
      PassChunk c;
      c.rows = (y1 - y0) * nx * batch_;
      c.y0 = y0;
      c.y1 = y1;
      if (nx == ow)
        c.segments.push_back({y0 * ow, (y1 - y0) * ow, 0});
      else
        for (uint64_t y = y0; y < y1; ++y) c.segments.push_back({y * ow + x0, nx, (y - y0) * nx * batch_});
      c.steps = conv_steps(m, y0, y1, x0, x1);
      chunks.push_back(std::move(c));
    }
  return chunks;
}

// The matmul steps of convolution m over output rows [y0, y1) and columns [x0, x1), one list per
// weight tile (kernel position and K tile), accumulator rows from 0 in (y, x, sample) order.
std::vector<std::vector<MatmulStep>> Lowering::conv_steps(const MatmulOp& m, uint64_t y0, uint64_t y1, uint64_t x0,
                                                          uint64_t x1) const {
  const View& v = m.inputs[0];
  const Storage& in = storage_[v.tensor];
  const uint64_t st = m.stride, off = in.pad - m.pad, nx = x1 - x0;
  std::vector<std::vector<MatmulStep>> out;
  for (uint64_t r = 0; r < m.kernel_h; ++r)
    for (uint64_t s = 0; s < m.kernel_w; ++s)
      for (const LaneTile& k : k_tiles(v)) {
        std::vector<MatmulStep> steps;
        if (st == 1)
          steps.push_back({in.stored_row(k.slice, y0 + r + off, x0 + s + off), nx * batch_, y1 - y0,
                           in.stored_w() * batch_, 0});
        else
          for (uint64_t y = y0; y < y1; ++y)
            steps.push_back({in.stored_row(k.slice, y * st + r + off, x0 * st + s + off), batch_, nx, st * batch_,
                             (y - y0) * nx * batch_});
        out.push_back(std::move(steps));
      }
  return out;
}

// Convolution i's activates pool as they write (the pool after it fused), when:
//   - the next op is a pool and the only reader of the convolution's output, which is not the
//     model's output; the convolution is not on the pixel path (1x1, stride 1: chunks of pixels
//     across rows) and not packed (packing.h: several pixels per accumulator row);
//   - its output pooled rows can be cut into bands: a chunk of pooled rows [oy0, oy1) needs
//     convolution rows [oy0 x s, (oy1 - 1) x s + k) in the accumulators (window k, stride s), at
//     most the budget of one pass (acc_budget, as lower() chunks). Rows no window reads are not computed. With overlapping
//     windows (s < k) and several chunks, the k - s rows two chunks share are computed by both:
//     fused only when those extra vectors (x kernel positions x K and N tiles) are fewer than the
//     UB rows the separate pool would read (window^2 per pooled row and slice).
std::optional<Lowering::Fusion> Lowering::fusion_for(size_t i) const {
  const auto* m = std::get_if<MatmulOp>(&g_.ops[i]);
  if (!*options_.fuse_pools || !m || i + 1 >= g_.ops.size()) return std::nullopt;
  const auto* p = std::get_if<PoolOp>(&g_.ops[i + 1]);
  const int t = m->output.tensor;
  if (!p || seg_of_.at(i) != seg_of_.at(i + 1) || p->input.tensor != t || t == g_.output || in_host_[t] || joined_[t] ||
      in_host_[p->output.tensor] || in_host_[m->inputs.at(0).tensor] ||
      last_use_[t] != static_cast<int64_t>(i + 1) || first_def_[t] != static_cast<int64_t>(i))
    return std::nullopt;
  size_t readers = 0, writers = 0;
  for (const auto& op : g_.ops)
    std::visit([&](const auto& o) {
      using T = std::decay_t<decltype(o)>;
      if constexpr (std::is_same_v<T, MatmulOp>) {
        for (const View& v : o.inputs) readers += v.tensor == t;
      } else if constexpr (std::is_same_v<T, PoolOp>) {
        readers += o.input.tensor == t;
      } else {
        readers += o.a.tensor == t || (o.op != isa::VecOp::pass && o.b.tensor == t);
      }
      writers += o.output.tensor == t;
    }, op);
  if (readers != 1 || writers != 1) return std::nullopt;
  const bool linear = m->kernel_h == 1 && m->kernel_w == 1 && m->stride == 1 && m->pad == 0;
  if (linear || m->inputs.size() != 1 || packing_for(*m, batch_)) return std::nullopt;
  const Shape &os = g_.tensors[t].shape, &ps = g_.tensors[p->output.tensor].shape;
  const uint64_t k = p->window, s = p->stride;
  if (k == 0 || s == 0 || k > 15 || s > 15 || os.h < k || os.w < k || (os.h - k) / s + 1 != ps.h ||
      (os.w - k) / s + 1 != ps.w || os.c != ps.c || p->input.pixel0 || p->output.pixel0 || m->output.pixel0)
    return std::nullopt;  // (the unfused lowering names what is wrong)
  const uint64_t line = os.w * batch_, budget = pass_budget(*m);
  if (k * line > budget) return std::nullopt;
  const uint64_t bands = std::min(ps.h, (budget / line - k) / s + 1);
  if (s < k && bands < ps.h) {
    const uint64_t chunks = div_up(ps.h, bands);
    const uint64_t tiles = layer_tiles(*m);
    const uint64_t extra = (chunks - 1) * (k - s) * line * tiles;
    const uint64_t pool_reads = ps.h * ps.w * batch_ * k * k * div_up(os.c, lanes_);
    if (extra > pool_reads) return std::nullopt;
  }
  return Fusion{i + 1, bands};
}

// Convolution i with the pool after it fused: chunks of f.bands pooled rows (fusion_for), each
// pass activating with pooling into the pool's output.
void Lowering::lower_fused(size_t i, const MatmulOp& m, const Fusion& f) {
  const PoolOp& p = std::get<PoolOp>(g_.ops[f.pool]);
  const Shape& os = g_.tensors[m.output.tensor].shape;
  const uint64_t ph = g_.tensors[p.output.tensor].shape.h, k = p.window, s = p.stride;
  struct Chunk {
    std::vector<std::vector<MatmulStep>> steps;
    uint64_t rows, oy0, oy1;
  };
  std::vector<Chunk> chunks;
  for (uint64_t oy0 = 0; oy0 < ph; oy0 += f.bands) {
    const uint64_t oy1 = std::min(ph, oy0 + f.bands), y0 = oy0 * s, y1 = (oy1 - 1) * s + k;
    chunks.push_back({conv_steps(m, y0, y1, 0, os.w), (y1 - y0) * os.w * batch_, oy0, oy1});
  }
  for (const Chunk& c : chunks)
    for (const auto& steps : c.steps)
      for (const MatmulStep& st : steps)
        if (st.rows > 65535 || st.repeat > 65535)
          fail(i, "a matmul would stream more than 65535 rows; use a smaller batch");
  for (const LaneTile& n : n_tiles(m))
    for (const Chunk& c : chunks) {
      const PooledBands bands{&p, c.oy0, c.oy1};
      pass(i, m, n, c.steps, {}, c.rows, &bands);
    }
}

// Activates a fused pass (accumulator block `base`: convolution rows from oy0 x stride, all
// columns) into pooled rows [oy0, oy1) of N tile n's slice of the pool's output: one activate,
// or one per pooled row when that output is stored padded (its rows are then not contiguous).
void Lowering::activate_pooled(const MatmulOp& m, const PoolOp& p, const LaneTile& n, uint64_t base, uint64_t oy0,
                               uint64_t oy1) {
  const Storage& out = storage_[p.output.tensor];
  const uint64_t ow = g_.tensors[m.output.tensor].shape.w, pw = out.shape.w, k = p.window, s = p.stride;
  const bool perchan = per_column(m);
  const uint64_t qtable = perchan ? table_row(m, n) : 0;
  sim::ActPool regs;
  regs.kind = static_cast<uint64_t>(p.kind) + 1;
  regs.window = k;
  regs.stride = s;
  regs.width = ow;
  regs.batch = batch_;
  em_.pool_in_activate(regs);
  dense_write(out);
  const auto emit = [&](uint64_t first_line, uint64_t lines, uint64_t oy, uint64_t pooled_lines) {
    const uint64_t ub = out.row(n.slice, oy, 0);
    emit_activate(m, qtable, base + first_line * ow * batch_, ub, lines * ow * batch_, {ub, pooled_lines * pw * batch_},
                  n.lane);
  };
  if (out.pad == 0)
    emit(0, (oy1 - 1 - oy0) * s + k, oy0, oy1 - oy0);
  else
    for (uint64_t oy = oy0; oy < oy1; ++oy) emit((oy - oy0) * s, k, oy, 1);
  em_.pool_in_activate({});
}

// How convolution m packs for a piece of `batch` samples (compiler::packing_for).
std::optional<Packing> Lowering::packing_for(const MatmulOp& m, uint64_t batch) const {
  return compiler::packing_for(g_, m, arch_, options_, batch);
}

// A packed convolution's weight tile for kernel rows r0, r0 + d, .., r0 + (kh-1) d (packing.h; d =
// pk.row_step): row (u*kh + rr)*C + c, column p*N + j (P > 1) or j - n0 (P = 1, N tile n) holds
// W[r0 + rr d][u - p*stride][c][j].
TileFetch Lowering::packed_tile(const MatmulOp& m, const LaneTile& n, const Packing& pk, uint64_t r0, uint64_t kh) {
  const TileKey key{&m, {n.slice, n.lane, pk.p, pk.u, r0, kh, pk.row_step}};
  if (const auto it = packed_cache_.find(key); it != packed_cache_.end()) return it->second;
  const uint64_t C = m.k, M = arch_.array_cols, n0 = pk.p > 1 ? 0 : n.slice * lanes_ + n.lane;
  const uint64_t cols = pk.p > 1 ? m.n : tile_cols(m, n);
  const auto fill = [&](uint8_t* tile) {
    for (uint64_t u = 0; u < pk.u; ++u)
      for (uint64_t rr = 0; rr < kh; ++rr)
        for (uint64_t c = 0; c < C; ++c) {
          uint8_t* row = tile + ((u * kh + rr) * C + c) * M;
          for (uint64_t p = 0; p < pk.p; ++p) {
            if (u < p * m.stride || u - p * m.stride >= m.kernel_w) continue;
            const uint64_t s = u - p * m.stride;
            const int8_t* w = m.weights.data() + (((r0 + rr * pk.row_step) * m.kernel_w + s) * m.k + c) * m.n + n0;
            std::memcpy(row + p * cols, w, cols);
          }
        }
  };
  if (m.weight_id < 0) {
    auto [at, added] = built_.packed.try_emplace(key, 0);
    if (added) {
      std::vector<uint8_t> tile(arch_.tile_bytes(), 0);
      fill(tile.data());
      at->second = built_.tiles.number(std::move(tile));
    }
    return packed_cache_[key] = fetch_of(image_.content(built_.tiles, at->second));
  }
  // Seeded weights: row (u kh + rr) C + c holds, in column block p, channel c's group's columns
  // where kernel column u - p x stride exists.
  const auto use = [&] {
    isa::WeightTileUse t;
    for (uint64_t u = 0; u < pk.u; ++u) {
      uint64_t p0 = pk.p, p1 = 0;  // the column blocks [p0, p1] with a kernel column
      for (uint64_t p = 0; p < pk.p; ++p)
        if (u >= p * m.stride && u - p * m.stride < m.kernel_w) p0 = std::min(p0, p), p1 = p;
      if (p0 == pk.p) continue;
      for (uint64_t rr = 0; rr < kh; ++rr)
        for (uint64_t c = 0; c < C; ++c) {
          const auto [j0, j1] = group_columns(m, c, n0, cols);
          if (j0 >= j1) continue;
          const uint64_t first = p0 * cols + j0, last = p1 * cols + j1;
          t.rows = uint32_t((u * kh + rr) * C + c + 1);
          t.cols = std::max(t.cols, uint32_t(last));
          t.spans += last - first;
        }
    }
    return t;
  };
  const WeightImage::Key id{1, uint64_t(m.weight_id), pk.p, pk.u, r0, kh, n0, cols, pk.row_step, 0};
  return packed_cache_[key] = fetch_of(image_.seeded(id, fill, use));
}

// A packed convolution (packing.h): per N tile (P = 1) or once (P > 1, all N channels of P pixels
// in one accumulator row), chunks of whole output rows (or of pixel groups within a row when one
// row's do not fit); per chunk and kernel row tile one weight tile and, per output row, one
// gathering matmul for the full groups (B samples x groups: rows = B, repeat = groups, stride =
// P x stride x B) and one for a last smaller group; then the activates: P > 1 scatters each
// group's B accumulator rows to its pixels (one activate per group), P = 1 writes runs as unpacked.
// A packed convolution's chunks (lower_packed): as many whole output rows of `groups` groups of
// `batch` samples as `budget` accumulator rows hold, else each row in runs of groups.
std::vector<Lowering::PackedChunk> Lowering::packed_chunks(uint64_t oh, uint64_t groups, uint64_t batch,
                                                           uint64_t budget) {
  std::vector<PackedChunk> chunks;
  if (const uint64_t rows_per = budget / (groups * batch))
    for (uint64_t y0 = 0; y0 < oh; y0 += rows_per) chunks.push_back({y0, std::min(oh, y0 + rows_per), 0, groups});
  else
    for (uint64_t y = 0, per = budget / batch; y < oh; ++y)
      for (uint64_t g0 = 0; g0 < groups; g0 += per) chunks.push_back({y, y + 1, g0, std::min(groups, g0 + per)});
  return chunks;
}

void Lowering::lower_packed(size_t i, const MatmulOp& m, const Packing& pk, uint64_t budget) {
  (void)i;
  const Storage& in = storage_[m.inputs[0].tensor];
  const Storage& out = storage_[m.output.tensor];
  const uint64_t oh = out.shape.h, ow = out.shape.w, B = batch_, C = in.shape.c, st = m.stride, off = in.pad - m.pad;
  const uint64_t P = pk.p, full = ow / P, tail = ow % P, G = full + (tail != 0);
  const std::vector<PackedChunk> chunks = packed_chunks(oh, G, B, budget);
  const std::vector<LaneTile> nts = P == 1 ? n_tiles(m) : std::vector<LaneTile>{{0, 0, 0, m.n}};
  stats_[layer_].packing = describe(pk);
  const auto pixels_of = [&](uint64_t g) { return g < full ? P : tail; };
  for (const LaneTile& n : nts)
    for (const PackedChunk& c : chunks) {
      const uint64_t groups = c.g1 - c.g0, base = next_block((c.y1 - c.y0) * groups * B);
      // Row tiles of pk.rows of the kernel rows gathered (those with a tap: first_row, first_row +
      // row_step, ...), tile j from kernel row r0.
      for (uint64_t j0 = 0; j0 < pk.kernel_rows; j0 += pk.rows) {
        const uint64_t kh = std::min(pk.rows, pk.kernel_rows - j0), r0 = pk.first_row + j0 * pk.row_step;
        const TileFetch waddr = packed_tile(m, n, pk, r0, kh);
        bool first = true;
        // Groups [ga, gb) of output row y, each of `pixels` pixels: one matmul.
        const auto emit = [&](uint64_t y, uint64_t ga, uint64_t gb, uint64_t pixels) {
          sim::PackRegs gather = dense_read(in, {0, 0, 0, C});
          gather.gather_bytes = C;
          gather.gather_cols = (pixels - 1) * st + m.kernel_w;
          gather.gather_rows = kh;
          gather.gather_col_step = B;  // (logical rows: one pixel's samples)
          gather.gather_row_step = pk.row_step * in.stored_w() * B;
          isa::Instruction mm = isa::make_instruction(Opcode::matmul);
          mm[Field::ub] = in.stored_row(0, y * st + r0 + off, ga * P * st + off);
          mm[Field::acc] = base + ((y - c.y0) * groups + ga - c.g0) * B;
          mm[Field::rows] = B;
          mm[Field::repeat] = gb - ga;
          mm[Field::stride] = gb - ga > 1 ? P * st * B : 0;
          mm[Field::switch_weights] = first;
          mm[Field::accumulate] = j0 > 0;
          // Useful MACs a vector: the group's pixels' windows, the model's taps of them
          // (MatmulOp::taps). The machine counts a gathering matmul's tile spans (one segment:
          // its box); a short last group uses part of them, a dilated kernel's spans hold its
          // gaps, so such a matmul gives its own figure (meta.matmul_macs).
          const uint64_t per_vector =
              pixels * m.taps_in_rows(r0, kh, pk.row_step) * group_pairs(m, 0, C, n.slice * lanes_ + n.first, n.count);
          const isa::WeightTileUse& tu = image_.use_at(waddr.waddr);
          const uint64_t counted = gather.segments() > 1 ? tu.spans : uint64_t{tu.rows} * tu.cols;
          em_.matmul(mm, first, waddr, gather, false,
                     per_vector != counted ? std::optional<uint64_t>(per_vector) : std::nullopt);
          const uint64_t useful = (gb - ga) * B * per_vector;
          macs_ += useful;
          stats_[layer_].macs += useful;
          stats_[layer_].array_macs += (gb - ga) * B * arch_.tile_bytes();
          stats_[layer_].tiles += first;
          first = false;
        };
        for (uint64_t y = c.y0; y < c.y1; ++y) {
          if (c.g0 < std::min(c.g1, full)) emit(y, c.g0, std::min(c.g1, full), P);
          if (tail && c.g1 == G) emit(y, std::max(c.g0, full), G, tail);
        }
      }
      dense_write(out);
      if (P == 1) {  // (no tail: 1 divides every width) the chunk's pixels, as unpacked
        if (c.g0 == 0 && c.g1 == G) activate(m, n, base, {{c.y0 * ow, (c.y1 - c.y0) * ow, 0}});
        else activate(m, n, base, {{c.y0 * ow + c.g0, groups, 0}});
        continue;
      }
      const bool perchan = per_column(m);
      const uint64_t qtable = perchan ? table_row(m, n, P) : 0;
      // (Into a concat's joined tensor: the branch's slice, from its first channel's byte.)
      const uint64_t slice = m.output.channel0 / lanes_, lane = m.output.channel0 % lanes_;
      for (uint64_t y = c.y0; y < c.y1; ++y)
        for (uint64_t g = c.g0; g < c.g1; ++g) {
          em_.scatter(pixels_of(g), m.n);
          const uint64_t ub = out.row(slice, y, g * P);
          emit_activate(m, qtable, base + ((y - c.y0) * groups + g - c.g0) * B, ub, B, {ub, B}, lane);
        }
      em_.scatter(0, 0);
    }
}

// The pool instruction's fields that op i's shapes fill (window, stride, input width, output size).
void Lowering::check_pool_fields(size_t i, const PoolOp& p) const {
  const auto limit = [&](const char* what, uint64_t value, uint64_t max) {
    if (value > max) fail(i, fmt::format("pool {} {} exceeds the pool instruction's limit {}", what, value, max));
  };
  const Shape& out = storage_[p.output.tensor].shape;
  limit("window", p.window, isa::field_max(Opcode::pool, Field::window));
  limit("stride", p.stride, isa::field_max(Opcode::pool, Field::pool_stride));
  limit("input width", storage_[p.input.tensor].stored_w(), isa::field_max(Opcode::pool, Field::in_w));
  limit("output height", out.h, isa::field_max(Opcode::pool, Field::out_h));
  limit("output width", out.w, isa::field_max(Opcode::pool, Field::out_w));
}

void Lowering::check_pool_rows(size_t i, const PoolOp& p) const {
  const Storage& in = storage_[p.input.tensor];
  if (in.pixel_rows() > 255)
    throw DoesNotFit(fmt::format("model {}: layer {}: pool of {} UB rows per pixel exceeds the pool instruction's "
                                 "limit 255",
                                 g_.name, g_.op_layer.at(i), in.pixel_rows()),
                     in.pixel_rows(), 255, -1);
}

void Lowering::lower(size_t i, const PoolOp& p) {
  const Storage& in = storage_[p.input.tensor];
  const Storage& out = storage_[p.output.tensor];
  if (p.input.pixel0 || pixels(p.input) != in.shape.pixels() || p.output.pixel0 || pixels(p.output) != out.shape.pixels())
    fail(i, "pooling reads and writes whole maps");
  const uint64_t oh = out.shape.h, ow = out.shape.w;
  if (in.shape.c != out.shape.c || p.stride == 0 || p.window == 0 || (oh - 1) * p.stride + p.window > in.shape.h ||
      (ow - 1) * p.stride + p.window > in.shape.w)
    fail(i, "the pooled map does not fit the input map, window and stride");
  if (in.q != out.q) fail(i, "pooling between a dense and a plain layout");
  check_pool_rows(i, p);
  check_pool_fields(i, p);
  for (uint64_t s = 0; s < in.slices(); ++s) {
    const auto emit = [&](uint64_t y0, uint64_t rows_out) {
      isa::Instruction in_ = isa::make_instruction(Opcode::pool);
      in_[Field::kind] = static_cast<uint64_t>(p.kind);
      in_[Field::src] = in.row(s, y0 * p.stride, 0);
      in_[Field::ub] = out.row(s, y0, 0);
      in_[Field::in_w] = in.stored_w();
      in_[Field::out_h] = rows_out;
      in_[Field::out_w] = ow;
      in_[Field::batch] = in.pixel_rows();  // (dense: q samples per row, pooled row by row alike)
      in_[Field::window] = p.window;
      in_[Field::pool_stride] = p.stride;
      const uint64_t read_pixels = ((rows_out - 1) * p.stride + p.window - 1) * in.stored_w() + (ow - 1) * p.stride + p.window;
      em_.activation(in_, {{in_[Field::src], read_pixels * in.pixel_rows()}},
                     {in_[Field::ub], rows_out * ow * in.pixel_rows()});
    };
    if (out.pad == 0)
      emit(0, oh);
    else
      for (uint64_t y = 0; y < oh; ++y) emit(y, 1);
  }
}

void Lowering::lower(size_t i, const VectorOp& v) {
  const bool two = v.op != isa::VecOp::pass;
  const Storage& a = storage_[v.a.tensor];
  const Storage& o = storage_[v.output.tensor];
  const Storage& b = storage_[two ? v.b.tensor : v.a.tensor];
  const uint64_t count = pixels(v.output);
  if (pixels(v.a) != count || (two && pixels(v.b) != count) || a.shape.c != o.shape.c || (two && b.shape.c != o.shape.c))
    fail(i, "element-wise operands and result must have the same shape");
  const View& vb = two ? v.b : v.a;
  if (a.q != o.q || b.q != o.q) fail(i, "element-wise operands in a dense and a plain layout");
  const uint64_t pr = o.pixel_rows();  // UB rows per pixel, the same for the three (dense or not)
  for (uint64_t s = 0; s < o.slices(); ++s) {
    const auto ra = runs(a, s, v.a.pixel0, count), rb = runs(b, s, vb.pixel0, count),
               ro = runs(o, s, v.output.pixel0, count);
    // Walk the three run lists together, cutting at every boundary.
    size_t ia = 0, ib = 0, io = 0;
    uint64_t da = 0, db = 0, dout = 0;
    for (uint64_t q = 0; q < count;) {
      uint64_t len = std::min({ra[ia].pixels - da, rb[ib].pixels - db, ro[io].pixels - dout});
      len = std::min(len, 65535 / pr);
      isa::Instruction in = isa::make_instruction(Opcode::vector);
      in[Field::op] = static_cast<uint64_t>(v.op);
      in[Field::func] = static_cast<uint64_t>(v.func);
      in[Field::src] = ra[ia].row + da * pr;
      in[Field::src_b] = two ? rb[ib].row + db * pr : 0;
      in[Field::ub] = ro[io].row + dout * pr;
      in[Field::rows] = len * pr;
      in[Field::mult] = v.mult;
      in[Field::shift] = v.shift;
      Emitter::Spans reads{{in[Field::src], len * pr}};
      if (two) reads.push_back({in[Field::src_b], len * pr});
      em_.planes({0, a.high(), two ? b.high() : 0, o.high()});
      em_.activation(in, reads, {in[Field::ub], len * pr});
      q += len;
      if ((da += len) == ra[ia].pixels) ++ia, da = 0;
      if ((db += len) == rb[ib].pixels) ++ib, db = 0;
      if ((dout += len) == ro[io].pixels) ++io, dout = 0;
    }
  }
}

// ---- banding ------------------------------------------------------------------------------------

// The band storages of op i for output rows [y0, y1): each tensor it reads (band_input's rows,
// stored with the op's padding), then the one it writes (unpadded).
std::vector<std::pair<int, Storage>> Lowering::band_storages(size_t i, uint64_t y0, uint64_t y1) const {
  const QOp& op = g_.ops[i];
  const BandInput bi = band_input(op, y0, y1);
  std::vector<std::pair<int, Storage>> bands;
  for (const View& v : op_reads(op)) {
    Shape s = g_.tensors[v.tensor].shape;
    s.h = bi.map_rows();
    bands.push_back({v.tensor, Storage{s, batch_, lanes_, bi.pad, 0}});
  }
  const int out = op_writes(op).tensor;
  Shape s = g_.tensors[out].shape;
  s.h = y1 - y0;
  bands.push_back({out, Storage{s, batch_, lanes_, 0, 0}});
  return bands;
}

uint64_t Lowering::band_rows_needed(size_t i, uint64_t out_rows) const {
  uint64_t rows = 0;
  for (const auto& [t, st] : band_storages(i, 0, out_rows)) rows += st.rows();
  return rows;
}

// Host DMA between a band and its tensor in host memory (host_of_, TPU order, layout.h): the
// band's rows are the tensor's stored rows from `first` on (input bands: with the band's padding,
// rows outside the map stay zero; output bands: unpadded).
void Lowering::band_io(int t, const Storage& band, uint64_t first, bool write) {
  const Shape& full = g_.tensors[t].shape;
  const uint64_t B = batch_, row_pixels = full.w * B;
  const auto dma = [&](uint64_t host, uint64_t ub, uint64_t rows, uint64_t cs) {
    for (uint64_t done = 0; done < rows;) {
      const uint64_t n = std::min(rows - done, (uint64_t{1} << 24) - 1);
      em_.host_dma(write, host + done * cs, ub + done, n, cs, cs);
      done += n;
    }
  };
  for (uint64_t s = 0; s < band.slices(); ++s) {
    const uint64_t cs = band.slice_channels(s), slice_host = host_of_[t] + s * lanes_ * full.pixels() * B;
    if (band.pad == 0) {
      dma(slice_host + first * row_pixels * cs, band.row(s, 0, 0), band.shape.h * row_pixels, cs);
      continue;
    }
    for (uint64_t j = 0; j < band.stored_h(); ++j) {
      const uint64_t y = first + j;  // in the map's padded rows
      if (y < band.pad || y - band.pad >= full.h) continue;
      dma(slice_host + (y - band.pad) * row_pixels * cs, band.stored_row(s, j, band.pad), row_pixels, cs);
    }
  }
}

// A padded pool or a 1-D pool (quantize.cpp pool_padded, pool_into) first copies its map into a
// padded map, or its line into k rows, by vec passes over parts of rows, which cannot be cut into
// bands: where op i is such a copy, refused naming the pool's tensors and the UB rows they take
// together for one sample (not counting an average's edge windows, each a few rows at a time).
void Lowering::refuse_pool_bands(size_t i) const {
  const std::string& layer = g_.op_layer.at(i);
  const PoolOp* pool = nullptr;
  size_t first = i;  // the layer's first op, which reads its input
  while (first > 0 && g_.op_layer[first - 1] == layer) --first;
  size_t at = first;  // the pool op
  for (; at < g_.ops.size() && g_.op_layer[at] == layer && !pool; ++at) pool = std::get_if<PoolOp>(&g_.ops[at]);
  if (!pool) return;
  check_pool_fields(at - 1, *pool);  // (what no unified buffer changes first)
  const std::vector<View> reads = op_reads(g_.ops[first]);
  if (reads.empty() || reads[0].tensor == pool->input.tensor) return;
  const int in = reads[0].tensor, copy = pool->input.tensor, out = pool->output.tensor;
  const Shape& cs = g_.tensors[copy].shape;
  // (the quantizer's names: NAME.padded a padded map, NAME.rows a 1-D pool's copies of its line)
  const std::string& cn = g_.tensors[copy].name;
  const bool line = cn.rfind(".padded") == std::string::npos ||
                    (cn.rfind(".rows") != std::string::npos && cn.rfind(".rows") > cn.rfind(".padded"));
  const auto rows = [&](int t) {  // the whole tensor's (storage_ holds a band's where one was lowered)
    Storage whole{g_.tensors[t].shape, batch_, lanes_, 0, 0};
    whole.planes = storage_[t].planes;
    return whole.ub_rows();
  };
  const uint64_t need = rows(in) + rows(copy) + rows(out), free = arch_.ub_rows() - table_rows_;
  const std::string tensors = fmt::format(
      "its input {} {} ({} UB rows), {} {} {} ({}) and output {} {} ({}) take {} UB rows together for {} sample{}",
      g_.tensors[in].name, g_.tensors[in].shape.str(), rows(in), line ? "the line's rows" : "the padded map",
      g_.tensors[copy].name, cs.str(), rows(copy), g_.tensors[out].name, g_.tensors[out].shape.str(), rows(out), need,
      batch_, batch_ == 1 ? "" : "s");
  const std::string ub = fmt::format("the {} the unified buffer has{}", free,
                                     table_rows_ ? fmt::format(" beside {} rows of tables", table_rows_) : "");
  const std::string why =
      need > free ? fmt::format("more than {}; use a ub_bytes of more than {} (--set ub_bytes=...), or a {}",
                                ub, (need + table_rows_) * arch_.ub_row_bytes(), line ? "shorter line" : "smaller map")
                  : fmt::format("of {}, but are held in host memory, to run in bands, with the tensors of the "
                                "layers joined to them, one of which does not fit the unified buffer; use a larger "
                                "ub_bytes, enough for those layers, or a smaller input",
                                ub);
  fail(i, fmt::format("{} cannot run in bands of rows ({} by vec passes over parts of rows, which cannot be cut into "
                      "bands): {}, {}",
                      line ? "a 1-D pool" : "a padded pool",
                      line ? "its line is first copied into its window's rows" : "its map is first copied into a padded map",
                      tensors, why));
}

// Op i over bands of its output rows, all its tensors in host memory: per band, its storages are
// allocated (the next band's beside the previous one's when two fit, so that its input DMA
// overlaps the previous band's matmuls), its input rows read, the op lowered on the band as on a
// smaller map, and its output rows written back. The bands are as tall as the largest free block
// allows; a single output row that does not fit is refused with the numbers.
void Lowering::lower_in_bands(size_t i) {
  const QOp& op = g_.ops[i];
  std::vector<View> views = op_reads(op);
  views.push_back(op_writes(op));
  for (const View& v : views)
    if (v.pixel0 != 0 || (v.pixels != 0 && v.pixels != g_.tensors[v.tensor].shape.pixels())) {
      refuse_pool_bands(i);
      fail(i, "reads or writes part of a tensor (a time step): it cannot be split into bands of rows, and its tensors "
              "do not fit the unified buffer");
    }
  for (const View& v : views)
    if (storage_[v.tensor].planes > 1)
      fail(i, fmt::format("the 16-bit tensor {} does not fit the unified buffer (16-bit tensors are not split into "
                          "bands of rows)", g_.tensors[v.tensor].name));
  const int out = views.back().tensor;
  const uint64_t oh = g_.tensors[out].shape.h, largest = alloc_.largest();
  const auto fits = [&](uint64_t rows, uint64_t copies) { return copies * band_rows_needed(i, rows) <= largest; };
  uint64_t copies = fits(1, 2) ? 2 : 1;
  if (!fits(1, copies)) {
    const BandInput bi = band_input(op, 0, 1);
    throw InputError(fmt::format(
        "model {}: layer {}: even one output row of tensor {} ({}) does not fit in the unified buffer: with the {} "
        "input rows it reads it needs {} UB rows, the largest free block is {} rows of {} ({} bytes per row); use a "
        "larger ub_bytes",
        g_.name, g_.op_layer.at(i), g_.tensors[out].name, g_.tensors[out].shape.str(), bi.map_rows(),
        band_rows_needed(i, 1), largest, arch_.ub_rows(), arch_.ub_row_bytes()));
  }
  uint64_t lo = 1, hi = oh;  // the tallest band that fits: binary search
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid, copies)) lo = mid;
    else hi = mid - 1;
  }
  const uint64_t rows = lo;
  std::vector<std::pair<int, Storage>> previous;
  for (uint64_t y0 = 0; y0 < oh; y0 += rows) {
    const uint64_t y1 = std::min(oh, y0 + rows);
    std::vector<std::pair<int, Storage>> bands = band_storages(i, y0, y1);
    if (copies == 1) {  // no room for two bands at once: this band takes the previous one's rows
      for (const auto& [t, st] : previous) alloc_.release(st.base, st.rows());
      previous.clear();
    }
    for (auto& [t, st] : bands) {
      const bool top = t == out;  // outputs from the top, inputs from the bottom
      if (!alloc_.allocate(st.rows(), top, st.base) && !alloc_.allocate(st.rows(), !top, st.base))
        throw std::logic_error("lower_in_bands: a band that fits did not fit");
      if (t != out) {  // its border, and the map's padding rows inside it (band_padding_rows)
        std::vector<std::pair<uint64_t, uint64_t>> zeros = border_ranges(st);
        for (const auto& r : band_padding_rows(st, band_input(op, y0, y1).first, g_.tensors[t].shape.h))
          zeros.push_back(r);
        for (const auto& [first, n] : zeros) {
          em_.zero({first, n});
          alloc_.zeroed(first, n);
        }
      }
    }
    stats_[layer_].ub_rows = std::max(stats_[layer_].ub_rows, table_rows_ + alloc_.used());
    for (const auto& [t, st] : previous) alloc_.release(st.base, st.rows());
    for (const auto& [t, st] : bands) storage_[t] = st;
    for (const auto& [t, st] : bands)
      if (t != out) band_io(t, st, band_input(op, y0, y1).first, false);
    std::visit([&](const auto& o) { lower(i, o); }, op);
    band_io(out, storage_[out], y0, true);
    previous = std::move(bands);
    ++bands_;
  }
  for (const auto& [t, st] : previous) alloc_.release(st.base, st.rows());
}

std::vector<int> Lowering::touched(size_t i) const {
  std::vector<int> t;
  for (const View& v : op_reads(g_.ops[i])) t.push_back(v.tensor);
  t.push_back(op_writes(g_.ops[i]).tensor);
  return t;
}

// Input streaming: a model input's load is cut into parts so that its first reader, a matmul op,
// starts on the rows already loaded (the emitter emits each part just before the first matmul
// that reads it, and the next part right after that matmul, so the host link moves part j + 1
// while the matrix unit works on part j; pass() cuts a matmul step where its groups reach into a
// later part). The load whole takes D DMAs (load_dmas: one per slice, or per image row of each
// slice where the input is stored padded), each started after L cycles (host_latency_cycles):
// T = its bytes' time + (D - 1) L after the first start. Parts are whole image rows of a slice, so
// k <= D parts keep the DMAs as they are, and k > D parts add k - D starts. With k parts the first
// layer waits for the first part (T / k) and at most the layer's own streaming C (its vectors:
// pixels x batch x kernel positions x K tiles x N tiles) can hide behind the transfer:
// max(0, k - D) L + min(C, T) / k is least at k = sqrt(min(C, T) / L), rounded down, or D where
// that is fewer.
uint64_t Lowering::stream_parts(size_t i, int t) const {
  const auto* m = std::get_if<MatmulOp>(&g_.ops[i]);
  if (!*options_.stream_input || !m || in_host_[t]) return 1;
  const auto vectors = [&](const MatmulOp& op) {
    return double(pixels(op.output) * batch_) * double(layer_tiles(op));
  };
  const double bytes = double(batch_ * g_.tensors[t].shape.elements());
  const double latency = double(std::max<uint64_t>(arch_.host_latency_cycles, 1));
  // The load whole takes D DMAs, one per slice, or per image row of each slice where the input is
  // stored padded (transfer()), each starting after L cycles: its time after the first start is
  // its bytes' T_b plus (D - 1) L, and cutting it into k <= D parts costs no DMA more; k > D parts
  // cost k - D more starts. (Counting one DMA whatever the storage, the compiler loaded cifar_cnn's
  // padded 32 x 32 input on a 512 x 512 array at batch 7 whole at 10.74 GB/s (T_b = 1,402 cycles:
  // sqrt(1,402 / 700) < 2 parts) and streamed it in 2 parts at 5 GB/s (T_b = 3,011), but its 32
  // DMAs' 31 later starts add 21,700 cycles: 119,712 cycles at 10.74 GB/s against 102,606 at 5.)
  const double dmas = double(load_dmas(t));
  const double transfer = std::ceil(bytes * arch_.clock_mhz / (arch_.host_gbps * 1000.0)) + (dmas - 1) * latency;
  // k parts where each beyond D costs a start: sqrt(min(C, T) / L), and at least D (free).
  const auto parts = [&](double c) {
    return std::max({1.0, dmas, std::floor(std::sqrt(std::min(c, transfer) / latency))});
  };
  // The transfer left exposed with k parts when C vectors can run behind it.
  const auto exposed = [&](double c, double k) {
    return transfer - std::min(c, transfer) + std::max(0.0, k - dmas) * latency + std::min(c, transfer) / k;
  };
  const double c = vectors(*m);
  double k = parts(c);
  // Parts that cut the image rows (more than the input has slices) cut a convolution's chunks
  // where its rows reach a later part (part_cuts: one not 1 x 1, not packed), and each chunk beyond
  // the first fetches the layer's tiles again: a count is a candidate only where the parts it
  // would give end the layer sooner, with the cuts that pay or none, than the `slices` parts it
  // falls back to or the load whole (stream_pays, by the estimate of the layer's end: stream_end,
  // paying_cuts); and where the array bounds the layer, each such tile's shift into it that
  // its chunk is too short to hide adds to its time: of the candidates up to k, the one that
  // leaves the least exposed plus those shifts. (Under the check stream_pays replaced, refetched
  // tiles against the transfer (stream_cut, now gone): CNN0 on 64 x 256
  // with 256 KiB at 350 MHz, 8 pieces of 1: 2 parts cost conv1's 20 tiles again, 20 x (42.2
  // fetch + 138.5 of the shift that a chunk's 180.5 vectors leave) = 3,613 cycles at 136 GB/s
  // against a 3,418-cycle transfer: 1,645,784 cycles streamed, 1,615,536 loaded whole. With 512
  // KiB, 4 pieces of 2 at 136 GB/s: 3 parts passed the fetch check, 40 x (42.2 + 78.3) = 4,820 <
  // 6,836, and left 439 cycles less exposed than 2, but their 40 tiles' 78.3 unhidden shift cycles
  // each (3,132) came on top: 1,566,768 cycles against 1,554,984 at 34 GB/s, where the fetches
  // allowed only 2.)
  const double slices = double(storage_[t].slices());
  const bool linear = m->kernel_h == 1 && m->kernel_w == 1 && m->stride == 1 && m->pad == 0;
  // Where the array's work is at least the transfer (the array, not the host link, bounds the
  // layer: it streams from the first part on), each unhidden shift adds to its time; where the
  // transfer is longer, the array waits for parts and the shifts fall in that wait.
  const auto shifts = [&](const MatmulOp& op, double k, double work) {
    return work < transfer ? 0.0 : double(layer_tiles(op)) * unhidden_shift(double(pixels(op.output) * batch_) / k);
  };
  double cost = exposed(c, k);
  const bool conv_reader = m->inputs.size() == 1 && m->inputs[0].tensor == t && !linear && conv_budget(*m).first > 0;
  if (k > slices && conv_reader && !packing_for(*m, batch_)) {
    const double most = k;
    cost = exposed(c, slices), k = slices;  // (at most slices parts: no refetch)
    std::map<uint64_t, bool> pays;          // (stream_pays by rows per part)
    for (double kk = slices + 1; kk <= most; ++kk)
      if (exposed(c, kk) + (kk - 1) * shifts(*m, kk, c) < cost && stream_pays(*m, t, uint64_t(kk), pays))
        cost = exposed(c, kk) + (kk - 1) * shifts(*m, kk, c), k = kk;
  }
  // Streamed into the next layer as well (lower_chain): both layers' streaming can hide, but each
  // part beyond the first fetches both layers' tiles again, which must take less time than the
  // transfer; chosen when it leaves less of the transfer exposed and its parts cut the image rows
  // (more parts than the input has slices: run() cuts each slice into ceil(k / slices) parts).
  // (Its unhidden shifts are not counted: on the random chains of tests/compiler/e2e_test.cpp
  // that chose fewer parts, slower on one of them, the same elsewhere.)
  if (chain_candidate(i) && m->inputs.size() == 1 && m->inputs[0].tensor == t) {
    const MatmulOp& b = std::get<MatmulOp>(g_.ops[i + 1]);
    const double cc = c + vectors(b);
    double kc = parts(cc);
    const auto refetch = [&](double k) {
      return (k - 1) * (double(layer_tiles(*m)) * refetch_cycles(*m, k) + double(layer_tiles(b)) * refetch_cycles(b, k));
    };
    while (kc >= 2 && refetch(kc) >= transfer) --kc;
    if (kc > slices && kc >= 2 && exposed(cc, kc) < exposed(c, k)) k = kc;
  }
  if (k >= 2 && conv_reader && !beats_whole(i, *m, t, uint64_t(k))) k = 1;
  return k >= 2 ? static_cast<uint64_t>(k) : 1;
}

// The parts convolution m reads where model input t is loaded `rows` image rows per DMA (one where
// t is stored padded), slice after slice, each kernel row of each output row reading the part that
// holds its input row in its K tile's slice (none in the zero border).
Lowering::StreamRows Lowering::load_parts(const MatmulOp& m, int t, uint64_t rows) const {
  const Storage& in = storage_[t];
  const Shape& is = in.shape;
  const uint64_t each = div_up(is.h, rows);
  StreamRows s{{0}, {}, {}};
  for (uint64_t sl = 0; sl < in.slices(); ++sl)
    for (uint64_t y = 0; y < is.h; y += rows)
      s.dma.push_back(dma_cycles(std::min(rows, is.h - y) * is.w * batch_ * in.slice_channels(sl)));
  int64_t most = -1;
  for (uint64_t y = 0; y < storage_[m.output.tensor].shape.h; ++y) {
    int64_t p = -1;
    for (uint64_t r = 0; r < m.kernel_h; ++r)
      for (const LaneTile& k : k_tiles(m.inputs[0])) {
        const int64_t row = int64_t(y * m.stride + r) - int64_t(m.pad);
        s.need.push_back(row < 0 || row >= int64_t(is.h) ? -1 : int64_t(k.slice * each + uint64_t(row) / rows));
        p = std::max(p, s.need.back());
      }
    if (y > 0 && p > most) s.rows.push_back(y);
    most = std::max(most, p);
  }
  return s;
}

// Whether convolution m streaming model input t in `parts` parts ends sooner, by the estimate
// (stream_end) with its paying cuts or none, than with what stream_parts falls back to: `slices`
// parts (one per slice; an input stored padded still moves an image row per DMA), loaded whole
// where the input has one slice (every matmul after the last DMA). The parts are those the load
// would give (stream_parts' caller: so many whole image rows per DMA that each slice gives
// ceil(parts / slices); one where t is stored padded: load_parts). (Asking only whether some cut
// beat no cut dropped streaming where the accumulator budget already cuts a chunk at every row, so
// that no cut can pay, for the whole load, which nobody weighed: cifar_cnn --mapper pack=off on
// tpu-v1 ran 1,559,438 cycles at 40 GB/s of host link, streamed, and 1,580,255 at 80, loaded whole.)
// `memo`: the answer by image rows per part (counts giving as many have the same parts).
bool Lowering::stream_pays(const MatmulOp& m, int t, uint64_t parts, std::map<uint64_t, bool>& memo) const {
  const Storage& in = storage_[t];
  if (conv_budget(m).first == 0 || in.shape.h == 0) return false;
  const uint64_t slices = in.slices();
  const uint64_t rows = part_rows(t, parts);
  if (const auto it = memo.find(rows); it != memo.end()) return it->second;
  const double bound = stream_end(m, {}, slices == 1 ? whole_load(m, t) : load_parts(m, t, part_rows(t, slices)));
  const StreamRows s = load_parts(m, t, rows);
  return memo[rows] = stream_end(m, {}, s) < bound || !paying_cuts(m, s, bound).empty();
}

// The image rows per DMA of model input t loaded in `parts` parts (stream_parts' caller: so many
// whole image rows that each slice gives ceil(parts / slices); one where t is stored padded).
uint64_t Lowering::part_rows(int t, uint64_t parts) const {
  const Storage& in = storage_[t];
  const uint64_t slices = in.slices(), h = std::max<uint64_t>(in.shape.h, 1);
  return load_dmas(t) > slices ? 1 : div_up(h, std::min(div_up(parts, slices), h));
}

// Model input t loaded whole for convolution m (load_parts' view): its DMAs back to back, every
// matmul after the last.
Lowering::StreamRows Lowering::whole_load(const MatmulOp& m, int t) const {
  StreamRows s = load_parts(m, t, part_rows(t, storage_[t].slices()));
  s.rows = {0};
  for (int64_t& n : s.need) n = int64_t(s.dma.size()) - 1;
  return s;
}

// Whether convolution m (op i), model input t's first reader, is done sooner with t streamed in
// `parts` parts than loaded whole, counting when the next layer's first tile has shifted in, by
// the estimate of m's end (packed_end where it packs; else stream_end, with the cuts that pay or
// none): the later of m's end and that tile (StreamClock::next_tiles), then m's end alone. The estimate counts the weight memory's latency: the
// layer's first tile arrives F + W + R after the start, and while the matrix unit waits for it,
// issue runs at most station_queue_depth matmuls ahead, so the parts after those wait for it on
// the host link, where the load whole runs on. (Without it, tiny_cnn at batch 1 on tpu-v1 with a
// latency of 10,000 cycles streamed its 12 image rows and ran 17,864 cycles against 14,113 loaded
// whole: its first tile arrives at 10,400, the load whole at 9,495: tests/CMakeLists.txt.) Loaded
// whole, the next layer's first rw issues behind the load's DMAs (the host station's queue holds
// issue), so that its latency may no longer hide behind m: counting m's end alone, LeNet-5 at
// batch 1 on tpu-v1 with W = 10,000 and weight_fifo_tiles = 1 ran 71,484 cycles loaded whole,
// against 70,108 streamed. Only the next layer's first tile counts: counting the first
// weight_fifo_tiles (those m's switches fetch) streamed LeNet-5 at batch 1 with W = 10,000, a
// 4-tile FIFO and one instruction per station queue (41,688 cycles against 38,498 loaded whole):
// the tiles after the first wait behind work the estimate does not see (pools, the next layers'
// activates), so their lateness counted for too much. (Counting m's activates in its end as
// well, StreamClock's act_free_, loaded tiny_cnn unpacked at batch 17 on 32 x 16 with W = 0
// whole: 36,247 cycles against 34,899 streamed.)
bool Lowering::beats_whole(size_t i, const MatmulOp& m, int t, uint64_t parts) const {
  const Emitter::Work& before = em_.work();
  if (before.switches > 0) return true;
  StreamRows whole = whole_load(m, t), s = load_parts(m, t, part_rows(t, parts));
  // The host DMAs emitted before (a per-column table's), all issued at the start: the link is
  // theirs first.
  if (before.dmas > 0)
    for (StreamRows* r : {&whole, &s}) {
      r->dma.insert(r->dma.begin(), double(before.dmas * arch_.host_latency_cycles +
                                           sim::transfer_cycles(before.dma_bytes, arch_.host_gbps, arch_.clock_mhz)));
      for (int64_t& n : r->need) n += n >= 0;
    }
  // The next layer's first tile: its fetch (its stored box at weight_mem_gbps) and vectors (a
  // packed layer's: its pixels x batch / P).
  NextTiles next_s, next_w;
  const uint64_t qw = 1;  // (the first only: see above)
  for (size_t j = i + 1; j < g_.ops.size() && next_s.later.size() < qw; ++j)
    if (const auto* b = std::get_if<MatmulOp>(&g_.ops[j])) {
      double fetch = 0, vectors = double(pixels(b->output) * batch_);
      uint64_t tiles = 0;
      if (const auto pk = packing_for(*b, batch_)) {
        const uint64_t cols = pk->p > 1 ? pk->p * b->n : tile_cols(*b, n_tiles(*b)[0]);
        fetch = double(sim::transfer_cycles(pk->u * std::min(pk->rows, pk->kernel_rows) * b->k * cols,
                                            arch_.weight_mem_gbps, arch_.clock_mhz));
        tiles = div_up(pk->kernel_rows, pk->rows) * (pk->p > 1 ? 1 : n_tiles(*b).size());
        vectors /= double(std::max<uint64_t>(pk->p, 1));
      } else {
        fetch = tile_fetch_cycles(*b), tiles = layer_tiles(*b);
      }
      for (uint64_t k = 0; k < tiles && next_s.later.size() < qw; ++k) next_s.later.push_back({fetch, vectors});
    }
  next_w.later = next_s.later;
  double end_s = 0, end_w = 0;
  if (const auto pk = packing_for(m, batch_)) {
    end_s = packed_end(m, *pk, s, &next_s);
    end_w = packed_end(m, *pk, whole, &next_w);
  } else {
    end_w = stream_end(m, {}, whole, &next_w);
    end_s = stream_end(m, {}, s, &next_s);
    if (const std::vector<uint64_t> cuts = paying_cuts(m, s, end_w); !cuts.empty()) {
      NextTiles cut_next{next_s.later, 0};
      if (const double e = stream_end(m, cuts, s, &cut_next); e < end_s) end_s = e, next_s = cut_next;
    }
  }
  const double done_s = std::max(end_s, next_s.late), done_w = std::max(end_w, next_w.late);
  return done_s < done_w || (done_s == done_w && end_s < end_w);
}

// An LSTM reads its input sequence one time step (pixel) at a time, each step's gates after the
// previous step's cell. Loaded whole before the first gate, the sequence's later steps wait on the
// host link for nothing; loaded step by step (one DMA per step and slice, step 0's first), the
// first gate waits only for step 0's rows and the host link moves step t + 1 while step t's weight
// tiles stream (the emitter's stream by steps, emitter.h). Each DMA start costs
// host_latency_cycles more (steps - 1 per slice), which the later steps' weight streaming hides.
bool Lowering::stream_by_steps(size_t i, int t) const {
  const auto* m = std::get_if<MatmulOp>(&g_.ops[i]);
  if (!*options_.stream_input || !m || in_host_[t] || g_.tensors[t].shape.pixels() < 2) return false;
  bool reads = false;
  for (const View& v : m->inputs)
    if (v.tensor == t) {
      if (v.pixels == 0 || v.pixels >= g_.tensors[t].shape.pixels()) return false;
      reads = true;
    }
  return reads;
}

// Samples [n0, n0 + batch_) of tensor t: its piece storage (storage_[t]) to or from the whole
// batch's copy. Host memory holds the whole batch in TPU order in pieces of `layout` samples
// (layout.h): where the piece is one of those pieces, one DMA per slice (per run of pixels when the
// storage is padded); else one per pixel and slice for each layout piece it overlaps.
// A resident copy (`whole`, a UB storage of the whole batch): one vec pass per pixel and slice.
void Lowering::transfer(int t, uint64_t n0, bool out, uint64_t host, uint64_t layout, const Storage* whole) {
  if (storage_[t].planes > 1) {
    // A 16-bit tensor (the model's output): each byte plane as an 8-bit tensor, the high plane's
    // UB rows high() further and its host bytes after the whole batch's low plane.
    if (whole) throw std::logic_error("transfer: a 16-bit tensor copied by sample ranges");
    const Storage keep = storage_[t];
    Storage plane = keep;
    plane.planes = 1;
    for (uint64_t p = 0; p < keep.planes; ++p) {
      plane.base = keep.base + p * keep.high();
      storage_[t] = plane;
      transfer(t, n0, out, host + p * g_.batch * keep.shape.elements(), layout, nullptr);
    }
    storage_[t] = keep;
    return;
  }
  const Storage& st = storage_[t];
  const uint64_t G = g_.batch, P = batch_, px = st.shape.pixels(), E = st.shape.elements();
  for (uint64_t s = 0; s < st.slices(); ++s) {
    if (whole) {
      if (st.q > 1 || whole->q > 1) throw std::logic_error("transfer: a dense storage copied by sample ranges");
      // 8-bit copies (a 16-bit tensor is not copied so: above), whatever planes the op before
      // them read and wrote: a 16-bit LSTM cell's last vec left vec_high_a set, and the copy of
      // its int8 h then read a high plane that was not there (lstm1 in the piece schedule).
      em_.planes({});
      for (uint64_t p = 0; p < px; ++p) {
        isa::Instruction in = isa::make_instruction(Opcode::vector);
        in[Field::op] = static_cast<uint64_t>(isa::VecOp::pass);
        in[Field::src] = out ? st.pixel_row(s, p) : whole->pixel_row(s, p) + n0;
        in[Field::ub] = out ? whole->pixel_row(s, p) + n0 : st.pixel_row(s, p);
        in[Field::rows] = P;
        in[Field::mult] = 1;
        em_.activation(in, {{in[Field::src], P}}, {in[Field::ub], P});
      }
      continue;
    }
    const uint64_t cs = st.slice_channels(s);
    for (uint64_t k = n0 / layout; k * layout < n0 + P; ++k) {
      const uint64_t first = k * layout, Bk = std::min(layout, G - first);
      const uint64_t a = std::max(n0, first), b = std::min(n0 + P, first + Bk);
      const uint64_t slice_host = host + first * E + s * lanes_ * px * Bk;
      if (a == n0 && b - a == P && Bk == P) {
        // (a dense storage, layout.h: a UB row holds q samples' cs bytes, contiguous in TPU order)
        const uint64_t pr = st.pixel_rows(), row_bytes = st.q * cs;
        for (const Run& run : runs(st, s, 0, px))
          for (uint64_t done = 0; done < run.pixels;) {
            uint64_t m = std::min(run.pixels - done, ((uint64_t{1} << 24) - 1) / pr);
            if (stream_pixels_ && !out) m = std::min(m, stream_pixels_);
            em_.stream_key(run.pixel + done);
            em_.host_dma(out, slice_host + (run.pixel + done) * P * cs, run.row + done * pr, m * pr, row_bytes,
                         row_bytes);
            done += m;
          }
        continue;
      }
      if (st.q > 1) throw std::logic_error("transfer: a dense storage moved by sample ranges");
      for (uint64_t p = 0; p < px; ++p) {
        em_.stream_key(p);
        em_.host_dma(out, slice_host + (p * Bk + a - first) * cs, st.pixel_row(s, p) + a - n0, b - a, cs, cs);
      }
    }
  }
}

// The planner's view of this lowering (schedule.h): per op the work it emitted, the UB rows per
// sample of the tensors live while it runs (an input from its first reader), whether it pools,
// whether a cut may go before it; per position the tensors that would cross a cut there.
ScheduleProblem Lowering::problem() const {
  const size_t n = g_.ops.size();
  ScheduleProblem pr;
  pr.batch = g_.batch;
  pr.measured_pieces = div_up(g_.batch, piece_);
  pr.free_rows = arch_.ub_rows() - table_rows_;
  pr.acc_limit = max_piece(arch_);
  pr.inputs = g_.inputs;
  pr.ops.resize(n);
  std::vector<int64_t> from(g_.tensors.size(), -1), last_def(g_.tensors.size(), -1);
  for (size_t t = 0; t < g_.tensors.size(); ++t) from[t] = first_def_[t];
  for (size_t i = 0; i < n; ++i) {
    for (const View& v : op_reads(g_.ops[i]))
      if (from[v.tensor] < 0) from[v.tensor] = static_cast<int64_t>(i);
    last_def[op_writes(g_.ops[i]).tensor] = static_cast<int64_t>(i);
  }
  std::vector<uint64_t> rows(g_.tensors.size());
  for (size_t t = 0; t < g_.tensors.size(); ++t) {
    Storage one = storage_[t];
    one.batch = 1;
    one.q = 1;  // (an estimate per sample: dense layouts, which need q > 1 samples, not counted)
    rows[t] = one.ub_rows();
  }
  const auto is_input = [&](int t) {
    return std::find(g_.inputs.begin(), g_.inputs.end(), t) != g_.inputs.end();
  };
  // The rows live at each op (tensor t from from[t] to last_use_[t]): added where t begins and
  // taken off after it ends, one pass over the tensors (a sum over every tensor at every op grew
  // as ops x tensors).
  std::vector<uint64_t> begins(n, 0), ends(n, 0);
  for (size_t t = 0; t < g_.tensors.size(); ++t)
    if (from[t] >= 0 && from[t] < static_cast<int64_t>(n) && last_use_[t] >= from[t]) {
      begins[static_cast<size_t>(from[t])] += rows[t];
      if (last_use_[t] < static_cast<int64_t>(n)) ends[static_cast<size_t>(last_use_[t])] += rows[t];
    }
  pr.crossing.resize(n + 1);
  uint64_t live_rows = 0;
  for (size_t i = 0; i < n; ++i) {
    ScheduleProblem::Op& op = pr.ops[i];
    op.work = op_work_[i];
    op.pool = std::holds_alternative<PoolOp>(g_.ops[i]) || (i + 1 < n && fused_away_[i + 1]);
    live_rows += begins[i];
    op.rows = live_rows;
    live_rows -= ends[i];
    if (i == 0 || g_.op_layer[i] == g_.op_layer[i - 1] || (i < n && fused_away_[i])) continue;
    bool ok = true;
    for (size_t t = 0; t < g_.tensors.size() && ok; ++t)
      ok = !(first_def_[t] >= 0 && first_def_[t] < static_cast<int64_t>(i) &&
             last_def[t] >= static_cast<int64_t>(i)) &&
           // a 16-bit tensor (an LSTM's internals, inside one layer) never crosses a cut: it is
           // never staged in host memory
           !(storage_[t].planes > 1 && first_def_[t] >= 0 && first_def_[t] < static_cast<int64_t>(i) &&
             last_use_[t] >= static_cast<int64_t>(i));
    op.cut_before = ok;
    if (!ok) continue;
    for (size_t t = 0; t < g_.tensors.size(); ++t)
      if (!is_input(static_cast<int>(t)) && first_def_[t] >= 0 && first_def_[t] < static_cast<int64_t>(i) &&
          last_use_[t] >= static_cast<int64_t>(i)) {
        const Shape& sh = g_.tensors[t].shape;
        pr.crossing[i].push_back(
            {static_cast<int>(t), rows[t], sh.pixels(), storage_[t].slices(), sh.elements()});
      }
  }
  return pr;
}

uint64_t Lowering::held_bytes() const {
  using compiler::held_bytes;
  uint64_t b = held_bytes(seg_of_) + held_bytes(live_) + held_bytes(whole_) + held_bytes(op_work_) + em_.held_bytes() +
               held_bytes(storage_) + held_bytes(placed_) + held_bytes(dense_) + held_bytes(joined_) +
               held_bytes(first_def_) + held_bytes(last_use_) + image_.index_bytes() + held_bytes(tables_) +
               hash_bytes(table_index_) + hash_bytes(packed_cache_) + hash_bytes(table_cache_) + held_bytes(perchan_) +
               held_bytes(fused_away_) + held_bytes(stats_) + held_bytes(in_host_) + held_bytes(host_of_) +
               held_bytes(sched_.resident) + hash_bytes(pass_fetches_) + hash_bytes(joined_tiles_) + tree_bytes(lane_tiles_);
  for (const auto& [op, fetches] : pass_fetches_) {
    b += tree_bytes(fetches);
    for (const auto& [n, tiles] : fetches) b += held_bytes(tiles);
  }
  for (const auto& [op, tiles] : joined_tiles_) b += held_bytes(tiles);
  for (const auto& [key, tiles] : lane_tiles_) b += held_bytes(tiles);
  for (const LayerStats& l : stats_)
    for (const std::string* t : {&l.packing, &l.precision, &l.fusion}) b += t->capacity() > 15 ? t->capacity() + 1 : 0;
  return b;
}

isa::Program Lowering::run() {
  plan_storage();
  const size_t nops = g_.ops.size(), nt = g_.tensors.size();
  std::vector<size_t>& seg_of = seg_of_;
  seg_of.assign(nops, 0);
  for (size_t si = 0; si < sched_.segments.size(); ++si)
    for (size_t i = sched_.segments[si].first; i < sched_.segments[si].end; ++i) seg_of[i] = si;
  // Per-column tables first (they stay for the whole program): build them to know their size.
  // A packed convolution of several pixels per vector reads a table that repeats the N channels
  // once per pixel group, and no other: the plain tables (one per N tile) only where a piece of
  // its segment (all equal but the last) lowers it otherwise. (A table no activate reads holds UB
  // rows the tensors then lack: LeNet-5's conv2, 5 pixels a vector on 64 x 256 with 256 KiB, kept
  // its plain table too, 7 rows that cut conv1 into 6 bands instead of 5.)
  const uint64_t row_bytes = arch_.ub_row_bytes();
  for (size_t i = 0; i < nops; ++i)
    if (const auto* m = std::get_if<MatmulOp>(&g_.ops[i]); m && per_column(*m)) {
      const uint64_t piece = sched_.segments[seg_of[i]].piece;
      bool plain = false;
      for (const uint64_t b : {piece, g_.batch % piece})
        if (b) {
          const auto pk = packing_for(*m, b);
          if (pk && pk->p > 1) table_row(*m, LaneTile{0, 0, 0, m->n}, pk->p);
          else plain = true;
        }
      if (plain)
        for (const LaneTile& n : n_tiles(*m)) table_row(*m, n);
    }
  table_rows_ = tables_.size() / row_bytes;
  if (table_rows_ >= arch_.ub_rows())
    throw InputError(fmt::format("model {}: its {} per-column requantization tables need {} UB rows, more than the {} "
                                 "the unified buffer has", g_.name, tables_.size() / row_bytes / div_up(7 * arch_.array_cols, row_bytes),
                                 table_rows_, arch_.ub_rows()));

  isa::Program p;
  p.model = g_.name;
  // Host memory: tables, inputs, output, each 4 KiB aligned. Inputs and the output hold the
  // pieces of the batch one after the other, each in TPU order (layout.h).
  uint64_t host = 0;
  const auto region = [&](const std::string& name, bool output, uint64_t bytes, double scale) {
    isa::HostRegion& r = p.host_regions.emplace_back();
    r.name = name;
    r.output = output;
    r.host_addr = host;
    r.bytes = bytes;
    r.scale = scale;
    host += div_up(bytes, 4096) * 4096;
    return r.host_addr;
  };
  em_.tag(0);
  if (table_rows_) {
    const uint64_t at = region("qtables", false, tables_.size(), 0.0);
    p.host_regions.back().init = tables_;
    em_.host_dma(false, at, table_base_, table_rows_, row_bytes, row_bytes);
  }
  std::vector<uint64_t> input_host;
  for (size_t j = 0; j < g_.inputs.size(); ++j) {
    const QTensor& qt = g_.tensors[g_.inputs[j]];
    const std::string name = g_.inputs.size() == 1 ? "input" : fmt::format("input{}", j);
    input_host.push_back(region(name, false, g_.batch * qt.shape.elements(), qt.scale));
    // A timing-only compile has no input values (LoadOptions::timing_only): no initial contents;
    // nor does a try that makes no code (its program is not kept).
    if (!g_.input_data.at(j).empty() && em_.stores_code())
      p.host_regions.back().init = to_tpu_order(g_.input_data.at(j), qt.shape, g_.batch, lanes_, piece_);
  }
  const QTensor& out = g_.tensors.at(g_.output);
  // (a 16-bit output: the low byte plane of the whole batch, then the high plane)
  const uint64_t output_host =
      region("output", true, g_.batch * out.shape.elements() * storage_[g_.output].planes, out.scale);
  // Tensors held in host memory (banding) that are neither an input nor the output: one scratch
  // region, reused by every piece; then the tensors staged across cuts of the piece schedule
  // (the whole batch, TPU order).
  const auto is_input = [&](size_t t) {
    return std::find(g_.inputs.begin(), g_.inputs.end(), static_cast<int>(t)) != g_.inputs.end();
  };
  std::vector<int64_t> def_seg(nt, -1), last_seg(nt, -1);
  for (size_t i = 0; i < nops; ++i)
    for (const int t : touched(i))
      last_seg[t] = std::max<int64_t>(last_seg[t], static_cast<int64_t>(seg_of[i]));
  for (size_t t = 0; t < nt; ++t)
    if (first_def_[t] >= 0) def_seg[t] = static_cast<int64_t>(seg_of[first_def_[t]]);
  std::vector<bool> crosses(nt, false);
  for (size_t t = 0; t < nt; ++t) crosses[t] = !is_input(t) && def_seg[t] >= 0 && last_seg[t] > def_seg[t];
  std::vector<uint64_t> scratch_offset(nt, 0);
  uint64_t scratch_bytes = 0;
  for (size_t t = 0; t < nt; ++t)
    if (in_host_[t] && static_cast<int>(t) != g_.output && !is_input(t)) {
      scratch_offset[t] = scratch_bytes;
      scratch_bytes += div_up(piece_ * g_.tensors[t].shape.elements(), 4096) * 4096;
    }
  for (size_t t = 0; t < nt; ++t)
    if (crosses[t] && !sched_.resident[t]) {
      scratch_offset[t] = scratch_bytes;
      scratch_bytes += div_up(g_.batch * g_.tensors[t].shape.elements(), 4096) * 4096;
    }
  const uint64_t scratch_host = scratch_bytes ? region("scratch", false, scratch_bytes, 0.0) : 0;
  host_of_.assign(nt, 0);
  // Dense layouts (layout.h) only where a tensor moves between storages of one piece size: not
  // for tensors crossing a cut of the piece schedule (copied by sample ranges between piece
  // sizes), nor for a model input or output moved in a segment whose piece is not the host
  // layout's (piece_).
  for (size_t t = 0; t < nt; ++t) dense_[t] = dense_[t] && !crosses[t];
  for (size_t i = 0; i < nops; ++i)
    if (sched_.segments[seg_of[i]].piece != piece_)
      for (const int t : touched(i))
        if (is_input(t) || t == g_.output) dense_[t] = false;
  tie_dense();

  std::vector<std::string> layers{"(start)"};
  std::unordered_map<std::string, uint64_t> layer_index;
  stats_.assign(1, {});
  op_work_.assign(nops + 1, {});
  whole_.assign(nt, std::nullopt);
  live_.assign(nt, false);
  alloc_ = RowAllocator(table_rows_, arch_.ub_rows());
  const auto add_work = [&](Emitter::Work& to, const Emitter::Work& before) {
    const Emitter::Work& now = em_.work();
    to.vectors += now.vectors - before.vectors;
    to.switches += now.switches - before.switches;
    to.activations += now.activations - before.activations;
    to.act_rows += now.act_rows - before.act_rows;
    to.dmas += now.dmas - before.dmas;
    to.dma_bytes += now.dma_bytes - before.dma_bytes;
    to.weight_bytes += now.weight_bytes - before.weight_bytes;
    to.launches += now.launches - before.launches;
  };
  Emitter::Work mark = em_.work();
  for (size_t si = 0; si < sched_.segments.size(); ++si) {
    const PieceSegment& sg = sched_.segments[si];
    segment_ = si;
    // The last op of this segment touching each tensor (its release), and the first reading each input.
    std::vector<int64_t> seg_last(nt, -1), first_read(g_.inputs.size(), -1);
    for (size_t i = sg.first; i < sg.end; ++i)
      for (const int t : touched(i)) seg_last[t] = static_cast<int64_t>(i);
    // The tensors each op of the segment touches last, in tensor order (retire below: a scan of
    // every tensor after every op grew as ops x tensors).
    std::vector<std::vector<int>> last_of(sg.end - sg.first);
    for (size_t t = 0; t < nt; ++t)
      if (seg_last[t] >= 0) last_of[static_cast<size_t>(seg_last[t]) - sg.first].push_back(static_cast<int>(t));
    for (size_t j = 0; j < g_.inputs.size(); ++j)
      for (size_t i = sg.first; i < sg.end && first_read[j] < 0; ++i)
        for (const View& v : op_reads(g_.ops[i]))
          if (v.tensor == g_.inputs[j]) first_read[j] = static_cast<int64_t>(i);
    // Resident tensors written here in pieces: the whole batch's storage, for as long as they are
    // read (written over the whole batch: their own storage, kept at the segment's end).
    for (size_t t = 0; t < nt; ++t)
      if (crosses[t] && sched_.resident[t] && def_seg[t] == static_cast<int64_t>(si) && sg.piece < g_.batch) {
        Storage w = storage_[t];
        w.batch = g_.batch;
        if (!alloc_.allocate(w.ub_rows(), true, w.base) && !alloc_.allocate(w.ub_rows(), false, w.base))
          throw DoesNotFit(
              fmt::format("model {}: tensor {} ({} x {}, {} UB rows) kept for the whole batch does not "
                          "fit in the unified buffer",
                          g_.name, g_.tensors[t].name, g_.batch, g_.tensors[t].shape.str(), w.rows()),
              w.rows(), alloc_.largest(), static_cast<int>(t));
        for (const auto& [first, rows] : border_ranges(w)) em_.zero({first, rows});
        whole_[t] = w;
      }
    // check_fit: a piece that ends with the unified buffer as it began leaves the next piece of
    // the same size the same start, so it fits as this one did; only the last, shorter piece is
    // still checked (the check's cost then does not grow with the batch: CNN1 at batch 1024 in
    // pieces of 2, 4 and 8 checked 512, 256 and 128 pieces).
    std::optional<RowAllocator> piece_start;
    for (uint64_t n0 = 0; n0 < g_.batch; n0 += sg.piece) {
      if (fit_only_ && n0 == sg.piece && alloc_ == *piece_start) {
        const uint64_t last = (g_.batch - 1) / sg.piece * sg.piece;  // the last piece's first sample
        if (g_.batch - last == sg.piece) break;                      // every piece the same size
        n0 = last;
      }
      if (fit_only_ && n0 == 0) piece_start = alloc_;
      batch_ = std::min(sg.piece, g_.batch - n0);
      placed_.assign(nt, false);
      for (size_t t = 0; t < nt; ++t) {
        storage_[t].batch = batch_;
        storage_[t].q = dense_[t] ? dense_q(storage_[t].shape.c, batch_, lanes_) : 1;
      }
      for (size_t t = 0; t < nt; ++t) host_of_[t] = scratch_host + scratch_offset[t];
      for (size_t j = 0; j < g_.inputs.size(); ++j)
        host_of_[g_.inputs[j]] = input_host[j] + n0 * g_.tensors[g_.inputs[j]].shape.elements();
      host_of_[g_.output] = output_host + n0 * out.shape.elements();
      // Resident tensors: a piece of the whole batch is the whole storage.
      for (size_t t = 0; t < nt; ++t)
        if (whole_[t] && batch_ == g_.batch) storage_[t] = *whole_[t], placed_[t] = true;
      const auto load = [&](size_t j) {
        if (in_host_[g_.inputs[j]]) return;  // read in bands by the ops that read it
        allocate(g_.inputs[j], g_.ops.size());
        transfer(g_.inputs[j], n0, false, input_host[j], piece_);
      };
      if (si == 0)
        for (size_t j = 0; j < g_.inputs.size(); ++j)
          if (std::none_of(g_.ops.begin(), g_.ops.end(), [&](const QOp& op) {
                const auto r = op_reads(op);
                return std::any_of(r.begin(), r.end(),
                                   [&](const View& v) { return v.tensor == g_.inputs[j]; });
              }))
            load(j);
      // Tensors written before this segment and read in it: their piece, from the UB or host copy.
      for (size_t t = 0; t < nt; ++t)
        if (crosses[t] && def_seg[t] < static_cast<int64_t>(si) && seg_last[t] >= 0 && !placed_[t]) {
          allocate(static_cast<int>(t), sg.first);
          transfer(static_cast<int>(t), n0, false, scratch_host + scratch_offset[t], g_.batch,
                   whole_[t] ? &*whole_[t] : nullptr);
        }
      add_work(op_work_[nops], mark);
      mark = em_.work();
      std::string current;
      int64_t stream_last = -1;  // the op after which the open input stream is flushed (-1: none)
      const auto enter_layer = [&](size_t i) {
        if (current == g_.op_layer[i]) return;
        current = g_.op_layer[i];
        auto [it, added] = layer_index.emplace(current, layers.size());
        if (added) layers.push_back(current);
        em_.tag(it->second);
        layer_ = it->second;
        stats_.resize(layers.size());
        stats_[layer_].piece = sg.piece;
      };
      for (size_t i = sg.first; i < sg.end; ++i) {
        // A step of a loop the host drives: a program segment of its own (but the first).
        if (*options_.host_loop && std::binary_search(g_.loop_steps.begin(), g_.loop_steps.end(), i)) {
          if (loop_started_) em_.interrupt();
          loop_started_ = true;
        }
        enter_layer(i);
        // Ops lowered together (lower_chain: op i + 1's chunks interleaved with op i's): the work
        // of each run of one op's instructions is counted to that op.
        size_t work_op = i;
        const auto enter = [&](size_t k) {
          stats_[layer_].ub_rows = std::max(stats_[layer_].ub_rows, table_rows_ + alloc_.used());
          add_work(op_work_[work_op], mark);
          mark = em_.work();
          work_op = k;
          enter_layer(k);
        };
        bool chained = false, streamed = false;  // (streamed: an input cut into parts of image rows)
        // Model inputs first read here: loaded whole, or streamed into this op (its DMA in
        // parts emitted as its matmuls need them; the emitter's stream, emitter.h), or, for an
        // input read one time step at a time, step by step until its last reader.
        for (size_t j = 0; j < g_.inputs.size(); ++j)
          if (first_read[j] == static_cast<int64_t>(i) && !placed_[g_.inputs[j]]) {
            const bool by_steps = stream_by_steps(i, g_.inputs[j]);
            const uint64_t parts = by_steps ? 2 : stream_parts(i, g_.inputs[j]);
            if (parts > 1) {
              if (stream_last >= 0) em_.stream_flush();  // (one stream at a time)
              const Storage& st = storage_[g_.inputs[j]];
              // Parts of whole image rows, so many per slice that all slices give `parts` (an
              // input stored padded already moves one image row per DMA); by steps, one pixel.
              const uint64_t per_slice = div_up(parts, st.slices());
              stream_pixels_ = by_steps ? 1 : div_up(st.shape.h, std::min(per_slice, st.shape.h)) * st.shape.w;
              em_.stream_begin();
              stream_last = by_steps ? seg_last[g_.inputs[j]] : static_cast<int64_t>(i);
              streamed = !by_steps;
            }
            load(j);
            if (parts > 1) em_.stream_end(by_steps);
            stream_pixels_ = 0;
          }
        if (i == sg.first) fused_away_.assign(g_.ops.size(), false);
        if (in_host_[op_writes(g_.ops[i]).tensor]) {
          lower_in_bands(i);
        } else if (const auto f = fusion_for(i)) {  // the pooled map instead of the convolution's
          const PoolOp& pool = std::get<PoolOp>(g_.ops[f->pool]);
          if (!placed_[pool.output.tensor]) allocate(pool.output.tensor, i);
          if (!fit_only_) lower_fused(i, std::get<MatmulOp>(g_.ops[i]), *f);
          fused_away_[f->pool] = true;
          stats_[layer_].fusion = fmt::format("pools as it writes: {} {}x{} stride {} ({})",
                                              pool.kind == isa::PoolKind::max ? "max" : "avg", pool.window,
                                              pool.window, pool.stride, g_.op_layer[f->pool]);
        } else if (fused_away_[i]) {
          stats_[layer_].fusion = fmt::format("fused into {}'s activates", g_.op_layer[i - 1]);
        } else {
          std::visit(
              [&](const auto& op) {
                if (first_def_[op.output.tensor] == static_cast<int64_t>(i) && !placed_[op.output.tensor])
                  allocate(op.output.tensor, i);
                // (check_fit: a chain is lowered, as it allocates op i + 1's output early; it
                // decides from shapes and the stream just begun, as run() does)
                if constexpr (std::is_same_v<std::decay_t<decltype(op)>, MatmulOp>)
                  if (streamed && lower_chain(i, enter)) {
                    chained = true;
                    return;
                  }
                if (!fit_only_) lower(i, op);
                else if constexpr (std::is_same_v<std::decay_t<decltype(op)>, PoolOp>) check_pool_rows(i, op);
              },
              g_.ops[i]);
        }
        if (stream_last == static_cast<int64_t>(i)) {
          em_.stream_flush();
          stream_last = -1;
        }
        stats_[layer_].ub_rows = std::max(stats_[layer_].ub_rows, table_rows_ + alloc_.used());
        add_work(op_work_[work_op], mark);
        mark = em_.work();
        // Tensors last touched by op k: released (or kept whole, or staged) after it.
        const auto retire = [&](size_t k) {
          if (k >= sg.end) return;
          for (const int t : last_of[k - sg.first])
            if (live_[t] && t != g_.output) {
              if (crosses[t] && sched_.resident[t] && batch_ == g_.batch) {  // kept: the whole batch's copy
                whole_[t] = storage_[t];
                live_[t] = false;
                continue;
              }
              // Read after this segment: its piece to the whole batch's copy first.
              if (crosses[t] && def_seg[t] == static_cast<int64_t>(si))
                transfer(static_cast<int>(t), n0, true, scratch_host + scratch_offset[t], g_.batch,
                         whole_[t] ? &*whole_[t] : nullptr);
              release(static_cast<int>(t));
            }
        };
        retire(i);
        if (chained) retire(++i);
        add_work(op_work_[nops], mark);
        mark = em_.work();
      }
      if (stream_last >= 0) em_.stream_flush();
      if (def_seg[g_.output] == static_cast<int64_t>(si) && !in_host_[g_.output]) {
        transfer(g_.output, n0, true, output_host, piece_);
        if (crosses[g_.output] && !sched_.resident[g_.output]) {
          transfer(g_.output, n0, true, scratch_host + scratch_offset[g_.output], g_.batch);
        } else if (crosses[g_.output] && batch_ == g_.batch) {
          whole_[g_.output] = storage_[g_.output];
          live_[g_.output] = false;
        } else if (crosses[g_.output]) {
          transfer(g_.output, n0, true, 0, g_.batch, &*whole_[g_.output]);
        }
      }
      for (size_t t = 0; t < nt; ++t) release(static_cast<int>(t));
      add_work(op_work_[nops], mark);
      mark = em_.work();
    }
    for (size_t t = 0; t < nt; ++t)
      if (whole_[t] && last_seg[t] == static_cast<int64_t>(si)) {
        alloc_.release(whole_[t]->base, whole_[t]->ub_rows());
        whole_[t].reset();
      }
  }
  if (fit_only_) return p;
  layers.push_back("(end)");
  em_.tag(layers.size() - 1);
  p.code = em_.finish();
  const uint64_t tiles = image_.tiles();
  image_.finish(p);
  if (!em_.macs_given().empty()) {
    nlohmann::json given = nlohmann::json::array();
    for (const isa::MatmulMacs& m : em_.macs_given())
      given.push_back(m.copy ? nlohmann::json{m.instruction, m.macs, "copy"} : nlohmann::json{m.instruction, m.macs});
    p.meta["matmul_macs"] = std::move(given);
  }
  p.meta["compiler"] = "tpusim compile (compiler/lower.cpp)";
  p.meta["batch"] = g_.batch;
  p.meta["batch_piece"] = piece_;
  p.meta["bands"] = bands_;
  p.meta["lanes"] = lanes_;
  p.meta["layers"] = layers;
  p.meta["macs"] = macs_;
  if (copy_macs_) p.meta["copy_macs"] = copy_macs_;
  // The concats the compile kept as parts where in place did not fit (compile.h place_concats).
  if (!g_.concats_as_parts.empty()) {
    nlohmann::json warnings = nlohmann::json::array();
    for (const std::string& c : g_.concats_as_parts)
      warnings.push_back(fmt::format("concat {} kept as parts (mapper switch concat_inplace): written in place, its "
                                     "joined tensor would be held in host memory and streamed in bands, which a "
                                     "tensor several layers write cannot be",
                                     c));
    p.meta["mapping_warnings"] = std::move(warnings);
  }
  p.meta["weight_tiles"] = tiles;
  p.meta["weight_fetches"] = em_.weight_fetches();
  if (em_.host_segments() > 1) p.meta["host_segments"] = em_.host_segments();
  const bool segmented = sched_.segments.size() > 1;
  if (segmented) {
    nlohmann::json segs = nlohmann::json::array();
    for (const PieceSegment& sg : sched_.segments)
      segs.push_back({{"first_layer", g_.op_layer[sg.first]},
                      {"last_layer", g_.op_layer[sg.end - 1]},
                      {"piece", sg.piece},
                      {"pieces", div_up(g_.batch, sg.piece)}});
    p.meta["piece_segments"] = std::move(segs);
  }
  // Each layer's model MACs, from the graph (compiler::matmul_work: the one definition), not
  // from the passes the lowering emitted.
  std::vector<uint64_t> model_macs(stats_.size(), 0);
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (const auto* m = std::get_if<MatmulOp>(&g_.ops[i]))
      if (const auto it = layer_index.find(g_.op_layer[i]); it != layer_index.end())
        model_macs[it->second] += matmul_work(g_, *m).model_macs;
  nlohmann::json mapping = nlohmann::json::array();
  for (size_t l = 1; l < stats_.size(); ++l)
    mapping.push_back({{"layer", layers[l]},
                       {"macs", stats_[l].macs},
                       {"array_macs", stats_[l].array_macs},
                       {"model_macs", model_macs[l]},
                       {"weight_tiles", stats_[l].tiles},
                       {"ub_bytes", stats_[l].ub_rows * arch_.ub_row_bytes()}});
  for (size_t l = 1; l < stats_.size(); ++l)
    if (stats_[l].copy_macs) mapping[l - 1]["copy_macs"] = stats_[l].copy_macs;
  for (size_t l = 1; l < stats_.size(); ++l)
    if (!stats_[l].packing.empty()) mapping[l - 1]["packing"] = stats_[l].packing;
  for (size_t l = 1; l < stats_.size(); ++l)
    if (!stats_[l].fusion.empty()) mapping[l - 1]["fusion"] = stats_[l].fusion;
  if (piece_ < g_.batch || segmented)
    for (size_t l = 1; l < stats_.size(); ++l) mapping[l - 1]["piece"] = stats_[l].piece;
  for (size_t l = 1; l < stats_.size(); ++l)
    if (!stats_[l].precision.empty()) mapping[l - 1]["precision"] = stats_[l].precision;
  p.meta["mapping"] = std::move(mapping);
  return p;
}

// A pool whose batch field (255 at most) holds the piece's samples: every pool, less those whose
// tensors can be dense (they hold batch / q UB rows per pixel; Lowering refuses a piece whose
// rows per pixel exceed 255 as not fitting, and the piece search tries smaller pieces).
bool has_pool(const QGraph& g, const sim::Arch& arch, const LowerOptions& options) {
  const bool dense = *resolve(options, arch).dense;
  return std::any_of(g.ops.begin(), g.ops.end(), [&](const auto& op) {
    const auto* p = std::get_if<PoolOp>(&op);
    return p && !(dense && narrow(g.tensors[p->input.tensor].shape.c, arch));
  });
}

// The search for the pieces a batch runs in (lower(), whose comment says how it searches):
// `attempt(piece)` tries the single loop in pieces of `piece` samples with the tensors `in_host`
// marks in host memory, returning when it fits and throwing DoesNotFit when not. Tensors are added
// to `in_host` while one sample does not fit. Returns the pieces of the last try that fit, the
// fewest found.
template <class Attempt>
uint64_t search_pieces(const QGraph& graph, const sim::Arch& arch, const LowerOptions& options,
                       std::vector<bool>& in_host, Attempt attempt) {
  if (graph.batch == 0) throw InputError(fmt::format("model {}: batch 0: a model needs at least one sample", graph.name));
  uint64_t limit = std::min(graph.batch, max_piece(arch));
  if (has_pool(graph, arch, options)) limit = std::min<uint64_t>(limit, 255);
  // Pieces of equal size for n pieces (256 in 2: 128; 256 under a limit of 255: 2 x 128).
  const auto piece_for = [&](uint64_t n) { return div_up(graph.batch, n); };
  const auto pieces_for = [&](uint64_t piece) { return div_up(graph.batch, piece); };
  uint64_t too_few = pieces_for(limit) - 1;  // the most pieces known not to fit (0: none tried)
  uint64_t best_n = 0;                       // the fewest pieces known to fit (0: none yet)
  uint64_t n = pieces_for(limit);
  // The proportional guess (pieces) while nothing fits yet: the bisection's upper end, tried last
  // (its mid points first: a count between that fits makes the guess's own try unneeded).
  uint64_t guess_n = 0;
  std::set<uint64_t> tried;  // pieces tried
  // Pieces that did not fit, each with the batch's last piece at that size (batch - (n - 1) x
  // piece): a try fails when either does not fit.
  const auto last_of = [&](uint64_t piece) { return graph.batch - (pieces_for(piece) - 1) * piece; };
  std::vector<std::pair<uint64_t, uint64_t>> failed;
  for (;;) {
    const uint64_t piece = piece_for(n);
    tried.insert(piece);
    try {
      attempt(piece);
      best_n = pieces_for(piece);
    } catch (const DoesNotFit& e) {
      // A single sample that does not fit: the tensor that did not (and every tensor of the ops
      // that touch it) is held in host memory and streamed in bands of rows; then the next, ...
      if (piece == 1 && e.tensor >= 0 && !in_host[e.tensor]) {
        hold_in_host(graph, e.tensor, in_host);
        continue;
      }
      if (piece == 1) throw InputError(fmt::format("{} (even for a single sample)", e.what()));
      failed.push_back({piece, last_of(piece)});
      too_few = std::max(too_few, pieces_for(piece));
      // No fitting piece yet: the proportional guess from this failure, unless one stands that
      // is still above it (a mid point below the guess failed: the guess stays the upper end).
      if (!best_n && pieces_for(piece) >= guess_n) {
        const uint64_t guess = std::clamp<uint64_t>(piece * e.largest / std::max<uint64_t>(e.needed, 1), 1, piece - 1);
        guess_n = std::max(pieces_for(guess), too_few + 1);
      }
    }
    // Bisect over piece counts strictly between too_few and best_n (or the guess, taken to fit
    // until tried), skipping counts that give the same piece size as a count already tried; with
    // no fit yet and nothing left between, the guess itself.
    uint64_t lo = too_few, hi = best_n ? best_n : guess_n;
    for (;;) {
      if (hi - lo <= 1) break;
      n = lo + (hi - lo) / 2;
      if (piece_for(n) == piece_for(hi)) {
        hi = n;  // same piece as the known fit: nothing to learn, narrow
        continue;
      }
      if (lo > 0 && piece_for(n) == piece_for(lo)) {
        lo = n;
        continue;
      }
      break;
    }
    if (hi - lo <= 1) {
      if (best_n) break;
      n = hi;
    }
  }
  // The bisection takes fitting to be monotone in the piece, and it is not: a dense layout's rows
  // per pixel are piece / q, q the largest divisor of the piece within the row (layout.h,
  // dense_q), so a smaller piece can need more rows. tiny_cnn at batch 200 on 128 x 512 with 256
  // KiB and 512 accumulator rows: pieces of 34 (conv2's 32 channels dense by 2 only: 612 rows)
  // and 23 (prime: 828 rows) do not fit where 50 (dense by 10: 180 rows) does; the bisection
  // stopped at 10 pieces of 20, 269,985 cycles, against 4 of 50 and 195,805 with 256 rows,
  // whose limit of 128 samples started it elsewhere. So the counts below the one found are
  // checked, fewest first, but for a piece p' where a piece p <= p' that failed needs no more
  // rows per pixel in any layout (p / dense_q(c, p) <= p' / dense_q(c, p') for each narrow
  // channel count c of the model's tensors; one row per sample for the others), and the batch's
  // last piece at p no more than its last piece at p' (a try fails when either piece does not
  // fit; tiny_cnn at batch 334 there: pieces of 48 fail by their last of 46, which would hide 6
  // pieces of 56, last 54): p' needs at least p's rows. (Not once tensors are held in host memory,
  // which only pieces of one sample do.) CNN1 at batch 1024 on tpu-v1: one more check (pieces of 20, which fit: 52 pieces
  // instead of 61 of 17).
  if (std::find(in_host.begin(), in_host.end(), true) != in_host.end()) return best_n;
  std::set<uint64_t> narrow_c;  // channel counts a dense layout may store (none: dense off)
  if (*resolve(options, arch).dense)
    for (const auto& t : graph.tensors)
      if (narrow(t.shape.c, arch)) narrow_c.insert(t.shape.c);
  const auto no_fewer_rows = [&](uint64_t p, uint64_t q) {  // q needs at least p's rows per pixel
    if (p > q) return false;
    for (const uint64_t c : narrow_c) {
      const uint64_t w = slice_width(arch);
      if (p / dense_q(c, p, w) > q / dense_q(c, q, w)) return false;
    }
    return true;
  };
  const uint64_t found = piece_for(best_n);
  for (uint64_t m = pieces_for(limit); m < best_n; ++m) {
    const uint64_t piece = piece_for(m);
    if (piece <= found) break;
    if (tried.count(piece) || std::any_of(failed.begin(), failed.end(), [&](const auto& f) {
          return no_fewer_rows(f.first, piece) && no_fewer_rows(f.second, last_of(piece));
        }))
      continue;
    tried.insert(piece);
    try {
      attempt(piece);
      return pieces_for(piece);
    } catch (const DoesNotFit&) {
      failed.push_back({piece, last_of(piece)});
    }
  }
  return best_n;  // (the last try that fitted: failing ones change nothing the caller keeps)
}

// Where a schedule does not fit the unified buffer: the first failure and the segment it is in.
struct Misfit {
  DoesNotFit error;
  size_t segment;
};

// Whether `schedule` fits (Lowering::check_fit: the allocations without the ops' instructions), with
// the tensors `in_host` marks in host memory; the misfit when not. Input streaming never costs a
// piece, a band or a replanning: streamed into two layers (lower_chain), a model input stays live
// until the second has run, so a schedule that does not fit with the chain is checked again
// streaming into the first layer alone, and when that fits, `options` goes without the chain (for
// this try, every later one and the program: the single loop's piece search and the piece
// schedule's replanning both ask here). (CNN0 on 64 x 256 with 256 KiB at 136 GB/s: the chain held
// the input, conv1 and conv2 at once, one sample did not fit, and all 16 layers ran in bands from
// host memory, 5.16M cycles against 1.62M without streaming.)
// Streaming into one layer allocates exactly as loading whole: the chain (lower_chain, allocating
// the second layer's output early) is the only thing in check_fit that streaming changes (the
// input's parts change its DMAs and the first layer's chunks, which check_fit does not lower, not
// what is allocated when). So where streaming alone does not fit, loading whole does not either,
// and streaming is never left out altogether (a third check, without streaming, could not pass
// where this one failed: its mapping warning, "input streaming (mapper switch stream) left out",
// was never given, and is gone).
std::optional<Misfit> misfit(const QGraph& graph, const sim::Arch& arch, BuiltTiles& built,
                             const PieceSchedule& schedule, LowerOptions& options, const std::vector<bool>& in_host) {
  const auto check = [&](const LowerOptions& o) -> std::optional<Misfit> {
    Lowering l(graph, arch, built, schedule, o, in_host, false);
    try {
      l.check_fit();
    } catch (const DoesNotFit& e) {
      return Misfit{e, l.segment()};
    }
    return std::nullopt;
  };
  std::optional<Misfit> with = check(options);
  if (!with || !*resolve(options, arch).stream_input || !options.stream_chain) return with;
  // Streamed into a second layer (lower_chain), the input stays live until that layer has run:
  // without the chain, streaming into the first layer alone. (CNN0 on 64 x 256 with 2 MiB at
  // 350 MHz and 136 GB/s: the chain did not fit, and dropping streaming altogether took 1,526,656
  // cycles against 1,503,966 at 34 GB/s, where conv1 streamed alone.)
  LowerOptions alone = options;
  alone.stream_chain = false;
  if (check(alone)) return with;  // it does not fit either way (the first failure's figures)
  options = alone;
  return std::nullopt;
}

// Whether the single loop in pieces of `piece` fits (misfit), throwing DoesNotFit when not.
void check_single_loop(const QGraph& graph, const sim::Arch& arch, BuiltTiles& built, uint64_t piece,
                       LowerOptions& options, const std::vector<bool>& in_host) {
  if (std::optional<Misfit> m =
          misfit(graph, arch, built, single_loop(graph.ops.size(), graph.tensors.size(), piece), options, in_host))
    throw m->error;
}

}  // namespace

uint64_t acc_budget(uint64_t rows, const sim::Arch& arch) {
  return rows <= arch.acc_entries ? rows : arch.acc_entries / 2;
}

uint64_t pass_budget(uint64_t rows, uint64_t tiles, uint64_t drain_per_row,
                     const std::function<double(double)>& refetch, const sim::Arch& arch) {
  const uint64_t half = arch.acc_entries / 2, whole = acc_budget(rows, arch);
  if (whole <= half) return whole;
  const double c = double(div_up(rows, half)), r = double(rows);
  const double drain = (r - r / c) * double(drain_per_row);
  const double extra = double(tiles) * (c - 1) * refetch(r / c);
  return drain > extra ? half : whole;
}

uint64_t max_piece(const sim::Arch& arch) { return arch.acc_entries / 2; }

bool may_pack(const QGraph& g, const MatmulOp& m, const sim::Arch& arch, const LowerOptions& options) {
  if (!*resolve(options, arch).pack || m.inputs.size() != 1 ||
      (m.kernel_h == 1 && m.kernel_w == 1 && m.stride == 1 && m.pad == 0))
    return false;
  return !m.wide_weights() && g.tensors.at(m.inputs[0].tensor).bits != 16;
}

namespace {

// Convolution m's shape as packing.h weighs it for a piece of `piece` samples, the work before
// it not yet counted (ConvShape::ahead infinite).
ConvShape conv_shape(const QGraph& g, const MatmulOp& m, const sim::Arch& arch, const LowerOptions& options,
                     uint64_t piece) {
  const Shape& is = g.tensors[m.inputs[0].tensor].shape;
  const Shape& os = g.tensors.at(m.output.tensor).shape;
  ConvShape cv{is.c, m.n, m.kernel_h, m.kernel_w, m.stride, os.h, os.w, piece};
  // A kernel widened with zero weights (MatmulOp::taps) gathers only its kernel rows with a tap:
  // evenly spaced (a dilated kernel's, a padded Conv1d's one), else every row from the first such
  // row to the last; unpacked, it computes only its taps' positions (computed_tiles).
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < m.kernel_h; ++r)
    if (m.taps_in_rows(r, 1)) rows.push_back(r);
  if (!rows.empty() && rows.size() < m.kernel_h) {
    const uint64_t step = rows.size() > 1 ? rows[1] - rows[0] : 1;
    bool even = true;
    for (size_t j = 1; j < rows.size(); ++j) even = even && rows[j] - rows[j - 1] == step;
    cv.first_row = rows.front();
    cv.row_step = even ? step : 1;
    cv.kh = even ? rows.size() : rows.back() - rows.front() + 1;
  }
  cv.positions = std::max<uint64_t>(1, m.taps_in_rows(0, m.kernel_h));
  cv.partial_tiles = *resolve(options, arch).partial_tiles;
  return cv;
}

// The option lowering takes for packable convolution op i (may_pack) after `ahead` cycles of
// other work (ConvShape::ahead): the estimate's choice, or the P that options.pack_pixels forces
// (bench/packing_scan.cpp: none where the layer cannot take it), or no packing where several
// pixels per vector would scatter a concat branch's channels across a slice boundary: into a
// concat's joined tensor (one its writers write part of: the op's own output view says so, as its
// writers cover its channels once each), several pixels per vector scatter each pixel's N channels
// to one slice from the branch's first channel, not for a branch that straddles a slice boundary.
// What the work before a layer leaves its weight fetches (ahead_of): ConvShape::ahead and ::held.
struct Before {
  double ahead = std::numeric_limits<double>::infinity();
  std::vector<double> held;
};

PackingOption option_for(const QGraph& g, size_t i, const sim::Arch& arch, const LowerOptions& options,
                         uint64_t piece, const Before& before) {
  const MatmulOp& m = std::get<MatmulOp>(g.ops[i]);
  ConvShape cv = conv_shape(g, m, arch, options, piece);
  cv.ahead = before.ahead;
  cv.held = before.held;
  cv.runs = std::isinf(cv.ahead) ? 1 : div_up(g.batch, std::max<uint64_t>(piece, 1));
  const Shape& os = g.tensors.at(m.output.tensor).shape;
  const std::vector<PackingOption> all = packing_options(cv, arch, acc_budget(os.h * os.w * piece, arch));
  PackingOption o = chosen_option(all);
  if (const auto it = options.pack_pixels.find(g.op_layer.at(i)); it != options.pack_pixels.end()) {
    o = all.front();
    for (const PackingOption& e : all)
      if (e.packing && e.packing->p == it->second) o = e;
  }
  const bool joined = m.output.channel0 || os.c != m.n;
  if (o.packing && o.packing->p > 1 && joined && m.output.channel0 % slice_width(arch) + m.n > slice_width(arch))
    o = all.front();
  return o;
}

// What the work before op i hides of its first weight_fifo_tiles weight fetches (ConvShape::ahead):
// the cycles of it the weight memory is free in. Walking back over the ops before it: pools and
// vector ops count 0 (their time is not estimated here: a lower bound); a convolution that may be
// packed counts its first run's estimate (PackingOption::first: with the batch in pieces the mean
// over the runs is less, and its last fetch is the first run's) after its own last fetch
// (PackingOption::fetched), itself
// estimated as after a long layer unless nothing but pools and vector ops precede it (one level:
// a chain of layers all bound by the weight memory is not followed further); any other matmul (a
// dense layer, a 1 x 1 convolution, a 16-bit one) has no estimate here, and is taken as long
// enough to hide them all (infinity: the estimate as it was). With no matmul before it (the
// model's first layer), only the load of its input hides them: at least one DMA's
// host_latency_cycles and its bytes at host_gbps (more DMAs, padded rows, tables take longer). A
// packed convolution waits for the whole load (input streaming cuts image rows only for an
// unpacked one, docs/compiler.md "Input streaming"); an unpacked one may start on its first part,
// with less hidden than counted, but its tiles, C rows a kernel position, are small.
Before ahead_of(const QGraph& g, size_t i, const sim::Arch& arch, const LowerOptions& options, uint64_t piece,
                bool follow = true) {
  for (size_t j = i; j-- > 0;) {
    const auto* prev = std::get_if<MatmulOp>(&g.ops[j]);
    if (!prev) continue;
    if (!follow || !may_pack(g, *prev, arch, options)) return {};
    const PackingOption o = option_for(g, j, arch, options, piece, ahead_of(g, j, arch, options, piece, false));
    Before b{std::max(0.0, o.first - std::max(0.0, o.fetched)), {}};
    for (const double t : o.freed) b.held.push_back(t - o.first);
    return b;
  }
  const Shape& is = g.tensors[std::get<MatmulOp>(g.ops[i]).inputs[0].tensor].shape;
  return {double(arch.host_latency_cycles + sim::transfer_cycles(is.elements() * piece, arch.host_gbps, arch.clock_mhz)),
          {}};
}

}  // namespace

std::optional<Packing> packing_for(const QGraph& g, const MatmulOp& m, const sim::Arch& arch,
                                   const LowerOptions& options, uint64_t piece) {
  if (!may_pack(g, m, arch, options)) return std::nullopt;
  size_t i = 0;
  while (std::get_if<MatmulOp>(&g.ops.at(i)) != &m) ++i;
  return option_for(g, i, arch, options, piece, ahead_of(g, i, arch, options, piece)).packing;
}

std::optional<std::string> concat_in_host(const QGraph& graph, const sim::Arch& arch, const LowerOptions& given) {
  BuiltTiles built(arch);
  LowerOptions options = given;
  std::vector<bool> in_host(graph.tensors.size(), false);
  try {
    search_pieces(graph, arch, given, in_host,
                  [&](uint64_t piece) { check_single_loop(graph, arch, built, piece, options, in_host); });
  } catch (const ConcatInHost& e) {
    return e.concat;
  }
  return std::nullopt;
}

uint64_t pieces(const QGraph& graph, const sim::Arch& arch, const LowerOptions& given) {
  BuiltTiles built(arch);
  LowerOptions options = given;
  std::vector<bool> in_host(graph.tensors.size(), false);
  return search_pieces(graph, arch, given, in_host,
                       [&](uint64_t piece) { check_single_loop(graph, arch, built, piece, options, in_host); });
}

// The batch runs in the fewest equal pieces that fit: half the accumulators (one block per pass,
// the other half for the next pass's overlap: max_piece), the pool instruction's 255 interleaved
// images, and the unified buffer. For the buffer, the piece count is searched (search_pieces,
// which pieces() runs with fit checks alone): a piece that does not fit gives
// a guess in proportion to the largest free block (a lower bound on the pieces: the other live
// tensors shrink with the piece too, so the guess is pessimistic), then a bisection between the
// most pieces known not to fit and the fewest known to fit (the guess counting as a fit until it
// is tried: it is tried only when no count between fits). Every try, of the single loop or of
// the piece schedule, is first checked to fit (Lowering::check_fit: the allocations without the
// ops' instructions; of a piece loop, the first piece, and the last where it is shorter, when the
// first leaves the unified buffer as it found it), and only a schedule that fits is lowered: the
// search checks alone, as pieces() does, and only the fewest pieces found are lowered (a check
// costs about a hundredth of CNN1's lowering at batch 512, and does not grow with the batch).
// When one sample does not fit, tensors are moved to host memory one connected group at a time
// (hold_in_host) and their ops run in bands of rows: one more check per group moved.
// The single loop's lowering makes code when the first try fitted and the piece schedule is not
// tried; else it measures (Lowering's `code`) and the program is lowered once more with code, into
// room for its counted instructions: by the piece schedule's try, or the single loop's when that
// wins or is not tried. A program is never held twice (CNN1 on a 64 x 64 array with 256
// accumulator rows: a measuring lowering of the single loop in 16 pieces and the piece schedule's
// with code, over a million instructions each; five checks that fail).
// Lowering each try that fitted (as the search once did) made the lowering's time grow faster than
// the batch: CNN1 at batch 1024 (tpu-v1, pieces of 16) lowered 6 times against 3 at batch 512, its
// bisection going through pieces of 2, 4, 8 and 13; both now lower twice (docs/compiler.md
// "Performance of the compiler").
// Input streaming never costs the single loop a piece or a band, nor the piece schedule a
// replanning (misfit: both ask it).
isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& given) {
  LowerMemory memory;
  return lower(graph, arch, given, memory);
}

isa::Program lower(const QGraph& graph, const sim::Arch& arch, const LowerOptions& given, LowerMemory& memory) {
  LowerOptions options = given;  // (without the stream chain, once a try fitted only without it: misfit)
  // The fewest pieces known to fit: the schedule, its program when its try made code, else the
  // instructions it counted.
  BuiltTiles built(arch);  // (shared by every try)
  struct Fit {
    PieceSchedule schedule;
    std::vector<bool> in_host;
    LowerOptions options;  // the switches it was lowered with (the chain may have been dropped: misfit)
    std::optional<isa::Program> program;
    uint64_t instructions = 0, image_bytes = 0;
  };
  const bool with_values = !without_values(graph);
  memory.working_bytes = 0;
  // (each try's working state, as it ends, with the tiles the tries share)
  const auto held = [&](const Lowering& l) {
    memory.working_bytes = std::max(memory.working_bytes, l.held_bytes() + built.held_bytes());
  };
  std::optional<Fit> best;
  std::vector<bool> in_host(graph.tensors.size(), false);  // tensors streamed in bands (hold_in_host)
  const size_t ops = graph.ops.size(), tensors = graph.tensors.size();
  uint64_t tries = 0;
  const uint64_t best_n = search_pieces(graph, arch, given, in_host, [&](uint64_t piece) {
    ++tries;
    check_single_loop(graph, arch, built, piece, options, in_host);
    best = Fit{single_loop(ops, tensors, piece), in_host, options, std::nullopt, 0};
  });
  const bool in_bands = std::find(in_host.begin(), in_host.end(), true) != in_host.end();
  const bool try_plan = *resolve(options, arch).piece_schedule && best_n > 1 && !in_bands;
  // The fewest pieces found, lowered: with code where the first try fitted (the batch's pieces
  // were not searched: most models at their batch) and no piece schedule is tried; else measured
  // first, so that the program's code is made once into room for exactly its instructions (grown
  // by doubling, CNN1's code at batch 1024 peaked at 177 MB against 117 MB), by with_code, or by
  // the piece schedule's try (one program at a time).
  // (Not with a check before the program: it is made after the check, once laid out.)
  const bool code = tries == 1 && !try_plan && !memory.before_program;
  std::optional<ScheduleProblem> best_problem;
  double best_estimate = 0;
  {
    Lowering l(graph, arch, built, best->schedule, best->options, best->in_host, code);
    isa::Program p = l.run();
    held(l);
    if (code) best->program = std::move(p);
    best->instructions = l.instructions();
    best->image_bytes = l.image_bytes();
    best_problem = l.problem();
    best_estimate = l.estimate();
  }
  // In pieces (and not in bands): the piece schedule (schedule.h) where its estimate beats the
  // single loop's. A segment that does not fit after all (the plan's row count is per sample and
  // ignores fragmentation) runs in one more piece, a few times at most.
  // The program chosen, with the switches given (meta.mapper: lower_options.h, mapper_to_json).
  const auto with_code = [&](Fit& f) {
    isa::Program p;
    if (f.program) {
      p = std::move(*f.program);
    } else {
      if (memory.before_program) memory.before_program(with_values ? f.image_bytes : 0, f.instructions);
      Lowering l(graph, arch, built, f.schedule, f.options, f.in_host, true, f.instructions);
      l.reserve_image(f.image_bytes);
      p = l.run();
      held(l);
    }
    if (nlohmann::json mapper = mapper_to_json(with_graph(given, graph)); !mapper.empty())
      p.meta["mapper"] = std::move(mapper);
    return p;
  };
  if (!try_plan) return with_code(*best);
  ScheduleProblem problem = std::move(*best_problem);
  PieceSchedule plan = plan_pieces(problem, arch, tensors);
  for (int tries = 0; plan.segments.size() > 1 && tries < 8; ++tries) {
    // The segment that does not fit, if one does not (found without lowering; without streaming
    // where only streaming did not fit: misfit).
    LowerOptions plan_options = options;
    std::optional<size_t> misfit_segment;
    if (const std::optional<Misfit> m = misfit(graph, arch, built, plan, plan_options, {})) misfit_segment = m->segment;
    if (!misfit_segment) {
      // The plan's try makes code (the program, when its estimate wins) unless the single loop's
      // program is held already: one program at a time. (Room for twice the single loop's
      // instructions: what is never written takes no memory.)
      const bool code = !best->program && !memory.before_program;
      Lowering l(graph, arch, built, plan, plan_options, {}, code, code ? 2 * best->instructions : 0);
      try {
        isa::Program p = l.run();
        held(l);
        if (l.estimate() < best_estimate) {
          best.reset();  // (its program, if its try made one, is not needed)
          Fit f{plan, {}, plan_options, code ? std::optional(std::move(p)) : std::nullopt, l.instructions(),
                l.image_bytes()};
          return with_code(f);
        }
        break;
      } catch (const DoesNotFit&) {
        misfit_segment = l.segment();  // (check_fit finds what run() does: not expected)
      }
    }
    // The segment needed more rows than the plan counted for its ops (fragmentation, zero
    // borders, dense layouts counted per sample): count them a quarter higher and plan again, so
    // that the planner may cut the segment elsewhere as well as give it more pieces (giving the
    // whole segment more pieces cost a model whose first layers need pieces its later layers'
    // whole batch: CNN1's FC layers then fetched their weights once per piece).
    const PieceSegment& sg = plan.segments.at(*misfit_segment);
    if (sg.piece == 1) break;
    for (size_t i = sg.first; i < sg.end; ++i) problem.ops[i].rows += (problem.ops[i].rows + 3) / 4;
    plan = plan_pieces(problem, arch, tensors);
  }
  return with_code(*best);
}

}  // namespace tpusim::compiler
