// Small text helpers shared by the assembler, disassembler and generators.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpusim::isa {

// out += sep + item, without the separator before the first item.
inline void append_joined(std::string& out, std::string_view sep, std::string_view item) {
  if (!out.empty()) out += sep;
  out += item;
}

// `text` as a message may quote it: control bytes and non-ASCII as \xNN (a NUL cannot cut the
// message short), and at most `max` characters, then "... (N bytes)" (a 10 MB identifier does
// not make a 10 MB message).
inline std::string printable(std::string_view text, size_t max = 80) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max) return out + "... (" + std::to_string(text.size()) + " bytes)";
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) out += char(c);
    else out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

// Levenshtein distance (insertions, deletions, substitutions): how near a misspelt name is to a
// known one, for "did you mean" hints (the assembler, --set, model descriptions, sweep specs).
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      diag = std::exchange(row[j], std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])}));
  }
  return row[b.size()];
}

// The candidate nearest `word` (the first of equals) and its distance; {"", SIZE_MAX} for none.
template <typename Range>
std::pair<std::string_view, size_t> nearest(std::string_view word, const Range& candidates) {
  std::pair<std::string_view, size_t> best{{}, SIZE_MAX};
  for (std::string_view c : candidates)
    if (const size_t d = edit_distance(word, c); d < best.second) best = {c, d};
  return best;
}

}  // namespace tpusim::isa
