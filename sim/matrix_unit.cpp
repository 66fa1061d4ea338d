// The matrix unit (units.h): when each matmul starts and ends, and its data on each engine.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

#include "sim/parallel.h"
#include "sim/units.h"

namespace tpusim::sim {

using isa::Field;

// A matmul inside the array (stepped engine): its input vectors, copied from the UB at t0
// (no other station may write them while it streams: hazards.h), and where results go.
// With 16-bit inputs (pack.h planes() = 2) the stream is both byte-plane passes one after the
// other: vector v < pass_vectors is the low plane's vector v, v >= pass_vectors the high plane's.
struct MatrixUnit::Stream {
  uint64_t index, t0, vectors, acc;
  bool accumulate, switch_tile;
  std::array<bool, 2> in_unsigned;  // per pass: read the input bytes as uint8
  std::array<unsigned, 2> shift;    // per pass: left shift of its column sums into the accumulators
  uint64_t pass_vectors;            // vectors per pass (rows x repeat)
  uint64_t period = 1;          // cycles per vector: vector v enters row 0 at t0 + v*period + period-1
  std::vector<uint8_t> inputs;  // vectors x array_rows
  uint64_t written = 0;         // results seen leaving the array so far
  // The vector entering row 0 at cycle `inj`, if any.
  std::optional<uint64_t> vector_at(uint64_t inj) const {
    if (inj + 1 < t0 + period) return std::nullopt;
    const uint64_t d = inj + 1 - t0 - period;
    if (d % period || d / period >= vectors) return std::nullopt;
    return d / period;
  }
};

MatrixUnit::MatrixUnit(sc_core::sc_module_name name, Context& ctx, Hazards& hazards)
    : sc_module(name), weights("weights"), ctx_(ctx), hazards_(hazards), queue_(ctx) {
  ctx.add_waitable(work_event_);
  SC_HAS_PROCESS(MatrixUnit);
  SC_THREAD(run);
  SC_METHOD(retire);
  sensitive << retire_event_;
  dont_initialize();
  SC_THREAD(step);
}

void MatrixUnit::reset(ArrayModel* array) {
  queue_.reset(ctx_.arch.station_queue_depth);
  port_free_ = 0;
  retiring_.clear();
  wake_ = drain_ = false;
  streams_.clear();
  shifts_.clear();
  next_step_ = 0;
  busy_until_ = 0;
  active_ = {};
  const Arch& a = ctx_.arch;
  if (ctx_.engine == Engine::stepped) {
    if (!own_array_ || own_array_->rows() != a.array_rows || own_array_->cols() != a.array_cols)
      own_array_ = std::make_unique<SystolicArray>(a.array_rows, a.array_cols);
    array_ = array ? array : own_array_.get();
    array_->set_skewed_shift(a.weight_shift_skewed != 0);
    array_->reset();
    left_.assign(a.array_rows, 0);
    left_flags_.assign(a.array_rows, 0);
    shadow_row_.assign(a.array_cols, 0);
  }
}

// Cycles [from, t0) a matmul waited for its tile: weight stall until the tile landed in the
// FIFO, weight shift after.
void MatrixUnit::account_wait(uint64_t from, uint64_t landed, uint64_t t0) {
  if (t0 <= from) return;
  const uint64_t split = std::clamp(landed, from, t0);
  ctx_.result.matrix.weight_stall += split - from;
  ctx_.result.matrix.weight_shift += t0 - split;
  ctx_.matrix_spans.push_back({from, t0});
}

void MatrixUnit::run() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    serve();
  }
}

