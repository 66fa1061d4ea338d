// One truth, three engines: random programs (random shapes, flags, stalls and sync patterns, on
// random small machines from 4x4 to 32x32) run on the fast, stepped and timing engines and the
// reference executor. Every program either fails on all three engines with the same error at the
// same cycle (a missing sync makes a data hazard, which the machine refuses), or runs on all three
// with the same cycle for every instruction's start and end, the same counters, and (fast and
// stepped) the reference executor's memories.
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "machine_support.h"

using namespace tpusim;
using isa::Field;
using isa::Opcode;

namespace {

struct Limits {
  std::vector<uint64_t> dims;  // array_rows / array_cols drawn from these
  bool stress = false;         // tiny FIFO and queues, slow memories
  bool shared = false;         // stations share UB rows: act writes matmul inputs, DMA act inputs
  bool fused = false;          // some activates pool as they write (setcfg act_pool ..)
  bool dense = false;          // some matmuls read and activates write dense rows (setcfg dense_rows ..)
  bool wide = false;           // some matmuls have 16-bit inputs or weights (setcfg mm_in_hi, mm_weight_hi)
  bool elements16 = false;     // some activates write and vecs read or write 16-bit elements (act_high, vec_high_*)
  bool partial = false;        // some read_weights fetch partial tiles (rw tile_rows x tile_cols, compact)
  bool matrix_syncs = false;   // runs of matmuls that fill the matrix queue, then a sync naming the matrix unit
};

class ProgramGenerator {
 public:
  ProgramGenerator(uint64_t seed, const Limits& lim) : rng_(seed), lim_(lim) {}

  sim::Arch arch() {
    sim::Arch a;
    a.name = "random";
    a.array_rows = any(lim_.dims);
    a.array_cols = any(lim_.dims);
    a.clock_mhz = 1000;
    a.ub_bytes = 256 * a.ub_row_bytes();
    a.acc_entries = 64;
    a.weight_fifo_tiles = lim_.stress ? 1 : pick(1, 4);
    a.station_queue_depth = lim_.stress ? pick(1, 2) : pick(1, 4);
    a.weight_mem_gbps = any<double>({0.5, 1, 4, 16});
    a.weight_mem_latency_cycles = pick(0, lim_.stress ? 40 : 10);
    a.host_gbps = any<double>({0.5, 1, 2.5, 8});
    a.host_latency_cycles = pick(0, 20);
    a.activation_lanes = any<uint64_t>({1, 3, 4, 16, 256});
    a.activation_latency_cycles = pick(0, 4);
    a.issue_cycles = pick(1, 2);
    a.weight_mem_bytes = a.tile_bytes() * 1024;
    return a;
  }

  isa::Program program(const sim::Arch& a) {
    arch_ = a;
    p_ = {};
    p_.model = "random";
    const uint64_t W = a.ub_row_bytes(), C = a.array_cols, tb = a.tile_bytes();
    // Weight image: 8 tiles, some with zero padding (a used box), for the unused-MACs counter.
    p_.weights.resize(8 * tb);
    for (uint64_t t = 0; t < 8; ++t) {
      const uint64_t ur = chance(0.5) ? a.array_rows : pick(1, a.array_rows),
                     uc = chance(0.5) ? C : pick(1, C);
      for (uint64_t k = 0; k < ur; ++k)
        for (uint64_t j = 0; j < uc; ++j) p_.weights[t * tb + k * C + j] = uint8_t(rng_());
    }
    region("x", false, 0, 64 * W, true);
    region("q", false, 0x10000, kQRows * W, false);
    qtable(p_.host_regions.back().init, C);
    region("y", true, 0x20000, 64 * W, false);
    emit(Opcode::read_host, {{Field::host, 0x10000}, {Field::ub, kQ}, {Field::rows, qrows()}});
    emit(Opcode::sync, {{Field::units, 1}});
    const uint64_t blocks = pick(1, 4);
    for (uint64_t b = 0; b < blocks; ++b) block();
    emit(Opcode::halt, {});
    return p_;
  }

