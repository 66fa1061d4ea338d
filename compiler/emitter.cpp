#include "compiler/emitter.h"

#include <algorithm>

#include "compiler/held_bytes.h"

namespace tpusim::compiler {

using isa::Field;
using isa::Opcode;

namespace {

// Bits of the sync mask (isa::kUnitMaskValues): host 0, weights 1, matrix 2, act 3.
constexpr uint64_t kStationBit[] = {1u << 0, 1u << 2, 1u << 3};

std::span<const RowSpan> view(const Emitter::Spans& v) { return {v.data(), v.size()}; }

bool intersects(const sim::RowSet& set, std::span<const RowSpan> spans) {
  if (set.empty()) return false;
  for (const RowSpan& r : spans)
    if (set.intersects(r.first, r.rows)) return true;
  return false;
}

}  // namespace

Emitter::Emitter(const sim::Arch& arch, uint64_t prefetch, bool code, uint64_t reserve)
    : arch_(arch), prefetch_(prefetch), code_on_(code) {
  if (!code_on_) return;
  code_.reserve(reserve);
  for (uint64_t i = 0; i < prefetch_; ++i) {
    unfilled_.push_back(code_.size());
    code_.push_back(isa::make_instruction(Opcode::read_weights));
  }
}

isa::Instruction& Emitter::append(Opcode op) {
  ++instructions_;
  if (!code_on_) return scratch_ = isa::make_instruction(op);
  return code_.emplace_back(isa::make_instruction(op));
}

void Emitter::touch(Station st, std::span<const RowSpan> reads, std::span<const RowSpan> writes) {
  if (!zeros_.empty() && !zeroing_) {  // held zeros of rows this instruction touches: first
    zeros_touched(reads);
    zeros_touched(writes);
  }
  uint64_t mask = 0;
  for (int other = 0; other < kStations; ++other) {
    if (other == st) continue;
    if (intersects(writes_[other], reads) || intersects(writes_[other], writes) || intersects(reads_[other], writes))
      mask |= kStationBit[other];
  }
  if ((mask & kStationBit[kAct]) && !zeros_.empty()) {
    zeros_due_ = true;
    // No matmul since the last activate: the activation unit idle, the matrix unit is too, so
    // naming it frees the held zeros' rows it touched at no cost.
    if (matmuls_ == matmuls_at_activate_) {
      const std::span<const RowSpan> held{zeros_.data(), zeros_.size()};
      if (intersects(reads_[kMatrix], held) || intersects(writes_[kMatrix], held)) mask |= kStationBit[kMatrix];
    }
  }
  if (mask) {
    append(Opcode::sync)[Field::units] = mask;
    if (mask & kStationBit[kHost]) arrived_ = emitted_;
    for (int other = 0; other < kStations; ++other)
      if (mask & kStationBit[other]) {
        reads_[other].clear();
        writes_[other].clear();
      }
  }
  for (const RowSpan& r : reads) reads_[st].add(r.first, r.rows);
  for (const RowSpan& r : writes) {
    writes_[st].add(r.first, r.rows);
    written_.add(r.first, r.rows);
  }
}

void Emitter::setcfg(isa::ConfigReg reg, uint64_t value, uint64_t& current) {
  if (value == current) return;
  isa::Instruction& in = append(Opcode::set_config);
  in[Field::reg] = static_cast<uint64_t>(reg);
  in[Field::value] = current = value;
}

void Emitter::tag(uint64_t value) { append(Opcode::debug_tag)[Field::tag] = value; }

void Emitter::host_dma(bool write, uint64_t host, uint64_t ub, uint64_t rows, uint64_t row_bytes, uint64_t stride) {
  if (collecting_ && !write) {
    parts_.push_back({host, ub, rows, row_bytes, stride, key_});
    indexed_ = false;
    return;
  }
  const RowSpan span[1]{{ub, rows}};
  const bool latest = stream_need(span);
  emit_dma(write, host, ub, rows, row_bytes, stride);
  stream_next(latest);
}

void Emitter::emit_dma(bool write, uint64_t host, uint64_t ub, uint64_t rows, uint64_t row_bytes, uint64_t stride) {
  setcfg(isa::ConfigReg::host_stride, stride, host_stride_);
  setcfg(isa::ConfigReg::host_row_bytes, row_bytes, host_row_bytes_);
  const RowSpan span[1]{{ub, rows}};
  if (write)
    touch(kHost, span, {});
  else
    touch(kHost, {}, span);
  isa::Instruction& in = append(write ? Opcode::write_host : Opcode::read_host);
  in[Field::host] = host;
  in[Field::ub] = ub;
  in[Field::rows] = rows;
  ++work_.dmas;
  work_.dma_bytes += rows * row_bytes;
  zeros_after();
}

void Emitter::stream_end(bool by_steps) {
  collecting_ = false;
  key_ = 0;
  if (by_steps && !parts_.empty()) {
    std::stable_sort(parts_.begin(), parts_.end(), [](const Part& a, const Part& b) { return a.key < b.key; });
    indexed_ = false;
    // One part's DMA (its start and its bytes over the host link) against one whole tile's
    // fetch from weight memory: the switching matmuls to wait between two paced parts.
    uint64_t bytes = 0;
    for (const Part& p : parts_) bytes = std::max(bytes, p.rows * p.row_bytes);
    const uint64_t dma = arch_.host_latency_cycles + sim::transfer_cycles(bytes, arch_.host_gbps, arch_.clock_mhz);
    const uint64_t tile = std::max<uint64_t>(sim::transfer_cycles(arch_.tile_bytes(), arch_.weight_mem_gbps, arch_.clock_mhz), 1);
    pace_ = std::max<uint64_t>((dma + tile - 1) / tile, 1);
    since_ = 0;
    step_ = parts_.front().key;
  }
  if (!parts_.empty() && emitted_ == 0) emit_part();
}

void Emitter::emit_part() {
  const Part& p = parts_[emitted_++];
  emit_dma(false, p.host, p.ub, p.rows, p.row_bytes, p.stride);
}

void Emitter::stream_flush() {
  while (emitted_ < parts_.size()) emit_part();
  parts_.clear();
  indexed_ = false;
  emitted_ = arrived_ = 0;
  pace_ = since_ = step_ = 0;
}

void Emitter::index_parts() const {
  piece_first_.clear();
  for (const Part& p : parts_)
    if (p.rows) piece_first_.push_back(p.ub), piece_first_.push_back(p.ub + p.rows);
  std::sort(piece_first_.begin(), piece_first_.end());
  piece_first_.erase(std::unique(piece_first_.begin(), piece_first_.end()), piece_first_.end());
  piece_part_.assign(piece_first_.size(), -1);
  empty_parts_.clear();
  // In part order, each part over the pieces it writes: the last writer of a piece stays.
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (!parts_[i].rows) {
      empty_parts_.push_back(i);
      continue;
    }
    auto j = static_cast<size_t>(std::lower_bound(piece_first_.begin(), piece_first_.end(), parts_[i].ub) -
                                 piece_first_.begin());
    for (; piece_first_[j] < parts_[i].ub + parts_[i].rows; ++j) piece_part_[j] = static_cast<int64_t>(i);
  }
  indexed_ = true;
}

