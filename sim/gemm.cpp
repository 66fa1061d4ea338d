// The fast engine's int8 GEMM (gemm.h): kernel choice, weight packing and the blocked driver.
// The SIMD kernels' interface is gemm_kernels.h; the x86 kernels are in gemm_x86.h.
//
// Packed layouts (SIMD kernels). W is cut into tiles of tile_vecs vectors of vec_cols columns
// (the last tile may hold fewer vectors) and K into groups of k_per_group (4 for VNNI's dpbusd, 2
// for AVX2's madd_epi16), zero padded in both directions. Tile t holds, for each group g and
// each of its vectors v, the vec_cols x k_per_group elements [column][k]: one vector register.
// packed_ starts with a two-byte header, the kernel that packed it and the offset of the data
// (64-byte aligned when packed; a copied PackedWeights keeps its bytes at the same offset).
// column_sums_ (avx512-vnni) holds, per column of the padded width, the column term that signed A
// needs, derived from sum_k W[k][j] once at packing. The portable kernel uses plain_ only.
#include "sim/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/gemm_kernels.h"

#if defined(__x86_64__)
#include "sim/gemm_x86.h"
#define TPUSIM_GEMM_X86 1
#endif

namespace tpusim::sim {
namespace {

using gemm_detail::SimdKernel;

enum class Kernel : uint8_t { kPortable = 0, kAvx2 = 1, kAvx512Vnni = 2 };  // ordered by preference

constexpr size_t kHeader = 2, kAlign = 64;

Kernel best_supported_kernel() {
  static const Kernel best = [] {
#ifdef TPUSIM_GEMM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
      return Kernel::kAvx512Vnni;
    if (__builtin_cpu_supports("avx2")) return Kernel::kAvx2;
#endif
    return Kernel::kPortable;
  }();
  return best;
}

bool supported(Kernel k) { return static_cast<int>(k) <= static_cast<int>(best_supported_kernel()); }

std::string_view name_of(Kernel k) {
  switch (k) {
    case Kernel::kPortable: return "portable";
    case Kernel::kAvx2: return "avx2";
    case Kernel::kAvx512Vnni: return "avx512-vnni";
  }
  return "?";
}

// The kernel for weights packed now: TPUSIM_GEMM_KERNEL when it names one this CPU has (read at
// every packing, so tests can switch), else the best the CPU supports. A bad value is reported
// once on stderr.
Kernel chosen_kernel() {
  const char* env = std::getenv("TPUSIM_GEMM_KERNEL");
  if (env == nullptr || *env == '\0') return best_supported_kernel();
  for (Kernel k : {Kernel::kPortable, Kernel::kAvx2, Kernel::kAvx512Vnni}) {
    if (name_of(k) != env) continue;
    if (supported(k)) return k;
    static std::atomic<bool> warned = false;
    if (!warned.exchange(true))
      std::fprintf(stderr, "tpusim: TPUSIM_GEMM_KERNEL=%s: this CPU lacks it, using %s\n", env,
                   std::string(name_of(best_supported_kernel())).c_str());
    return best_supported_kernel();
  }
  static std::atomic<bool> warned = false;
  if (!warned.exchange(true))
    std::fprintf(stderr, "tpusim: TPUSIM_GEMM_KERNEL=%s is not portable, avx2 or avx512-vnni; ignored\n",
                 env);
  return best_supported_kernel();
}

const SimdKernel* simd_kernel(Kernel k) {
  switch (k) {
    case Kernel::kPortable: return nullptr;
#ifdef TPUSIM_GEMM_X86
    case Kernel::kAvx2: return &gemm_detail::kAvx2Kernel;
    case Kernel::kAvx512Vnni: return &gemm_detail::kAvx512Kernel;
#else
    default: return nullptr;
#endif
  }
  return nullptr;
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Element value of a uint8 byte read as int8 (signed) or uint8: wrapping uint32 arithmetic.
uint32_t value(uint8_t x, bool is_unsigned) {
  return is_unsigned ? x : static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(x)));
}

// C rows += A rows x W (plain_ layout), for each signedness so the inner loop vectorises.
template <bool AU, bool WU>
void portable_rows(const uint8_t* a, size_t lda, const uint8_t* w, size_t B, size_t K, size_t M, int32_t* c,
                   size_t ldc) {
  for (size_t b = 0; b < B; ++b) {
    auto* crow = reinterpret_cast<uint32_t*>(c + b * ldc);
    for (size_t k = 0; k < K; ++k) {
      const uint32_t av = value(a[b * lda + k], AU);
      const uint8_t* wrow = w + k * M;
      for (size_t j = 0; j < M; ++j) crow[j] += av * value(wrow[j], WU);
    }
  }
}

void portable_multiply(const uint8_t* a, size_t lda, bool au, const uint8_t* w, bool wu, size_t B, size_t K,
                       size_t M, int32_t* c, size_t ldc) {
  if (au && wu) portable_rows<true, true>(a, lda, w, B, K, M, c, ldc);
  else if (au) portable_rows<true, false>(a, lda, w, B, K, M, c, ldc);
  else if (wu) portable_rows<false, true>(a, lda, w, B, K, M, c, ldc);
  else portable_rows<false, false>(a, lda, w, B, K, M, c, ldc);
}

// column_sums_ (sum_k W[k][j] per column of the padded width, from the kernel's packer) -> the
// column term of the corrections for signed A (see gemm_x86.h), in place, once per packing.
void signed_a_corrections(std::vector<int32_t>& sums, size_t K, bool w_unsigned) {
  const uint32_t both = w_unsigned ? static_cast<uint32_t>(K) * 16384u : 0u;
  for (int32_t& x : sums) x = static_cast<int32_t>(both - 128u * static_cast<uint32_t>(x));
}

struct Problem {
  const uint8_t* a;
  size_t lda;
  bool a_unsigned;
  const uint8_t* w;  // packed data
  bool w_unsigned;
  size_t B, K, M;
  int32_t* c;
  size_t ldc;
  bool accumulate;
};

// One multiply() on a SIMD kernel. Rows go in chunks (A packed once per chunk); in a chunk, each
// column tile runs over all row blocks while its slice of W stays in L1. Tiles read and write C
// in place, except at C's right edge (M not a multiple of the vector width), which goes through
// a scratch tile and the kernel's masked edge().
class SimdMultiply {
 public:
  SimdMultiply(const SimdKernel& kernel, const Problem& p, const std::vector<int32_t>& col_corr)
      : col_corr_(p.a_unsigned || col_corr.empty() ? nullptr : col_corr.data()),
        k_(kernel),
        p_(p),
        groups_(ceil_div(p.K, kernel.k_per_group)),
        nvec_(ceil_div(p.M, kernel.vec_cols)) {
    t_.a_stride = groups_ * 4;
    t_.w_tile_stride = groups_ * kernel.tile_vecs * kernel.vec_bytes;
    t_.groups = groups_;
    a_buf_.resize(chunk() * t_.a_stride);
    row_corr_.assign(chunk(), 0);
  }