 private:
  static constexpr uint64_t kX = 0, kY = 64, kZ = 128, kQ = 192, kQRows = 8;
  uint64_t pick(uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  T any(const std::vector<T>& v) {
    return v[pick(0, v.size() - 1)];
  }
  uint64_t qrows() const { return (7 * arch_.array_cols + arch_.ub_row_bytes() - 1) / arch_.ub_row_bytes(); }

  void emit(Opcode op, std::initializer_list<std::pair<Field, uint64_t>> fields) {
    p_.code.push_back(test::make(op, fields));
  }
  void region(const char* name, bool output, uint64_t addr, uint64_t bytes, bool random) {
    isa::HostRegion r;
    r.name = name;
    r.output = output;
    r.host_addr = addr;
    r.bytes = bytes;
    if (!output) {
      r.init.resize(bytes);
      if (random) isa::fill_random(r.init, rng_());
    }
    p_.host_regions.push_back(r);
  }
  // bias int32 (small), mult uint16, shift 0..40, per column (docs/isa.md, act perchan).
  void qtable(std::vector<uint8_t>& t, uint64_t C) {
    for (uint64_t c = 0; c < C; ++c) {
      const int32_t bias = int32_t(pick(0, 1 << 21)) - (1 << 20);
      for (int i = 0; i < 4; ++i) t[4 * c + i] = uint8_t(uint32_t(bias) >> (8 * i));
      const uint64_t mult = pick(0, 400);
      t[4 * C + 2 * c] = uint8_t(mult);
      t[4 * C + 2 * c + 1] = uint8_t(mult >> 8);
      t[6 * C + c] = uint8_t(pick(0, 40));
    }
  }
  void maybe_sync(uint64_t units) {
    if (chance(0.9)) emit(Opcode::sync, {{Field::units, units}});
  }

  // Random packing registers (sim/pack.h) for the next matmul: a gather of bytes x cols x rows
  // segments within array_rows, steps 0..4; or none. Returns how far its segments reach.
  uint64_t gather() {
    const auto set = [&](isa::ConfigReg reg, uint64_t v) { emit(Opcode::set_config, {{Field::reg, uint64_t(reg)}, {Field::value, v}}); };
    if (!chance(0.4)) {
      if (gathering_) set(isa::ConfigReg::gather_bytes, 0);
      if (dense_in_) set(isa::ConfigReg::dense_rows, 0);
      gathering_ = dense_in_ = false;
      return 0;
    }
    const uint64_t n = arch_.array_rows, bytes = pick(1, std::min<uint64_t>(n, 3)), cols = pick(1, n / bytes);
    const uint64_t rows = pick(1, n / bytes / cols), cs = pick(0, 4), rs = pick(0, 4);
    set(isa::ConfigReg::gather_bytes, bytes);
    set(isa::ConfigReg::gather_cols, cols);
    set(isa::ConfigReg::gather_rows, rows);
    set(isa::ConfigReg::gather_col_step, cs);
    set(isa::ConfigReg::gather_row_step, rs);
    gathering_ = true;
    gather_bytes_ = bytes;
    dense_in(bytes);
    return (cols - 1) * cs + (rows - 1) * rs;
  }
  // With lim_.dense, sometimes Q = 2..4 logical rows of `bytes` >= the gather's bytes per UB row.
  void dense_in(uint64_t gather_bytes) {
    const uint64_t q = pick(2, 4), most = arch_.ub_row_bytes() / q;
    if (lim_.dense && chance(0.5) && most >= gather_bytes) {
      dense_bytes_ = pick(gather_bytes, most);
      set(isa::ConfigReg::dense_rows, q);
      set(isa::ConfigReg::dense_bytes, dense_bytes_);
      dense_in_ = true;
    } else if (dense_in_) {
      set(isa::ConfigReg::dense_rows, 0);
      dense_in_ = false;
    }
  }

  void matmul(bool switch_tile) {
    uint64_t reach = gather();
    const uint64_t rows = pick(1, 8), repeat = pick(1, 3), stride = pick(0, 8);
    uint64_t span = (repeat - 1) * stride + rows;
    if (span + reach > 64) {  // a long reach: no gather this time
      emit(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::gather_bytes)}, {Field::value, 0}});
      if (dense_in_) set(isa::ConfigReg::dense_rows, 0);
      gathering_ = dense_in_ = false;
      reach = 0;
    }
    span += reach;
    // (drawn in the order the fields were before 16-bit modes: the other tests' programs stay the same)
    const bool accumulate = chance(0.5), unsigned_in = chance(0.3);
    const uint64_t ub = kX + pick(0, 64 - span);
    wide(ub, span);
    emit(Opcode::matmul, {{Field::switch_weights, switch_tile},
                          {Field::accumulate, accumulate},
                          {Field::unsigned_data, unsigned_in},
                          {Field::ub, ub},
                          {Field::acc, pick(0, 64 - rows * repeat)},
                          {Field::rows, rows},
                          {Field::repeat, repeat},
                          {Field::stride, stride},
                          {Field::lane, dense_in_   ? pick(0, dense_bytes_ - gather_bytes_)
                                        : gathering_ ? pick(0, arch_.ub_row_bytes() - gather_bytes_)
                                                     : pick(0, arch_.ub_row_bytes() - arch_.array_rows)}});
  }
  // With lim_.wide, sometimes 16-bit inputs (the high plane mm_in_hi rows further, still in the
  // input region, so only shared rows make hazards) and sometimes a high weight plane.
  void wide(uint64_t ub, uint64_t span) {
    if (!lim_.wide) return;
    const uint64_t room = kX + 64 - (ub + span);
    set(isa::ConfigReg::mm_in_hi, room > 0 && chance(0.5) ? pick(1, room) : 0);
    set(isa::ConfigReg::mm_weight_hi, chance(0.5));
  }
  bool gathering_ = false, scattering_ = false, dense_in_ = false, dense_out_ = false;
  uint64_t gather_bytes_ = 0, dense_bytes_ = 0, group_cols_ = 0;

  // Where a station reads or writes: its own region, or (shared) one another station uses too.
  uint64_t share(uint64_t own, uint64_t other) { return lim_.shared && chance(0.5) ? other : own; }

  void set(isa::ConfigReg reg, uint64_t value) { emit(Opcode::set_config, {{Field::reg, uint64_t(reg)}, {Field::value, value}}); }

  // An activate that pools as it writes: a map of h x w pixels x b images (at most 24 rows),
  // windows and strides of 1..3, max or avg; then pooling off again, or left on for the next
  // fused activate.
  void fused_activate(uint64_t act_out) {
    const uint64_t window = pick(1, 3), stride = pick(1, 3), b = pick(1, 2);
    const uint64_t w = pick(window, 4), h = pick(window, std::max<uint64_t>(window, 24 / (w * b)));
    const uint64_t out = ((h - window) / stride + 1) * ((w - window) / stride + 1) * b;
    set(isa::ConfigReg::act_pool, pick(1, 2));
    set(isa::ConfigReg::act_pool_window, window);
    set(isa::ConfigReg::act_pool_stride, stride);
    set(isa::ConfigReg::act_pool_width, w);
    set(isa::ConfigReg::act_pool_batch, b);
    emit(Opcode::activate, {{Field::func, pick(0, 4)},
                            {Field::per_channel, chance(0.3)},
                            {Field::acc, pick(0, 64 - h * w * b)},
                            {Field::ub, act_out + pick(0, 64 - out)},
                            {Field::rows, h * w * b},
                            {Field::mult, pick(0, 300)},
                            {Field::shift, pick(0, 20)},
                            {Field::clip, pick(0, 255)},
                            {Field::qtable, kQ}});
    if (chance(0.7)) set(isa::ConfigReg::act_pool, 0);
  }

  void activation_work() {
    // Sometimes scatter: G groups of gc columns, each accumulator row to G UB rows (sim/pack.h).
    uint64_t groups = 1;
    if (chance(0.3)) {
      groups = pick(1, std::min<uint64_t>(arch_.array_cols, 4));
      emit(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_groups)}, {Field::value, groups}});
      group_cols_ = pick(1, arch_.array_cols / groups);
      emit(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_group_cols)}, {Field::value, group_cols_}});
      scattering_ = true;
    } else if (scattering_) {
      emit(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_groups)}, {Field::value, 0}});
      scattering_ = false;
    }
    const uint64_t rows = pick(1, 8 / groups);
    const uint64_t act_out = share(kY, kX), aux_in = share(kY, kX), aux_out = share(kZ, kX);
    if (chance(0.3))  // write the columns elsewhere in the rows (non-square arrays)
      emit(Opcode::set_config, {{Field::reg, uint64_t(isa::ConfigReg::act_lane)},
                                {Field::value, pick(0, arch_.ub_row_bytes() - arch_.array_cols)}});
    if (lim_.dense) {  // sometimes Q = 2..4 written rows per UB row, act_lane inside a field
      const uint64_t q = pick(2, 4), most = arch_.ub_row_bytes() / q, need = scattering_ ? group_cols_ : 1;
      if (chance(0.5) && most >= need) {
        const uint64_t bytes = pick(need, most);
        set(isa::ConfigReg::act_dense_rows, q);
        set(isa::ConfigReg::act_dense_bytes, bytes);
        set(isa::ConfigReg::act_lane, pick(0, bytes - need));
        dense_out_ = true;
      } else if (dense_out_) {
        set(isa::ConfigReg::act_dense_rows, 0);
        set(isa::ConfigReg::act_lane, pick(0, arch_.ub_row_bytes() - arch_.array_cols));
        dense_out_ = false;
      }
    }
    if (lim_.fused && chance(0.6)) fused_activate(act_out);
    // Sometimes 16-bit results: the high plane H = rows..16 rows further (not with a scatter,
    // dense rows or unsigned results, which act refuses with act_high); off again after it.
    const bool high = lim_.elements16 && !scattering_ && !dense_out_ && chance(0.5);
    if (high) set(isa::ConfigReg::act_high, pick(rows, 16));
    emit(Opcode::activate, {{Field::func, pick(0, 4)},
                            {Field::per_channel, chance(0.3)},
                            {Field::unsigned_data, !high && chance(0.2)},
                            {Field::acc, pick(0, 64 - rows)},
                            {Field::ub, act_out + pick(0, 64 - rows * groups)},
                            {Field::rows, rows},
                            {Field::mult, pick(0, 300)},
                            {Field::shift, pick(0, 20)},
                            {Field::clip, pick(0, 255)},
                            {Field::qtable, kQ}});
    if (high) set(isa::ConfigReg::act_high, 0);
    maybe_sync(8);
    if (chance(0.5)) {
      const uint64_t r = pick(1, 8), op = pick(0, 5);
      // Sometimes 16-bit operands and result, each its own plane distance r..16 or int8 (0).
      if (lim_.elements16)
        for (const auto reg : {isa::ConfigReg::vec_high_a, isa::ConfigReg::vec_high_b, isa::ConfigReg::vec_high_out})
          set(reg, chance(0.4) ? pick(r, 16) : 0);
      emit(Opcode::vector, {{Field::op, op},
                            {Field::func, pick(0, 4)},
                            {Field::src, aux_in + pick(0, 64 - r)},
                            {Field::src_b, op == 5 ? 0 : aux_in + pick(0, 64 - r)},
                            {Field::ub, aux_out + pick(0, 64 - r)},
                            {Field::rows, r},
                            {Field::mult, pick(0, 300)},
                            {Field::shift, pick(0, 12)}});
    } else {
      const uint64_t window = pick(1, 2), ps = pick(1, 2), out_h = pick(1, 2), out_w = pick(1, 2),
                     batch = pick(1, 2);
      const uint64_t in_w = (out_w - 1) * ps + window, in_h = (out_h - 1) * ps + window;
      emit(Opcode::pool, {{Field::kind, pick(0, 1)},
                          {Field::src, aux_in + pick(0, 64 - in_h * in_w * batch)},
                          {Field::ub, aux_out + pick(0, 64 - out_h * out_w * batch)},
                          {Field::in_w, in_w},
                          {Field::out_h, out_h},
                          {Field::out_w, out_w},
                          {Field::batch, batch},
                          {Field::window, window},
                          {Field::pool_stride, ps}});
    }
    maybe_sync(8);
  }

  void block() {
    const uint64_t tiles = pick(1, 2);
    // A partial tile's box (compact, zero-filled in the FIFO): its tiles x box bytes from the
    // tile's address stay inside the 8-tile image (next_tile_ <= 6, tiles <= 2).
    const bool partial = lim_.partial && chance(0.5);
    emit(Opcode::read_weights, {{Field::waddr, next_tile_ * arch_.tile_bytes()},
                                {Field::tiles, tiles},
                                {Field::unsigned_data, chance(0.3)},
                                {Field::tile_rows, partial ? pick(1, arch_.array_rows) : 0},
                                {Field::tile_cols, partial ? pick(1, arch_.array_cols) : 0}});
    next_tile_ = (next_tile_ + tiles) % 7;
    const bool narrow = chance(0.3);
    if (narrow) emit(Opcode::set_config, {{Field::reg, 1}, {Field::value, pick(1, arch_.ub_row_bytes())}});
    emit(Opcode::read_host, {{Field::host, pick(0, 32) * arch_.ub_row_bytes()},
                             {Field::ub, share(kX, kY) + pick(0, 32)},
                             {Field::rows, pick(1, 32)}});
    if (narrow) emit(Opcode::set_config, {{Field::reg, 1}, {Field::value, 0}});
    maybe_sync(1);
    for (uint64_t t = 0; t < tiles; ++t) {
      matmul(true);
      if (chance(0.4)) matmul(false);
      if (lim_.matrix_syncs) matrix_sync();
    }
    activation_work();
    const uint64_t rows = pick(1, 16);
    emit(Opcode::write_host, {{Field::host, 0x20000 + pick(0, 64 - rows) * arch_.ub_row_bytes()},
                              {Field::ub, kZ + pick(0, 64 - rows)},
                              {Field::rows, rows}});
    if (chance(0.3)) emit(Opcode::barrier, {});
  }

  // More matmuls on the tile just switched in (up to 5: a queue of 1 to 4 fills), then often a
  // sync (naming the matrix unit, alone or with others, or only another unit) and more matmuls
  // after it: issue held at a full matrix queue while the unit streams or waits for its tile, or
  // resumed after a sync in the control unit's own process, the cases the timing engine's ahead
  // start (a matmul started before simulated time reaches it) must leave as the other engines do.
  void matrix_sync() {
    const uint64_t more = pick(0, 5);
    for (uint64_t i = 0; i < more; ++i) matmul(false);
    if (!chance(0.8)) return;
    emit(Opcode::sync, {{Field::units, any<uint64_t>({1, 2, 4, 6, 8, 12, 15})}});
    const uint64_t after = pick(0, 2);
    for (uint64_t i = 0; i < after; ++i) matmul(false);
  }

  std::mt19937_64 rng_;
  Limits lim_;
  sim::Arch arch_;
  isa::Program p_;
  uint64_t next_tile_ = 0;
};

