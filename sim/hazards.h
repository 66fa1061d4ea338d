// Ordering checks between the stations, which run concurrently.
//
// The TPU handles dependencies through the unified buffer with explicit synchronisation
// (the compiler places sync): the hardware does not watch UB addresses. A program that lacks a
// needed sync would read or overwrite rows out of program order; the simulator refuses such a
// program with an error naming both instructions, so every accepted program gives exactly the
// reference executor's results. The accumulators, in contrast, are interlocked in hardware:
// activate waits for earlier matmuls writing its rows, and matmul for earlier activates still
// reading the rows it would overwrite.
#pragma once

// (GCC 12 at -O3 warns of an overread in boost's small_vector move, on a size it cannot bound:
// a false positive, silenced for the header only; clang has no such warning.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
#include <boost/container/small_vector.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "sim/context.h"

namespace tpusim::sim {

struct RowRange {
  uint64_t first = 0, rows = 0;
  uint64_t end() const { return first + rows; }
};

// The UB rows an instruction reads and writes, and the accumulator rows it reads or writes.
// `act_pool`: the fused-pooling registers an activate runs under (an activate with pooling
// writes only its pooled map's rows; track_act_pool follows them through a program).
struct Accesses {
  // (A few spans each, kept without an allocation: the machine asks for every instruction's.)
  using Spans = boost::container::small_vector<RowRange, 4>;
  Spans ub_reads, ub_writes;
  RowRange acc;  // rows 0 when none
};
// `pack`: the packing registers the instruction was issued with (a gathering matmul reads, a
// scattering activate writes, more rows); `act_pool`: the fused-pooling registers an activate
// runs under (an activate with pooling writes only its pooled map's rows; track_act_pool
// follows them through a program).
// `planes`: the 16-bit element registers (act_high .. vec_high_out) an act or vec runs under:
// its high byte planes are read or written too (track_planes follows them through a program).
Accesses accesses(const isa::Instruction& inst, const Arch& arch, const PackRegs& pack = {},
                  const ActPool& act_pool = {}, const Planes& planes = {});
// The same, written over `out` (its spans' storage reused).
void accesses(Accesses& out, const isa::Instruction& inst, const Arch& arch, const PackRegs& pack,
              const ActPool& act_pool, const Planes& planes);
RowRange acc_rows(const isa::Instruction& inst);  // matmul writes / act reads; rows 0 otherwise

class Hazards {
 public:
  explicit Hazards(Context& ctx) : ctx_(ctx) {}
  void reset() {
    for (auto& w : windows_) w.clear();
    acc_writers_.clear();
    acc_readers_.clear();
  }
  // Instruction `index` of `unit` uses the UB during [start, until). Fails the run (naming both
  // instructions) when it conflicts with an instruction of another unit out of program order.
  // `lowest_unstarted` is the smallest instruction index no station has started yet.
  // Returns false (the run failed) on a conflict.
  [[nodiscard]] bool started(uint64_t index, isa::Unit unit, uint64_t start, uint64_t until,
                             uint64_t lowest_unstarted);

  // Whether every record of the other units' windows is of an instruction before `index` (none
  // later in program order has started: a start of `index` that overlaps none in time can
  // conflict with none). Each window is in program order (windows_): its last record is its latest.
  bool others_before(isa::Unit unit, uint64_t index) const {
    for (int u = 0; u < kUnitCount; ++u)
      if (u != int(unit) && windows_[u].size() && windows_[u][windows_[u].size() - 1].index > index) return false;
    return true;
  }

  // Accumulator interlocks: matmuls and activates from issue to completion.
  void issued(uint64_t index);
  void completed(uint64_t index);
  // An earlier matmul still writing (or earlier activate still reading) rows `index` uses.
  bool acc_busy(uint64_t index) const;

 private:
  struct Record {
    uint64_t index;
    isa::Unit unit;
    uint64_t start, until;
    Accesses use;
  };
  static bool late_writes(const Record& early, const Record& late);  // UB rows `early` reads or writes
  static bool conflicts(const Record& a, const Record& b);
  void report(const Record& a, const Record& b) const;  // fails the run
  Context& ctx_;
  // The records that may still conflict, one window per unit (only another unit's can conflict),
  // each in the order its unit started them: program order, and each use ends before the unit's
  // next one begins, so the records that can no longer conflict are a prefix of each. A window is
  // a ring of records whose slots are reused (a record's spans stay in its slot's inline storage:
  // no allocation per instruction); it doubles when full.
  class Window {
   public:
    size_t size() const { return count_; }
    const Record& operator[](size_t k) const { return ring_[(head_ + k) & (ring_.size() - 1)]; }
    Record& push_back();  // a slot at the end, holding an old record's values until overwritten
    void pop_back() { --count_; }
    void clear() { head_ = count_ = 0; }
    // Drops the prefix of records with until <= start and index < low.
    void drop_before(uint64_t start, uint64_t low) {
      while (count_ && ring_[head_].until <= start && ring_[head_].index < low) {
        head_ = (head_ + 1) & (ring_.size() - 1);
        --count_;
      }
    }

   private:
    std::vector<Record> ring_ = std::vector<Record>(16);  // a power of two
    size_t head_ = 0, count_ = 0;
  };
  std::array<Window, kUnitCount> windows_;
  // In issue order; they leave mostly from the front (Hazards::completed).
  std::deque<std::pair<uint64_t, RowRange>> acc_writers_, acc_readers_;
};

}  // namespace tpusim::sim