  void run() {
    const size_t R = k_.tile_rows;
    for (size_t b0 = 0; b0 < p_.B; b0 += chunk()) {
      const size_t rows = std::min(chunk(), p_.B - b0), whole = rows - rows % R;
      const bool row_sums = k_.corrections && p_.w_unsigned;
      k_.pack_a(p_.a + b0 * p_.lda, p_.lda, p_.a_unsigned, rows, p_.K, a_buf_.data(), t_.a_stride,
                row_sums ? row_corr_.data() : nullptr);
      for (size_t v0 = 0; v0 < nvec_; v0 += k_.tile_vecs)
        for (size_t r0 = 0; r0 < whole; r0 += R) block(b0 + r0, r0, R, v0, 1);
      if (whole < rows) last_rows(b0 + whole, whole, rows - whole);
    }
  }

 private:
  size_t chunk() const { return 16 * k_.tile_rows; }

  // The last n rows (fewer than a tile's) take several whole column tiles at once where they can.
  void last_rows(size_t b, size_t r0, size_t n) {
    const size_t wide = k_.wide_tiles(n), step = k_.tile_vecs;
    for (size_t v0 = 0; v0 < nvec_;) {
      const size_t tiles = wide > 1 && (v0 + wide * step) * k_.vec_cols <= p_.M ? wide : 1;
      block(b, r0, n, v0, tiles);
      v0 += tiles * step;
    }
  }