// Whether p sets one of `regs` to a value other than 0.
bool sets_any(const isa::Program& p, std::initializer_list<isa::ConfigReg> regs) {
  for (const auto& in : p.code)
    if (in.opcode == Opcode::set_config && in[Field::value] != 0)
      for (const isa::ConfigReg r : regs)
        if (in[Field::reg] == uint64_t(r)) return true;
  return false;
}

// Runs `count` random programs; returns how many ran (the rest were refused on every engine alike),
// and in `ran_16` (when given) how many of those that ran use 16-bit elements.
int differential(uint64_t seed, int count, const Limits& lim, int* ran_16 = nullptr, int* ran_partial = nullptr) {
  int ran = 0;
  for (int n = 0; n < count; ++n) {
    ProgramGenerator gen(seed + uint64_t(n), lim);
    const sim::Arch arch = gen.arch();
    const isa::Program p = gen.program(arch);
    INFO("seed " << seed + uint64_t(n) << ", " << arch.array_rows << "x" << arch.array_cols);
    std::string error;
    try {
      sim::simulate(p, arch, {sim::Engine::timing, 0});
    } catch (const sim::SimError& e) {
      error = fmt::format("{} (cycle {})", e.what(), e.cycle.value_or(0));
    }
    if (error.empty()) {
      test::run_all(p, arch);
      ++ran;
      if (ran_16)
        *ran_16 += sets_any(p, {isa::ConfigReg::act_high, isa::ConfigReg::vec_high_a, isa::ConfigReg::vec_high_b,
                                isa::ConfigReg::vec_high_out});
      if (ran_partial)
        *ran_partial += std::any_of(p.code.begin(), p.code.end(), [](const isa::Instruction& in) {
          return in.opcode == Opcode::read_weights && (in[Field::tile_rows] || in[Field::tile_cols]);
        });
      continue;
    }
    INFO("refused: " << error);
    for (sim::Engine e : {sim::Engine::fast, sim::Engine::stepped}) {
      try {
        sim::simulate(p, arch, {e, 0});
        FAIL("engine " << sim::engine_name(e) << " ran a program the timing engine refused");
      } catch (const sim::SimError& err) {
        // (The same message, failing at the same cycle.)
        REQUIRE(fmt::format("{} (cycle {})", err.what(), err.cycle.value_or(0)) == error);
      }
    }
  }
  return ran;
}

}  // namespace

