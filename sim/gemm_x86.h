// Internal to sim/gemm.cpp: the x86 SIMD kernels of the int8 GEMM (interface: gemm_kernels.h).
//
// avx512-vnni: _mm512_dpbusd_epi32 multiplies unsigned bytes u by signed bytes s, four k at a
// time, and never saturates. With sa = 1 for signed A and tw = 1 for unsigned W, the kernel feeds
// u = a + 128 sa (A xor 0x80) and s = w - 128 tw (W xor 0x80), so
//   sum a w = sum u s + 128 tw sum_k a - 128 sa sum_k w + 16384 sa tw K,
// a row term (row_corr) plus a column term (col_corr), exact in wrapping int32 arithmetic.
// avx2: A and W widened to int16 with their true values; _mm256_madd_epi16 needs no corrections.
// Every function here is compiled for its instruction set and runs only when the CPU has it.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "sim/gemm_kernels.h"

namespace tpusim::sim::gemm_detail {

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

#define TPUSIM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define TPUSIM_AVX2 __attribute__((target("avx2")))
#define TPUSIM_UNROLL _Pragma("GCC unroll 64")

// The tiles keep their accumulators in one array with every loop over it fully unrolled, and
// touch memory only before and after the K loop: so GCC 12 keeps them in registers (a masked
// store or a branch in the same function makes it spill them inside the loop).
struct Avx512 {
  static constexpr int kRows = 4, kVecs = 4;

  // R rows x T column tiles of V vectors.
  template <int R, int V, int T = 1>
  TPUSIM_AVX512 static void tile(const TileArgs& t) {
    constexpr int N = V * T;
    __m512i acc[R * N];
    TPUSIM_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i rc = _mm512_set1_epi32(t.row_corr[r]);
      TPUSIM_UNROLL for (int n = 0; n < N; ++n) acc[r * N + n] =
          _mm512_add_epi32(_mm512_add_epi32(rc, _mm512_loadu_si512(t.col_corr + 16 * n)),
                           _mm512_loadu_si512(t.in + r * t.in_ld + 16 * n));
    }
    for (size_t g = 0; g < t.groups; ++g) {
      __m512i ar[R];
      TPUSIM_UNROLL for (int r = 0; r < R; ++r) ar[r] =
          _mm512_set1_epi32(static_cast<int>(load_u32(t.a + r * t.a_stride + g * 4)));
      TPUSIM_UNROLL for (int n = 0; n < N; ++n) {
        const __m512i wv = _mm512_loadu_si512(t.w + (n / V) * t.w_tile_stride + (g * V + n % V) * 64);
        TPUSIM_UNROLL for (int r = 0; r < R; ++r) acc[r * N + n] =
            _mm512_dpbusd_epi32(acc[r * N + n], ar[r], wv);
      }
    }
    TPUSIM_UNROLL for (int r = 0; r < R; ++r) {
      TPUSIM_UNROLL for (int n = 0; n < N; ++n)
          _mm512_storeu_si512(t.out + r * t.out_ld + 16 * n, acc[r * N + n]);
    }
  }

  TPUSIM_AVX512 static void edge(const int32_t* tile, size_t rows, size_t vecs, int32_t* c, size_t ldc,
                                 int tail_cols, bool accumulate) {
    const __mmask16 tail = static_cast<__mmask16>((1u << tail_cols) - 1);
    for (size_t r = 0; r < rows; ++r, c += ldc)
      for (size_t v = 0; v < vecs; ++v, tile += 16) {
        const __mmask16 m = v == vecs - 1 ? tail : static_cast<__mmask16>(0xffff);
        __m512i x = _mm512_loadu_si512(tile);
        if (accumulate) x = _mm512_add_epi32(x, _mm512_maskz_loadu_epi32(m, c + 16 * v));
        _mm512_mask_storeu_epi32(c + 16 * v, m, x);
      }
  }

  TPUSIM_AVX512 static void pack_a(const uint8_t* a, size_t lda, bool a_unsigned, size_t rows, size_t K,
                                   uint8_t* out, size_t ld_out, int32_t* row_corr) {
    const __m512i flip = _mm512_set1_epi8(a_unsigned ? 0 : static_cast<char>(0x80));
    for (size_t r = 0; r < rows; ++r, a += lda, out += ld_out) {
      __m512i sum = _mm512_setzero_si512();
      for (size_t k = 0; k < ld_out; k += 64) {
        const __mmask64 valid = mask64(k < K ? K - k : 0), store = mask64(ld_out - k);
        const __m512i u =
            _mm512_maskz_mov_epi8(valid, _mm512_xor_si512(_mm512_maskz_loadu_epi8(valid, a + k), flip));
        _mm512_mask_storeu_epi8(out + k, store, u);
        sum = _mm512_add_epi64(sum, _mm512_sad_epu8(u, _mm512_setzero_si512()));
      }
      if (row_corr == nullptr) continue;
      uint64_t lanes[8];
      _mm512_storeu_si512(lanes, sum);
      uint32_t sum_u = 0;
      for (uint64_t x : lanes) sum_u += static_cast<uint32_t>(x);
      row_corr[r] =
          static_cast<int32_t>(128u * (sum_u - (a_unsigned ? 0u : 128u * static_cast<uint32_t>(K))));
    }
  }

