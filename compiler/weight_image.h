// The weight image a program's read_weights fetch tiles from (isa::Program::weights): tiles, each
// stored once, in the order the lowering first asks for them; a partial tile (useful box smaller
// than the array's) as its box only (compact storage, rw tile_rows / tile_cols). Owner: back end.
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

// Tiles known by their contents (every tile not of seeded weights), numbered so that two tiles
// get the same number exactly when their bytes are equal, each tile's useful cells found once.
// One per compile, kept across the lowering's tries (lower.cpp): a tile is built, hashed and
// compared once, not once per try (CNN1's concat tiles on a 1024 x 1024 array: 1 MiB each).
class ContentTiles {
 public:
  ContentTiles(uint64_t rows, uint64_t cols) : rows_(rows), cols_(cols) {}
  // The number of the tile with these bytes (rows x cols of them): an earlier tile's when equal.
  size_t number(std::vector<uint8_t> tile);
  const std::vector<uint8_t>& bytes(size_t n) const { return tiles_.at(n).bytes; }
  const isa::WeightTileUse& use(size_t n) const { return tiles_.at(n).use; }
  // The bytes it holds: every tile whole (rows x cols) and its index (compiler/held_bytes.h).
  uint64_t held_bytes() const;

 private:
  struct Tile {
    std::vector<uint8_t> bytes;
    isa::WeightTileUse use;
  };
  uint64_t rows_, cols_;
  std::vector<Tile> tiles_;
  std::unordered_multimap<uint64_t, size_t> by_hash_;  // hash of a tile's bytes -> its number
};

class WeightImage {
 public:
  // with_bytes false: a timing-only compile's image (no seeded weight has a value).
  // compact: a tile whose useful box is smaller than the array's is stored as that box only
  // (rows x cols bytes, row major) and fetched with rw tile_rows / tile_cols (docs/isa.md).
  WeightImage(uint64_t rows, uint64_t cols, bool with_bytes, bool compact = true)
      : rows_(rows), cols_(cols), with_bytes_(with_bytes), compact_(compact) {}

  // Where a tile lies in the image and the box it is stored as (rows_ x cols_ when whole).
  struct Stored {
    uint64_t waddr = 0;
    uint32_t rows = 0, cols = 0;
  };

  using Key = std::array<uint64_t, 10>;
  // The seeded tile `key`, appended on first use: fill(tile) writes its bytes into a zeroed
  // rows x cols tile (with bytes), use() returns its useful cells (with or without).
  template <class Fill, class Use>
  Stored seeded(const Key& key, Fill fill, Use use) {
    if (const auto it = seeded_.find(key); it != seeded_.end()) return it->second;
    const isa::WeightTileUse u = use();
    std::vector<uint8_t> tile;
    if (with_bytes_) {
      tile.assign(rows_ * cols_, 0);
      fill(tile.data());
    }
    return seeded_[key] = append(u, tile);
  }
  // Tile n of `tiles` (stored once per distinct contents), appended unless already there.
  Stored content(const ContentTiles& tiles, size_t n);
  uint64_t bytes() const { return size_; }
  // Room for `bytes` of image (with bytes): the size a measuring try of the same schedule laid out,
  // so that the image is built once into its exact size rather than grown by doubling.
  void reserve(uint64_t bytes) {
    if (with_bytes_) bytes_.reserve(bytes);
  }
  // The bytes its indexes hold (the tiles' useful cells, the tiles by key and by number), not the
  // image's own (the program's: isa::program_bytes).
  uint64_t index_bytes() const;
  uint64_t tiles() const { return uses_.size(); }
  // The useful cells of the tile stored at weight address `waddr` (one Stored's waddr).
  const isa::WeightTileUse& use_at(uint64_t waddr) const { return isa::tile_use_at(uses_, waddr); }
  // Moves the image into `p`: its bytes, or (without) its size; and the tiles' useful cells.
  void finish(isa::Program& p);

 private:
  // Appends a tile with useful cells `u` (its full bytes in `tile` when with_bytes_).
  Stored append(isa::WeightTileUse u, const std::vector<uint8_t>& tile);
  // The box a tile with useful cells `u` is stored as.
  std::pair<uint32_t, uint32_t> box(const isa::WeightTileUse& u) const;
  uint64_t rows_, cols_;
  bool with_bytes_, compact_;
  uint64_t size_ = 0;
  std::vector<uint8_t> bytes_;               // with bytes: the image
  std::vector<isa::WeightTileUse> uses_;     // each tile's useful cells and address (meta.tile_uses)
  std::map<Key, Stored> seeded_;
  std::unordered_map<size_t, Stored> content_;  // content tiles by their ContentTiles number
};

// A hash of `bytes` for the in-memory indexes that find an identical tile or table (never stored):
// eight bytes at a time in four independent lanes (a 1 MiB tile of a 1024 x 1024 array hashes
// about ten times faster than byte by byte).
uint64_t bytes_hash(const std::vector<uint8_t>& bytes);

}  // namespace tpusim::compiler