TEST_CASE("differential - square arrays 4x4 to 32x32", "[machine][differential]") {
  const int ran = differential(1000, 150, {{4, 8, 16, 32}});
  CHECK(ran >= 75);
}

TEST_CASE("differential - non-square and odd-sized arrays", "[machine][differential]") {
  const int ran = differential(2000, 150, {{4, 5, 7, 12, 32}});
  CHECK(ran >= 75);
}

TEST_CASE("differential - stations sharing UB rows (RAW through the UB and hazards)",
          "[machine][differential]") {
  const int ran = differential(4000, 150, {{4, 8, 16}, false, true});
  CHECK(ran >= 50);  // 78 of 150 run; the rest have hazards, refused alike by every engine
}

TEST_CASE("differential - activates with fused pooling (setcfg act_pool), alone and sharing UB rows",
          "[machine][differential]") {
  // A plain activate follows each fused one: with pooling left on it runs fused too, or is
  // refused by every engine alike (its rows not whole lines of the map).
  const int ran = differential(5000, 150, {{4, 5, 8, 16}, false, false, true});
  CHECK(ran >= 40);
  const int shared = differential(6000, 100, {{4, 8}, false, true, true});
  CHECK(shared >= 20);
}

TEST_CASE("differential - dense reads and writes (setcfg dense_rows, act_dense_rows), with gathers, scatters, "
          "fused pooling and shared UB rows",
          "[machine][differential][dense]") {
  const int ran = differential(7000, 150, {{4, 5, 8, 16}, false, false, true, true});
  CHECK(ran >= 40);  // 61 of 150 run; the rest are refused alike by every engine
  const int shared = differential(8000, 100, {{4, 8}, false, true, false, true});
  CHECK(shared >= 40);  // 68 of 100
}

