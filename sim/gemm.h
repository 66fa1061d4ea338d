// The fast engine's int8 GEMM: C (int32) = or += A (int8|uint8) x W (int8|uint8).
//
// C[b][j] (+)= sum_{k<K} A[b][k] * W[k][j] with int32 wrap-around, for b < B, j < M.
// W is packed once per weight tile (a tile is reused by many matmuls) into the layout the
// kernel wants; the kernel is chosen at run time from the CPU's features (AVX-512 VNNI,
// AVX2, or portable C++) and every kernel gives bit-identical results.
//
// Packing finds the box of W outside which every weight is zero (a partial tile's zero fill, the
// padding of a layer narrower than the array) and multiplies only inside it: the rows of W outside
// add nothing to any sum, and the columns outside are zero (left as they are when accumulating).
// Exact in wrapping int32 arithmetic, so the results do not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tpusim::sim {

class PackedWeights {
 public:
  PackedWeights() = default;
  // W[k][j] = w[k * ldw + j] for k < K, j < M.
  PackedWeights(const uint8_t* w, size_t ldw, size_t K, size_t M, bool w_unsigned);
  size_t K() const { return K_; }
  size_t M() const { return M_; }
  // The nonzero box: W rows [k0, k0 + box_K()) and columns [m0, m0 + box_M()) hold every nonzero
  // weight (box_K() = box_M() = 0 when all are zero).
  size_t k0() const { return k0_; }
  size_t m0() const { return m0_; }
  size_t box_K() const { return box_K_; }
  size_t box_M() const { return box_M_; }
  bool w_unsigned() const { return w_unsigned_; }

  // Row b of A is a[b * lda .. + K); C row b is c[b * ldc .. + M).
  void multiply(const uint8_t* a, size_t lda, bool a_unsigned, size_t B, int32_t* c, size_t ldc,
                bool accumulate) const;

 private:
  size_t K_ = 0, M_ = 0;
  size_t k0_ = 0, m0_ = 0, box_K_ = 0, box_M_ = 0;
  bool w_unsigned_ = false;
  std::vector<uint8_t> packed_;       // kernel layout
  std::vector<int32_t> column_sums_;  // sum_k W[k][j], for the signed/unsigned corrections
  std::vector<uint8_t> plain_;        // W row major, for the portable kernel
};

// Name of the kernel multiply() uses on this CPU: "avx512-vnni", "avx2" or "portable".
std::string_view gemm_kernel_name();

// The plainest loops, for tests and as the portable fallback's definition.
void gemm_reference(const uint8_t* a, size_t lda, bool a_unsigned, const uint8_t* w, size_t ldw,
                    bool w_unsigned, size_t B, size_t K, size_t M, int32_t* c, size_t ldc, bool accumulate);

}  // namespace tpusim::sim
