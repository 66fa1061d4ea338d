// Fusion of conv + activation + pool (compiler/lower.cpp fusion_for): the activates pool as they
// write (setcfg act_pool), the full-size map never exists. Exact instructions and cycles on small
// cases, and random conv + pool models bit-exact on every engine, fused and unfused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>

#include "graph_builder.h"
#include "tools/source_dir.h"

namespace tpusim::test {

using compiler::map_shape;
using isa::Field;
using isa::Opcode;
namespace fs = std::filesystem;

namespace {

// conv 3x3 (pad 1) with relu on an h x w x 8 map, then a `kind` pool of window k, stride s.
compiler::QGraph conv_pool(uint64_t batch, uint64_t h, uint64_t w, isa::PoolKind kind, uint64_t k, uint64_t s) {
  GraphBuilder b(batch);
  const int x = b.input(map_shape(h, w, 8)), c = b.tensor("c", map_shape(h, w, 8));
  const int p = b.tensor("p", map_shape((h - k) / s + 1, (w - k) / s + 1, 8));
  compiler::MatmulOp m = b.matmul({whole(x)}, whole(c), 3, 3);
  m.pad = 1;
  b.add(m, "conv");
  b.add(compiler::PoolOp{whole(c), whole(p), kind, k, s}, "pool");
  b.g.output = p;
  return b.g;
}

const isa::Instruction& first(const isa::Program& p, Opcode op) {
  for (const auto& in : p.code)
    if (in.opcode == op) return in;
  FAIL("no such instruction");
  return p.code.front();
}

uint64_t reg(const isa::Program& p, isa::ConfigReg r) {
  uint64_t v = 0;
  for (const auto& in : p.code)
    if (in.opcode == Opcode::set_config && in[Field::reg] == uint64_t(r)) v = in[Field::value];
  return v;
}

}  // namespace

TEST_CASE("conv + relu + max pool: the activate pools as it writes, exact instructions and cycles") {
  // A 4 x 4 x 8 map, batch 1, conv 3x3 pad 1 (9 matmuls of 4 rows x 4 groups), 2 x 2 max pool.
  const compiler::QGraph g = conv_pool(1, 4, 4, isa::PoolKind::max, 2, 2);
  const isa::Program f = lower_and_check(g, arch8x8(), whole_input()), u = lower_and_check(g, arch8x8(), whole_input({false}));
  CHECK(count(f, Opcode::pool) == 0);
  CHECK(count(u, Opcode::pool) == 1);
  CHECK(count(f, Opcode::activate) == 1);
  CHECK(count(f, Opcode::matmul) == 9);
  CHECK(count(u, Opcode::matmul) == 9);
  // The five registers (kind max = 1, window 2, stride 2, 4 pixels per line, 1 image) once.
  CHECK(count(f, Opcode::set_config) == 2 + 5);  // + the DMA's host_stride and host_row_bytes
  CHECK(reg(f, isa::ConfigReg::act_pool) == 1);
  CHECK(reg(f, isa::ConfigReg::act_pool_window) == 2);
  CHECK(reg(f, isa::ConfigReg::act_pool_stride) == 2);
  CHECK(reg(f, isa::ConfigReg::act_pool_width) == 4);
  CHECK(reg(f, isa::ConfigReg::act_pool_batch) == 1);
  CHECK(first(f, Opcode::activate)[Field::rows] == 16);
  CHECK(first(f, Opcode::write_host)[Field::rows] == 4);
  CHECK(first(f, Opcode::write_host)[Field::ub] == first(f, Opcode::activate)[Field::ub]);
  const EngineRuns rf = run_all(f, arch8x8()), ru = run_all(u, arch8x8());
  const auto timing = [](const isa::Program& p, const EngineRuns& r, Opcode op) {
    for (size_t i = 0; i < p.code.size(); ++i)
      if (p.code[i].opcode == op) return r.fast.timeline[i];
    return sim::InstructionTiming{};
  };
  // The last matmul ends at 337 in both. The act then reads 16 accumulator rows at 2 cycles per
  // row (8 columns, 4 lanes) after 2 cycles of latency: [337, 337 + 2 + 16 x 2) = [337, 371),
  // fused or not. Unfused, the pool then reads 4 pooled rows x 2 x 2 UB rows at 2 cycles each:
  // [371, 371 + 2 + 4 x 4 x 2) = [371, 405), and the output DMA (43 cycles: 10 + 4 rows x 8
  // bytes + 1) waits for it: 405 + 43 = 448 cycles; fused it waits for the act: 371 + 43 = 414.
  CHECK(timing(f, rf, Opcode::activate).start == 337);
  CHECK(timing(f, rf, Opcode::activate).end == 371);
  CHECK(timing(u, ru, Opcode::activate).end == 371);
  CHECK(timing(u, ru, Opcode::pool).start == 371);
  CHECK(timing(u, ru, Opcode::pool).end == 405);
  CHECK(rf.fast.cycles == 414);
  CHECK(ru.fast.cycles == 448);
  // UB: the padded 6 x 6 input (36 rows) and the 4 pooled rows; unfused also the 16 rows of the
  // full-size map.
  CHECK(rf.fast.ub_peak_rows == 36 + 4);
  CHECK(ru.fast.ub_peak_rows == 36 + 16);
  // The per-layer mapping says so.
  CHECK(f.meta["mapping"][0]["fusion"] == "pools as it writes: max 2x2 stride 2 (pool)");
  CHECK(f.meta["mapping"][1]["fusion"] == "fused into conv's activates");
  CHECK(!u.meta["mapping"][0].contains("fusion"));
}

TEST_CASE("conv + relu + average pool fused, batch 3: the same cycles as max, avg rounding bit-exact") {
  const compiler::QGraph g = conv_pool(3, 4, 4, isa::PoolKind::avg, 2, 2);
  const isa::Program f = lower_and_check(g, arch8x8(), whole_input()), u = lower_and_check(g, arch8x8(), whole_input({false}));
  CHECK(count(f, Opcode::pool) == 0);
  CHECK(reg(f, isa::ConfigReg::act_pool) == 2);
  CHECK(reg(f, isa::ConfigReg::act_pool_batch) == 3);
  CHECK(first(f, Opcode::activate)[Field::rows] == 48);  // 16 pixels x 3 images
  CHECK(first(f, Opcode::write_host)[Field::rows] == 12);
  const EngineRuns rf = run_all(f, arch8x8()), ru = run_all(u, arch8x8());
  // The unfused pool: 2 + 12 pooled rows x 4 reads x 2 cycles = 98 cycles, all of it removed
  // from the end of the program (the act and everything before it are the same).
  CHECK(ru.fast.cycles - rf.fast.cycles == 98);
}

TEST_CASE("fusion chunks the accumulators in whole bands of pooled rows, and does not fuse where a band does not fit") {
  // 8 x 8 map, batch 2: 16 accumulator rows per image row, 128 per map; 64 accumulators give
  // passes of 32 rows (2 image rows).
  const compiler::QGraph g = conv_pool(2, 8, 8, isa::PoolKind::max, 2, 2);
  const isa::Program f = lower_and_check(g, arch8x8(64), whole_input()), u = lower_and_check(g, arch8x8(64), whole_input({false}));
  // 2 x 2 stride 2: one pooled row (2 image rows, 32 accumulator rows) per pass, 4 passes of 9
  // matmuls; unfused the same 4 passes of 2 image rows, then the pool.
  CHECK(count(f, Opcode::activate) == 4);
  CHECK(count(f, Opcode::pool) == 0);
  CHECK(count(f, Opcode::matmul) == 4 * 9);
  CHECK(count(u, Opcode::matmul) == 4 * 9);
  CHECK(count(u, Opcode::pool) == 1);
  // 3 x 3 stride 2 needs 3 image rows = 48 accumulator rows in one pass: more than 32, not fused.
  const compiler::QGraph wide = conv_pool(2, 8, 8, isa::PoolKind::max, 3, 2);
  const isa::Program w = lower_and_check(wide, arch8x8(64));
  CHECK(count(w, Opcode::pool) == 1);
  CHECK(!w.meta["mapping"][0].contains("fusion"));
  // Overlapping windows (2 x 2 stride 1) with passes of 2 image rows: 1 pooled row per pass, 7
  // passes, each image row but the first and last computed twice: 6 x 16 vectors x 9 tiles = 864
  // more than unfused, against 7 x 7 x 2 pooled rows x 4 = 392 UB rows the pool reads: not fused.
  CHECK(count(lower_and_check(conv_pool(2, 8, 8, isa::PoolKind::avg, 2, 1), arch8x8(64)), Opcode::pool) == 1);
  // A 16 x 16 map, batch 1, 200 accumulators: passes of 100 rows, 6 image rows; 5 pooled rows per
  // pass (image rows [0, 6), [5, 11), [10, 16)), rows 5 and 10 computed twice: 2 x 16 x 9 = 288
  // vectors more, against 15 x 15 pooled rows x 4 = 900 UB rows: fused. Unfused: passes of 6, 6
  // and 4 image rows. Either way 3 passes of 9 matmuls.
  const compiler::QGraph overlap = conv_pool(1, 16, 16, isa::PoolKind::avg, 2, 1);
  const isa::Program o = lower_and_check(overlap, arch8x8(200), whole_input()), ou = lower_and_check(overlap, arch8x8(200), whole_input({false}));
  CHECK(count(o, Opcode::pool) == 0);
  CHECK(count(o, Opcode::activate) == 3);
  CHECK(count(o, Opcode::matmul) == 3 * 9);
  CHECK(count(ou, Opcode::matmul) == 3 * 9);
  CHECK(first(o, Opcode::activate)[Field::rows] == 6 * 16);
}

TEST_CASE("random conv + pool models are bit-exact on every engine, fused and unfused") {
  std::mt19937 rng(12);
  const auto pick = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  int fused = 0;
  for (int n = 0; n < 24; ++n) {
    sim::Arch a = arch8x8(std::vector<uint64_t>{32, 64, 128, 256}[pick(0, 3)]);
    a.array_rows = std::vector<uint64_t>{4, 8, 16}[pick(0, 2)];
    a.array_cols = std::vector<uint64_t>{4, 8, 16}[pick(0, 2)];
    a.ub_bytes = 4096 * a.ub_row_bytes();
    const uint64_t batch = pick(1, 3), h = pick(4, 9), w = pick(4, 9), k = pick(1, 3), s = pick(1, 3);
    const uint64_t cin = std::vector<uint64_t>{a.array_rows, 3, 12}[pick(0, 2)], cout = pick(4, 20);
    const uint64_t kern = pick(2, 3), pad = pick(0, 1), oh = h + 2 * pad - kern + 1, ow = w + 2 * pad - kern + 1;
    if (oh < k || ow < k) continue;
    GraphBuilder b(batch);
    b.rng.seed(100 + n);
    const int x = b.input(map_shape(h, w, cin)), c = b.tensor("c", map_shape(oh, ow, cout));
    const int p = b.tensor("p", map_shape((oh - k) / s + 1, (ow - k) / s + 1, cout));
    compiler::MatmulOp m = b.matmul({whole(x)}, whole(c), kern, kern, pick(0, 1));
    m.pad = pad;
    m.func = pick(0, 1) ? isa::Func::relu : isa::Func::identity;
    b.add(m, "conv");
    b.add(compiler::PoolOp{whole(c), whole(p), pick(0, 1) ? isa::PoolKind::avg : isa::PoolKind::max, k, s}, "pool");
    b.g.output = p;
    if (pick(0, 1)) {  // a padded convolution reads the pooled map: pooled rows written one by one
      const compiler::Shape& ps = b.g.tensors[p].shape;
      const int y = b.tensor("y", map_shape(ps.h, ps.w, 8));
      compiler::MatmulOp m2 = b.matmul({whole(p)}, whole(y), 3, 3);
      m2.pad = 1;
      b.add(m2, "conv2");
      b.g.output = y;
    }
    INFO("model " << n << ": " << a.array_rows << "x" << a.array_cols << " acc " << a.acc_entries << ", batch "
                  << batch << ", " << h << "x" << w << "x" << cin << " conv " << kern << " pad " << pad << " -> "
                  << cout << ", pool " << k << " stride " << s);
    const isa::Program f = lower_and_check(b.g, a);
    lower_and_check(b.g, a, {false});
    fused += count(f, Opcode::pool) == 0;
  }
  CHECK(fused >= 8);
}

// Not run by default (the paper apps take a minute): cycles of the apps on tpu-v1, timing engine,
// with and without fusion, e.g. compiler_e2e_tests "[.measure]" -s | grep cycles.
TEST_CASE("fusion: the paper apps' cycles with and without fusion", "[.measure]") {
  const sim::Arch a = sim::arch_preset("tpu-v1");
  for (const auto& [file, batch] : std::vector<std::pair<std::string, std::optional<uint64_t>>>{
           {"tpu-v1/cnn0.toml", {}}, {"tpu-v1/cnn1.toml", {}}, {"small/lenet5.toml", 256}, {"small/inception.toml", {}},
           {"tpu-v1/mlp0.toml", {}}, {"tpu-v1/lstm0.toml", {}}}) {
    compiler::LoadOptions o;
    o.batch = batch;
    o.timing_only = true;
    const compiler::Compiled c = compiler::prepare_file(fs::path(tpusim::source_dir()) / "workloads" / file, o);
    for (bool fuse : {false, true}) {
      const isa::Program p = compiler::lower(c.graph, a, {fuse});
      const sim::RunResult r = sim::simulate(p, a, {sim::Engine::timing, 0});
      WARN(file << (fuse ? " fused" : " unfused") << " cycles " << r.cycles << ", pools " << count(p, Opcode::pool)
                << ", ub_peak_rows " << r.ub_peak_rows);
    }
  }
}

}  // namespace tpusim::test