  // Per tile (64 columns) and group: 4 rows x 64 bytes, transposed into 4 vectors of 16 columns
  // x 4 bytes; sums[j] = sum_k W[k][j] (true values), for the corrections.
  TPUSIM_AVX512 static void pack_w(const uint8_t* w, size_t ldw, size_t K, size_t M, bool w_unsigned,
                                   uint8_t* out, int32_t* sums) {
    static_assert(kVecs == 4, "one 64-byte row segment per tile");
    const __m512i flip = _mm512_set1_epi8(w_unsigned ? static_cast<char>(0x80) : 0),
                  ones = _mm512_set1_epi8(1);
    const size_t groups = (K + 3) / 4;
    for (size_t j = 0; j < M; j += 64, sums += 64) {
      const __mmask64 cols = mask64(M - j);
      const size_t vecs = std::min<size_t>(4, (M - j + 15) / 16);
      __m512i sum[4] = {};
      for (size_t g = 0; g < groups; ++g, out += vecs * 64) {
        __m512i row[4];
        for (size_t i = 0; i < 4; ++i) {
          const size_t k = g * 4 + i;
          row[i] = k < K ? _mm512_maskz_mov_epi8(
                               cols, _mm512_xor_si512(_mm512_maskz_loadu_epi8(cols, w + k * ldw + j), flip))
                         : _mm512_setzero_si512();
        }
        __m512i vec[4];
        transpose_4x64(row, vec);
        for (size_t v = 0; v < vecs; ++v) {
          _mm512_storeu_si512(out + v * 64, vec[v]);
          sum[v] = _mm512_dpbusd_epi32(sum[v], ones, vec[v]);
        }
      }
      const __m512i unflip =
          _mm512_set1_epi32(w_unsigned ? static_cast<int>(static_cast<uint32_t>(128 * K)) : 0);
      for (size_t v = 0; v < vecs; ++v) _mm512_storeu_si512(sums + 16 * v, _mm512_add_epi32(sum[v], unflip));
    }
  }

  // _mm512_shuffle_i32x4 (its zero-masked form: GCC 12 warns about the plain one's undefined
  // pass-through operand).
  template <int kImm>
  TPUSIM_AVX512 static __m512i lanes(__m512i a, __m512i b) {
    return _mm512_maskz_shuffle_i32x4(static_cast<__mmask16>(0xffff), a, b, kImm);
  }

  // rows[i] byte 16 L + c (row i, column 16 L + c) -> vec[L] byte 4 c + i.
  TPUSIM_AVX512 static void transpose_4x64(const __m512i* rows, __m512i* vec) {
    const __m512i t0 = _mm512_unpacklo_epi8(rows[0], rows[1]), t1 = _mm512_unpackhi_epi8(rows[0], rows[1]);
    const __m512i t2 = _mm512_unpacklo_epi8(rows[2], rows[3]), t3 = _mm512_unpackhi_epi8(rows[2], rows[3]);
    // Lane L of q[n]: columns 16 L + 4 n .. + 3, 4 bytes each.
    const __m512i q0 = _mm512_unpacklo_epi16(t0, t2), q1 = _mm512_unpackhi_epi16(t0, t2);
    const __m512i q2 = _mm512_unpacklo_epi16(t1, t3), q3 = _mm512_unpackhi_epi16(t1, t3);
    const __m512i a0 = lanes<0x44>(q0, q1), a1 = lanes<0x44>(q2, q3);
    const __m512i a2 = lanes<0xee>(q0, q1), a3 = lanes<0xee>(q2, q3);
    vec[0] = lanes<0x88>(a0, a1);
    vec[1] = lanes<0xdd>(a0, a1);
    vec[2] = lanes<0x88>(a2, a3);
    vec[3] = lanes<0xdd>(a2, a3);
  }

  static __mmask64 mask64(size_t n) { return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1; }
};

struct Avx2 {
  static constexpr int kRows = 4, kVecs = 2;

  // R rows x T column tiles of V vectors.
  template <int R, int V, int T = 1>
  TPUSIM_AVX2 static void tile(const TileArgs& t) {
    constexpr int N = V * T;
    __m256i acc[R * N];
    TPUSIM_UNROLL for (int r = 0; r < R; ++r) {
      TPUSIM_UNROLL for (int n = 0; n < N; ++n) acc[r * N + n] = load(t.in + r * t.in_ld + 8 * n);
    }
    for (size_t g = 0; g < t.groups; ++g) {
      __m256i ar[R];
      TPUSIM_UNROLL for (int r = 0; r < R; ++r) ar[r] =
          _mm256_set1_epi32(static_cast<int>(load_u32(t.a + r * t.a_stride + g * 4)));
      TPUSIM_UNROLL for (int n = 0; n < N; ++n) {
        const __m256i wv = load(t.w + (n / V) * t.w_tile_stride + (g * V + n % V) * 32);
        TPUSIM_UNROLL for (int r = 0; r < R; ++r) acc[r * N + n] =
            _mm256_add_epi32(acc[r * N + n], _mm256_madd_epi16(ar[r], wv));
      }
    }
    TPUSIM_UNROLL for (int r = 0; r < R; ++r) {
      TPUSIM_UNROLL for (int n = 0; n < N; ++n) store(t.out + r * t.out_ld + 8 * n, acc[r * N + n]);
    }
  }

