// The fast engine's int8 GEMM (sim/gemm.h): every kernel this CPU has, forced in turn through
// TPUSIM_GEMM_KERNEL, must match gemm_reference bit for bit, int32 wrap-around included.
#include "sim/gemm.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tpusim::sim {
namespace {

const char* const kKernels[] = {"portable", "avx2", "avx512-vnni"};
constexpr size_t kLda = 256;  // the UB row: A rows are longer than K

// Sets TPUSIM_GEMM_KERNEL for its lifetime (weights packed meanwhile use that kernel).
class ForceKernel {
 public:
  explicit ForceKernel(const std::string& name) {
    if (const char* old = std::getenv("TPUSIM_GEMM_KERNEL")) old_ = old;
    setenv("TPUSIM_GEMM_KERNEL", name.c_str(), 1);
  }
  ~ForceKernel() {
    if (old_) setenv("TPUSIM_GEMM_KERNEL", old_->c_str(), 1);
    else unsetenv("TPUSIM_GEMM_KERNEL");
  }
  ForceKernel(const ForceKernel&) = delete;
  ForceKernel& operator=(const ForceKernel&) = delete;

 private:
  std::optional<std::string> old_;
};

// True when this CPU runs `name` (gemm_kernel_name() falls back otherwise); WARNs when not.
bool kernel_available(const std::string& name) {
  if (gemm_kernel_name() == name) return true;
  WARN("this CPU lacks the " << name << " kernel (it would use " << gemm_kernel_name() << "): skipped");
  return false;
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

struct Case {
  size_t B, K, M;
  bool a_unsigned, w_unsigned, accumulate;
};

// Runs one case through PackedWeights (the forced kernel) and gemm_reference; C starts as c0.
// A rows are kLda apart (at least K), C rows M + 3 apart; the gap columns must stay untouched.
void check_case(const Case& cs, const std::vector<uint8_t>& a, const std::vector<uint8_t>& w,
                const std::vector<int32_t>& c0) {
  const size_t lda = std::max(kLda, cs.K), ldc = cs.M + 3;
  std::vector<int32_t> want = c0, got = c0;
  gemm_reference(a.data(), lda, cs.a_unsigned, w.data(), cs.M, cs.w_unsigned, cs.B, cs.K, cs.M, want.data(),
                 ldc, cs.accumulate);
  const PackedWeights packed(w.data(), cs.M, cs.K, cs.M, cs.w_unsigned);
  packed.multiply(a.data(), lda, cs.a_unsigned, cs.B, got.data(), ldc, cs.accumulate);
  INFO("B=" << cs.B << " K=" << cs.K << " M=" << cs.M << " a_unsigned=" << cs.a_unsigned
            << " w_unsigned=" << cs.w_unsigned << " accumulate=" << cs.accumulate);
  REQUIRE(got == want);
}

// Every signedness and accumulate combination on the given matrices.
void check_all_modes(size_t B, size_t K, size_t M, const std::vector<uint8_t>& a,
                     const std::vector<uint8_t>& w, const std::vector<int32_t>& c0) {
  for (int mode = 0; mode < 8; ++mode)
    check_case({B, K, M, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0}, a, w, c0);
}

void check_shapes(const std::string& kernel) {
  const ForceKernel force(kernel);
  if (!kernel_available(kernel)) return;
  std::mt19937 rng(12345);
  const size_t dims[] = {1, 3, 4, 5, 16, 17, 31, 32, 64, 256};
  const size_t batches[] = {1, 2, 7, 8, 9, 200};
  for (size_t K : dims)
    for (size_t M : dims)
      for (size_t B : batches) {
        const auto a = random_bytes(B * std::max(kLda, K), rng), w = random_bytes(K * M, rng);
        std::vector<int32_t> c0(B * (M + 3));
        for (auto& x : c0) x = static_cast<int32_t>(rng());
        check_all_modes(B, K, M, a, w, c0);
      }
}

TEST_CASE("gemm: the portable kernel matches gemm_reference on every shape and mode", "[gemm]") {
  check_shapes("portable");
}

TEST_CASE("gemm: the avx2 kernel matches gemm_reference on every shape and mode", "[gemm]") {
  check_shapes("avx2");
}

TEST_CASE("gemm: the avx512-vnni kernel matches gemm_reference on every shape and mode", "[gemm]") {
  check_shapes("avx512-vnni");
}

// Fewer rows than a register tile's take several whole column tiles at once when C is wide
// enough; the remaining columns, whole or not, go one tile at a time.
TEST_CASE("gemm: every kernel is exact on wide C with few rows", "[gemm]") {
  std::mt19937 rng(11);
  for (const char* kernel : kKernels) {
    const ForceKernel force(kernel);
    if (!kernel_available(kernel)) continue;
    for (const auto [K, M] : {std::array<size_t, 2>{200, 200}, {33, 320}, {256, 512}})
      for (const size_t B : {1, 2, 3, 5, 66, 67}) {
        const auto a = random_bytes(B * kLda, rng), w = random_bytes(K * M, rng);
        std::vector<int32_t> c0(B * (M + 3));
        for (auto& x : c0) x = static_cast<int32_t>(rng());
        check_all_modes(B, K, M, a, w, c0);
      }
  }
}

TEST_CASE("gemm: every kernel is exact on extreme values", "[gemm]") {
  const uint8_t extremes[] = {0x80, 0x7f, 0x00, 0xff, 0x01, 0x81};  // -128/128, 127, 0, -1/255, 1, -127/129
  std::mt19937 rng(7);
  for (const char* kernel : kKernels) {
    const ForceKernel force(kernel);
    if (!kernel_available(kernel)) continue;
    for (const auto [B, K, M] : {std::array<size_t, 3>{9, 256, 256}, {5, 255, 33}, {13, 7, 200}}) {
      std::vector<uint8_t> a(B * kLda), w(K * M);
      const std::vector<int32_t> c0(B * (M + 3), std::numeric_limits<int32_t>::min());
      for (uint8_t x : extremes) {  // every element the same extreme, A and W each
        std::fill(a.begin(), a.end(), x);
        std::fill(w.begin(), w.end(), extremes[(x + 1) % 6]);
        check_all_modes(B, K, M, a, w, c0);
      }
      for (auto& x : a) x = extremes[rng() % 6];  // a random mix of them
      for (auto& x : w) x = extremes[rng() % 6];
      check_all_modes(B, K, M, a, w, c0);
    }
  }
}

TEST_CASE("gemm: sums wrap around in int32, in the dot product and when accumulating", "[gemm]") {
  const size_t B = 3, K = 70000, M = 17;  // 70000 * 255 * 255 > 2^32: the dot product wraps
  const std::vector<uint8_t> a(B * K, 0xff), w(K * M, 0xff);
  for (const char* kernel : kKernels) {
    const ForceKernel force(kernel);
    if (!kernel_available(kernel)) continue;
    const PackedWeights packed(w.data(), M, K, M, true);
    for (const int32_t start :
         {std::numeric_limits<int32_t>::max() - 5, std::numeric_limits<int32_t>::min(), 0}) {
      std::vector<int32_t> c(B * M, start);
      packed.multiply(a.data(), K, true, B, c.data(), M, true);
      const auto want = static_cast<int32_t>(static_cast<uint32_t>(start) + uint32_t{K} * 255u * 255u);
      INFO(kernel << " start " << start);
      REQUIRE(c == std::vector<int32_t>(B * M, want));
      std::vector<int32_t> signed_c(B * M, start), ref = signed_c;  // -1 x -1 and -1 x 255 too
      for (const bool a_unsigned : {false, true}) {
        const PackedWeights signed_w(w.data(), M, K, M, false);
        signed_w.multiply(a.data(), K, a_unsigned, B, signed_c.data(), M, true);
        gemm_reference(a.data(), K, a_unsigned, w.data(), M, false, B, K, M, ref.data(), M, true);
        REQUIRE(signed_c == ref);
      }
    }
  }
}

TEST_CASE("gemm: with no TPUSIM_GEMM_KERNEL (or a bad one) the best kernel the CPU has runs", "[gemm]") {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  const std::string best = vnni ? "avx512-vnni" : __builtin_cpu_supports("avx2") ? "avx2" : "portable";
#else
  const std::string best = "portable";
#endif
  {
    const ForceKernel force("");
    CHECK(gemm_kernel_name() == best);
  }
  const ForceKernel force("no-such-kernel");
  CHECK(gemm_kernel_name() == best);
}

TEST_CASE("gemm: packed weights are reused, copied, and keep their kernel", "[gemm]") {
  std::mt19937 rng(3);
  const size_t K = 200, M = 100;
  const auto w = random_bytes(K * M, rng);
  std::optional<ForceKernel> force(std::in_place, "portable");
  const PackedWeights portable(w.data(), M, K, M, false);
  force.emplace("avx512-vnni");  // the portable packing stays portable; this one is the best available
  const PackedWeights packed(w.data(), M, K, M, false), copy = packed;
  force.reset();
  CHECK((packed.K() == K && packed.M() == M && !packed.w_unsigned()));
  for (const size_t B : {1, 64, 65, 300}) {
    const auto a = random_bytes(B * kLda, rng);
    std::vector<int32_t> want(B * M), got(B * M, -1), from_copy(B * M, -2), from_portable(B * M, -3);
    gemm_reference(a.data(), kLda, false, w.data(), M, false, B, K, M, want.data(), M, false);
    packed.multiply(a.data(), kLda, false, B, got.data(), M, false);
    copy.multiply(a.data(), kLda, false, B, from_copy.data(), M, false);
    portable.multiply(a.data(), kLda, false, B, from_portable.data(), M, false);
    CHECK(got == want);
    CHECK(from_copy == want);
    CHECK(from_portable == want);
  }
}

// Packing multiplies only inside the box that holds every nonzero weight (a partial tile's zero
// fill): zero rows and columns at every border, including an all-zero W, on every kernel and
// mode. The columns outside the box must read zero, or keep C's value when accumulating.
TEST_CASE("gemm: every kernel is exact when W has zero borders", "[gemm]") {
  std::mt19937 rng(21);
  struct Border {
    size_t K, M, top, bottom, left, right;
  };
  const Border borders[] = {{256, 256, 0, 56, 0, 72},  {256, 256, 3, 0, 5, 0},  {256, 256, 17, 200, 64, 1},
                            {37, 53, 1, 1, 1, 1},      {64, 64, 63, 0, 0, 63},  {9, 300, 0, 8, 299, 0},
                            {256, 256, 256, 0, 0, 0},  {5, 7, 0, 0, 7, 0}};
  for (const char* kernel : kKernels) {
    const ForceKernel force(kernel);
    if (!kernel_available(kernel)) continue;
    for (const Border& bd : borders) {
      auto w = random_bytes(bd.K * bd.M, rng);
      for (size_t k = 0; k < bd.K; ++k)
        for (size_t j = 0; j < bd.M; ++j)
          if (k < bd.top || k >= bd.K - std::min(bd.K, bd.bottom) || j < bd.left || j >= bd.M - std::min(bd.M, bd.right))
            w[k * bd.M + j] = 0;
          else if (w[k * bd.M + j] == 0)
            w[k * bd.M + j] = 0x80;  // inside: nonzero, so the box is exactly the border's
      const PackedWeights packed(w.data(), bd.M, bd.K, bd.M, false);
      const bool all_zero = bd.top + bd.bottom >= bd.K || bd.left + bd.right >= bd.M;
      CHECK(packed.box_K() == (all_zero ? 0 : bd.K - bd.top - bd.bottom));
      CHECK(packed.box_M() == (all_zero ? 0 : bd.M - bd.left - bd.right));
      for (const size_t B : {1, 5, 64, 130}) {
        const auto a = random_bytes(B * std::max(kLda, bd.K), rng);
        std::vector<int32_t> c0(B * (bd.M + 3));
        for (auto& x : c0) x = static_cast<int32_t>(rng());
        check_all_modes(B, bd.K, bd.M, a, w, c0);
      }
    }
  }
}

TEST_CASE("gemm: degenerate and tall shapes", "[gemm]") {
  std::mt19937 rng(5);
  std::vector<int32_t> c(8, 42);
  PackedWeights().multiply(nullptr, 0, false, 2, c.data(), 4, false);  // M = 0: nothing to do
  const auto w = random_bytes(4 * 17, rng);
  PackedWeights(w.data(), 17, 4, 17, true).multiply(nullptr, kLda, true, 0, c.data(), 17, false);  // B = 0
  CHECK(c == std::vector<int32_t>(8, 42));
  PackedWeights(nullptr, 3, 0, 3, false).multiply(nullptr, kLda, true, 2, c.data(), 4, false);  // K = 0
  CHECK(c == std::vector<int32_t>{0, 0, 0, 42, 0, 0, 0, 42});
  for (const char* kernel : kKernels) {  // B = 65535, the most rows one matmul can have
    const ForceKernel force(kernel);
    if (!kernel_available(kernel)) continue;
    const size_t B = 65535;
    const auto a = random_bytes(B * kLda, rng);
    std::vector<int32_t> c0(B * 20);
    for (auto& x : c0) x = static_cast<int32_t>(rng());
    check_case({B, 4, 17, false, true, true}, a, w, c0);
  }
}

}  // namespace
}  // namespace tpusim::sim
