#include "compiler/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "sim/host_model.h"

namespace tpusim::compiler {

namespace {

uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

double xfer(double bytes, double gbps, const sim::Arch& a) {
  return std::ceil(bytes * a.clock_mhz / (gbps * 1000.0));
}

// The op's work had it run in n pieces instead of the measured ones (see schedule.h).
Emitter::Work in_pieces(const Emitter::Work& w, uint64_t measured, uint64_t n) {
  Emitter::Work r = w;
  r.switches = div_up(w.switches * n, measured);
  r.weight_bytes = div_up(w.weight_bytes * n, measured);
  r.activations = div_up(w.activations * n, measured);
  r.launches = div_up(w.launches * n, measured);  // (each piece runs the loop's steps again)
  return r;
}

// Cycles to move tensor t's whole batch between its piece storages (pieces of `piece`, n of them)
// and its whole-batch copy: in the UB (vec, one per pixel and slice unless the pieces are the
// whole batch) or in host memory (a DMA per pixel and slice, one per slice for the whole batch).
double move_cycles(const CrossingTensor& t, uint64_t batch, uint64_t piece, bool resident,
                   const sim::Arch& a) {
  const uint64_t n = div_up(batch, piece);
  const double row = double(div_up(a.ub_row_bytes(), a.activation_lanes));
  if (resident) {
    if (piece == batch) return 0;
    const double copies = double(n * t.slices * t.pixels);
    return copies * double(a.activation_latency_cycles) + double(batch * t.pixels * t.slices) * row;
  }
  const double dmas = double(piece == batch ? t.slices : n * t.slices * t.pixels);
  return dmas * double(a.host_latency_cycles) + xfer(double(batch * t.bytes), a.host_gbps, a);
}

}  // namespace

PieceSchedule single_loop(size_t ops, size_t tensors, uint64_t piece) {
  PieceSchedule s;
  s.segments.push_back({0, ops, piece});
  s.io_piece = piece;
  s.resident.assign(tensors, false);
  return s;
}

double op_cycles(const Emitter::Work& w, const sim::Arch& a) {
  const double fetch = w.weight_bytes ? xfer(double(w.weight_bytes), a.weight_mem_gbps, a) : 0;
  const double matrix = std::max(double(w.vectors + w.switches * a.array_rows), fetch);
  const double act = double(w.act_rows * div_up(a.ub_row_bytes(), a.activation_lanes)) +
                     double(w.activations * a.activation_latency_cycles);
  const double host =
      double(w.dmas * a.host_latency_cycles) + (w.dma_bytes ? xfer(double(w.dma_bytes), a.host_gbps, a) : 0);
  // A host-driven loop's launches (mapper host_loop: an LSTM's layer-steps), each the driver's time
  // and a download's start-up; the segments' instructions are downloaded whatever the pieces, so
  // the download's bytes are left out (sim/host_model.h, launch_cycles).
  const double launches = double(w.launches) * double(sim::launch_cycles(a, 0));
  return matrix + act + host + launches;
}

// Dynamic programme over the cut positions. State after a cut at position b: (b, whether the
// tensors crossing b are resident, the piece of the segment ending at b) -> the cheapest cost of
// ops [0, b) and how it was reached. A segment [a, b) runs over the whole batch when B x its
// largest rows per sample fit (a resident tensor is then its own storage), else in pieces of
//   P = min(limit, (free rows - resident rows crossing a - resident rows crossing b) / max rows per sample)
// (a tensor crossing both counted twice: conservative), the limit being the accumulators' half
// and the pool's 255 samples where the segment pools.
PieceSchedule plan_pieces(const ScheduleProblem& pr, const sim::Arch& arch, size_t tensors) {
  const size_t n = pr.ops.size();
  const uint64_t B = pr.batch;
  std::vector<size_t> cuts{0};
  for (size_t j = 1; j < n; ++j)
    if (pr.ops[j].cut_before) cuts.push_back(j);
  cuts.push_back(n);
  std::vector<uint64_t> resident_rows(n + 1, 0);  // per position: its crossing tensors' rows, whole batch
  for (size_t j = 0; j <= n && j < pr.crossing.size(); ++j)
    for (const CrossingTensor& t : pr.crossing[j]) resident_rows[j] += t.rows * B;
  // move_cycles of each tensor crossing position j, per piece and resident or not, computed once
  // (the search asks for the same ones for every segment it tries from or to j).
  std::vector<std::map<std::pair<uint64_t, bool>, std::vector<double>>> moves(n + 1);
  const auto moves_at = [&](size_t j, uint64_t piece, bool resident) -> const std::vector<double>& {
    auto [it, added] = moves[j].try_emplace({piece, resident});
    if (added)
      for (const CrossingTensor& t : pr.crossing[j]) it->second.push_back(move_cycles(t, B, piece, resident, arch));
    return it->second;
  };
  // Prefix sums of op cycles per piece count, built when first needed.
  std::map<uint64_t, std::vector<double>> prefix;
  const auto ops_cost = [&](size_t a, size_t b, uint64_t pieces) {
    auto [it, added] = prefix.try_emplace(pieces);
    if (added) {
      it->second.assign(n + 1, 0.0);
      for (size_t i = 0; i < n; ++i)
        it->second[i + 1] =
            it->second[i] + op_cycles(in_pieces(pr.ops[i].work, pr.measured_pieces, pieces), arch);
    }
    return it->second[b] - it->second[a];
  };
  struct State {
    double cost = std::numeric_limits<double>::infinity();
    size_t from_cut = 0;
    bool from_resident = false;
    uint64_t from_piece = 0, piece = 0;
  };
  // Per cut index, key (resident, piece of the segment ending there), in that order.
  std::vector<std::map<std::pair<bool, uint64_t>, State>> best(cuts.size());
  best[0][{false, 0}] = State{0.0, 0, false, 0, 0};
  for (size_t ca = 0; ca + 1 < cuts.size(); ++ca) {
    const size_t a = cuts[ca];
    for (auto it = best[ca].begin(); it != best[ca].end(); ++it) {
      const auto [ma, pl] = it->first;
      const double base = it->second.cost;
      const uint64_t rin = ma ? resident_rows[a] : 0;
      const std::vector<double>* from_moves = a > 0 ? &moves_at(a, pl, ma) : nullptr;
      uint64_t maxd = 1;
      bool pool = false;
      for (size_t cb = ca + 1; cb < cuts.size(); ++cb) {
        const size_t b = cuts[cb];
        for (size_t i = cuts[cb - 1]; i < b; ++i)
          maxd = std::max(maxd, pr.ops[i].rows), pool |= pr.ops[i].pool;
        const uint64_t limit = std::min<uint64_t>({B, pr.acc_limit, pool ? 255 : B});
        for (const bool mb : {false, true}) {
          if (b == n && mb) continue;
          // Over the whole batch, a resident tensor is the segment's own storage of it (in the
          // rows per sample already); in pieces, the whole batch's copy comes on top.
          const uint64_t rout = mb ? resident_rows[b] : 0;
          uint64_t fit = B;
          if (B > limit || B * maxd > pr.free_rows) {
            if (rin + rout >= pr.free_rows) continue;
            fit = std::min(limit, (pr.free_rows - rin - rout) / maxd);
          }
          if (fit == 0) continue;
          const uint64_t pieces = div_up(B, fit), piece = div_up(B, pieces);
          double cost = base + ops_cost(a, b, pieces);
          if (a > 0) {
            const std::vector<double>& to_moves = moves_at(a, piece, ma);
            for (size_t k = 0; k < to_moves.size(); ++k) cost += (*from_moves)[k] + to_moves[k];
          }
          State& s = best[cb][{mb, piece}];
          if (cost < s.cost) s = State{cost, ca, ma, pl, piece};
        }
      }
    }
  }
  // The cheapest end, then back along the cuts.
  const State* end = nullptr;
  std::tuple<size_t, bool, uint64_t> key;
  for (const auto& [k, s] : best.back())
    if (!end || s.cost < end->cost) end = &s, key = {cuts.size() - 1, k.first, k.second};
  // No schedule fits the rows counted (tiny_cnn at batch 2 on 8 x 8 with 3 KiB and pieces=on,
  // once lower() counted a misfit segment's rows higher): one segment, the single loop's shape
  // (there was no segment to read the I/O piece from, and the compile crashed).
  if (!end) return single_loop(n, tensors, 1);
  PieceSchedule sched;
  sched.resident.assign(tensors, false);
  std::vector<std::pair<size_t, bool>> modes;  // (position, resident) of each cut
  while (std::get<0>(key) > 0) {
    const State& s = best.at(std::get<0>(key)).at({std::get<1>(key), std::get<2>(key)});
    sched.segments.insert(sched.segments.begin(),
                          PieceSegment{cuts[s.from_cut], cuts[std::get<0>(key)], s.piece});
    if (s.from_cut > 0) modes.push_back({cuts[s.from_cut], s.from_resident});
    key = {s.from_cut, s.from_resident, s.from_piece};
  }
  // A tensor is resident when every cut it crosses is.
  std::vector<int> crossed(tensors, 0), resident(tensors, 0);
  for (const auto& [j, r] : modes)
    for (const CrossingTensor& t : pr.crossing[j]) ++crossed[t.tensor], resident[t.tensor] += r;
  for (size_t t = 0; t < tensors; ++t) sched.resident[t] = crossed[t] > 0 && resident[t] == crossed[t];
  sched.io_piece = sched.segments.front().piece;
  return sched;
}

}  // namespace tpusim::compiler
