// Bulk draws of a SeededUniform stream (model.h): the same values as SeededUniform::uniform called
// once per element, computed a whole MT19937-64 state (312 draws) at a time with loops the
// compiler vectorises, cloned for x86-64-v4 and v3. model.cpp generates the seeded weights,
// biases and inputs with it; tests hold it equal to SeededUniform (std::mt19937_64).
#pragma once

#include <cstdint>

namespace tpusim::compiler {

// The 64-bit seed of stream `stream` of a model's seed: SeededUniform's std::mt19937_64 and
// SeededDraws both start from it.
constexpr uint64_t stream_seed(uint64_t seed, uint64_t stream) { return seed + stream * 0x9E3779B97F4A7C15ull; }

class SeededDraws {
 public:
  SeededDraws(uint64_t seed, uint64_t stream);
  // out[i] = float(bound x (2u - 1)) for the stream's next n draws u in [0, 1) (the top 53 bits
  // of each 64-bit output): SeededUniform::uniform(bound), n times.
  void fill(double bound, float* out, uint64_t n);

 private:
  static constexpr int kWords = 312;
  uint64_t state_[kWords];
  double u_[kWords];     // the current state's draws
  int next_ = kWords;    // the next unused one
};

}  // namespace tpusim::compiler