// A matmul starts at t0 = max(ready, s + rows): ready when it is available, the port is free and
// no earlier activate reads its accumulator rows; s when its tile begins shifting into the
// shadow slot (with switch). The unit waits once, for t0, wherever both are known early: an
// accumulator interlock free now stays free (only earlier activates count, and they only
// complete), and a decided shift does not move.
void MatrixUnit::serve() {
  for (;;) {
    const StationQueue::Entry* e = queue_.front();
    if (!e) return;
    const uint64_t i = e->index;
    uint64_t ready = std::max({ctx_.now(), e->available, port_free_});
    const isa::Instruction& in = ctx_.inst(i);
    if (hazards_.acc_busy(i)) {
      if (!ctx_.wait_until(ready)) return;
      while (hazards_.acc_busy(i)) {
        ctx_.block(isa::Unit::matrix, "instruction {0} waits for activates reading its accumulator rows", i);
        if (!ctx_.wait_for(ctx_.completed_events[int(isa::Unit::activation)])) return;
      }
      ready = ctx_.now();
    }
    uint64_t t0 = ready, landed = ready;
    if (in[Field::switch_weights]) {
      static constexpr const char* kWaitsForTile = "instruction {0} (matmul with switch) waits for its weight tile";
      uint64_t s = 0;
      const FetchedTile* shadow = weights->wait_shadow(s, false);
      if (!shadow) {  // not decided yet: wait from `ready` for the shift to be decided
        if (!ctx_.wait_until(ready)) return;
        ctx_.block(isa::Unit::matrix, kWaitsForTile, i);
        shadow = weights->wait_shadow(s, true);
        if (!shadow) return;
      }
      landed = shadow->landed;
      // Blocked until the shift begins, then shifting until t0 (the whole tile shifted in).
      ctx_.block_during(isa::Unit::matrix, kWaitsForTile, i, ready, s);
      t0 = std::max({ctx_.now(), ready, s + ctx_.arch.array_rows});
    }  // (without switch: the active tile; check_weight_order made sure there is one)
    if (!may_start_ahead(i, t0) && !ctx_.wait_until(t0)) return;
    ctx_.unblock(isa::Unit::matrix);
    account_wait(ready, landed, t0);
    if (ctx_.trace) ctx_.trace->weight_wait(i, ready, landed, t0);
    queue_.pop_at(t0);
    if (!start_matmul(i, t0)) return;
    weights->resume_fetch();  // (after a switch the fetch station waited for)
  }
}

// On the timing engine the unit starts a matmul at t0 without waiting for it when no other unit
// can act before t0: the host interface idle with an empty queue (what issue gives it from here is
// available after the pop at t0), the activation unit unable to start or complete anything another
// unit could see before t0 (activation_waits), the fetch station quiet (it waits for a switch, or
// for an rw), no instruction later than this one started by them (no hazard this start could
// find), issue not stopped at a sync issued before t0 that may pass without the matrix unit
// (PopListener::wakes_before), and issue from t0 unable to fail or to pass --max-cycles (issue
// finds the slot this pop frees only from t0 on: StationQueue::room_at). The unit then goes on
// from t0 as if it had waited there (docs/timing.md, "Events").
bool MatrixUnit::may_start_ahead(uint64_t i, uint64_t t0) const {
  using isa::Unit;
  if (ctx_.engine != Engine::timing || t0 <= ctx_.now() || t0 > ctx_.ahead_limit || ctx_.aborted) return false;
  if (!ctx_.idle(Unit::host_dma) || !ctx_.queues[int(Unit::host_dma) - 1]->empty()) return false;
  const PopListener& issue = *ctx_.pop_listener;
  return weights->quiet() && activation_waits(i, t0) && hazards_.others_before(Unit::matrix, i) &&
         !issue.wakes_before(t0) && issue.may_issue_at(t0);
}

