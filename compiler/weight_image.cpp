// The weight image (weight_image.h).
#include "compiler/weight_image.h"

#include <algorithm>
#include <cstring>

namespace tpusim::compiler {

namespace {
uint64_t fnv1a(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

isa::WeightTileUse tile_use_of(const uint8_t* tile, uint64_t rows, uint64_t cols) {
  isa::WeightTileUse u;
  for (uint64_t k = 0; k < rows; ++k) {
    const uint8_t* row = tile + k * cols;
    const uint8_t* first = std::find_if(row, row + cols, [](uint8_t b) { return b != 0; });
    if (first == row + cols) continue;
    const uint8_t* last = row + cols;
    while (!*(last - 1)) --last;
    u.rows = uint32_t(k + 1);
    u.cols = std::max(u.cols, uint32_t(last - row));
    u.spans += uint64_t(last - first);
  }
  return u;
}

const uint8_t* WeightImage::content_at(uint64_t addr) const {
  return with_bytes_ ? bytes_.data() + addr : content_bytes_.at(addr).data();
}

uint64_t WeightImage::content(const std::vector<uint8_t>& tile) {
  const uint64_t h = fnv1a(tile);
  for (auto [it, end] = content_index_.equal_range(h); it != end; ++it)
    if (std::memcmp(content_at(it->second), tile.data(), tile.size()) == 0) return it->second;
  const uint64_t at = size_;
  if (with_bytes_) bytes_.insert(bytes_.end(), tile.begin(), tile.end());
  else content_bytes_[at] = tile;
  uses_.push_back(tile_use_of(tile.data(), tile.size() / cols_, cols_));
  size_ += tile_bytes_;
  content_index_.emplace(h, at);
  return at;
}

void WeightImage::finish(isa::Program& p) {
  if (with_bytes_) {
    p.weights = std::move(bytes_);
  } else {
    p.weights.clear();
    p.weights_not_computed = size_;
  }
  if (uses_.empty()) return;
  nlohmann::json uses = nlohmann::json::array();
  for (const isa::WeightTileUse& u : uses_) uses.push_back({u.rows, u.cols, u.spans});
  p.meta["tile_uses"] = std::move(uses);
}

}  // namespace tpusim::compiler
