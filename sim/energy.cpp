// The energy model (energy.h): per-action counts from the executed instructions, times the
// architecture's energies.
#include "sim/energy.h"
#include "sim/pack.h"

#include <numeric>

#include "isa/table.h"
#include "sim/state.h"

namespace tpusim::sim {

namespace {

using isa::Field;
using isa::Opcode;

// The bytes one read_host/write_host row moves: host_row_bytes when set (setcfg), else the UB row.
uint64_t dma_row_bytes(uint64_t host_row_bytes, const Arch& a) {
  return host_row_bytes ? host_row_bytes : a.ub_row_bytes();
}

}  // namespace

ActionCounts count_actions(const isa::Program& program, const Arch& a, uint64_t executed,
                           uint64_t array_macs) {
  ActionCounts c;
  c[EnergyAction::mac] = array_macs;
  const uint64_t row = a.ub_row_bytes(), acc_row = a.array_cols * 4;
  uint64_t host_row_bytes = 0;  // the register's reset value
  PackRegs pack;                // the packing registers (pack.h)
  ActPool act_pool;
  Planes planes;                // the 16-bit element registers: a 16-bit operand is two UB rows
  for (uint64_t i = 0; i < executed && i < program.code.size(); ++i) {
    const isa::Instruction& inst = program.code[i];
    track_act_pool(act_pool, inst);
    track_planes(planes, inst);
    switch (inst.opcode) {
      case Opcode::set_config:
        set_pack_register(pack, inst);
        if (inst[Field::reg] == static_cast<uint64_t>(isa::ConfigReg::host_row_bytes))
          host_row_bytes = inst[Field::value];
        break;
      case Opcode::read_host:  // host -> UB: whole UB rows written (the rest zero-filled)
        c[EnergyAction::host_link] += inst[Field::rows] * dma_row_bytes(host_row_bytes, a);
        c[EnergyAction::ub_write] += inst[Field::rows] * row;
        break;
      case Opcode::write_host:
        c[EnergyAction::host_link] += inst[Field::rows] * dma_row_bytes(host_row_bytes, a);
        c[EnergyAction::ub_read] += inst[Field::rows] * row;
        break;
      case Opcode::read_weights:
        // A partial tile (tile_rows x tile_cols) moves and is buffered as its stored bytes only;
        // the zero fill happens as it shifts into the array.
        c[EnergyAction::dram] += inst[Field::tiles] * tile_box(a, inst).bytes();
        c[EnergyAction::weight_fifo] += inst[Field::tiles] * tile_box(a, inst).bytes();
        break;
      case Opcode::matmul: {
        // Each byte-plane pass (16-bit inputs: two) reads its vectors and writes the accumulators;
        // every pass after the first adds to what the previous one wrote (read-modify-write).
        const uint64_t vectors = inst[Field::rows] * inst[Field::repeat], planes = pack.planes();
        c[EnergyAction::ub_read] += vectors * pack.segments() * row * planes;  // a gather reads a row per segment
        c[EnergyAction::acc_write] += vectors * acc_row * planes;
        c[EnergyAction::acc_read] += vectors * acc_row * (planes - 1 + (inst[Field::accumulate] ? 1 : 0));
        break;
      }
      case Opcode::activate:  // with fused pooling, only the pooled rows reach the UB
        c[EnergyAction::acc_read] += inst[Field::rows] * acc_row;
        // (dense writes: act_dense_rows written rows share one UB row write)
        c[EnergyAction::ub_write] +=
            activate_writes(pack, inst, act_pool.on() ? activate_ub_rows(inst, act_pool) : inst[Field::rows] * pack.groups())
                .rows *
            row;
        if (planes.act) c[EnergyAction::ub_write] += inst[Field::rows] * row;  // the high plane
        break;
      case Opcode::vector: {
        const bool pass = inst[Field::op] == static_cast<uint64_t>(isa::VecOp::pass);  // one operand
        const uint64_t planes_read = (planes.a ? 2 : 1) + (pass ? 0 : planes.b ? 2 : 1);
        c[EnergyAction::ub_read] += inst[Field::rows] * row * planes_read;
        c[EnergyAction::ub_write] += inst[Field::rows] * row * (planes.out ? 2 : 1);
        break;
      }
      case Opcode::pool: {
        const uint64_t outputs = inst[Field::out_h] * inst[Field::out_w] * inst[Field::batch];
        c[EnergyAction::ub_read] += outputs * inst[Field::window] * inst[Field::window] * row;
        c[EnergyAction::ub_write] += outputs * row;
        break;
      }
      default: break;
    }
  }
  return c;
}

double picojoules_per(const Arch& a, EnergyAction act) {
  switch (act) {
    case EnergyAction::mac: return a.energy_mac_pj;
    case EnergyAction::ub_read: return a.energy_ub_read_pj_per_byte;
    case EnergyAction::ub_write: return a.energy_ub_write_pj_per_byte;
    case EnergyAction::acc_read: return a.energy_acc_read_pj_per_byte;
    case EnergyAction::acc_write: return a.energy_acc_write_pj_per_byte;
    case EnergyAction::weight_fifo: return a.energy_weight_fifo_pj_per_byte;
    case EnergyAction::dram: return a.energy_dram_pj_per_byte;
    case EnergyAction::host_link: return a.energy_host_pj_per_byte;
    case EnergyAction::count: break;
  }
  return 0;
}

double Energy::total() const { return std::accumulate(joules.begin(), joules.end(), static_joules); }

Energy energy_of(const ActionCounts& counts, const Arch& a, double seconds) {
  Energy e;
  for (size_t i = 0; i < kEnergyActionNames.size(); ++i)
    e.joules[i] = static_cast<double>(counts.n[i]) * picojoules_per(a, static_cast<EnergyAction>(i)) * 1e-12;
  e.static_joules = a.static_watts * seconds;
  return e;
}

}  // namespace tpusim::sim
