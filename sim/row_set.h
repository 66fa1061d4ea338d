// A set of rows (UB rows, for instance) as sorted, disjoint half-open intervals [first, end), two
// that touch joined into one: what the machine's UB counter (Context::note_ub) and the compiler's
// sync placement (compiler/emitter.h) ask of a set once or more per instruction (add a span, ask
// whether a span meets the set, clear), in a flat vector rather than a tree node per interval.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tpusim::sim {

class RowSet {
 public:
  void clear() {
    v_.clear();
    hint_ = 0;
  }
  bool empty() const { return v_.empty(); }
  size_t intervals() const { return v_.size(); }

  // Whether some row of [first, first + rows) is in the set.
  bool intersects(uint64_t first, uint64_t rows) const {
    if (rows == 0) return false;
    // The first interval ending after `first`; it meets the span when it starts before its end.
    const auto it = std::upper_bound(v_.begin(), v_.end(), first,
                                     [](uint64_t f, const Interval& i) { return f < i.end; });
    return it != v_.end() && it->first < first + rows;
  }

  // Adds [first, first + rows); returns how many of those rows were in the set already.
  uint64_t add(uint64_t first, uint64_t rows) {
    if (rows == 0) return 0;
    const uint64_t end = first + rows;
    // Inside the interval the last span met (the machine's instructions mostly read and write the
    // same few tensors): all seen, nothing changes.
    if (hint_ < v_.size() && v_[hint_].first <= first && end <= v_[hint_].end) return rows;
    // [lo, hi): the intervals that overlap or touch the span (end >= first and first <= end).
    const auto lo = std::lower_bound(v_.begin(), v_.end(), first,
                                     [](const Interval& i, uint64_t f) { return i.end < f; });
    auto hi = lo;
    uint64_t seen = 0;
    for (; hi != v_.end() && hi->first <= end; ++hi)
      seen += std::min(hi->end, end) - std::min(std::max(hi->first, first), std::min(hi->end, end));
    hint_ = size_t(lo - v_.begin());
    if (lo == hi) {
      v_.insert(lo, Interval{first, end});
      return 0;
    }
    const Interval joined{std::min(first, lo->first), std::max(end, (hi - 1)->end)};
    *lo = joined;
    v_.erase(lo + 1, hi);
    return seen;
  }

 // The bytes its intervals hold (the compiler's working-state figure, compiler/held_bytes.h).
  uint64_t held_bytes() const { return uint64_t(v_.capacity()) * sizeof(Interval); }

 private:
  struct Interval {
    uint64_t first, end;
  };
  std::vector<Interval> v_;
  size_t hint_ = 0;  // the interval the last add() joined or made
};

}  // namespace tpusim::sim
