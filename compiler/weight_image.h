// The weight image a program's read_weights fetch tiles from (isa::Program::weights): tiles of
// tile_bytes, each stored once, in the order the lowering first asks for them. Owner: back end.
//
// A tile of seeded weights (MatmulOp::weight_id >= 0) is known by a key that says what it holds
// (the weights, the kernel position, the rows and columns, the plane): two tiles of one key are
// the same bytes and are stored once, and a tile is never compared with another by value. Any
// other tile (weights from a file, the identity weights joining a concat's parts) is stored once
// per distinct contents. So the image's layout does not depend on the seeded weights' values,
// and a timing-only compile (LoadOptions::timing_only), which has none, lays it out exactly as
// the full compile does, without bytes. Either compile records each tile's useful cells in the
// program (meta.tile_uses, isa::WeightTileUse): for a seeded tile the cells that hold its weights
// (a weight that rounds to zero is still one), for any other tile its nonzero cells.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "isa/program.h"

namespace tpusim::compiler {

class WeightImage {
 public:
  // with_bytes false: a timing-only compile's image (no seeded weight has a value).
  WeightImage(uint64_t tile_bytes, uint64_t cols, bool with_bytes)
      : tile_bytes_(tile_bytes), cols_(cols), with_bytes_(with_bytes) {}

  using Key = std::array<uint64_t, 10>;
  // The address of the seeded tile `key`, appended on first use: fill(tile) writes its bytes into
  // a zeroed tile (with bytes), use() returns its useful cells (without).
  template <class Fill, class Use>
  uint64_t seeded(const Key& key, Fill fill, Use use) {
    if (const auto it = seeded_.find(key); it != seeded_.end()) return it->second;
    const uint64_t at = size_;
    if (with_bytes_) {
      bytes_.resize(size_ + tile_bytes_, 0);
      fill(bytes_.data() + at);
    }
    uses_.push_back(use());
    size_ += tile_bytes_;
    return seeded_[key] = at;
  }
  // The address of a tile with these bytes (tile_bytes of them), appended unless already there.
  uint64_t content(const std::vector<uint8_t>& tile);
  uint64_t bytes() const { return size_; }
  // Moves the image into `p`: its bytes, or (without) its size and the tiles' useful cells.
  void finish(isa::Program& p);

 private:
  const uint8_t* content_at(uint64_t addr) const;
  uint64_t tile_bytes_, cols_;
  bool with_bytes_;
  uint64_t size_ = 0;
  std::vector<uint8_t> bytes_;               // with bytes: the image
  std::vector<isa::WeightTileUse> uses_;     // each tile's useful cells (meta.tile_uses)
  std::map<Key, uint64_t> seeded_;
  std::unordered_multimap<uint64_t, uint64_t> content_index_;  // hash of a content tile -> its address
  std::map<uint64_t, std::vector<uint8_t>> content_bytes_;     // without bytes: content tiles by address
};

// The useful cells of a tile of `cols` columns from its bytes: sim::tile_use's box and
// sim::tile_spans's spans over the box's rows.
isa::WeightTileUse tile_use_of(const uint8_t* tile, uint64_t rows, uint64_t cols);

}  // namespace tpusim::compiler
