// The bytes a container holds, from the sizes it stores (the memory checks' working-state figures,
// docs/limits.md "Memory"): a vector its capacity, a node-based map a node per entry (its value
// and links) and, unordered, its bucket array. The allocator's rounding is not counted.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace tpusim::compiler {

template <class T>
uint64_t held_bytes(const std::vector<T>& v) {
  return uint64_t(v.capacity()) * sizeof(T);
}
inline uint64_t held_bytes(const std::vector<bool>& v) { return uint64_t(v.capacity()) / 8; }
template <class T>
uint64_t held_bytes(const std::deque<T>& v) {
  return uint64_t(v.size()) * sizeof(T);
}
// std::map, std::set: a red-black tree node per entry (three links and a colour, 32 bytes, then
// the value).
template <class M>
uint64_t tree_bytes(const M& m) {
  return uint64_t(m.size()) * (32 + sizeof(typename M::value_type));
}
// std::unordered_map and multimap: a node per entry (its link, the value, the cached hash) and the
// bucket array.
template <class M>
uint64_t hash_bytes(const M& m) {
  return uint64_t(m.size()) * (16 + sizeof(typename M::value_type)) + uint64_t(m.bucket_count()) * sizeof(void*);
}

}  // namespace tpusim::compiler