int64_t Emitter::stream_part(const RowSpan& span) const {
  // The last part that writes a row of `span`, if it has not arrived (a sync waited for the
  // parts before arrived_ only).
  if (!span.rows || parts_.empty()) return -1;
  if (!indexed_) index_parts();
  auto j = std::upper_bound(piece_first_.begin(), piece_first_.end(), span.first) - piece_first_.begin();
  if (j > 0) --j;
  int64_t last = -1;
  for (auto k = static_cast<size_t>(j); k < piece_first_.size() && piece_first_[k] < span.first + span.rows; ++k)
    last = std::max(last, piece_part_[k]);
  // (A part of no rows counts where its first row lies strictly inside the span, as the plain
  // overlap test of the two ranges has it.)
  for (auto k = empty_parts_.rbegin(); k != empty_parts_.rend() && static_cast<int64_t>(*k) > last; ++k)
    if (span.first < parts_[*k].ub && parts_[*k].ub < span.first + span.rows) {
      last = static_cast<int64_t>(*k);
      break;
    }
  return last >= static_cast<int64_t>(arrived_) ? last : -1;
}

bool Emitter::stream_need(std::span<const RowSpan> spans) {
  if (collecting_ || parts_.empty()) return false;
  int64_t need = -1;
  for (const RowSpan& s : spans) need = std::max(need, stream_part(s));
  if (need < 0) return false;
  while (emitted_ <= static_cast<size_t>(need)) emit_part();
  step_ = std::max(step_, parts_[static_cast<size_t>(need)].key);
  return static_cast<size_t>(need) + 1 == emitted_;
}

