// The weight image (weight_image.h).
#include "compiler/weight_image.h"

#include <algorithm>
#include <cstring>

#include "compiler/held_bytes.h"

namespace tpusim::compiler {

uint64_t bytes_hash(const std::vector<uint8_t>& b) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {b.size(), 0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull};
  size_t i = 0;
  for (; i + 32 <= b.size(); i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, b.data() + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  uint64_t h = lane[0];
  for (int k = 1; k < 4; ++k) h = (h ^ lane[k]) * kMul;
  for (; i < b.size(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h ^ (h >> 32);
}

std::pair<uint32_t, uint32_t> WeightImage::box(const isa::WeightTileUse& u) const {
  if (!compact_ || (u.rows == rows_ && u.cols == cols_)) return {uint32_t(rows_), uint32_t(cols_)};
  return {std::max<uint32_t>(u.rows, 1), std::max<uint32_t>(u.cols, 1)};  // (an empty tile: one zero byte)
}

WeightImage::Stored WeightImage::append(isa::WeightTileUse u, const std::vector<uint8_t>& tile) {
  const auto [r, c] = box(u);
  const Stored at{size_, r, c};
  if (with_bytes_)
    for (uint64_t k = 0; k < r; ++k) bytes_.insert(bytes_.end(), tile.begin() + k * cols_, tile.begin() + k * cols_ + c);
  u.waddr = size_;
  uses_.push_back(u);
  size_ += uint64_t(r) * c;
  return at;
}

size_t ContentTiles::number(std::vector<uint8_t> tile) {
  const uint64_t h = bytes_hash(tile);
  for (auto [it, end] = by_hash_.equal_range(h); it != end; ++it)
    if (tiles_[it->second].bytes == tile) return it->second;
  const isa::WeightTileUse u = isa::tile_use_of(tile.data(), rows_, cols_);
  tiles_.push_back({std::move(tile), u});
  by_hash_.emplace(h, tiles_.size() - 1);
  return tiles_.size() - 1;
}

WeightImage::Stored WeightImage::content(const ContentTiles& tiles, size_t n) {
  if (const auto it = content_.find(n); it != content_.end()) return it->second;
  return content_[n] = append(tiles.use(n), tiles.bytes(n));
}

uint64_t ContentTiles::held_bytes() const {
  uint64_t b = compiler::held_bytes(tiles_) + hash_bytes(by_hash_);
  for (const Tile& t : tiles_) b += compiler::held_bytes(t.bytes);
  return b;
}

uint64_t WeightImage::index_bytes() const {
  return held_bytes(uses_) + tree_bytes(seeded_) + hash_bytes(content_);
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
  for (const isa::WeightTileUse& u : uses_) uses.push_back({u.rows, u.cols, u.spans, u.waddr});
  p.meta["tile_uses"] = std::move(uses);
}

}  // namespace tpusim::compiler