TEST_CASE("differential - 16-bit inputs and weights (setcfg mm_in_hi, mm_weight_hi), with gathers, dense rows "
          "and shared UB rows",
          "[machine][differential][wide]") {
  const int ran = differential(9000, 150, {{4, 5, 8, 16}, false, false, false, true, true});
  CHECK(ran >= 40);
  const int shared = differential(9500, 100, {{4, 8}, false, true, false, false, true});
  CHECK(shared >= 30);
}

TEST_CASE("differential - 16-bit elements (setcfg act_high, vec_high_a, vec_high_b, vec_high_out), with 16-bit "
          "matmuls, fused pooling and shared UB rows",
          "[machine][differential][wide]") {
  Limits lim{{4, 5, 8, 16}, false, false, true, false, true};
  lim.elements16 = true;
  int high = 0;
  const int ran = differential(9700, 150, lim, &high);
  CHECK(ran >= 40);    // 71 of 150 run, the rest refused alike by every engine
  CHECK(high >= 30);   // 53 of the 71 set act_high or a vec_high register
  lim = Limits{{4, 8}, false, true};
  lim.elements16 = true;
  high = 0;
  const int shared = differential(9900, 100, lim, &high);
  CHECK(shared >= 30);  // 63 of 100
  CHECK(high >= 25);    // 48 of the 63
}