void Emitter::stream_pace(bool needed) {
  if (!pace_ || emitted_ >= parts_.size()) return;
  if (needed) {
    since_ = 0;
    return;
  }
  if (++since_ < pace_ || parts_[emitted_].key > step_ + 1) return;
  emit_part();
  since_ = 0;
}

void Emitter::stream_next(bool needed_latest) {
  if (needed_latest && emitted_ < parts_.size()) emit_part();
}

void Emitter::matmul(isa::Instruction inst, bool switches, TileFetch fetch, const sim::PackRegs& gather,
                     bool low_plane, std::optional<uint64_t> macs, bool copy) {
  setcfg(isa::ConfigReg::gather_bytes, gather.gather_bytes, pack_.gather_bytes);
  setcfg(isa::ConfigReg::mm_in_hi, gather.mm_in_hi, pack_.mm_in_hi);
  setcfg(isa::ConfigReg::mm_weight_hi, gather.mm_weight_hi, pack_.mm_weight_hi);
  if (gather.gathers()) {
    setcfg(isa::ConfigReg::gather_cols, gather.gather_cols, pack_.gather_cols);
    setcfg(isa::ConfigReg::gather_rows, gather.gather_rows, pack_.gather_rows);
    setcfg(isa::ConfigReg::gather_col_step, gather.gather_col_step, pack_.gather_col_step);
    setcfg(isa::ConfigReg::gather_row_step, gather.gather_row_step, pack_.gather_row_step);
  }
  setcfg(isa::ConfigReg::dense_rows, gather.dense_rows, pack_.dense_rows);
  if (gather.dense_in()) setcfg(isa::ConfigReg::dense_bytes, gather.dense_bytes, pack_.dense_bytes);
  if (switches && !code_on_) ++fetches_, ++instructions_;
  if (switches && code_on_) {  // this anchor's placeholder, then fetch `fetches_` fills the oldest unfilled one
    ++instructions_;
    unfilled_.push_back(code_.size());
    code_.push_back(isa::make_instruction(Opcode::read_weights));
    isa::Instruction& rw = code_[unfilled_.front()];
    unfilled_.pop_front();
    rw[Field::waddr] = fetch.waddr;
    rw[Field::tiles] = 1;
    rw[Field::tile_rows] = fetch.rows;
    rw[Field::tile_cols] = fetch.cols;
    rw[Field::unsigned_data] = low_plane;
    ++fetches_;
  }
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat], stride = inst[Field::stride];
  ++instructions_;
  Spans reads;  // (sim/pack.h: the UB rows each group reads)
  if (repeat == 1 || stride == rows) {
    const sim::UbSpan a = sim::matmul_group_reads(pack_, inst, 0), b = sim::matmul_group_reads(pack_, inst, repeat - 1);
    reads.push_back({a.first, b.first + b.rows - a.first});
  } else {
    for (uint64_t g = 0; g < repeat; ++g) {
      const sim::UbSpan s = sim::matmul_group_reads(pack_, inst, g);
      reads.push_back({s.first, s.rows});
    }
  }
  if (pack_.mm_in_hi)  // the high byte plane: the same rows, mm_in_hi further
    for (size_t r = 0, low = reads.size(); r < low; ++r) reads.push_back({reads[r].first + pack_.mm_in_hi, reads[r].rows});
  // (whether it reads a part of the stream not yet waited for: its sync then waits for it)
  bool needed = false;
  if (pace_)
    for (const RowSpan& r : reads) needed = needed || stream_part(r) >= 0;
  const bool latest = stream_need(view(reads));
  touch(kMatrix, view(reads), {});
  work_.vectors += sim::stream_cycles(pack_, arch_, rows * repeat);  // (both passes of 16-bit inputs)
  work_.switches += switches;
  if (switches) work_.weight_bytes += fetch.rows ? uint64_t(fetch.rows) * fetch.cols : arch_.tile_bytes();
  if (code_on_ && macs) macs_given_.push_back({code_.size(), *macs, copy});
  if (code_on_) code_.push_back(inst);
  ++matmuls_;
  stream_next(latest);
  if (switches) stream_pace(needed);
  zeros_after();
}

