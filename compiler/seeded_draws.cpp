// seeded_draws.h: MT19937-64 (Matsumoto and Nishimura's 64-bit Mersenne Twister with the
// parameters of std::mt19937_64), its state refilled and tempered 312 words at a time.
#include "compiler/seeded_draws.h"

#include <algorithm>

#include "sim/target_clones.h"

namespace tpusim::compiler {
namespace {

constexpr int kN = 312, kM = 156;
constexpr uint64_t kMatrix = 0xB5026F5AA96619E9ull, kUpper = ~uint64_t{0} << 31, kLower = ~kUpper;

inline uint64_t twist(uint64_t a, uint64_t b, uint64_t c) {
  const uint64_t y = (a & kUpper) | (b & kLower);
  return c ^ (y >> 1) ^ ((0 - (y & 1)) & kMatrix);
}

// The state's next 312 words (word i from words i, i + 1 and i + 156 mod 312, the later ones
// from words already replaced: three loops, none wrapping around), then each word tempered and
// its top 53 bits made a double in [0, 1).
TPUSIM_CLONES void refill(uint64_t* mt, double* u) {
  for (int i = 0; i < kN - kM; ++i) mt[i] = twist(mt[i], mt[i + 1], mt[i + kM]);
  for (int i = kN - kM; i < kN - 1; ++i) mt[i] = twist(mt[i], mt[i + 1], mt[i + kM - kN]);
  mt[kN - 1] = twist(mt[kN - 1], mt[0], mt[kM - 1]);
  for (int i = 0; i < kN; ++i) {
    uint64_t x = mt[i];
    x ^= (x >> 29) & 0x5555555555555555ull;
    x ^= (x << 17) & 0x71D67FFFEDA60000ull;
    x ^= (x << 37) & 0xFFF7EEE000000000ull;
    x ^= x >> 43;
    u[i] = double(static_cast<int64_t>(x >> 11)) * 0x1.0p-53;  // (below 2^53: exact either way)
  }
}

// out[i] = float(bound x (2 u[i] - 1)), each operation rounded alone as SeededUniform's are.
TPUSIM_CLONES __attribute__((optimize("fp-contract=off"))) void scale(const double* u, double bound, float* out,
                                                                      int n) {
  for (int i = 0; i < n; ++i) out[i] = float(bound * (2.0 * u[i] - 1.0));
}

}  // namespace

SeededDraws::SeededDraws(uint64_t seed, uint64_t stream) {
  state_[0] = stream_seed(seed, stream);  // as SeededUniform's engine
  for (int i = 1; i < kWords; ++i)
    state_[i] = 6364136223846793005ull * (state_[i - 1] ^ (state_[i - 1] >> 62)) + uint64_t(i);
}

void SeededDraws::fill(double bound, float* out, uint64_t n) {
  while (n > 0) {
    if (next_ == kWords) refill(state_, u_), next_ = 0;
    const int take = static_cast<int>(std::min<uint64_t>(n, uint64_t(kWords - next_)));
    scale(u_ + next_, bound, out, take);
    next_ += take, out += take, n -= uint64_t(take);
  }
}

}  // namespace tpusim::compiler