// Whether the activation unit can do nothing before t0 that another unit could see. Idle with an
// empty queue, it gets work only from issue, after the pop at t0. Running its last instruction
// (the queue empty), it only completes it, at a known end: at or after t0, or while issue waits
// for a pop (no sync can see the completion then, and the matrix unit looks at it only from t0 on).
// Its queue's head starts after the running instruction's end, once it is available and every
// earlier matmul writing the accumulator rows it reads has ended (all of them started: this matmul
// is the matrix unit's oldest, and a head after it waits for it too): no earlier than the latest
// of those, known now; later than t0, nothing it does meanwhile (it wakes at those ends to look)
// is seen by another unit.
bool MatrixUnit::activation_waits(uint64_t i, uint64_t t0) const {
  using isa::Unit;
  const StationQueue& q = *ctx_.queues[int(Unit::activation) - 1];
  if (q.empty())
    return ctx_.idle(Unit::activation) || ctx_.activation_end >= t0 || ctx_.pop_listener->waits_for_pop();
  const StationQueue::Entry& head = q.head();
  uint64_t start = std::max(head.available, ctx_.activation_end);
  if (start > t0) return true;
  const isa::Instruction& in = ctx_.inst(head.index);
  if (in.opcode != isa::Opcode::activate) return false;
  const RowRange rows = acc_rows(in);
  const auto writes = [&](uint64_t matmul) {
    const RowRange w = acc_rows(ctx_.inst(matmul));
    return w.first < rows.end() && rows.first < w.end();
  };
  if (head.index > i && writes(i)) return true;  // (it waits for this one's end)
  for (const auto& [index, end] : retiring_)
    if (end > t0 && index < head.index && writes(index)) return true;
  return false;
}

bool MatrixUnit::start_matmul(uint64_t i, uint64_t t0) {
  const isa::Instruction& in = ctx_.inst(i);
  const Arch& a = ctx_.arch;
  const uint64_t rows = in[Field::rows], repeat = in[Field::repeat], B = rows * repeat;
  const PackRegs& pack = ctx_.pack(i);
  const uint64_t planes = pack.planes();
  const uint64_t period = vector_cycles(pack, a), stream = stream_cycles(pack, a, B);  // (check_static bounds B, period)
  const uint64_t end = t0 + stream + a.array_rows + a.array_cols - 1;
  if (!hazards_.started(i, isa::Unit::matrix, t0, t0 + stream, ctx_.lowest_unstarted())) return false;
  if (in[Field::switch_weights]) {
    uint64_t s = 0;
    active_ = *weights->wait_shadow(s, false);  // loaded: serve() waited for it
    active_spans_.reset();
    weights->switched(t0 + period - 1, t0);  // with the first vector's wavefront
    if (ctx_.engine == Engine::fast) {
      const uint8_t* w = active_.tile.data;
      if (active_.tile.partial()) {  // the FIFO's zero fill of a compactly stored tile
        active_.tile.expand(a.array_rows, a.array_cols, expanded_);
        w = expanded_.data();
      }
      packed_ = PackedWeights(w, a.array_cols, a.array_rows, a.array_cols, active_.tile.is_unsigned);
    }
  }
  MatrixCounters& m = ctx_.result.matrix;
  // Useful MACs per vector: the program's figure for this matmul where it gives one (a packed
  // convolution's short last group, a grouped convolution's tile across groups:
  // isa::MatmulMacs); else the tile's nonzero box; for a matmul that gathers several segments a
  // vector (a packed convolution's block-Toeplitz tile) the sum of its rows' nonzero spans
  // (machine.h TileUse). A read of a dense layout gathers one segment: its tile is an ordinary
  // one. An identity copy's figure counts as copy MACs: no useful (model) MACs.
  const isa::MatmulMacs* given = ctx_.matmul_macs.empty() ? nullptr : isa::matmul_macs_at(ctx_.matmul_macs, i);
  const bool toeplitz = !given && pack.segments() > 1;  // (1 without gather)
  if (toeplitz && !active_spans_)
    active_spans_ = ctx_.tile_uses.empty()
                        ? isa::tile_use_of(active_.tile.data, active_.use.rows,
                                           active_.tile.cols ? active_.tile.cols : a.array_cols)
                              .spans
                        : isa::tile_use_at(ctx_.tile_uses, active_.tile.waddr).spans;
  const uint64_t used = given      ? given->macs
                        : toeplitz ? *active_spans_
                                   : uint64_t{active_.use.rows} * active_.use.cols;
  // A gathering matmul keeps the array busy for its whole stream; only one cycle in `period`
  // carries a vector (the others count as unused MACs).
  // 8-bit multiply-accumulates: a 16-bit input's two byte-plane passes each count.
  m.array_active += stream;
  if (given && given->copy) {
    ctx_.result.copy_macs += B * planes * used;
  } else {
    m.useful_mac_cycles += double(B * planes) * double(used) / double(a.tile_bytes());
    ctx_.result.macs += B * planes * used;
  }
  ctx_.result.array_macs += B * planes * a.tile_bytes();
  ctx_.matrix_spans.push_back({t0, t0 + stream});
  ctx_.timeline[i].start = t0;
  const bool unsigned_flag = in[Field::unsigned_data] != 0, accumulate = in[Field::accumulate] != 0;
  if (ctx_.engine == Engine::stepped) {
    auto st = std::make_shared<Stream>(Stream{i, t0, B * planes, in[Field::acc], accumulate,
                                              in[Field::switch_weights] != 0,
                                              {pack.pass_unsigned(0, unsigned_flag), pack.pass_unsigned(1, unsigned_flag)},
                                              {pack.pass_shift(0), pack.pass_shift(1)}, B, period, {}});
    st->inputs.resize(B * planes * a.array_rows);
    for (uint64_t p = 0; p < planes; ++p) {
      const uint64_t off = pack.pass_offset(p);
      const auto row_of = [&](uint64_t row) { return ctx_.state->ub_row(row + off); };
      for (uint64_t v = 0; v < B; ++v)
        gather_vector(pack, a, in, v, row_of, st->inputs.data() + (p * B + v) * a.array_rows);
    }
    streams_.push_back(std::move(st));
    work_event_.notify();
  } else {
    if (ctx_.engine == Engine::fast)
      for (uint64_t p = 0; p < planes; ++p) fast_pass(i, p, accumulate || p > 0);
    retiring_.push_back({i, end});
    if (retiring_.size() == 1 && (wake_ || drain_)) notify_retire();
  }
  port_free_ = t0 + stream;
  // Busy: the union of [t0, end) over matmuls (their drains overlap the next ones' streaming).
  ctx_.result.unit_busy[int(isa::Unit::matrix)] += end - std::max(t0, busy_until_);
  busy_until_ = end;
  return true;
}