TEST_CASE("differential - partial weight tiles (rw tile_rows, tile_cols), with 16-bit matmuls, dense rows, a "
          "one-tile FIFO and shared UB rows",
          "[machine][differential]") {
  // Half the read_weights fetch a random tile_rows x tile_cols box: the fast engine zero-fills
  // it before packing, the stepped engine shifts the fill into the array, the timing engine
  // moves only the box's bytes; every engine and the reference executor agree.
  Limits lim{{4, 5, 8, 16}, false, false, false, true, true};
  lim.partial = true;
  int partial = 0;
  const int ran = differential(10100, 150, lim, nullptr, &partial);
  CHECK(ran >= 40);       // 121 of 150 run, the rest refused alike by every engine
  CHECK(partial >= 30);   // 86 of the 121 fetch a partial tile
  lim = Limits{{4, 8}, true, true};
  lim.partial = true;
  partial = 0;
  const int stressed = differential(10300, 100, lim, nullptr, &partial);
  CHECK(stressed >= 25);  // 59 of 100
  CHECK(partial >= 15);   // 45 of the 59
}

TEST_CASE("differential - syncs on the matrix unit behind a full matrix queue, with partial tiles, a one-tile FIFO "
          "and shared UB rows",
          "[machine][differential]") {
  // Each tile's matmuls are followed by up to 5 more and often a sync, then up to 2 more, so issue
  // waits at a full queue (depth 1 to 4), for the unit to drain, or resumes after a sync on another
  // unit; the timing engine starts matmuls ahead of simulated time and must give every instruction
  // the other engines' cycles. (It catches issue finding a slot freed by a matmul started ahead
  // before that start's cycle, which no other differential case does.)
  Limits lim{{4, 5, 8, 16}};
  lim.matrix_syncs = true;
  lim.partial = true;
  const int ran = differential(10500, 150, lim);
  CHECK(ran >= 100);  // 127 of 150 run, the rest refused alike by every engine
  lim = Limits{{4, 8}, true, true};
  lim.matrix_syncs = true;
  const int stressed = differential(10700, 100, lim);
  CHECK(stressed >= 45);  // 64 of 100
}

