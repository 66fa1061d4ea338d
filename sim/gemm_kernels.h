// Internal to sim/gemm.cpp: what the driver asks of a SIMD kernel of the int8 GEMM (layouts:
// gemm.cpp; the x86 kernels: gemm_x86.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tpusim::sim::gemm_detail {

// One register tile: rows x vectors of C (one column tile of W, or several side by side), K
// reduced completely.
//   out[r][col] = in[r][col] + row_corr[r] + col_corr[col] + sum_k A[r][k] W[k][col]
// in/out rows are in_ld/out_ld ints apart (in_ld 0: one row for all); in may be out.
struct TileArgs {
  const uint8_t* a;  // packed A: row r at a + r * a_stride, 4 bytes per group
  size_t a_stride;
  const uint8_t* w;      // the first column tile's packed W
  size_t w_tile_stride;  // bytes from one whole column tile of packed W to the next
  size_t groups;
  const int32_t* in;
  size_t in_ld;
  int32_t* out;
  size_t out_ld;
  const int32_t* row_corr;  // avx512-vnni only
  const int32_t* col_corr;
};
using TileFn = void (*)(const TileArgs&);
// C (+)= tile rows x vecs vectors of out (row stride vecs * vec_cols); the last vector's columns
// from tail_cols on are left alone (the tile at C's right edge).
using EdgeFn = void (*)(const int32_t* tile, size_t rows, size_t vecs, int32_t* c, size_t ldc, int tail_cols,
                        bool accumulate);

constexpr int kMaxTileRows = 4, kMaxTileVecs = 4;

struct SimdKernel {
  size_t vec_cols, vec_bytes, k_per_group;
  size_t tile_rows, tile_vecs;
  bool corrections;
  // A rows -> packed rows of ld_out bytes (zero padded); row_corr (when not null): per row,
  // 128 * sum_k a (the unsigned-W correction).
  void (*pack_a)(const uint8_t* a, size_t lda, bool a_unsigned, size_t rows, size_t K, uint8_t* out,
                 size_t ld_out, int32_t* row_corr);
  // W -> out (the packed layout); sums (corrections only): per column (padded to whole vectors),
  // sum_k W[k][j].
  void (*pack_w)(const uint8_t* w, size_t ldw, size_t K, size_t M, bool w_unsigned, uint8_t* out,
                 int32_t* sums);
  EdgeFn edge;
  std::array<TileFn, kMaxTileRows * kMaxTileVecs> tiles;  // [(rows - 1) * tile_vecs + vecs - 1]
  // For fewer rows than tile_rows: wide_tiles(rows) whole column tiles at once, so the register
  // tile keeps enough independent accumulators.
  std::array<TileFn, kMaxTileRows> wide;  // [rows - 1]
  TileFn tile(size_t rows, size_t vecs) const { return tiles[(rows - 1) * tile_vecs + vecs - 1]; }
  size_t wide_tiles(size_t rows) const { return tile_rows / rows; }
};

}  // namespace tpusim::sim::gemm_detail