void Emitter::activation(const isa::Instruction& inst, Spans reads, RowSpan write) {
  activation(inst, std::move(reads), write, act_lane_);
}

void Emitter::activation(const isa::Instruction& inst, Spans reads, RowSpan write, uint64_t act_lane) {
  if (inst.opcode == Opcode::activate) {
    setcfg(isa::ConfigReg::act_lane, act_lane, act_lane_);
    setcfg(isa::ConfigReg::act_groups, scatter_want_.first, pack_.act_groups);
    if (pack_.scatters()) setcfg(isa::ConfigReg::act_group_cols, scatter_want_.second, pack_.act_group_cols);
    setcfg(isa::ConfigReg::act_pool, pool_want_.kind, pool_.kind);
    if (pool_want_.on()) {
      setcfg(isa::ConfigReg::act_pool_window, pool_want_.window, pool_.window);
      setcfg(isa::ConfigReg::act_pool_stride, pool_want_.stride, pool_.stride);
      setcfg(isa::ConfigReg::act_pool_width, pool_want_.width, pool_.width);
      setcfg(isa::ConfigReg::act_pool_batch, pool_want_.batch, pool_.batch);
    }
    setcfg(isa::ConfigReg::act_dense_rows, dense_want_.first, pack_.act_dense_rows);
    if (pack_.dense_out()) setcfg(isa::ConfigReg::act_dense_bytes, dense_want_.second, pack_.act_dense_bytes);
    // The caller's span is in written (logical) rows: x groups, then UB rows (dense writes).
    const sim::UbSpan w = sim::activate_writes(pack_, inst, write.rows * pack_.groups());
    write = {w.first, w.rows};
    setcfg(isa::ConfigReg::act_high, planes_want_.act, planes_.act);
  } else if (inst.opcode == Opcode::vector) {
    setcfg(isa::ConfigReg::vec_high_a, planes_want_.a, planes_.a);
    setcfg(isa::ConfigReg::vec_high_b, planes_want_.b, planes_.b);
    setcfg(isa::ConfigReg::vec_high_out, planes_want_.out, planes_.out);
  }
  Spans writes{write};
  if (inst.opcode == Opcode::activate && planes_.act) writes.push_back({write.first + planes_.act, write.rows});
  if (inst.opcode == Opcode::vector) {  // reads: src's rows, then src_b's (not for pass)
    if (planes_.out) writes.push_back({write.first + planes_.out, write.rows});
    const size_t n = reads.size();
    if (n > 0 && planes_.a) reads.push_back({reads[0].first + planes_.a, reads[0].rows});
    if (n > 1 && planes_.b) reads.push_back({reads[1].first + planes_.b, reads[1].rows});
  }
  Spans spans(reads.begin(), reads.end());
  spans.insert(spans.end(), writes.begin(), writes.end());
  const bool latest = stream_need(view(spans));
  touch(kAct, view(reads), view(writes));
  ++work_.activations;
  if (inst.opcode == Opcode::activate) matmuls_at_activate_ = matmuls_;
  if (inst.opcode == Opcode::pool)
    for (const RowSpan& r : reads) work_.act_rows += r.rows;
  else work_.act_rows += inst[Field::rows];
  ++instructions_;
  if (code_on_) code_.push_back(inst);
  stream_next(latest);
}

void Emitter::zero(RowSpan rows) {
  if (rows.rows == 0 || !written_.intersects(rows.first, rows.rows)) return;
  if (zero_ahead_) {
    zeros_.push_back(rows);
    return;
  }
  emit_zero(rows);
}

void Emitter::zeros_touched(std::span<const RowSpan> spans) {
  for (size_t i = 0; i < zeros_.size();) {
    const RowSpan z = zeros_[i];
    bool touched = false;
    for (const RowSpan& r : spans) touched = touched || (r.first < z.first + z.rows && z.first < r.first + r.rows);
    if (!touched) {
      ++i;
      continue;
    }
    zeros_.erase(zeros_.begin() + std::ptrdiff_t(i));
    zeroing_ = true;
    // (Inside another instruction's emission, whose setcfgs are written: a 16-bit vec's planes
    // are written back after the 8-bit zeroing vecs.)
    const sim::Planes regs = planes_;
    emit_zero(z);
    setcfg(isa::ConfigReg::vec_high_a, regs.a, planes_.a);
    setcfg(isa::ConfigReg::vec_high_b, regs.b, planes_.b);
    setcfg(isa::ConfigReg::vec_high_out, regs.out, planes_.out);
    zeroing_ = false;
  }
}

