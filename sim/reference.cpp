// The golden functional ISA executor: instructions in program order, no time.
#include "sim/reference.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>

namespace tpusim::sim {

using isa::Field;
using isa::Opcode;

namespace {

struct Weights {
  std::deque<WeightTile> fifo;  // unbounded: rw never waits here
  std::optional<WeightTile> active;
};

void read_weights(const MachineState& s, const isa::Instruction& inst, Weights& w) {
  for (uint64_t t = 0; t < inst[Field::tiles]; ++t) w.fifo.push_back(weight_tile(s, inst, t));
}

void matmul(MachineState& s, const isa::Instruction& inst, uint64_t index, Weights& w) {
  if (inst[Field::switch_weights]) {
    if (w.fifo.empty()) throw SimError(index, describe(index, inst) + ": " + kNoTileFetched);
    w.active = w.fifo.front();
    w.fifo.pop_front();
  }
  if (!w.active) throw SimError(index, describe(index, inst) + ": " + kNoActiveTile);
  matmul_reference(s, inst, *w.active);
}

// Runs instruction `index`; false when it is halt.
bool step(MachineState& s, const isa::Instruction& inst, uint64_t index, Weights& w) {
  switch (inst.opcode) {
    case Opcode::halt: return false;
    case Opcode::set_config: exec_set_config(s, inst, index); break;
    case Opcode::read_host: exec_read_host(s, inst, index); break;
    case Opcode::write_host: exec_write_host(s, inst, index); break;
    case Opcode::read_weights: read_weights(s, inst, w); break;
    case Opcode::matmul: matmul(s, inst, index, w); break;
    case Opcode::activate: exec_activate(s, inst, index); break;
    case Opcode::vector: exec_vector(s, inst, index); break;
    case Opcode::pool: exec_pool(s, inst, index); break;
    case Opcode::nop:
    case Opcode::sync:
    case Opcode::barrier:
    case Opcode::interrupt:  // (the host launches the next segment: no effect on data)
    case Opcode::debug_tag: break;
  }
  return true;
}

std::string text(uint8_t v) { return std::to_string(static_cast<int8_t>(v)); }
std::string text(int32_t v) { return std::to_string(v); }

// "<what> sizes differ: ..." or "<what> <place(i)>: <a> != <b>" for the first element i where the
// two memories differ; "" when they are identical.
template <typename T, typename Place>
std::string first_difference(const std::vector<T>& a, const std::vector<T>& b, const std::string& what,
                             Place place) {
  if (a.size() != b.size())
    return what + " sizes differ: " + std::to_string(a.size()) + " != " + std::to_string(b.size());
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin());
  if (ia == a.end()) return "";
  return what + " " + place(static_cast<uint64_t>(ia - a.begin())) + ": " + text(*ia) + " != " + text(*ib);
}

// Element i of rows of `length` elements: "row R <column> C".
auto row_place(uint64_t length, const char* column) {
  return [length = std::max<uint64_t>(length, 1), column](uint64_t i) {
    return "row " + std::to_string(i / length) + " " + column + " " + std::to_string(i % length);
  };
}

std::string first_host_difference(const MachineState& a, const MachineState& b) {
  if (a.host.size() != b.host.size())
    return "host region counts differ: " + std::to_string(a.host.size()) +
           " != " + std::to_string(b.host.size());
  for (size_t i = 0; i < a.host.size(); ++i) {
    const HostBuffer &x = a.host[i], &y = b.host[i];
    if (x.name != y.name || x.addr != y.addr)
      return "host region " + std::to_string(i) + " differs: " + x.name + " != " + y.name;
    std::string diff = first_difference(x.bytes, y.bytes, "host region " + x.name,
                                        [](uint64_t k) { return "byte " + std::to_string(k); });
    if (!diff.empty()) return diff;
  }
  return "";
}

}  // namespace

MachineState run_reference(const isa::Program& program, const Arch& arch) {
  check_static(program, arch);
  MachineState s = make_state(program, arch);
  Weights w;
  for (uint64_t i = 0; i < program.code.size(); ++i)
    if (!step(s, program.code[i], i, w)) return s;
  throw SimError(program.code.size(), "instruction " + std::to_string(program.code.size()) +
                                          " (past the last instruction): the program ends without halt");
}

bool same_memories(const MachineState& a, const MachineState& b, std::string* why) {
  std::string diff = first_difference(a.ub, b.ub, "UB", row_place(a.arch.ub_row_bytes(), "byte"));
  if (diff.empty())
    diff = first_difference(a.acc, b.acc, "accumulator", row_place(a.arch.array_cols, "column"));
  if (diff.empty()) diff = first_host_difference(a, b);
  if (why) *why = diff;
  return diff.empty();
}

}  // namespace tpusim::sim
