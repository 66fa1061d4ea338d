// The trace model (trace_model.h): everything the writers show, derived after the run.
#include "sim/trace_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/icl/interval_map.hpp>
#include <boost/icl/interval_set.hpp>

#include "isa/disassembler.h"
#include "sim/hazards.h"

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;

namespace {
constexpr uint32_t kNoLayer = UINT32_MAX;
}

std::vector<Sample> step_series(std::vector<std::pair<uint64_t, int64_t>> deltas) {
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Sample> out{{0, 0}};
  int64_t value = 0;
  for (size_t k = 0; k < deltas.size();) {
    const uint64_t c = deltas[k].first;
    for (; k < deltas.size() && deltas[k].first == c; ++k) value += deltas[k].second;
    if (value == out.back().value) continue;
    if (out.back().cycle == c) out.back().value = value;
    else out.push_back({c, value});
  }
  return out;
}

TraceModel::TraceModel(const TraceInput& input, const TraceSelection& selection)
    : in(input),
      sel(selection),
      program(*input.program),
      arch(*input.arch),
      timeline(input.result->timeline),
      cycles(input.result->cycles),
      pack(program.code) {
  build_layers();
  build_matrix_spans();
  build_series();
  const auto& tiles = in.recorder->tiles;
  tile_in_rw_.resize(tiles.size());
  for (size_t t = 0; t < tiles.size(); ++t)
    tile_in_rw_[t] = t > 0 && tiles[t - 1].rw == tiles[t].rw ? tile_in_rw_[t - 1] + 1 : 0;
  opcode_kept_.assign(256, sel.opcodes.empty());
  for (Opcode op : sel.opcodes) opcode_kept_[size_t(op)] = true;
}

isa::Unit TraceModel::unit(uint64_t i) const { return isa::spec(inst(i).opcode).unit; }

std::string TraceModel::text(uint64_t i) const { return isa::format_instruction(inst(i)); }

const std::string* TraceModel::layer(uint64_t i) const {
  return layer_of_[i] == kNoLayer ? nullptr : &layer_names_[layer_of_[i]];
}

uint64_t TraceModel::vectors(uint64_t i) const { return inst(i)[Field::rows] * inst(i)[Field::repeat]; }
uint64_t TraceModel::stream_cycles(uint64_t i) const { return sim::stream_cycles(pack.at(i), arch, vectors(i)); }

bool TraceModel::in_window(uint64_t begin, uint64_t end) const {
  if (begin == end) return begin >= sel.begin && begin < sel.end;
  return begin < sel.end && end > sel.begin;
}

bool TraceModel::passes(uint64_t i) const {
  if (i == kNoCycle) return true;
  if (!opcode_kept_[size_t(inst(i).opcode)]) return false;
  return sel.layers.empty() || (layer_of_[i] != kNoLayer && layer_kept_[layer_of_[i]]);
}

// A `tag` names the layer of the instructions after it: meta.layers[tag] when the program has
// that list (compiled models do), else "tag N".
void TraceModel::build_layers() {
  layer_of_.assign(timeline.size(), kNoLayer);
  uint32_t current = kNoLayer;
  const std::vector<LayerTag> tags = layer_tags(program);
  auto tag = tags.begin();
  for (uint64_t i = 0; i < timeline.size(); ++i) {
    if (tag != tags.end() && tag->index == i) {
      auto it = std::find(layer_names_.begin(), layer_names_.end(), tag->name);
      current = uint32_t(it - layer_names_.begin());
      if (it == layer_names_.end()) layer_names_.push_back(tag->name);
      ++tag;
    }
    layer_of_[i] = current;
  }
  layer_kept_.assign(layer_names_.size(), false);
  for (size_t k = 0; k < layer_names_.size(); ++k)
    layer_kept_[k] = std::find(sel.layers.begin(), sel.layers.end(), layer_names_[k]) != sel.layers.end();
}