  // C rows b .. b + n (packed A rows r0 ..) x `tiles` column tiles from vector v0 (several only
  // when all are whole).
  void block(size_t b, size_t r0, size_t n, size_t v0, size_t tiles) {
    const size_t vecs = std::min(k_.tile_vecs, nvec_ - v0), col0 = v0 * k_.vec_cols;
    const size_t width = std::min(vecs * k_.vec_cols, p_.M - col0);
    const bool edge = width < vecs * k_.vec_cols;
    int32_t* c = p_.c + b * p_.ldc + col0;
    t_.w = p_.w + v0 * groups_ * k_.vec_bytes;
    t_.col_corr = col_corr_ == nullptr ? kZeros : col_corr_ + col0;
    t_.a = a_buf_.data() + r0 * t_.a_stride;
    t_.row_corr = row_corr_.data() + r0;
    t_.in = p_.accumulate && !edge ? c : kZeros;
    t_.in_ld = p_.accumulate && !edge ? p_.ldc : 0;
    t_.out = edge ? edge_tile_ : c;
    t_.out_ld = edge ? vecs * k_.vec_cols : p_.ldc;
    (tiles > 1 ? k_.wide[n - 1] : k_.tile(n, vecs))(t_);
    if (edge)
      k_.edge(edge_tile_, n, vecs, c, p_.ldc, static_cast<int>(width - (vecs - 1) * k_.vec_cols),
              p_.accumulate);
  }

  // A register tile's worth of ints, as many as the widest tile reads or writes.
  static constexpr size_t kTileInts = gemm_detail::kMaxTileRows * gemm_detail::kMaxTileVecs * 16;
  alignas(64) static constexpr int32_t kZeros[kTileInts] = {};

  const int32_t* col_corr_;  // null: none (unsigned A)
  const SimdKernel& k_;
  const Problem& p_;
  size_t groups_, nvec_;
  gemm_detail::TileArgs t_{};
  alignas(64) int32_t edge_tile_[kTileInts];
  // Reused across calls (no allocation per multiply once they have grown).
  static thread_local std::vector<uint8_t> a_buf_;
  static thread_local std::vector<int32_t> row_corr_;
};

thread_local std::vector<uint8_t> SimdMultiply::a_buf_;
thread_local std::vector<int32_t> SimdMultiply::row_corr_;

// The rows [k0, k1) and columns [m0, m1) of W outside which every byte is zero (all four 0 when
// W is all zero).
struct Box {
  size_t k0 = 0, k1 = 0, m0 = 0, m1 = 0;
};
Box nonzero_box(const uint8_t* w, size_t ldw, size_t K, size_t M) {
  Box box;
  std::vector<uint8_t> any(M, 0);  // OR of each column over the rows
  bool found = false;
  for (size_t k = 0; k < K; ++k) {
    const uint8_t* row = w + k * ldw;
    uint8_t row_any = 0;
    for (size_t j = 0; j < M; ++j) {
      any[j] |= row[j];
      row_any |= row[j];
    }
    if (row_any == 0) continue;
    if (!found) box.k0 = k, found = true;
    box.k1 = k + 1;
  }
  if (!found) return {};
  while (any[box.m0] == 0) ++box.m0;
  box.m1 = M;
  while (any[box.m1 - 1] == 0) --box.m1;
  return box;
}

}  // namespace

