// The back end's instruction emitter: appends instructions in program order and places what the
// machine leaves to the compiler:
//   - sync: the stations (host DMA, matrix unit, activation unit) run concurrently and the
//     hardware does not watch UB addresses (docs/timing.md), so before an instruction that
//     touches UB rows another station may still read or write (RAW, WAR, WAW), the emitter
//     inserts `sync` for exactly those stations. Accumulators are interlocked in hardware.
//   - read_weights: matmuls that switch tiles consume the weight FIFO in order; the rw for the
//     tile `prefetch` switches ahead is placed before each switching matmul (and before the
//     sync that may precede it), the first `prefetch` at the start. With prefetch <= the FIFO
//     depth this cannot deadlock (bench/mlp_program.cpp explains why).
//   - setcfg: the DMA stride registers, written only when they change.
//   - input streaming (docs/compiler.md, "Input streaming"): the read_host DMAs of a load given
//     between stream_begin() and stream_end() are parts emitted lazily, so that the first layer
//     starts on the rows already loaded while the host link moves the next ones.
#pragma once

#include <boost/container/small_vector.hpp>
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "isa/instruction.h"
#include "isa/program.h"
#include "sim/arch.h"
#include "sim/pack.h"
#include "sim/row_set.h"
#include "sim/state.h"

namespace tpusim::compiler {

struct RowSpan {
  uint64_t first = 0, rows = 0;
};

// The tile a switching matmul fetches: its weight memory address and, for a partial tile stored
// compactly, its box (rw tile_rows x tile_cols; 0 x 0: the whole array's).
struct TileFetch {
  uint64_t waddr = 0;
  uint32_t rows = 0, cols = 0;
};

class Emitter {
 public:
  // An instruction's UB spans: a few, kept without an allocation.
  using Spans = boost::container::small_vector<RowSpan, 4>;
  // `code` false: a measuring emitter (a try of the lowering's piece search, lower.cpp): it
  // decides everything as a full one does (registers, syncs, stream parts, work counters) but
  // stores no instruction; finish() returns nothing. `reserve`: instructions to make room for (a
  // measuring run's instructions(): the code then grows without being copied).
  Emitter(const sim::Arch& arch, uint64_t prefetch, bool code = true, uint64_t reserve = 0);

  void tag(uint64_t value);
  void host_dma(bool write, uint64_t host, uint64_t ub, uint64_t rows, uint64_t row_bytes, uint64_t stride);
  // A matmul; `fetch` is the tile it switches to (when `switches`).
  // `gather`: the setcfg gather_* and dense_rows / dense_bytes registers it runs with (sim/pack.h;
  // default: no gather, not dense), and its 16-bit modes mm_in_hi and mm_weight_hi, written when
  // they change; its reads then reach gather.reach() (logical) rows past each group, and the same
  // rows mm_in_hi further (the high plane).
  // `low_plane`: its tile is a 16-bit weight matrix's low byte plane, fetched with `rw unsigned`.
  // `macs`: its useful MACs per vector where its tile's useful cells do not say them (a packed
  // convolution's short last group, a grouped convolution's tile across groups), or with `copy`
  // an identity copy's MACs per vector (isa::MatmulMacs): listed in macs_given(), the program's
  // meta.matmul_macs.
  void matmul(isa::Instruction inst, bool switches, TileFetch fetch, const sim::PackRegs& gather = {},
              bool low_plane = false, std::optional<uint64_t> macs = std::nullopt, bool copy = false);
  // The act_groups / act_group_cols the following activates run with (0, 0: no scatter);
  // written before the next activate when they change. An activate writes rows x groups rows.
  void scatter(uint64_t groups, uint64_t group_cols) {
    scatter_want_ = {groups, groups ? group_cols : 0};
  }
  // The act_dense_rows / act_dense_bytes the following activates run with (0, 0: one written row
  // per UB row; sim/pack.h); written before the next activate when they change. The caller gives
  // an activate's write span in written rows from its `ub`: the emitter turns it into UB rows.
  void dense_out(uint64_t q, uint64_t bytes) { dense_want_ = {q > 1 ? q : 0, q > 1 ? bytes : 0}; }
  // The fused pooling the following activates run with (sim/state.h ActPool; kind 0: none):
  // the setcfg act_pool registers, written before the next activate when they change. The
  // caller gives such an activate's write span as its pooled rows.
  void pool_in_activate(const sim::ActPool& pool) { pool_want_ = pool; }
  // The 16-bit element planes (sim/state.h Planes: setcfg act_high for activates, vec_high_* for
  // vecs; 0 = 8-bit) the following act and vec run with, written before each when they change.
  // The high planes' rows (the spans given to activation() moved by the register's rows) count
  // as read and written for sync placement.
  void planes(const sim::Planes& planes) { planes_want_ = planes; }
  // act, vec and pool (the activation unit). `act_lane` is the UB row byte an act writes from
  // (a setcfg when it changes); vec and pool ignore it.
  void activation(const isa::Instruction& inst, Spans reads, RowSpan write, uint64_t act_lane);
  void activation(const isa::Instruction& inst, Spans reads, RowSpan write);
  // Zeroes UB rows (vec sub of the rows with themselves) unless they were never written. With
  // zeros ahead (zero_ahead(true)) the vecs are not emitted at once but held until they can run
  // under other work: after the instruction that the next `sync` naming the activation unit
  // guards (so that the sync does not wait for them and the instruction is not issued behind
  // them), or, at the latest, just before any instruction that touches their rows (program order),
  // `int` or the end. A sync naming the activation unit when no matmul was emitted after the last
  // activate also names the matrix unit where a held zero's rows were read or written by it since
  // its last sync: the activation unit idle, that activate is done and with it every matmul
  // before it, so the sync waits no longer and the rows are free (docs/compiler.md, "Zero borders
  // ahead").
  void zero(RowSpan rows);
  void zero_ahead(bool on) { zero_ahead_ = on; }
  // sync on every unit with outstanding UB accesses, then halt; returns the program's code with
  // the read_weights in place.
  std::vector<isa::Instruction> finish();
  // The matmuls given `macs`, by their place in finish()'s code (valid after finish()).
  const std::vector<isa::MatmulMacs>& macs_given() const { return macs_given_; }
  // The bytes the emitter holds besides the code (its row sets, stream parts, held zeros, the
  // matmuls given macs): the lowering's working state (compiler/held_bytes.h).
  uint64_t held_bytes() const;
  // Ends a program segment (a step of a loop the host drives): `int`, which drains the machine
  // and holds issue for the host's launch of the next segment. No read_weights is hoisted across
  // it: the placeholders for the fetches after it that were placed before it are dropped, and
  // the next segment starts its own prefetch as a program does.
  void interrupt();
  uint64_t host_segments() const { return segments_; }