// Active: [t0, t0 + B) of every matmul; weight stall and shift: each matmul's wait, split where
// its tile landed; RAW and input stalls: the cycles issue was held by a sync that no matrix span
// covers (exactly how the counters are computed in machine.cpp).
void TraceModel::build_matrix_spans() {
  std::vector<MatrixSpan> matrix;
  for (uint64_t i = 0; i < timeline.size(); ++i)
    if (inst(i).opcode == Opcode::matmul)
      matrix.push_back({MatrixKind::active, timeline[i].start, timeline[i].start + stream_cycles(i), i});
  for (const TraceRecorder::WeightWait& w : in.recorder->weight_waits) {
    if (w.t0 <= w.from) continue;
    const uint64_t split = std::clamp(w.landed, w.from, w.t0);
    if (split > w.from) matrix.push_back({MatrixKind::weight_stall, w.from, split, w.index});
    if (w.t0 > split) matrix.push_back({MatrixKind::weight_shift, split, w.t0, w.index});
  }
  auto by_begin = [](const MatrixSpan& a, const MatrixSpan& b) { return a.begin < b.begin; };
  std::sort(matrix.begin(), matrix.end(), by_begin);
  matrix_spans = matrix;
  size_t c = 0;
  for (const TraceRecorder::SyncWait& s : in.recorder->sync_waits) {
    const MatrixKind kind = s.kind == HoldKind::raw     ? MatrixKind::raw_stall
                            : s.kind == HoldKind::input ? MatrixKind::input_stall
                                                        : MatrixKind::host_launch;
    while (c < matrix.size() && matrix[c].end <= s.begin) ++c;
    uint64_t at = s.begin;
    for (size_t k = c; k < matrix.size() && matrix[k].begin < s.end; ++k) {
      if (matrix[k].begin > at) matrix_spans.push_back({kind, at, matrix[k].begin, s.index});
      at = std::max(at, matrix[k].end);
    }
    if (at < s.end) matrix_spans.push_back({kind, at, s.end, s.index});
  }
  std::stable_sort(matrix_spans.begin(), matrix_spans.end(), by_begin);
}

void TraceModel::build_series() {
  std::vector<std::pair<uint64_t, int64_t>> slots, landed;
  for (const TraceRecorder::Tile& t : in.recorder->tiles) {
    slots.push_back({t.request, 1});
    landed.push_back({t.landed, 1});
    if (t.shift_begin != kNoCycle) landed.push_back({t.shift_begin, -1});
    if (t.shift_end != kNoCycle) slots.push_back({t.shift_end, -1});
  }
  series[size_t(Series::fifo_slots)] = step_series(std::move(slots));
  series[size_t(Series::fifo_landed)] = step_series(std::move(landed));
  // UB rows in use: the rows instructions read or write while they use them (a matmul while it
  // streams, others from start to end); rows touched: the footprint so far.
  struct Use {
    uint64_t cycle;
    bool begins;
    uint64_t index;
  };
  std::vector<Use> uses;
  std::vector<Accesses> acc(timeline.size());
  ActPool act_pool;  // the setcfg registers in force, in issue (program) order
  Planes planes;
  for (uint64_t i = 0; i < timeline.size(); ++i) {
    track_act_pool(act_pool, inst(i));
    track_planes(planes, inst(i));
    if (unit(i) == isa::Unit::control) continue;
    acc[i] = accesses(inst(i), arch, pack.at(i), act_pool, planes);
    if (acc[i].ub_reads.empty() && acc[i].ub_writes.empty()) continue;
    const uint64_t end = inst(i).opcode == Opcode::matmul ? timeline[i].start + stream_cycles(i) : timeline[i].end;
    uses.push_back({timeline[i].start, true, i});
    uses.push_back({end, false, i});
  }
  std::stable_sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) {
    return a.cycle != b.cycle ? a.cycle < b.cycle : (!a.begins && b.begins);  // ends first
  });
  using Interval = boost::icl::discrete_interval<uint64_t>;
  boost::icl::interval_map<uint64_t, int64_t> in_use;
  boost::icl::interval_set<uint64_t> touched;
  std::vector<Sample>& use_series = series[size_t(Series::ub_in_use)];
  std::vector<Sample>& touched_series = series[size_t(Series::ub_footprint)];
  use_series = touched_series = {{0, 0}};
  auto put = [](std::vector<Sample>& s, uint64_t c, int64_t v) {
    if (s.back().value == v) return;
    if (s.back().cycle == c) s.back().value = v;
    else s.push_back({c, v});
  };
  for (size_t k = 0; k < uses.size();) {
    const uint64_t c = uses[k].cycle;
    for (; k < uses.size() && uses[k].cycle == c; ++k) {
      const Accesses& a = acc[uses[k].index];
      for (const auto* list : {&a.ub_reads, &a.ub_writes})
        for (const RowRange& r : *list) {
          if (r.rows == 0) continue;
          const Interval iv = Interval::right_open(r.first, r.end());
          if (uses[k].begins) {
            in_use += std::make_pair(iv, int64_t{1});
            touched += iv;
          } else {
            in_use -= std::make_pair(iv, int64_t{1});
          }
        }
    }
    put(use_series, c, int64_t(boost::icl::cardinality(in_use)));
    put(touched_series, c, int64_t(boost::icl::cardinality(touched)));
  }
}

}  // namespace tpusim::sim
