// The stepped systolic array against its contract (sim/systolic_array.h): hand-computed registers
// cycle by cycle, the timing of tile loads, switches and results, and a literal per-cell model.
//
// Cycle c is the step() call made when cycles() == c; "after cycle c" is right after it returns.
#include "sim/systolic_array.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/mac_cell.h"

namespace {

using tpusim::sim::MacCell;
using tpusim::sim::SystolicArray;
using tpusim::sim::mac_cell_next;
using Matrix16 = std::vector<std::vector<int16_t>>;
using Matrix32 = std::vector<std::vector<int32_t>>;
using Grid = std::vector<std::vector<int64_t>>;
constexpr uint8_t V = SystolicArray::kValid;
constexpr uint8_t S = SystolicArray::kSwitch;

// Every register of one kind, as a rows x cols grid.
template <typename T>
Grid grid(const SystolicArray& a, T (SystolicArray::*reg)(uint64_t, uint64_t) const) {
  Grid g(a.rows(), std::vector<int64_t>(a.cols()));
  for (uint64_t k = 0; k < a.rows(); ++k)
    for (uint64_t j = 0; j < a.cols(); ++j) g[k][j] = (a.*reg)(k, j);
  return g;
}
std::vector<int64_t> bottom(const SystolicArray& a) { return {a.bottom().begin(), a.bottom().end()}; }
std::vector<int64_t> bottom_valid(const SystolicArray& a) {
  return {a.bottom_valid().begin(), a.bottom_valid().end()};
}
void step(SystolicArray& a, const std::vector<int16_t>& left, const std::vector<uint8_t>& flags,
          int64_t shadow_row = -1, const std::vector<int16_t>& shadow = {}) {
  a.step(left, flags, shadow_row, shadow);
}

// One matmul as the control unit issues it: tile row r is written into shadow row r at cycle
// shadow_start + r; element k of vector i enters row k at cycle t0 + i + k with kValid, and
// kSwitch on vector 0.
struct Matmul {
  Matrix16 tile;     // rows x cols, W[k][j]
  Matrix16 vectors;  // B x rows, x_i[k]
  int64_t shadow_start, t0;
  int64_t batch() const { return static_cast<int64_t>(vectors.size()); }
};

// The plainest loops: y_i[j] = sum_k x_i[k] * W[k][j], wrapped to int32.
Matrix32 reference(const Matrix16& tile, const Matrix16& vectors) {
  Matrix32 y(vectors.size(), std::vector<int32_t>(tile[0].size()));
  for (size_t i = 0; i < vectors.size(); ++i)
    for (size_t j = 0; j < tile[0].size(); ++j) {
      int64_t sum = 0;
      for (size_t k = 0; k < tile.size(); ++k) sum += int64_t{vectors[i][k]} * tile[k][j];
      y[i][j] = static_cast<int32_t>(sum);  // modulo 2^32 (C++20)
    }
  return y;
}

Matrix16 random_matrix(size_t rows, size_t cols, bool is_unsigned, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(is_unsigned ? 0 : -128, is_unsigned ? 255 : 127);
  Matrix16 m(rows, std::vector<int16_t>(cols));
  for (auto& row : m)
    for (auto& v : row) v = static_cast<int16_t>(d(rng));
  return m;
}

struct Outcome {
  std::vector<Matrix32> results;    // results[m][i][j]: bottom()[j] after cycle t0 + i + (rows-1) + j
  std::vector<std::string> errors;  // timing and scheduling violations
};

// What enters the array at cycle c for these matmuls (errors: two writers of one input in a cycle).
struct Inputs {
  std::vector<int16_t> left, shadow;
  std::vector<uint8_t> flags;
  int64_t shadow_row = -1;
};
Inputs inputs_at(const std::vector<Matmul>& matmuls, int64_t n, int64_t m, int64_t c,
                 std::vector<std::string>& errors) {
  Inputs in{std::vector<int16_t>(n), std::vector<int16_t>(m), std::vector<uint8_t>(n)};
  for (const Matmul& mm : matmuls) {
    if (c >= mm.shadow_start && c < mm.shadow_start + n) {
      if (in.shadow_row >= 0) errors.push_back("two shadow writes at cycle " + std::to_string(c));
      in.shadow_row = c - mm.shadow_start;
      in.shadow = mm.tile[in.shadow_row];
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = c - mm.t0 - k;
      if (i < 0 || i >= mm.batch()) continue;
      if (in.flags[k] != 0) errors.push_back("two inputs for a row at cycle " + std::to_string(c));
      in.left[k] = mm.vectors[i][k];
      in.flags[k] = static_cast<uint8_t>(V | (i == 0 ? S : 0));
    }
  }
  return in;
}

// Steps the array through the matmuls, checking every cycle that bottom_valid()[j] is set exactly
// when some vector's column-j result is due, and that empty() is false exactly while vector
// elements are in flight: after cycle c, x[k][j] holds the element that entered row k at c - j,
// so a matmul occupies the array from t0 to t0 + (B-1) + (rows-1) + (cols-1).
Outcome run(SystolicArray& a, const std::vector<Matmul>& matmuls) {
  const int64_t n = static_cast<int64_t>(a.rows()), m = static_cast<int64_t>(a.cols());
  Outcome out;
  int64_t end = 0;
  for (const Matmul& mm : matmuls) {
    out.results.emplace_back(mm.vectors.size(), std::vector<int32_t>(m));
    end = std::max(end, mm.t0 + mm.batch() + n + m - 3 + 3);
  }
  for (int64_t c = static_cast<int64_t>(a.cycles()); c <= end; ++c) {
    const Inputs in = inputs_at(matmuls, n, m, c, out.errors);
    step(a, in.left, in.flags, in.shadow_row, in.shadow);
    bool in_flight = false;
    for (const Matmul& mm : matmuls) in_flight |= c >= mm.t0 && c <= mm.t0 + mm.batch() + n + m - 3;
    // A skewed shift holds a row given at L in the top edge's delay registers until its write to
    // column m - 1 at L + m - 1; the last row is given at shadow_start + n - 1.
    bool pending = false;
    if (a.skewed_shift())
      for (const Matmul& mm : matmuls)
        pending |= c >= mm.shadow_start && m > 1 && c < mm.shadow_start + n - 1 + m - 1;
    if (a.shift_pending() != pending) out.errors.push_back("shift_pending() wrong after cycle " + std::to_string(c));
    for (int64_t j = 0; j < m; ++j) {
      int due = 0;
      for (size_t x = 0; x < matmuls.size(); ++x) {
        const int64_t i = c - matmuls[x].t0 - (n - 1) - j;
        if (i < 0 || i >= matmuls[x].batch()) continue;
        out.results[x][i][j] = a.bottom()[j];
        ++due;
      }
      if (a.bottom_valid()[j] != (due == 1 ? 1 : 0))
        out.errors.push_back("bottom_valid[" + std::to_string(j) + "] wrong after cycle " +
                             std::to_string(c));
    }
    if (a.empty() == in_flight) out.errors.push_back("empty() wrong after cycle " + std::to_string(c));
  }
  return out;
}

// The array as a grid of cells, each stepped with sim/mac_cell.h's mac_cell_next (the header's
// rule written once, for one cell; tests/hw holds the SystemVerilog cell against the same function).
struct ContractModel {
  size_t n, m;
  Grid weight, shadow, x, xf, psum, pv;
  // Skewed shift: the rows given in the last m steps, newest first (cell (k, j) takes the row
  // given j steps ago, if it is row k).
  bool skewed = false;
  std::deque<std::pair<int64_t, std::vector<int16_t>>> given;
  ContractModel(size_t rows, size_t cols, bool skewed_shift = false) : n(rows), m(cols), skewed(skewed_shift) {
    for (Grid* g : {&weight, &shadow, &x, &xf, &psum, &pv}) g->assign(n, std::vector<int64_t>(m, 0));
  }
  MacCell cell(size_t k, size_t j) const {
    return {int16_t(weight[k][j]), int16_t(shadow[k][j]), int16_t(x[k][j]),
            uint8_t(xf[k][j]),     int32_t(psum[k][j]),   uint8_t(pv[k][j])};
  }
  void step(const std::vector<int16_t>& left, const std::vector<uint8_t>& flags, int64_t row,
            const std::vector<int16_t>& shadow_values) {
    Grid weight2 = weight, shadow2 = shadow, x2 = x, xf2 = xf, psum2 = psum, pv2 = pv;
    given.emplace_front(row, shadow_values);
    if (given.size() > m) given.pop_back();
    for (size_t k = 0; k < n; ++k)
      for (size_t j = 0; j < m; ++j) {
        const int16_t x_in = j == 0 ? left[k] : int16_t(x[k][j - 1]);
        const uint8_t f_in = j == 0 ? flags[k] : uint8_t(xf[k][j - 1]);
        const int32_t p_in = k == 0 ? 0 : int32_t(psum[k - 1][j]);
        // (the row given j steps ago exists only after j steps: index the deque only then)
        const size_t age = skewed ? j : 0;
        const bool given_then = age < given.size();
        const auto& [r, values] = given[given_then ? age : 0];
        const bool write = given_then && r >= 0 && size_t(r) == k;
        const MacCell c = mac_cell_next(cell(k, j), x_in, f_in, p_in, write, write ? values[j] : 0);
        weight2[k][j] = c.weight, shadow2[k][j] = c.shadow, x2[k][j] = c.x, xf2[k][j] = c.x_flags;
        psum2[k][j] = c.psum, pv2[k][j] = c.psum_valid;
      }
    weight = weight2, shadow = shadow2, x = x2, xf = xf2, psum = psum2, pv = pv2;
  }
  bool empty() const {
    for (size_t k = 0; k < n; ++k)
      for (size_t j = 0; j < m; ++j)
        if ((xf[k][j] & V) || pv[k][j]) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("2x2 array, cycle by cycle: tile through the shadow, switch with vector 0, two vectors",
          "[array]") {
  // W = [[1, 2], [3, 4]] shifted in at cycles 0 and 1; t0 = 2; x0 = (5, 6), x1 = (7, 8).
  // y0 = (5*1 + 6*3, 5*2 + 6*4) = (23, 34); y1 = (7*1 + 8*3, 7*2 + 8*4) = (31, 46).
  SystolicArray a(2, 2);
  CHECK(a.empty());
  step(a, {0, 0}, {0, 0}, 0, {1, 2});
  step(a, {0, 0}, {0, 0}, 1, {3, 4});
  CHECK(grid(a, &SystolicArray::shadow) == Grid{{1, 2}, {3, 4}});
  CHECK(grid(a, &SystolicArray::weight) == Grid{{0, 0}, {0, 0}});  // not switched yet
  CHECK(a.empty());                                                // a tile in the shadow is not data
  // Cycle 2: x0[0] enters row 0 with the switch: cell (0,0) takes shadow 1, psum 5*1.
  step(a, {5, 0}, {V | S, 0});
  CHECK(grid(a, &SystolicArray::weight) == Grid{{1, 0}, {0, 0}});
  CHECK(grid(a, &SystolicArray::x_value) == Grid{{5, 0}, {0, 0}});
  CHECK(grid(a, &SystolicArray::x_flags) == Grid{{V | S, 0}, {0, 0}});
  CHECK(grid(a, &SystolicArray::psum) == Grid{{5, 0}, {0, 0}});
  CHECK(grid(a, &SystolicArray::psum_valid) == Grid{{1, 0}, {0, 0}});
  CHECK(!a.empty());
  // Cycle 3: x1[0] enters row 0, x0[1] row 1. (0,1): 5*2 = 10 (switches to 2); (1,0): 5 + 6*3 = 23.
  step(a, {7, 6}, {V, V | S});
  CHECK(grid(a, &SystolicArray::weight) == Grid{{1, 2}, {3, 0}});
  CHECK(grid(a, &SystolicArray::x_value) == Grid{{7, 5}, {6, 0}});
  CHECK(grid(a, &SystolicArray::x_flags) == Grid{{V, V | S}, {V | S, 0}});
  CHECK(grid(a, &SystolicArray::psum) == Grid{{7, 10}, {23, 0}});
  CHECK(bottom(a) == std::vector<int64_t>{23, 0});  // y0[0] after t0 + 0 + (2-1) + 0 = 3
  CHECK(bottom_valid(a) == std::vector<int64_t>{1, 0});
  // Cycle 4: (0,1): 7*2 = 14; (1,0): 7 + 8*3 = 31; (1,1): 10 + 6*4 = 34 (switches to 4).
  step(a, {0, 8}, {0, V});
  CHECK(grid(a, &SystolicArray::weight) == Grid{{1, 2}, {3, 4}});
  CHECK(grid(a, &SystolicArray::x_value) == Grid{{0, 7}, {8, 6}});
  CHECK(grid(a, &SystolicArray::psum) == Grid{{0, 14}, {31, 34}});
  CHECK(grid(a, &SystolicArray::psum_valid) == Grid{{0, 1}, {1, 1}});
  CHECK(bottom(a) == std::vector<int64_t>{31, 34});  // y1[0] and y0[1] after cycle 4
  CHECK(bottom_valid(a) == std::vector<int64_t>{1, 1});
  // Cycle 5: (1,1): 14 + 8*4 = 46, the last result (t0 + B + N + M - 3 = 2 + 2 + 2 + 2 - 3 = 5).
  step(a, {0, 0}, {0, 0});
  CHECK(grid(a, &SystolicArray::psum) == Grid{{0, 0}, {0, 46}});
  CHECK(bottom(a) == std::vector<int64_t>{0, 46});
  CHECK(bottom_valid(a) == std::vector<int64_t>{0, 1});
  CHECK(!a.empty());
  // Cycle 6: everything has left.
  step(a, {0, 0}, {0, 0});
  CHECK(grid(a, &SystolicArray::psum) == Grid{{0, 0}, {0, 0}});
  CHECK(bottom_valid(a) == std::vector<int64_t>{0, 0});
  CHECK(a.empty());
  CHECK(a.cycles() == 7);
}

TEST_CASE("3x4 array, cycle by cycle: weights switch with the wavefront, results leave skewed", "[array]") {
  // W rows (1, 2, 3, 4), (-1, 0, 1, 2), (2, -2, 5, 1) at cycles 0..2; t0 = 3; x0 = (1, 2, 3),
  // x1 = (-2, 1, 4). y0 = (1-2+6, 2+0-6, 3+2+15, 4+4+3) = (5, -4, 20, 11);
  // y1 = (-2-1+8, -4+0-8, -6+1+20, -8+2+4) = (5, -12, 15, -2).
  const Matrix16 w = {{1, 2, 3, 4}, {-1, 0, 1, 2}, {2, -2, 5, 1}};
  const Matrix16 x = {{1, 2, 3}, {-2, 1, 4}};
  SystolicArray a(3, 4);
  const int64_t t0 = 3;
  for (int64_t c = 0; c <= 10; ++c) {
    std::vector<int16_t> left(3);
    std::vector<uint8_t> flags(3);
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t i = c - t0 - k;
      if (i == 0 || i == 1) left[k] = x[i][k], flags[k] = static_cast<uint8_t>(i == 0 ? V | S : V);
    }
    step(a, left, flags, c < 3 ? c : -1, c < 3 ? w[c] : std::vector<int16_t>(4));
    INFO("after cycle " << c);
    // Cell (k, j) takes W[k][j] with the switch at cycle t0 + k + j.
    Grid weight(3, std::vector<int64_t>(4));
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 4; ++j) weight[k][j] = c >= t0 + k + j ? w[k][j] : 0;
    CHECK(grid(a, &SystolicArray::weight) == weight);
    // y_i[j] is at the bottom after cycle t0 + i + 2 + j = 5 + i + j; other bottom values are 0.
    static const Grid kBottom = {{5, 0, 0, 0},   {5, -4, 0, 0}, {0, -12, 20, 0},
                                 {0, 0, 15, 11}, {0, 0, 0, -2}, {0, 0, 0, 0}};
    static const Grid kBottomValid = {{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 1, 0},
                                      {0, 0, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 0}};
    CHECK(bottom(a) == (c < 5 ? std::vector<int64_t>(4) : kBottom[c - 5]));
    CHECK(bottom_valid(a) == (c < 5 ? std::vector<int64_t>(4) : kBottomValid[c - 5]));
    CHECK(a.empty() == (c < 3 || c > 9));  // last result after t0 + B + N + M - 3 = 3 + 2 + 3 + 4 - 3 = 9
    if (c == 5) {
      // Register (k, j) holds vector i = c - t0 - k - j: row 0 partials x_i[0]*W[0][j], row 1
      // adds x_i[1]*W[1][j]: (0,1) -2*2 = -4, (0,2) 1*3 = 3, (1,0) -2*1 + 1*-1 = -3,
      // (1,1) 1*2 + 2*0 = 2, (2,0) y0[0] = 5.
      CHECK(grid(a, &SystolicArray::psum) == Grid{{0, -4, 3, 0}, {-3, 2, 0, 0}, {5, 0, 0, 0}});
      CHECK(grid(a, &SystolicArray::x_value) == Grid{{0, -2, 1, 0}, {1, 2, 0, 0}, {3, 0, 0, 0}});
      CHECK(grid(a, &SystolicArray::x_flags) == Grid{{0, V, V | S, 0}, {V, V | S, 0, 0}, {V | S, 0, 0, 0}});
    }
  }
}

TEST_CASE("Timing contract: results bit-exact at t0 + i + (rows-1) + j for int8 and uint8 data", "[array]") {
  std::mt19937 rng(1);
  const std::vector<std::pair<uint64_t, uint64_t>> shapes = {{1, 1}, {1, 5},   {5, 1},  {4, 4},
                                                             {7, 3}, {16, 16}, {32, 32}};
  for (auto [n, m] : shapes)
    for (int64_t batch : {1, 3, 40})
      for (int signs = 0; signs < 4; ++signs) {
        const bool x_unsigned = signs & 1, w_unsigned = signs & 2;
        // The tile shifts in at cycles s..s+n-1; t0 = s + 1 is the earliest start (row k's cells
        // copy shadow row k from cycle t0 + k = s + k + 1, after it was written at s + k).
        const int64_t s = 2 + signs, t0 = s + 1 + (batch == 3 ? 5 : 0);
        Matmul mm{random_matrix(n, m, w_unsigned, rng), random_matrix(batch, n, x_unsigned, rng), s, t0};
        SystolicArray a(n, m);
        const Outcome out = run(a, {mm});
        INFO(n << "x" << m << " array, B " << batch << ", x unsigned " << x_unsigned << ", W unsigned "
               << w_unsigned << (out.errors.empty() ? "" : ", first error: " + out.errors[0]));
        CHECK(out.errors.empty());
        CHECK(out.results[0] == reference(mm.tile, mm.vectors));
      }
}

TEST_CASE("Starting a matmul in the cycle of its first shadow write: column 0 reads the old shadow",
          "[array]") {
  // t0 = s: cell (k, 0) copies shadow row k at cycle s + k, the cycle it is written, so column 0
  // keeps the old tile (zeros); cells (k, j > 0) copy at s + k + j, after the write. t0 >= s + 1 is tight.
  std::mt19937 rng(2);
  const Matmul mm{random_matrix(4, 3, false, rng), random_matrix(5, 4, false, rng), 3, 3};
  SystolicArray a(4, 3);
  const Outcome out = run(a, {mm});
  CHECK(out.errors.empty());
  Matrix16 old_column_0 = mm.tile;
  for (auto& row : old_column_0) row[0] = 0;
  CHECK(out.results[0] == reference(old_column_0, mm.vectors));
  CHECK(out.results[0] != reference(mm.tile, mm.vectors));
}

namespace {
// Two matmuls, the second tile shifting in at s2 while the first tile is in use.
std::pair<Outcome, std::vector<Matmul>> back_to_back(uint64_t n, uint64_t m, int64_t batch,
                                                     int64_t s2_minus_bound, std::mt19937& rng) {
  const int64_t s = 0, t0 = n + 1;                 // t0 >= s + 1; t0 = s + n + 1 keeps the shifts apart
  const int64_t s2 = t0 + m - 1 + s2_minus_bound;  // bound: cell (r, m-1) copies row r at t0 + r + m - 1
  const int64_t t0b = std::max(t0 + batch, s2 + 1);
  Matrix16 w2 = random_matrix(n, m, false, rng);
  std::vector<Matmul> mms = {{random_matrix(n, m, false, rng), random_matrix(batch, n, true, rng), s, t0},
                             {w2, random_matrix(batch + 2, n, true, rng), s2, t0b}};
  for (uint64_t k = 0; k < n; ++k) mms[1].tile[k][m - 1] = static_cast<int16_t>(mms[0].tile[k][m - 1] + 1);
  SystolicArray a(n, m);
  return {run(a, mms), mms};
}
}  // namespace

TEST_CASE("Back to back: the next tile shifts in from t0 + cols - 1 while the first is in use", "[array]") {
  std::mt19937 rng(3);
  for (auto [n, m] :
       std::vector<std::pair<uint64_t, uint64_t>>{{4, 4}, {7, 3}, {3, 7}, {1, 5}, {5, 1}, {16, 16}})
    for (int64_t batch : {1, 3, 40}) {
      INFO(n << "x" << m << " array, B " << batch);
      auto [out, mms] = back_to_back(n, m, batch, 0, rng);
      CHECK(out.errors.empty());
      CHECK(out.results[0] == reference(mms[0].tile, mms[0].vectors));
      CHECK(out.results[1] == reference(mms[1].tile, mms[1].vectors));
    }
}

TEST_CASE("Back to back, shadow write one cycle early: the first matmul's last column is corrupted",
          "[array]") {
  // s2 = t0 + cols - 2: shadow row r is overwritten at s2 + r, one cycle before cell (r, cols-1)
  // copies it at t0 + r + cols - 1; column cols-2 copies in the same cycle and is still right.
  std::mt19937 rng(4);
  for (auto [n, m] : std::vector<std::pair<uint64_t, uint64_t>>{{4, 4}, {7, 3}, {3, 7}, {5, 1}, {16, 16}}) {
    INFO(n << "x" << m << " array");
    auto [out, mms] = back_to_back(n, m, 6, -1, rng);
    CHECK(out.errors.empty());
    // The whole last column ran with the second tile's weights, the rest with the first's.
    Matrix16 mixed = mms[0].tile;
    for (uint64_t k = 0; k < n; ++k) mixed[k][m - 1] = mms[1].tile[k][m - 1];
    const Matrix32 right = reference(mms[0].tile, mms[0].vectors);
    CHECK(out.results[0] == reference(mixed, mms[0].vectors));
    CHECK(out.results[0] != right);
    CHECK(out.results[1] == reference(mms[1].tile, mms[1].vectors));
  }
}

namespace {
// The same two matmuls on an array whose shift is skewed by column (set_skewed_shift): cell (r, j)
// of the second tile is written at s2 + r + j, so the bound is s2 >= t0 (cell (r, j) copies the
// first tile at t0 + r + j, reading the old shadow in the cycle it is written).
std::pair<Outcome, std::vector<Matmul>> skewed_back_to_back(uint64_t n, uint64_t m, int64_t batch,
                                                            int64_t s2_minus_bound, std::mt19937& rng) {
  const int64_t s = 0, t0 = n + m;  // t0 >= s + 1; the first tile's last write is at s + n + m - 2
  const int64_t s2 = t0 + s2_minus_bound;
  const int64_t t0b = std::max(t0 + batch, s2 + int64_t(n));  // the next switch: t0' >= s2 + n
  std::vector<Matmul> mms = {{random_matrix(n, m, false, rng), random_matrix(batch, n, true, rng), s, t0},
                             {random_matrix(n, m, false, rng), random_matrix(batch + 2, n, true, rng), s2, t0b}};
  SystolicArray a(n, m, true);
  return {run(a, mms), mms};
}
}  // namespace

TEST_CASE("Skewed shift: the next tile shifts in from the switch itself (s2 = t0) while the first is in use",
          "[array]") {
  std::mt19937 rng(6);
  for (auto [n, m] :
       std::vector<std::pair<uint64_t, uint64_t>>{{4, 4}, {7, 3}, {3, 7}, {1, 5}, {5, 1}, {16, 16}})
    for (int64_t batch : {1, 3, 40}) {
      auto [out, mms] = skewed_back_to_back(n, m, batch, 0, rng);
      INFO(n << "x" << m << " array, B " << batch << (out.errors.empty() ? "" : ", first error: " + out.errors[0]));
      CHECK(out.errors.empty());
      CHECK(out.results[0] == reference(mms[0].tile, mms[0].vectors));
      CHECK(out.results[1] == reference(mms[1].tile, mms[1].vectors));
    }
}

TEST_CASE("Skewed shift one cycle before the switch: every cell of the first matmul takes the second tile",
          "[array]") {
  // s2 = t0 - 1: cell (r, j) is written at t0 - 1 + r + j, one cycle before the switch wave copies
  // it at t0 + r + j, so the first matmul runs entirely on the second tile.
  std::mt19937 rng(7);
  for (auto [n, m] : std::vector<std::pair<uint64_t, uint64_t>>{{4, 4}, {7, 3}, {3, 7}, {5, 1}, {16, 16}}) {
    auto [out, mms] = skewed_back_to_back(n, m, 6, -1, rng);
    INFO(n << "x" << m << " array" << (out.errors.empty() ? "" : ", first error: " + out.errors[0]));
    CHECK(out.errors.empty());
    CHECK(out.results[0] == reference(mms[1].tile, mms[0].vectors));
    CHECK(out.results[0] != reference(mms[0].tile, mms[0].vectors));
    CHECK(out.results[1] == reference(mms[1].tile, mms[1].vectors));
  }
}

TEST_CASE("Skewed shift, cycle by cycle: row r reaches column j at s + r + j", "[array]") {
  // 2 x 3 array, W = [[1, 2, 3], [4, 5, 6]] given at cycles 0 and 1: after cycle c, cell (r, j)
  // holds W[r][j] once c >= r + j; writes pending until the last, cycle 1 + 2 = 3.
  SystolicArray a(2, 3, true);
  const Matrix16 w = {{1, 2, 3}, {4, 5, 6}};
  for (int64_t c = 0; c < 6; ++c) {
    step(a, {0, 0}, {0, 0}, c < 2 ? c : -1, c < 2 ? w[c] : std::vector<int16_t>(3));
    INFO("after cycle " << c);
    Grid want(2, std::vector<int64_t>(3));
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t j = 0; j < 3; ++j) want[r][j] = c >= r + j ? w[r][j] : 0;
    CHECK(grid(a, &SystolicArray::shadow) == want);
    CHECK(a.empty());  // a shift is not data
    CHECK(a.shift_pending() == (c < 3));
  }
  step(a, {0, 0}, {0, 0}, 0, w[0]);
  CHECK(a.shift_pending());
  a.reset();
  CHECK(!a.shift_pending());
  CHECK(grid(a, &SystolicArray::shadow) == Grid(2, std::vector<int64_t>(3)));
}