  uint64_t weight_fetches() const { return fetches_; }
  // Instructions emitted so far but the read_weights placed at the start (a measuring emitter
  // counts the ones it would store).
  uint64_t instructions() const { return instructions_; }
  bool stores_code() const { return code_on_; }

  // Input streaming. Between stream_begin() and stream_end() a read_host is not emitted but kept
  // as a part of the stream, in order. stream_end() emits the first part. Every later
  // instruction that touches a part's UB rows first gets that part and every part before it
  // emitted; and after the first instruction that needs the latest emitted part (so that its
  // sync on the host waits for that part), the next part is emitted. So the host link moves part
  // j + 1 while the instructions that read part j run, and each sync waits for one part only.
  // stream_flush() emits what is left (finish() does too).
  // A stream by steps (an LSTM's input sequence, whose time steps are read one after another):
  // stream_key() gives the step of the parts collected next; stream_end(true) orders the parts by
  // step (stably: a step's parts in their order), and after a switching matmul that needed no part
  // of the stream, the next part is emitted once every `pace` such matmuls while it belongs to the
  // step after the latest one read (pace: switches whose tile fetches take about as long as a
  // part's DMA, so that the host queue does not fill and hold issue). So step t + 1's input moves
  // over the host link while step t's weight tiles stream, one DMA at a time.
  void stream_begin() { collecting_ = true; }
  void stream_key(uint64_t key) { key_ = key; }
  void stream_end(bool by_steps = false);
  void stream_flush();
  bool streaming() const { return !parts_.empty(); }
  // The last part of the stream not yet known to have arrived (no sync on the host since it was
  // emitted) whose rows `span` touches; -1 when none.
  int64_t stream_part(const RowSpan& span) const;
  // The bytes each part of the stream moves, in order (the lowering's estimate of when each
  // arrives: Lowering::stream_end).
  std::vector<uint64_t> stream_bytes() const {
    std::vector<uint64_t> out;
    for (const Part& p : parts_) out.push_back(p.rows * p.row_bytes);
    return out;
  }

  // Running totals of the work emitted so far, per station (for the compiler's cycle estimate,
  // compiler/schedule.h): matmul vector cycles (rows x repeat x the cycles a gathered vector
  // takes, sim/pack.h) and tile switches, activation-unit
  // instructions and the rows they process (act/vec: rows; pool: rows read), host DMAs and bytes,
  // weight bytes fetched (a partial tile's stored box only), host launches (`int`: interrupt()).
  struct Work {
    uint64_t vectors = 0, switches = 0, activations = 0, act_rows = 0, dmas = 0, dma_bytes = 0;
    uint64_t weight_bytes = 0, launches = 0;
  };
  const Work& work() const { return work_; }