  TPUSIM_AVX2 static void edge(const int32_t* tile, size_t rows, size_t vecs, int32_t* c, size_t ldc,
                               int tail_cols, bool accumulate) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), all = _mm256_set1_epi32(-1);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail_cols), iota);
    for (size_t r = 0; r < rows; ++r, c += ldc)
      for (size_t v = 0; v < vecs; ++v, tile += 8) {
        const __m256i m = v == vecs - 1 ? tail : all;
        __m256i x = load(tile);
        if (accumulate) x = _mm256_add_epi32(x, _mm256_maskload_epi32(c + 8 * v, m));
        _mm256_maskstore_epi32(c + 8 * v, m, x);
      }
  }

  // Rows widened to int16 (zero padded to ld_out bytes); no row sums needed.
  TPUSIM_AVX2 static void pack_a(const uint8_t* a, size_t lda, bool a_unsigned, size_t rows, size_t K,
                                 uint8_t* out, size_t ld_out, int32_t*) {
    for (size_t r = 0; r < rows; ++r, a += lda, out += ld_out) {
      auto* o = reinterpret_cast<int16_t*>(out);
      size_t k = 0;
      for (; k + 16 <= K; k += 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + k),
                            a_unsigned ? _mm256_cvtepu8_epi16(x) : _mm256_cvtepi8_epi16(x));
      }
      for (; k < K; ++k) o[k] = a_unsigned ? a[k] : static_cast<int8_t>(a[k]);
      for (; k < ld_out / 2; ++k) o[k] = 0;
    }
  }

  // Per tile (16 columns) and pair of rows: the rows widened to int16 and interleaved into 2
  // vectors of 8 columns x 2 int16. No column sums needed.
  TPUSIM_AVX2 static void pack_w(const uint8_t* w, size_t ldw, size_t K, size_t M, bool w_unsigned,
                                 uint8_t* out, int32_t*) {
    static_assert(kVecs == 2, "one 16-byte row segment per tile");
    const size_t groups = (K + 1) / 2;
    for (size_t j = 0; j < M; j += 16) {
      const size_t n = std::min<size_t>(16, M - j), vecs = (n + 7) / 8;
      for (size_t g = 0; g < groups; ++g, out += vecs * 32) {
        __m256i row[2];
        for (size_t i = 0; i < 2; ++i) {
          const size_t k = g * 2 + i;
          alignas(16) uint8_t bytes[16] = {};
          if (k < K && n < 16) std::memcpy(bytes, w + k * ldw + j, n);
          const __m128i x = k < K && n == 16
                                ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k * ldw + j))
                                : _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
          row[i] = w_unsigned ? _mm256_cvtepu8_epi16(x) : _mm256_cvtepi8_epi16(x);
        }
        const __m256i lo = _mm256_unpacklo_epi16(row[0], row[1]), hi = _mm256_unpackhi_epi16(row[0], row[1]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
        if (vecs == 2)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
      }
    }
  }

  TPUSIM_AVX2 static __m256i load(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  TPUSIM_AVX2 static void store(void* p, __m256i x) { _mm256_storeu_si256(static_cast<__m256i*>(p), x); }
};

template <class Impl, size_t... I>
constexpr std::array<TileFn, kMaxTileRows * kMaxTileVecs> tile_table(std::index_sequence<I...>) {
  return {&Impl::template tile<I / Impl::kVecs + 1, I % Impl::kVecs + 1>...};
}

template <class Impl, size_t... I>
constexpr std::array<TileFn, kMaxTileRows> wide_table(std::index_sequence<I...>) {
  return {&Impl::template tile<I + 1, Impl::kVecs, Impl::kRows / (I + 1)>...};
}

template <class Impl>
constexpr SimdKernel make_kernel(size_t vec_cols, size_t k_per_group, bool corrections) {
  static_assert(Impl::kRows <= kMaxTileRows && Impl::kVecs <= kMaxTileVecs);
  return {vec_cols,
          vec_cols * 4,
          k_per_group,
          Impl::kRows,
          Impl::kVecs,
          corrections,
          &Impl::pack_a,
          &Impl::pack_w,
          &Impl::edge,
          tile_table<Impl>(std::make_index_sequence<Impl::kRows * Impl::kVecs>()),
          wide_table<Impl>(std::make_index_sequence<Impl::kRows>())};
}

inline constexpr SimdKernel kAvx512Kernel = make_kernel<Avx512>(16, 4, true);
inline constexpr SimdKernel kAvx2Kernel = make_kernel<Avx2>(8, 2, false);

#undef TPUSIM_AVX512
#undef TPUSIM_AVX2
#undef TPUSIM_UNROLL

}  // namespace tpusim::sim::gemm_detail