TEST_CASE("empty(): true after reset, false while data is in flight, true once the last result left",
          "[array]") {
  // 4x5 array, tile at cycles 0..3, B = 3, t0 = 6: the last result (vector 2, column 4) is at the
  // bottom after cycle t0 + (B-1) + (N-1) + (M-1) = 6 + 2 + 3 + 4 = 15 = t0 + B + N + M - 3.
  std::mt19937 rng(5);
  const Matmul mm{random_matrix(4, 5, false, rng), random_matrix(3, 4, false, rng), 0, 6};
  SystolicArray a(4, 5);
  CHECK(a.empty());
  std::vector<std::string> errors;
  for (int64_t c = 0; c <= 18; ++c) {
    const Inputs in = inputs_at({mm}, 4, 5, c, errors);
    step(a, in.left, in.flags, in.shadow_row, in.shadow);
    INFO("after cycle " << c);
    CHECK(a.empty() == (c < 6 || c > 15));  // the tile load alone (cycles 0..3) is no data
    if (c == 15) CHECK(a.bottom_valid()[4] == 1);
    if (c == 15) CHECK(a.bottom()[4] == reference(mm.tile, mm.vectors)[2][4]);
  }
  CHECK(errors.empty());
  SystolicArray b(4, 5);  // reset in mid-flight
  for (int64_t c = 0; c <= 10; ++c) {
    const Inputs in = inputs_at({mm}, 4, 5, c, errors);
    step(b, in.left, in.flags, in.shadow_row, in.shadow);
  }
  CHECK(!b.empty());
  b.reset();
  CHECK(b.empty());
  CHECK(b.cycles() == 0);
}

