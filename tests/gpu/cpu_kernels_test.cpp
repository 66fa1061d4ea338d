// The CPU runner's vectorized spans (gpu/cpu_kernels.h) against the integer form (integer_ops.h:
// requantize, vector_element), which tests/gpu/integer_ops_test.cpp holds against the simulator: in
// every instruction-set variant this machine can run, exhaustively over the int8 operands of the
// vector operations, randomly (with the rounding ties and the range's ends) for the requantization.
#include "gpu/cpu_kernels.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "gpu/plan.h"
#include "gpu/requantize_clamp.h"

using namespace tpusim;
using gpu::OutputTable;

namespace {

const isa::Func kFuncs[] = {isa::Func::identity, isa::Func::relu, isa::Func::relux, isa::Func::sigmoid,
                            isa::Func::tanh};

// Runs `check` once with each variant selected, then restores the best one.
template <typename F>
void for_each_isa(F&& check) {
  const std::vector<const char*> isas = gpu::cpu_kernels_isas();
  REQUIRE(std::string(isas.back()) == "baseline");
  for (const char* isa : isas) {
    INFO("instruction set " << isa);
    REQUIRE(gpu::select_cpu_kernels(isa));
    REQUIRE(std::string(gpu::cpu_kernels_isa()) == isa);
    check();
  }
  REQUIRE(gpu::select_cpu_kernels(isas.front()));
}

}  // namespace

TEST_CASE("the kernels run the best variant this machine has", "[gpu][kernels]") {
  const std::vector<const char*> isas = gpu::cpu_kernels_isas();
  REQUIRE(std::string(gpu::cpu_kernels_isa()) == isas.front());
  REQUIRE_FALSE(gpu::select_cpu_kernels("no such isa"));
#if defined(__x86_64__)
  // Every x86-64 CPU this project runs on has AVX2 (the development and CI machines have AVX-512).
  REQUIRE(isas.size() >= 2);
#endif
}

TEST_CASE("vector_span equals vector_element for every pair of int8 operands", "[gpu][kernels]") {
  // Operands in every combination: a = i % 256 - 128, b = i / 256 - 128.
  std::vector<int8_t> a(65536), b(65536), got(65536);
  for (int i = 0; i < 65536; ++i) {
    a[size_t(i)] = int8_t(i % 256 - 128);
    b[size_t(i)] = int8_t(i / 256 - 128);
  }
  // Multipliers and shifts at the ends of their ranges (mult <= 65535, shift <= 63) and between:
  // shift 0 (no rounding), 1 (halves), 31 and 32 (the 32-bit lanes' last shift and the first that
  // rounds everything to 0), 63.
  const std::pair<uint32_t, uint32_t> scales[] = {{1, 0}, {1, 1}, {3, 2}, {16383, 14}, {65535, 16},
                                                  {65535, 31}, {65535, 32}, {40000, 63}, {255, 7}};
  for_each_isa([&] {
    for (uint32_t op = 0; op <= 5; ++op)
      for (isa::Func f : kFuncs)
        for (const auto& [mult, shift] : scales) {
          const OutputTable table = gpu::output_table(f, f == isa::Func::relux ? 6 : 127);
          const std::optional<gpu::VectorKernel> k = gpu::vector_kernel(op, mult, shift, table);
          REQUIRE(k);
          // Spans of odd lengths and offsets: the vector loops' remainders.
          for (const auto& [first, count] : {std::pair<size_t, size_t>{0, 65536}, {13, 1001}, {7, 3}}) {
            std::fill(got.begin(), got.end(), int8_t{99});
            gpu::vector_span(*k, &a[first], &b[first], &got[first], count);
            for (size_t e = first; e < first + count; ++e) {
              const int8_t want = gpu::vector_element(op, a[e], b[e], mult, shift, table);
              if (got[e] != want) {
                INFO("op " << op << " func " << int(f) << " mult " << mult << " shift " << shift << " a "
                           << int(a[e]) << " b " << int(b[e]));
                REQUIRE(int(got[e]) == int(want));
              }
            }
            REQUIRE((first == 0 || got[first - 1] == 99));  // nothing written outside the span
            REQUIRE((first + count == got.size() || got[first + count] == 99));
          }
        }
  });
  // A multiplier beyond the machine's 16 bits is left to the scalar form.
  REQUIRE_FALSE(gpu::vector_kernel(2, 65536, 0, gpu::output_table(isa::Func::identity, 127)));
}