TEST_CASE("differential - stressed weight FIFO and queues and slow memories", "[machine][differential]") {
  const int ran = differential(3000, 150, {{4, 8, 16}, true});
  CHECK(ran >= 75);
}

// Not run by default: writes one random program and its machine for a closer look,
// e.g. TPUSIM_DIFF_SEED=3105 TPUSIM_DIFF_DIMS=4,8,16 sim_tests "[.dump]" then
// tpusim run /tmp/tpusim-diff.tpu --arch /tmp/tpusim-diff.json. TPUSIM_DIFF_STRESS=1,
// TPUSIM_DIFF_ODD, TPUSIM_DIFF_SHARED, TPUSIM_DIFF_PARTIAL and TPUSIM_DIFF_MATRIX_SYNCS (any value)
// set the Limits a case above uses.
TEST_CASE("differential - dump one program", "[.dump]") {
  const char* seed = std::getenv("TPUSIM_DIFF_SEED");
  REQUIRE(seed);
  Limits lim{{4, 8, 16, 32}};
  if (const char* stress = std::getenv("TPUSIM_DIFF_STRESS")) lim = {{4, 8, 16}, std::string(stress) == "1"};
  if (std::getenv("TPUSIM_DIFF_ODD")) lim.dims = {4, 5, 7, 12, 32};
  if (const char* dims = std::getenv("TPUSIM_DIFF_DIMS")) {  // e.g. 4,5,8,16
    lim.dims.clear();
    std::stringstream in(dims);
    for (std::string d; std::getline(in, d, ',');) lim.dims.push_back(std::stoull(d));
  }
  lim.shared = lim.shared || std::getenv("TPUSIM_DIFF_SHARED");
  lim.partial = std::getenv("TPUSIM_DIFF_PARTIAL") != nullptr;
  lim.matrix_syncs = std::getenv("TPUSIM_DIFF_MATRIX_SYNCS") != nullptr;
  ProgramGenerator gen(std::stoull(seed), lim);
  const sim::Arch arch = gen.arch();
  isa::save_program("/tmp/tpusim-diff.tpu", gen.program(arch));
  std::ofstream("/tmp/tpusim-diff.json") << sim::arch_to_json(arch).dump(2);
}