std::string_view gemm_kernel_name() { return name_of(chosen_kernel()); }

PackedWeights::PackedWeights(const uint8_t* w, size_t ldw, size_t K, size_t M, bool w_unsigned)
    : K_(K), M_(M), w_unsigned_(w_unsigned) {
  const Box box = nonzero_box(w, ldw, K, M);
  k0_ = box.k0, m0_ = box.m0, box_K_ = box.k1 - box.k0, box_M_ = box.m1 - box.m0;
  w += k0_ * ldw + m0_;
  K = box_K_, M = box_M_;
  const Kernel kernel = chosen_kernel();
  const SimdKernel* simd = simd_kernel(kernel);
  if (simd == nullptr || K == 0) {
    packed_.assign(1, static_cast<uint8_t>(simd == nullptr ? kernel : Kernel::kPortable));
    plain_.resize(K * M);
    for (size_t k = 0; k < K; ++k) std::memcpy(plain_.data() + k * M, w + k * ldw, M);
    return;
  }
  const size_t groups = ceil_div(K, simd->k_per_group), nvec = ceil_div(M, simd->vec_cols);
  packed_.assign(kHeader + kAlign + groups * nvec * simd->vec_bytes, 0);
  const auto base = reinterpret_cast<uintptr_t>(packed_.data() + kHeader);
  const size_t offset = kHeader + (kAlign - base % kAlign) % kAlign;
  packed_[0] = static_cast<uint8_t>(kernel);
  packed_[1] = static_cast<uint8_t>(offset);
  column_sums_.assign(simd->corrections ? nvec * simd->vec_cols : 0, 0);
  simd->pack_w(w, ldw, K, M, w_unsigned, packed_.data() + offset, column_sums_.data());
  signed_a_corrections(column_sums_, K, w_unsigned);
}

void PackedWeights::multiply(const uint8_t* a, size_t lda, bool a_unsigned, size_t B, int32_t* c, size_t ldc,
                             bool accumulate) const {
  if (B == 0 || M_ == 0) return;
  // Columns outside the box: zero, or as they are when accumulating.
  if (!accumulate && box_M_ < M_)
    for (size_t b = 0; b < B; ++b) {
      std::fill_n(c + b * ldc, m0_, 0);
      std::fill_n(c + b * ldc + m0_ + box_M_, M_ - m0_ - box_M_, 0);
    }
  if (box_M_ == 0) return;
  a += k0_;
  c += m0_;
  const SimdKernel* simd = simd_kernel(static_cast<Kernel>(packed_[0]));
  if (simd == nullptr) {
    if (!accumulate)
      for (size_t b = 0; b < B; ++b) std::fill_n(c + b * ldc, box_M_, 0);
    portable_multiply(a, lda, a_unsigned, plain_.data(), w_unsigned_, B, box_K_, box_M_, c, ldc);
    return;
  }
  const Problem p{a, lda, a_unsigned, packed_.data() + packed_[1], w_unsigned_, B, box_K_, box_M_,
                  c, ldc, accumulate};
  SimdMultiply(*simd, p, column_sums_).run();
}

void gemm_reference(const uint8_t* a, size_t lda, bool a_unsigned, const uint8_t* w, size_t ldw,
                    bool w_unsigned, size_t B, size_t K, size_t M, int32_t* c, size_t ldc, bool accumulate) {
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < M; ++j) {
      uint32_t sum = accumulate ? static_cast<uint32_t>(c[b * ldc + j]) : 0u;
      for (size_t k = 0; k < K; ++k)
        sum += value(a[b * lda + k], a_unsigned) * value(w[k * ldw + j], w_unsigned);
      c[b * ldc + j] = static_cast<int32_t>(sum);
    }
}

}  // namespace tpusim::sim