TEST_CASE("psum wraps modulo 2^32", "[array]") {
  // 3 rows of 32767 * 32767 = 1073676289: 3221028867 - 2^32 = -1073938429.
  SystolicArray a(3, 1);
  const Matmul big{{{32767}, {32767}, {32767}}, {{32767, 32767, 32767}}, 0, 3};
  CHECK(run(a, {big}).results[0] == Matrix32{{-1073938429}});
  // 2 rows of (-32768)^2 = 2^30: 2^31 wraps to INT32_MIN.
  SystolicArray b(2, 1);
  const Matmul min{{{-32768}, {-32768}}, {{-32768, -32768}}, 0, 2};
  CHECK(run(b, {min}).results[0] == Matrix32{{INT32_MIN}});
}

TEST_CASE("Register accessors, argument checks and reset", "[array]") {
  SystolicArray a(2, 3);
  CHECK(a.rows() == 2);
  CHECK(a.cols() == 3);
  CHECK(a.cycles() == 0);
  step(a, {-7, 9}, {V | S, V}, 1, {4, 5, -6});
  CHECK(a.shadow(1, 2) == -6);
  CHECK(a.weight(0, 0) == 0);  // took the old shadow (0) with the switch
  CHECK(a.x_value(0, 0) == -7);
  CHECK(a.x_flags(0, 0) == (V | S));
  CHECK(a.psum_valid(1, 0) == 1);
  CHECK(a.psum(1, 0) == 0);
  CHECK(a.cycles() == 1);
  CHECK_THROWS_AS(a.weight(2, 0), std::out_of_range);
  CHECK_THROWS_AS(a.x_value(0, 3), std::out_of_range);
  CHECK_THROWS_AS(a.psum_valid(5, 5), std::out_of_range);
  CHECK_THROWS_AS(step(a, {1}, {V}), std::invalid_argument);
  CHECK_THROWS_AS(step(a, {1, 2}, {V}), std::invalid_argument);
  CHECK_THROWS_AS(step(a, {1, 2}, {V, V}, 2, {1, 2, 3}), std::out_of_range);
  CHECK_THROWS_AS(step(a, {1, 2}, {V, V}, 0, {1, 2}), std::invalid_argument);
  CHECK_THROWS_AS(SystolicArray(0, 4), std::invalid_argument);
  CHECK(a.cycles() == 1);  // rejected steps change nothing
  a.reset();
  CHECK(a.cycles() == 0);
  CHECK(a.empty());
  for (auto reg : {&SystolicArray::weight, &SystolicArray::shadow, &SystolicArray::x_value})
    CHECK(grid(a, reg) == Grid(2, std::vector<int64_t>(3, 0)));
  CHECK(grid(a, &SystolicArray::psum) == Grid(2, std::vector<int64_t>(3, 0)));
  CHECK(grid(a, &SystolicArray::x_flags) == Grid(2, std::vector<int64_t>(3, 0)));
}