// Fast engine: byte-plane pass p of matmul i (pack.h) with the int8 GEMM, its column sums added
// to the accumulators (or overwriting them when `add` is false) shifted left pass_shift(p) bits.
void MatrixUnit::fast_pass(uint64_t i, uint64_t p, bool add) {
  const isa::Instruction& in = ctx_.inst(i);
  const Arch& a = ctx_.arch;
  const PackRegs& pack = ctx_.pack(i);
  const uint64_t rows = in[Field::rows], repeat = in[Field::repeat], B = rows * repeat, M = a.array_cols;
  const uint64_t off = pack.pass_offset(p);
  const bool x_unsigned = pack.pass_unsigned(p, in[Field::unsigned_data] != 0);
  const unsigned shift = pack.pass_shift(p);
  int32_t* acc = ctx_.state->acc_row(in[Field::acc]);
  // Shifted passes go through a scratch block, then acc (+)= sums << shift, modulo 2^32.
  int32_t* out = acc;
  if (shift) {
    scratch_.resize(B * M);
    out = scratch_.data();
  }
  const bool out_add = shift ? false : add;
  // Blocks of kRowBlock vectors on sim::parallel_for's threads, each block's sums written by the
  // thread that computes it (results independent of the thread count).
  constexpr uint64_t kRowBlock = 128;
  if (pack.gathers()) {
    gathered_.resize(B * a.array_rows);
    const auto row_of = [&](uint64_t row) { return ctx_.state->ub_row(row + off); };
    parallel_for((B + kRowBlock - 1) / kRowBlock, [&](uint64_t blk) {
      const uint64_t v0 = blk * kRowBlock, n = std::min(kRowBlock, B - v0);
      for (uint64_t v = v0; v < v0 + n; ++v) gather_vector(pack, a, in, v, row_of, gathered_.data() + v * a.array_rows);
      packed_.multiply(gathered_.data() + v0 * a.array_rows, a.array_rows, x_unsigned, n, out + v0 * M, M, out_add);
    });
  } else {
    const uint64_t per = (rows + kRowBlock - 1) / kRowBlock;  // blocks per group of rows
    parallel_for(repeat * per, [&](uint64_t blk) {
      const uint64_t g = blk / per, r0 = blk % per * kRowBlock, n = std::min(kRowBlock, rows - r0);
      packed_.multiply(ctx_.state->ub_row(in[Field::ub] + off + g * in[Field::stride] + r0) + in[Field::lane],
                       a.ub_row_bytes(), x_unsigned, n, out + (g * rows + r0) * M, M, out_add);
    });
  }
  if (shift)
    for (uint64_t e = 0; e < B * M; ++e)
      acc[e] = int32_t((uint32_t(scratch_[e]) << shift) + (add ? uint32_t(acc[e]) : 0u));
}