TEST_CASE("requantize_span equals requantize for every function", "[gpu][kernels]") {
  std::mt19937_64 rng(15);
  const uint64_t n = 4099;  // not a multiple of any vector width
  std::vector<int32_t> acc(n);
  std::vector<gpu::ColumnQuant> q(n);
  std::vector<double> bias(n), scale(n);
  std::vector<int8_t> got(n);
  for_each_isa([&] {
    for (isa::Func f : kFuncs)
      for (int clip : {6, 127}) {
        const OutputTable table = gpu::output_table(f, uint8_t(clip));
        std::vector<int32_t> storage;
        const gpu::OutputMap map = gpu::output_map(table, storage);
        // A clamp for identity, relu and relux; a table for the curves.
        REQUIRE((map.table != nullptr) == (f == isa::Func::sigmoid || f == isa::Func::tanh));
        for (int round = 0; round < 4; ++round) {
          for (uint64_t e = 0; e < n; ++e) {
            const uint32_t shift = uint32_t(rng() % (gpu::kMaxClampShift + 1));
            const uint32_t mult = uint32_t(1 + rng() % 65535);
            int32_t a = int32_t(uint32_t(rng()) >> (rng() % 32));
            if (rng() % 2) a = -a;
            if (e % 7 == 0) a = e % 14 ? INT32_MIN : INT32_MAX;
            int32_t b = int32_t(rng() % 2001) - 1000;
            // Every fourth element on a rounding tie: (a + b) x mult = (2j + 1) x 2^(shift - 1),
            // with mult = 2^(shift - 1) and a = 2j + 1, or mult = 1 and a = (2j + 1) x 2^(shift - 1).
            uint32_t m = mult;
            if (e % 4 == 1 && shift >= 1 && shift <= 20) {
              const int32_t odd = 2 * (int32_t(rng() % 4096) - 2048) + 1;
              b = 0;
              if (shift <= 16) m = uint32_t{1} << (shift - 1), a = odd;
              else m = 1, a = odd * (int32_t{1} << (shift - 1));
            }
            acc[e] = a;
            q[e] = {b, m, shift};
            bias[e] = double(b);
            scale[e] = std::ldexp(double(m), -int(shift));
          }
          gpu::requantize_span(acc.data(), bias.data(), scale.data(), map, got.data(), n);
          for (uint64_t e = 0; e < n; ++e) {
            const int8_t want = gpu::requantize(acc[e], q[e], table);
            if (got[e] != want) {
              INFO("func " << int(f) << " clip " << clip << " acc " << acc[e] << " bias " << q[e].bias << " mult "
                           << q[e].mult << " shift " << q[e].shift);
              REQUIRE(int(got[e]) == int(want));
            }
          }
        }
      }
  });
}

TEST_CASE("requantize_span rounds the curve's input range exactly at its edges", "[gpu][kernels]") {
  // shift 0, mult 1: y = acc + bias, so every y in [-2100, 2100] (beyond the table's [-2048, 2047])
  // and the halves around them with shift 1.
  for_each_isa([&] {
    for (isa::Func f : {isa::Func::sigmoid, isa::Func::tanh}) {
      const OutputTable table = gpu::output_table(f, 127);
      std::vector<int32_t> storage;
      const gpu::OutputMap map = gpu::output_map(table, storage);
      for (uint32_t shift : {0u, 1u}) {
        std::vector<int32_t> acc;
        for (int32_t y = -4201; y <= 4201; ++y) acc.push_back(y);
        std::vector<double> bias(acc.size(), 0), scale(acc.size(), std::ldexp(1.0, -int(shift)));
        std::vector<int8_t> got(acc.size());
        gpu::requantize_span(acc.data(), bias.data(), scale.data(), map, got.data(), acc.size());
        for (size_t e = 0; e < acc.size(); ++e) {
          INFO("func " << int(f) << " shift " << shift << " acc " << acc[e]);
          REQUIRE(int(got[e]) == int(gpu::requantize(acc[e], {0, 1, shift}, table)));
        }
      }
    }
  });
}

TEST_CASE("pool_average_span equals pool_average for every window sum", "[gpu][kernels]") {
  // Every sum of size int8 values, [-128 size, 127 size], for the windows up to 10 x 10 (powers of
  // two and the rest); the ends, the halves and random sums for larger ones up to the limit; and
  // one beyond it (the scalar form).
  std::mt19937_64 rng(9);
  for_each_isa([&] {
    std::vector<int32_t> sizes;
    for (int32_t w = 1; w <= 10; ++w) sizes.push_back(w * w);
    for (int32_t s : {2, 3, 5, 7, 1000, 1024, 4095, gpu::kMaxPoolSpanSize - 1, gpu::kMaxPoolSpanSize,
                      gpu::kMaxPoolSpanSize + 1})
      sizes.push_back(s);
    for (int32_t size : sizes) {
      std::vector<int32_t> sum;
      if (size <= 100) {
        for (int32_t v = -128 * size; v <= 127 * size; ++v) sum.push_back(v);
      } else {
        for (int32_t q = -128; q <= 127; ++q)
          for (int32_t d : {-1, 0, 1}) {
            // q x size, and the halves (2q + 1) x size / 2 around which rounding turns.
            sum.push_back(q * size + d);
            if (q < 127) sum.push_back((2 * q + 1) * size / 2 + d);
          }
        for (int i = 0; i < 20000; ++i) sum.push_back(int32_t(rng() % uint64_t(255 * size)) - 128 * size);
      }
      std::vector<int8_t> got(sum.size());
      gpu::pool_average_span(sum.data(), size, got.data(), sum.size());
      for (size_t e = 0; e < sum.size(); ++e)
        if (got[e] != gpu::pool_average(sum[e], size)) {
          INFO("size " << size << " sum " << sum[e]);
          REQUIRE(int(got[e]) == int(gpu::pool_average(sum[e], size)));
        }
    }
  });
}
