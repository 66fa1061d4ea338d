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

WeightImage::Stored WeightImage::content(const std::vector<uint8_t>& tile) {
  const uint64_t h = fnv1a(tile);
  for (auto [it, end] = content_index_.equal_range(h); it != end; ++it)
    if (content_bytes_.at(it->second.waddr) == tile) return it->second;
  const Stored at = append(tile_use_of(tile.data(), rows_, cols_), tile);
  content_bytes_[at.waddr] = tile;
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
  for (const isa::WeightTileUse& u : uses_) uses.push_back({u.rows, u.cols, u.spans, u.waddr});
  p.meta["tile_uses"] = std::move(uses);
}

}  // namespace tpusim::compiler