// A method, not a thread: woken at the front matmul's end (ends come in order) while a unit
// waits for it (wake_at_next_end) or the run drains (drain), never otherwise.
void MatrixUnit::retire() {
  if (ctx_.aborted) {
    retiring_.clear();
    return;
  }
  retire_due();
  wake_ = false;  // the waiter, woken by the completion, asks again if it still waits
  if (drain_ && !retiring_.empty()) notify_retire();
}

void MatrixUnit::retire_due() {
  const uint64_t now = ctx_.now();
  while (!retiring_.empty() && retiring_.front().second <= now) {
    const auto [i, end] = retiring_.front();
    retiring_.pop_front();
    hazards_.completed(i);
    ctx_.complete(isa::Unit::matrix, i, end);
  }
}

// (Every end <= now has been completed when this is called: the front's end is later.)
void MatrixUnit::notify_retire() {
  retire_event_.notify(ctx_.at(std::max(retiring_.front().second, ctx_.now())) - ctx_.stamp());
}

// Called by a unit about to wait for a completion, after it looked (retire_due ran at this cycle,
// in its own process or in retire()).
void MatrixUnit::wake_at_next_end() {
  wake_ = true;
  if (!retiring_.empty()) notify_retire();  // (else the next start_matmul notifies)
}

void MatrixUnit::drain() {
  drain_ = true;
  retire_due();  // (what ended by now, as if each end had had its event)
  if (!retiring_.empty()) notify_retire();
}

std::vector<MatrixUnit::InFlight> MatrixUnit::in_flight() const {
  std::vector<InFlight> v;
  for (const auto& s : streams_) v.push_back({s->index, s->t0, s->vectors, s->written, s->period});
  return v;
}

void MatrixUnit::shift_started(const FetchedTile& tile, uint64_t s) {
  shifts_.push_back({tile, s});
  work_event_.notify();
}

// Stepped engine: cycle c is stepped at time c + 1, once every station has said what enters
// the array in cycle c (streams register at their t0, shifts at their first cycle).
void MatrixUnit::step() {
  for (;;) {
    sc_core::wait(ctx_.start_event);
    step_run();
  }
}

void MatrixUnit::step_run() {
  auto busy = [&] {
    // (array_ exists only for the stepped engine)
    return !streams_.empty() || !shifts_.empty() || (ctx_.engine == Engine::stepped && !array_->empty());
  };
  for (;;) {
    while (!busy())
      if (!ctx_.wait_for(work_event_)) {
        // The run is over (wait_for wakes at its end, MachineRun::unwind): the array is left as
        // every cycle before the end left it, for the traces and the debugger. (Here, in this
        // thread: the run's own ArrayModel may wait for delta cycles.)
        catch_up(ctx_.now());
        return;
      }
    for (uint64_t c = ctx_.now(); busy(); ++c)
      if (!ctx_.wait_until(c + 1) || !step_cycle(c)) return;
  }
}

// Cycles skipped while the array was empty (step_run) change nothing but a skewed shift's delayed
// shadow writes (ArrayModel::shift_pending): they are stepped here, idle, only when something
// looks at the array, so that whether they are stepped cannot move any cycle (a deadlock's
// included: the run's end is the machine's, not the last column's write).
void MatrixUnit::catch_up(uint64_t until) {
  if (ctx_.engine != Engine::stepped || !array_->shift_pending()) return;
  std::fill(left_.begin(), left_.end(), 0);
  std::fill(left_flags_.begin(), left_flags_.end(), 0);
  for (; next_step_ < until && array_->shift_pending(); ++next_step_) {
    array_->step(left_, left_flags_, -1, shadow_row_);
    if (ctx_.trace) ctx_.trace->array_step(next_step_, *array_);
    ++ctx_.result.array_steps;
  }
}

