// The fast engine's int8 GEMM: C (int32) = or += A (int8|uint8) x W (int8|uint8).
//
// C[b][j] (+)= sum_{k<K} A[b][k] * W[k][j] with int32 wrap-around, for b < B, j < M.
// W is packed once per weight tile (a tile is reused by many matmuls) into the layout the
// kernel wants; the kernel is chosen at run time from the CPU's features (AVX-512 VNNI,
// AVX2, or portable C++) and every kernel gives bit-identical results.
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
  bool w_unsigned() const { return w_unsigned_; }

  // Row b of A is a[b * lda .. + K); C row b is c[b * ldc .. + M).
  void multiply(const uint8_t* a, size_t lda, bool a_unsigned, size_t B, int32_t* c, size_t ldc,
                bool accumulate) const;

 private:
  size_t K_ = 0, M_ = 0;
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
