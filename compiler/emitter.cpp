#include "compiler/emitter.h"

#include <algorithm>

namespace tpusim::compiler {

using isa::Field;
using isa::Opcode;

namespace {

// Bits of the sync mask (isa::kUnitMaskValues): host 0, weights 1, matrix 2, act 3.
constexpr uint64_t kStationBit[] = {1u << 0, 1u << 2, 1u << 3};

boost::icl::discrete_interval<uint64_t> interval(const RowSpan& r) {
  return boost::icl::discrete_interval<uint64_t>::right_open(r.first, r.first + r.rows);
}

bool intersects(const boost::icl::interval_set<uint64_t>& set, const std::vector<RowSpan>& spans) {
  for (const RowSpan& r : spans)
    if (r.rows && boost::icl::intersects(set, interval(r))) return true;
  return false;
}

}  // namespace

void Emitter::touch(Station st, const std::vector<RowSpan>& reads, const std::vector<RowSpan>& writes) {
  uint64_t mask = 0;
  for (int other = 0; other < kStations; ++other) {
    if (other == st) continue;
    if (intersects(writes_[other], reads) || intersects(writes_[other], writes) || intersects(reads_[other], writes))
      mask |= kStationBit[other];
  }
  if (mask) {
    isa::Instruction& sync = code_.emplace_back(isa::make_instruction(Opcode::sync));
    sync[Field::units] = mask;
    for (int other = 0; other < kStations; ++other)
      if (mask & kStationBit[other]) {
        reads_[other].clear();
        writes_[other].clear();
      }
  }
  for (const RowSpan& r : reads)
    if (r.rows) reads_[st].add(interval(r));
  for (const RowSpan& r : writes)
    if (r.rows) {
      writes_[st].add(interval(r));
      written_.add(interval(r));
    }
}

void Emitter::setcfg(isa::ConfigReg reg, uint64_t value, uint64_t& current) {
  if (value == current) return;
  isa::Instruction& in = code_.emplace_back(isa::make_instruction(Opcode::set_config));
  in[Field::reg] = static_cast<uint64_t>(reg);
  in[Field::value] = current = value;
}

void Emitter::tag(uint64_t value) { code_.emplace_back(isa::make_instruction(Opcode::debug_tag))[Field::tag] = value; }

void Emitter::host_dma(bool write, uint64_t host, uint64_t ub, uint64_t rows, uint64_t row_bytes, uint64_t stride) {
  setcfg(isa::ConfigReg::host_stride, stride, host_stride_);
  setcfg(isa::ConfigReg::host_row_bytes, row_bytes, host_row_bytes_);
  const RowSpan span{ub, rows};
  if (write)
    touch(kHost, {span}, {});
  else
    touch(kHost, {}, {span});
  isa::Instruction& in = code_.emplace_back(isa::make_instruction(write ? Opcode::write_host : Opcode::read_host));
  in[Field::host] = host;
  in[Field::ub] = ub;
  in[Field::rows] = rows;
}

void Emitter::matmul(isa::Instruction inst, bool switches, uint64_t waddr, const sim::PackRegs& gather) {
  setcfg(isa::ConfigReg::gather_bytes, gather.gather_bytes, pack_.gather_bytes);
  if (gather.gathers()) {
    setcfg(isa::ConfigReg::gather_cols, gather.gather_cols, pack_.gather_cols);
    setcfg(isa::ConfigReg::gather_rows, gather.gather_rows, pack_.gather_rows);
    setcfg(isa::ConfigReg::gather_col_step, gather.gather_col_step, pack_.gather_col_step);
    setcfg(isa::ConfigReg::gather_row_step, gather.gather_row_step, pack_.gather_row_step);
  }
  const size_t anchor = code_.size();
  const uint64_t rows = inst[Field::rows], repeat = inst[Field::repeat], stride = inst[Field::stride];
  const uint64_t reach = pack_.reach();
  std::vector<RowSpan> reads;
  if (repeat == 1 || stride == rows)
    reads.push_back({inst[Field::ub], rows * repeat + reach});
  else
    for (uint64_t g = 0; g < repeat; ++g) reads.push_back({inst[Field::ub] + g * stride, rows + reach});
  touch(kMatrix, reads, {});
  if (switches) {
    fetches_.push_back(waddr);
    anchors_.push_back(anchor);
  }
  code_.push_back(inst);
}

void Emitter::activation(const isa::Instruction& inst, std::vector<RowSpan> reads, RowSpan write) {
  activation(inst, std::move(reads), write, act_lane_);
}

void Emitter::activation(const isa::Instruction& inst, std::vector<RowSpan> reads, RowSpan write, uint64_t act_lane) {
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
    write.rows *= pack_.groups();
  }
  touch(kAct, reads, {write});
  code_.push_back(inst);
}

void Emitter::zero(RowSpan rows) {
  if (rows.rows == 0 || !boost::icl::intersects(written_, interval(rows))) return;
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
}

std::vector<isa::Instruction> Emitter::finish() {
  code_.push_back(isa::make_instruction(Opcode::halt));
  // Insert the read_weights: fetches [0, prefetch) at the start, fetch i + prefetch at anchor i.
  std::vector<isa::Instruction> out;
  out.reserve(code_.size() + fetches_.size());
  const auto rw = [&](uint64_t i) {
    isa::Instruction& in = out.emplace_back(isa::make_instruction(Opcode::read_weights));
    in[Field::waddr] = fetches_[i];
    in[Field::tiles] = 1;
  };
  const uint64_t first = std::min<uint64_t>(prefetch_, fetches_.size());
  for (uint64_t i = 0; i < first; ++i) rw(i);
  size_t next = 0;  // next anchor
  for (size_t at = 0; at < code_.size(); ++at) {
    for (; next < anchors_.size() && anchors_[next] == at; ++next)
      if (next + prefetch_ < fetches_.size()) rw(next + prefetch_);
    out.push_back(code_[at]);
  }
  return out;
}

}  // namespace tpusim::compiler