bool MatrixUnit::step_cycle(uint64_t c) {
  const uint64_t N = ctx_.arch.array_rows, M = ctx_.arch.array_cols;
  // 0. The cycles skipped while the array was empty, before it is used again (catch_up).
  catch_up(c);
  next_step_ = c + 1;
  // The stream whose vector entered row 0 at cycle `inj`, if any, and that vector's index.
  uint64_t v = 0;
  auto stream_at = [&](uint64_t inj) -> Stream* {
    for (auto& s : streams_)
      if (const auto at = s->vector_at(inj)) {
        v = *at;
        return s.get();
      }
    return nullptr;
  };
  // 1. The accumulators write what left the bottom row in cycle c - 1: column j's result of
  //    the vector that entered row 0 at c - N - j.
  const auto bottom = array_->bottom();
  const auto valid = array_->bottom_valid();
  for (uint64_t j = 0; j < M; ++j) {
    if (!valid[j]) continue;
    Stream* s = c >= N + j ? stream_at(c - N - j) : nullptr;
    if (!s) {
      ctx_.fail(
          streams_.empty() ? 0 : streams_.front()->index,
          fmt::format("internal error: the stepped array produced a result no matmul expects (cycle {}, "
                      "column {})",
                      c, j));
      return false;
    }
    // Vector v of the stream is vector v % pass_vectors of pass v / pass_vectors (16-bit inputs).
    const uint64_t pass = v / s->pass_vectors;
    int32_t* acc = ctx_.state->acc_row(s->acc + v % s->pass_vectors) + j;
    const uint32_t sum = uint32_t(bottom[j]) << s->shift[pass];
    *acc = s->accumulate || pass ? int32_t(uint32_t(*acc) + sum) : int32_t(sum);
    ++s->written;
  }
  // A matmul ends in the cycle after its last result was seen leaving the array (observed, not
  // computed: the differential tests hold this against the closed form of the other engines).
  while (!streams_.empty() && streams_.front()->written == streams_.front()->vectors * M) {
    const uint64_t i = streams_.front()->index;
    streams_.pop_front();
    hazards_.completed(i);
    ctx_.complete(isa::Unit::matrix, i, c + 1);
  }
  // 2. The systolic data setup: row k gets element k of the vector that entered row 0 at c - k.
  for (uint64_t k = 0; k < N; ++k) {
    Stream* s = c >= k ? stream_at(c - k) : nullptr;
    if (!s) {
      left_[k] = 0;
      left_flags_[k] = 0;
      continue;
    }
    const uint8_t b = s->inputs[v * N + k];
    left_[k] = s->in_unsigned[v / s->pass_vectors] ? int16_t(b) : int16_t(int8_t(b));
    left_flags_[k] = SystolicArray::kValid | (v == 0 && s->switch_tile ? SystolicArray::kSwitch : 0);
  }
  // 3. The weight shift: shadow row r enters the array's top edge in cycle s + r (the array
  //    delays column j's write by j cycles when the shift is skewed: set_skewed_shift).
  int64_t shadow_row = -1;
  if (!shifts_.empty() && c >= shifts_.front().second) {
    const auto& [tile, s] = shifts_.front();
    shadow_row = int64_t(c - s);
    for (uint64_t j = 0; j < M; ++j)  // (zeros outside a partial tile's box: the FIFO's fill)
      shadow_row_[j] = int16_t(tile.tile.weight(uint64_t(shadow_row), j, M));
    if (c == s + N - 1) shifts_.pop_front();
  }
  array_->step(left_, left_flags_, shadow_row, shadow_row_);
  if (ctx_.trace) ctx_.trace->array_step(c, *array_);
  ++ctx_.result.array_steps;
  return true;
}

}  // namespace tpusim::sim