// Arbitrary int16 values, flags and shadow writes, switches at any time: the fast layout must
// give the header's next-state function exactly, register by register, every cycle. Skewed, the
// cycles 100..129 give a shadow row every cycle (every delay register of the top edge in use).
static void check_against_model(bool skewed, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-32768, 32767), flag(0, 3);
  for (auto [n, m] : std::vector<std::pair<size_t, size_t>>{
           {1, 1}, {1, 5}, {5, 1}, {3, 4}, {3, 11}, {17, 33}, {40, 70}}) {
    SystolicArray a(n, m, skewed);
    ContractModel model(n, m, skewed);
    bool same = true;
    for (int c = 0; c < 150 && same; ++c) {
      std::vector<int16_t> left(n), shadow(m);
      std::vector<uint8_t> flags(n);
      for (auto& v : left) v = static_cast<int16_t>(value(rng));
      for (auto& v : shadow) v = static_cast<int16_t>(value(rng));
      for (auto& f : flags) f = static_cast<uint8_t>(c % 50 < 30 ? flag(rng) : 0);  // quiet spells drain
      const int64_t pick = std::uniform_int_distribution<int64_t>(-static_cast<int64_t>(n), n - 1)(rng);
      int64_t row = pick < 0 ? -1 : pick;  // a shadow write in about half the cycles
      if (skewed && c >= 100 && c < 130) row = pick < 0 ? -pick - 1 : pick;
      step(a, left, flags, row, shadow);
      model.step(left, flags, row, shadow);
      INFO(n << "x" << m << " array after cycle " << c);
      same = grid(a, &SystolicArray::weight) == model.weight &&
             grid(a, &SystolicArray::shadow) == model.shadow && grid(a, &SystolicArray::x_value) == model.x &&
             grid(a, &SystolicArray::x_flags) == model.xf && grid(a, &SystolicArray::psum) == model.psum &&
             grid(a, &SystolicArray::psum_valid) == model.pv && bottom(a) == model.psum[n - 1] &&
             bottom_valid(a) == model.pv[n - 1] && a.empty() == model.empty();
      CHECK(same);
    }
  }
}

TEST_CASE("Every register matches the literal per-cell model under random inputs and flags", "[array]") {
  check_against_model(false, 6);
}

TEST_CASE("Skewed shift: every register matches the literal per-cell model, delays included", "[array]") {
  check_against_model(true, 7);
}
