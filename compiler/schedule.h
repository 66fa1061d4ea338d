// The piece schedule: which ops run over the whole batch and which in pieces of it.
//
// A batch whose tensors do not all fit the unified buffer runs in pieces. Run as one loop (the
// whole model once per piece), every weight tile is fetched once per piece. The schedule here cuts
// the model's ops into segments of consecutive layers, each with its own piece size: the whole
// batch where the segment's live tensors fit, else the fewest equal pieces that fit. A tensor that
// crosses a cut (written before it, read after) is either kept in the UB for the whole batch
// (`resident`: the pieces of the segment before write their samples into it with `vec` copies
// where the two segments' pieces differ), or staged through host memory (the scratch region, as
// the bands' tensors are: write_host after the producer, read_host before the consumers). The
// choice of cuts, pieces and resident or staged is the cheapest by the cycle estimate below, a
// dynamic programme over the cut positions; then the schedule is lowered for real, and kept only
// when it fits and its own estimate beats the single loop's (compiler/lower.cpp, lower()).
//
// The estimate (cycles), per op, from what the op's lowering emitted (Emitter::Work):
//   max(matmul vectors + switches x array_rows, switches x tile fetch) + activation rows x
//   ceil(W / activation_lanes) + activation instructions x activation_latency_cycles + host DMAs x
//   host_latency_cycles + xfer(DMA bytes, host_gbps) + host launches (`int`, a host-driven loop's
//   layer-steps) x (host_driver_us x clock + host_latency_cycles),
// i.e. streaming and weight fetching overlap (the weight FIFO), the other units add. For an op run
// in n pieces instead of the n* it was measured with, switches, activation instructions and
// launches (each piece runs the loop's steps again) scale by n / n*; vectors and rows are the
// batch's whatever the pieces.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/emitter.h"
#include "sim/arch.h"

namespace tpusim::compiler {

// Ops [first, end) in pieces of `piece` samples (the last piece the rest).
struct PieceSegment {
  size_t first = 0, end = 0;
  uint64_t piece = 0;
};

struct PieceSchedule {
  std::vector<PieceSegment> segments;
  uint64_t io_piece = 0;       // the pieces of the input and output host regions (meta.batch_piece)
  std::vector<bool> resident;  // per tensor crossing a cut: kept in the UB (else staged in host memory)
};

// The whole model in pieces of `piece`: one segment (the single loop).
PieceSchedule single_loop(size_t ops, size_t tensors, uint64_t piece);

// A tensor that crosses a cut: its UB rows per sample (with its zero border), pixels, slices and
// bytes per sample (channels x pixels).
struct CrossingTensor {
  int tensor = -1;
  uint64_t rows = 0, pixels = 0, slices = 0, bytes = 0;
};

// What the planner knows, from a lowering of the whole model in `measured_pieces` pieces.
struct ScheduleProblem {
  uint64_t batch = 1, measured_pieces = 1;
  uint64_t free_rows = 0;  // UB rows for tensors (the per-column tables take the rest)
  uint64_t acc_limit = 1;  // samples a piece may have for the accumulators (half of them)
  struct Op {
    Emitter::Work work;       // emitted over the whole batch
    uint64_t rows = 0;        // UB rows per sample of the tensors live while it runs
    bool pool = false;        // a pool instruction (255 samples at most) or a pool fused into it
    bool cut_before = false;  // a cut may go before it (a layer boundary no tensor is written across)
  };
  std::vector<Op> ops;
  std::vector<std::vector<CrossingTensor>> crossing;  // per position j (before op j): crossing tensors
  std::vector<int> inputs;                            // the model's inputs (never resident or staged)
};

double op_cycles(const Emitter::Work& w, const sim::Arch& arch);

// The cheapest schedule by the estimate (one segment when no cut pays, or when no schedule fits
// the rows counted: an op's rows per sample more than the free rows, after lower()'s retries
// counted a segment's rows higher; the caller then keeps its single loop).
PieceSchedule plan_pieces(const ScheduleProblem& problem, const sim::Arch& arch, size_t tensors);

}  // namespace tpusim::compiler