void Emitter::zeros_after() {
  if (!zeros_due_) return;
  zeros_due_ = false;
  std::vector<RowSpan> held;
  held.swap(zeros_);
  zeroing_ = true;
  for (const RowSpan& z : held) {
    const RowSpan span[1]{z};
    bool free = true;
    for (int other = 0; other < kStations; ++other)
      if (other != kAct) free = free && !intersects(reads_[other], span) && !intersects(writes_[other], span);
    if (free) emit_zero(z);
    else zeros_.push_back(z);
  }
  zeroing_ = false;
}

void Emitter::zeros_all() {
  std::vector<RowSpan> held;
  held.swap(zeros_);
  zeros_due_ = false;
  zeroing_ = true;
  for (const RowSpan& z : held) emit_zero(z);
  zeroing_ = false;
}

void Emitter::emit_zero(RowSpan rows) {
  const sim::Planes want = planes_want_;  // an 8-bit vec, whatever the ops around it use
  planes_want_ = {};
  // vec reads and writes at most 65535 rows at a time (the rows field).
  for (uint64_t done = 0; done < rows.rows;) {
    const uint64_t n = std::min<uint64_t>(rows.rows - done, 65535);
    isa::Instruction in = isa::make_instruction(Opcode::vector);
    in[Field::op] = static_cast<uint64_t>(isa::VecOp::sub);
    in[Field::src] = in[Field::src_b] = in[Field::ub] = rows.first + done;
    in[Field::rows] = n;
    activation(in, {{rows.first + done, n}}, {rows.first + done, n});
    done += n;
  }
  planes_want_ = want;
}

void Emitter::interrupt() {
  zeros_all();
  append(Opcode::interrupt);
  ++segments_;
  ++work_.launches;
  // It waits for every station: no sync needed after it for what came before. (An input stream's
  // parts keep their bookkeeping: a stream by steps paces its next parts by the step that reads
  // them, so a part emitted before the int is still waited for by a sync, which finds it long
  // arrived, and still moves the stream's step on.)
  for (int s = 0; s < kStations; ++s) reads_[s].clear(), writes_[s].clear();
  if (!code_on_) return;
  dropped_.insert(dropped_.end(), unfilled_.begin(), unfilled_.end());
  unfilled_.clear();
  for (uint64_t i = 0; i < prefetch_; ++i) {
    unfilled_.push_back(code_.size());
    code_.push_back(isa::make_instruction(Opcode::read_weights));
  }
}

std::vector<isa::Instruction> Emitter::finish() {
  zeros_all();
  stream_flush();
  append(Opcode::halt);
  if (!code_on_) return {};
  // Drop the placeholders no fetch filled (at most `prefetch` at the end, and those before each
  // interrupt), moving the code after them down.
  dropped_.insert(dropped_.end(), unfilled_.begin(), unfilled_.end());
  unfilled_.clear();
  if (!dropped_.empty()) {
    // A given matmul moves down by the placeholders dropped before it (both in code order).
    size_t before = 0;
    for (isa::MatmulMacs& m : macs_given_) {
      while (before < dropped_.size() && dropped_[before] < m.instruction) ++before;
      m.instruction -= before;
    }
    size_t to = dropped_.front(), d = 0;
    for (size_t from = to; from < code_.size(); ++from) {
      if (d < dropped_.size() && dropped_[d] == from) {
        ++d;
        continue;
      }
      code_[to++] = code_[from];
    }
    code_.resize(to);
  }
  return std::move(code_);
}

uint64_t Emitter::held_bytes() const {
  uint64_t b = written_.held_bytes() + compiler::held_bytes(unfilled_) + compiler::held_bytes(dropped_) +
               compiler::held_bytes(macs_given_) + compiler::held_bytes(parts_) + compiler::held_bytes(piece_first_) +
               compiler::held_bytes(piece_part_) + compiler::held_bytes(empty_parts_) + compiler::held_bytes(zeros_);
  for (size_t s = 0; s < kStations; ++s) b += reads_[s].held_bytes() + writes_[s].held_bytes();
  return b;
}

}  // namespace tpusim::compiler