 private:
  enum Station { kHost, kMatrix, kAct, kStations };
  using Rows = sim::RowSet;
  void touch(Station st, std::span<const RowSpan> reads, std::span<const RowSpan> writes);
  void setcfg(isa::ConfigReg reg, uint64_t value, uint64_t& current);
  void emit_dma(bool write, uint64_t host, uint64_t ub, uint64_t rows, uint64_t row_bytes, uint64_t stride);
  // Emits the parts an instruction touching `spans` needs; true when it needs the latest one
  // emitted (the caller then emits the next part after it: stream_next()).
  bool stream_need(std::span<const RowSpan> spans);
  // A stream by steps: after a switching matmul (`needed`: it needed a part), the paced part.
  void stream_pace(bool needed);
  void stream_next(bool needed_latest);
  void emit_part();
  // Appends an instruction (a measuring emitter counts it and gives a scratch one to fill).
  isa::Instruction& append(isa::Opcode op);
  // The vecs that zero `rows` (zero() without holding them).
  void emit_zero(RowSpan rows);
  // Held zeros: those whose rows `spans` touches, emitted now (before the instruction that touches
  // them); and after the instruction a sync naming the activation unit guards, those whose rows no
  // other station has touched since its last sync.
  void zeros_touched(std::span<const RowSpan> spans);
  void zeros_after();
  void zeros_all();

  const sim::Arch& arch_;
  uint64_t prefetch_;
  bool code_on_;
  uint64_t instructions_ = 0;
  isa::Instruction scratch_;  // what a measuring emitter "appends" to
  std::vector<isa::Instruction> code_;
  std::array<Rows, kStations> reads_, writes_;  // UB rows touched since the station's last sync
  Rows written_;                                 // UB rows ever written
  uint64_t host_stride_ = 0, host_row_bytes_ = 0, act_lane_ = 0;
  sim::PackRegs pack_;                                // the packing registers as last written
  std::pair<uint64_t, uint64_t> scatter_want_{0, 0};  // act_groups, act_group_cols for activates
  std::pair<uint64_t, uint64_t> dense_want_{0, 0};    // act_dense_rows, act_dense_bytes for activates
  sim::ActPool pool_, pool_want_;                     // act_pool registers: as written, for activates
  Work work_;
  sim::Planes planes_, planes_want_;                  // act_high, vec_high_*: as written, wanted
  // The read_weights are written in place as the code grows (a program is never copied: CNN1 on
  // a 64 x 64 array has over a million instructions): `prefetch` placeholders at the start, one
  // more where each switching matmul's anchor is (the rw for fetch i + prefetch goes there,
  // before matmul i's sync). Fetch j fills the j-th placeholder; finish() drops the ones no fetch
  // filled (the last `prefetch`).
  uint64_t fetches_ = 0;            // switching matmuls so far
  std::deque<size_t> unfilled_;     // placeholders not yet filled, in code order
  std::vector<size_t> dropped_;     // placeholders an interrupt() left unfilled, in code order
  uint64_t segments_ = 1;           // program segments (interrupt() starts one)
  std::vector<isa::MatmulMacs> macs_given_;  // matmul(macs): by code_ index, by final index after finish()
  struct Part {
    uint64_t host, ub, rows, row_bytes, stride, key;
  };
  std::vector<Part> parts_;      // the stream's read_host DMAs, in order
  // stream_part's index of parts_ (rebuilt when parts_ changed): the UB rows they write, cut at
  // every part's first and end row, each piece with the last part that writes it (-1: none).
  // A query is a binary search, not a scan of the parts (an LSTM's input sequence on a 64 x 64
  // array: hundreds of parts, asked about row by row, stream_split).
  void index_parts() const;
  mutable std::vector<uint64_t> piece_first_;  // ascending; the last is an end (its part -1)
  mutable std::vector<int64_t> piece_part_;
  mutable std::vector<size_t> empty_parts_;  // parts of no rows, ascending
  mutable bool indexed_ = false;
  size_t emitted_ = 0;           // parts emitted so far
  size_t arrived_ = 0;           // parts a sync on the host has waited for
  bool collecting_ = false;      // between stream_begin() and stream_end()
  uint64_t key_ = 0;             // the step of the parts collected next (stream_key)
  uint64_t pace_ = 0;            // a stream by steps: switching matmuls per paced part (0: not by steps)
  uint64_t since_ = 0;           // switching matmuls since the last part emitted or needed
  uint64_t step_ = 0;            // the latest step a stream by steps has had read
  // Zeros ahead (zero()).
  bool zero_ahead_ = false;
  std::vector<RowSpan> zeros_;   // held: rows to zero, not yet emitted
  bool zeros_due_ = false;       // a sync naming act was emitted: zeros_after() after its instruction
  bool zeroing_ = false;         // emitting held zeros (their own touch() does not look at zeros_)
  uint64_t matmuls_ = 0, matmuls_at_activate_ = 0;  // matmuls emitted; of them, before the last activate
};

}  // namespace tpusim::compiler
