// The sweep's point order (tools/sweep/schedule.h): longest first, a model's points on the worker
// that prepared it unless sharing them pays, and every point handed out exactly once.
#include "tools/sweep/schedule.h"

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "compiler/compile.h"
#include "compiler/lower_options.h"
#include "sim/parallel.h"
#include "tools/sweep/spec.h"
#include "tools/source_dir.h"

using namespace tpusim::tools::sweep;

namespace {

// Points with hand-set costs: (model, run seconds, preparation seconds).
struct Fixture {
  std::vector<Point> points;
  std::vector<PointCost> costs;
  Fixture(std::initializer_list<std::tuple<const char*, double, double>> spec) {
    points.resize(spec.size());
    for (const auto& [model, run, prepare] : spec) {
      points[costs.size()].index = costs.size();
      costs.push_back({run, prepare, model});
    }
  }
  std::vector<const Point*> todo() const {
    std::vector<const Point*> t;
    for (const Point& p : points) t.push_back(&p);
    return t;
  }
};

}  // namespace

TEST_CASE("schedule: the longest point first, then the dearest of each worker's models") {
  // Model a (0.01 s to prepare): points of 1.0, 0.2 and 0.1 s; model b (0.5 s to prepare): two of
  // 0.05 s.
  Fixture f({{"a", 0.2, 0.01}, {"b", 0.05, 0.5}, {"a", 1.0, 0.01}, {"b", 0.05, 0.5}, {"a", 0.1, 0.01}});
  Scheduler s(f.todo(), f.costs, 2);
  // Worker 0: the 1.0 s point (1.01 with a's preparation).
  CHECK(s.next(0, false)->index == 2);
  // Worker 1: a is worker 0's; b's first point (0.55 with its preparation; ties in point order).
  CHECK(s.next(1, true)->index == 1);
  // Worker 1 again: its own model's point before any of a's.
  CHECK(s.next(1, true)->index == 3);
  // Then a's 0.2 s point: preparing a here (0.01 s) costs less than the 0.3 s left of a.
  CHECK(s.next(1, true)->index == 0);
  CHECK(s.next(0, true)->index == 4);
  CHECK(s.empty());
  CHECK(s.next(0, false) == nullptr);
}

TEST_CASE("schedule: a model dear to prepare stays on its worker while it runs") {
  Fixture f({{"a", 1.0, 0.01}, {"b", 0.05, 0.5}, {"b", 0.05, 0.5}});
  Scheduler s(f.todo(), f.costs, 2);
  CHECK(s.next(0, false)->index == 0);
  CHECK(s.next(1, true)->index == 1);
  // Worker 0: only b's point 2 is left, b is worker 1's and would cost 0.5 s to prepare here,
  // more than the 0.05 s left of it: worker 0 waits while worker 1 runs.
  CHECK(s.next(0, true) == nullptr);
  CHECK_FALSE(s.empty());
  // With no other worker running, it is given anyway (a sweep never stalls).
  CHECK(s.next(0, false)->index == 2);
  CHECK(s.empty());
}

TEST_CASE("schedule: a cheap model's points are shared when that shortens the sweep") {
  // One model: four 1 s points, 0.1 s to prepare: the second worker takes them as well.
  Fixture f({{"m", 1.0, 0.1}, {"m", 1.0, 0.1}, {"m", 1.0, 0.1}, {"m", 1.0, 0.1}});
  Scheduler s(f.todo(), f.costs, 2);
  std::set<uint64_t> seen;
  seen.insert(s.next(0, false)->index);
  const Point* p = s.next(1, true);  // 0.1 + 1.0 < the 3.0 s left of m: shared
  REQUIRE(p);
  seen.insert(p->index);
  seen.insert(s.next(0, true)->index);
  seen.insert(s.next(1, true)->index);
  CHECK(seen == std::set<uint64_t>{0, 1, 2, 3});
  CHECK(s.empty());
}

TEST_CASE("schedule: a point put back (its worker died) is handed out again, the worker starts afresh") {
  Fixture f({{"a", 0.3, 0.5}, {"a", 0.2, 0.5}});
  Scheduler s(f.todo(), f.costs, 2);
  const Point* p = s.next(0, false);
  CHECK(p->index == 0);
  CHECK(s.next(1, true) == nullptr);  // a is worker 0's; 0.5 + 0.2 > the 0.2 s left of it
  s.put_back(p);
  s.restart(0);  // worker 0 died: it holds nothing now
  CHECK(s.next(1, false)->index == 0);
  CHECK(s.next(1, true)->index == 1);  // worker 1 holds a now
  CHECK(s.empty());
}

TEST_CASE("schedule: estimates from the model's shapes order the paper apps' points") {
  const Spec spec = load_spec(std::string(tpusim::source_dir()) + "/workloads/sweeps/paper-matrix.toml");
  std::vector<const Point*> todo;
  for (const Point& p : spec.points) todo.push_back(&p);
  const std::vector<PointCost> costs = estimate_costs(spec, todo);
  REQUIRE(costs.size() == todo.size());
  // The dearest point is CNN1 on the 64 x 64 array with 256 accumulator rows (1.15M instructions).
  size_t top = 0;
  for (size_t i = 0; i < costs.size(); ++i)
    if (costs[i].run > costs[top].run) top = i;
  CHECK(todo[top]->workload->name == "cnn1");
  CHECK(todo[top]->arch.array_rows == 64);
  CHECK(todo[top]->arch.acc_entries == 256);
  // LSTM0 and LSTM1 need their data for a timing compile (their residual adds): dearer to prepare
  // than the CNNs, whose timing compiles compute none.
  double lstm0 = 0, cnn1 = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (todo[i]->workload->name == "lstm0") lstm0 = costs[i].prepare;
    if (todo[i]->workload->name == "cnn1") cnn1 = costs[i].prepare;
    CHECK(costs[i].model.find(todo[i]->workload->path.string()) == 0);
  }
  CHECK(lstm0 > 4 * cnn1);
  // Estimated on sim::parallel_for's threads: the same figures on one thread as on three.
  tpusim::sim::set_threads(1);
  const std::vector<PointCost> one = estimate_costs(spec, todo);
  tpusim::sim::set_threads(3);
  const std::vector<PointCost> three = estimate_costs(spec, todo);
  tpusim::sim::set_threads(0);
  for (size_t i = 0; i < costs.size(); ++i) {
    CHECK(one[i].run == three[i].run);
    CHECK(one[i].pieces == three[i].pieces);
    CHECK(one[i].model == three[i].model);
  }
}

TEST_CASE("schedule: points share a model key unless their batch or concat_inplace differ") {
  // 2 concat_inplace x 2 pack x 2 batches = 8 points of one workload: pack acts only in the
  // lowering (one prepared model serves both values), concat_inplace changes the quantized graph
  // and the batch the model: 4 keys, 2 points each.
  const Spec spec = parse_spec(R"(
[sweep]
name = "keys"
engine = "timing"
workloads = ["../small/lenet5.toml"]
[grid]
batch = [1, 2]
mapper.pack = ["on", "off"]
mapper.concat_inplace = ["on", "off"]
)",
                               std::string(tpusim::source_dir()) + "/workloads/sweeps/keys.toml");
  std::vector<const Point*> todo;
  for (const Point& p : spec.points) todo.push_back(&p);
  REQUIRE(todo.size() == 8);
  const std::vector<PointCost> costs = estimate_costs(spec, todo);
  std::map<std::string, int> per_key;
  for (size_t i = 0; i < todo.size(); ++i) ++per_key[costs[i].model];
  CHECK(per_key.size() == 4);
  for (const auto& [key, n] : per_key) CHECK(n == 2);
  CHECK(model_key("m.toml", 2, true) == "m.toml\n2\nconcat_inplace");
  CHECK(model_key("m.toml", std::nullopt, false) == "m.toml\n");
}

TEST_CASE("schedule: a point queued behind a busy worker is one of its models', longest first") {
  // Model a (cheap to prepare): points of 1.0, 0.3 and 0.2 s; model b: 0.5 and 0.4 s; a program: 0.1 s.
  Fixture f({{"a", 1.0, 0.01}, {"b", 0.5, 0.01}, {"a", 0.3, 0.01}, {"b", 0.4, 0.01}, {"a", 0.2, 0.01}, {"", 0.1, 0}});
  Scheduler s(f.todo(), f.costs, 2);
  // (Each queued point is asked for as if behind the 0.1 s point 5: the points left after it keep
  // the other worker busy for that long, but for the last, below.)
  const Point* short_point = &f.points[5];
  CHECK(s.next(0, false)->index == 0);  // worker 0 holds a
  // Queued behind worker 0: a's next point, not b's longer one (b is nobody's yet: which worker
  // prepares it is decided when one is idle).
  CHECK(s.queued(0, short_point)->index == 2);
  CHECK(s.next(1, true)->index == 1);  // worker 1 holds b
  CHECK(s.queued(1, short_point)->index == 3);
  CHECK(s.queued(1, short_point)->index == 5);  // b has no point left; a program needs no model
  CHECK(s.queued(1, short_point) == nullptr);   // only a's point 4 is left: worker 0's
  // Queued, it would leave worker 1 nothing to do while worker 0 runs its point: it waits for an
  // idle worker (worker 0's: a's last point stays with the worker that prepared a).
  CHECK(s.queued(0, short_point) == nullptr);
  CHECK(s.next(1, true) == nullptr);
  CHECK(s.next(0, true)->index == 4);
  CHECK(s.empty());
  CHECK(s.queued(0, short_point) == nullptr);
}

TEST_CASE("schedule: nothing is queued behind a long point when the other workers would run out of work") {
  // Programs of 1.0, 0.3 and 0.2 s on 2 workers. Queueing the 0.3 s point behind the 1.0 s one
  // would end the sweep at 1.3 s, worker 1 idle after 0.2 s; unqueued, worker 1 runs 0.3 then
  // 0.2, and the sweep ends at 1.0 s.
  Fixture f({{"", 1.0, 0}, {"", 0.3, 0}, {"", 0.2, 0}});
  Scheduler s(f.todo(), f.costs, 2);
  CHECK(s.next(0, false)->index == 0);
  CHECK(s.queued(0, &f.points[0]) == nullptr);  // 0.3 + 0.2 left < 1.0 x 1 other worker
  CHECK(s.next(1, true)->index == 1);
  CHECK(s.queued(1, &f.points[1]) == nullptr);  // 0 left after the 0.2 s point < 0.3
  CHECK(s.queued(0, &f.points[0]) == nullptr);
  CHECK(s.next(1, true)->index == 2);
  CHECK(s.empty());
  // One worker: nobody else can idle, so its next point is always queued.
  Scheduler one(f.todo(), f.costs, 1);
  CHECK(one.next(0, false)->index == 0);
  CHECK(one.queued(0, &f.points[0])->index == 1);
  CHECK(one.queued(0, &f.points[0])->index == 2);
}

// The pieces a point's batch runs in and the activates its lowering emits, counted from the
// model's shapes (estimate_costs), against the program a worker compiles for the point.
namespace {
struct ProgramCounts {
  uint64_t pieces = 1, activates = 0, packed = 0;  // packed: layers the mapping says are packed
  size_t as_parts = 0;                              // concats kept as parts (compiler::place_concats)
};
ProgramCounts compiled_counts(const Point& p) {
  tpusim::compiler::LoadOptions o;
  o.timing_only = true;
  o.batch = p.batch;
  o.mapper = p.mapper;
  tpusim::compiler::Compiled m = tpusim::compiler::prepare_file(p.workload->path, o);
  tpusim::compiler::LowerOptions mapper = p.mapper;
  tpusim::compiler::place_concats(m, p.arch, mapper);  // (concats kept as parts where the point needs it)
  tpusim::compiler::lower_for(m, p.arch, mapper);
  ProgramCounts c;
  for (const tpusim::isa::Instruction& in : m.program.code) c.activates += in.opcode == tpusim::isa::Opcode::activate;
  const uint64_t piece = m.program.meta.value("batch_piece", uint64_t{0});
  if (piece) c.pieces = (m.model.batch + piece - 1) / piece;
  for (const auto& layer : m.program.meta.at("mapping")) c.packed += layer.contains("packing");
  c.as_parts = mapper.concats_as_parts.size();
  return c;
}

Spec one_workload(const std::string& workload, const std::string& sides) {
  return parse_spec("[sweep]\nname = \"counts\"\nengine = \"timing\"\nworkloads = [\"../" + workload +
                        "\"]\n[grid.array]\narray_rows = [" + sides + "]\narray_cols = [" + sides + "]\n",
                    std::string(tpusim::source_dir()) + "/workloads/sweeps/counts.toml");
}
}  // namespace

TEST_CASE("schedule: the pieces and activates counted from the shapes are the compiled program's") {
  // Dense layers, convolutions packed and not (on the wider arrays narrow convolutions pack
  // several pixels a vector, one activate per group of each output row): every activate counted.
  for (const char* workload : {"tpu-v1/mlp0.toml", "small/tiny_cnn.toml", "small/lenet5.toml"}) {
    const Spec spec = one_workload(workload, "64, 256, 512, 1024");
    REQUIRE(spec.points.size() == 4);
    for (const Point& p : spec.points) {
      INFO(workload << " on " << p.arch.array_rows);
      const PointCost c = estimate_costs(spec, {&p}).at(0);
      const ProgramCounts real = compiled_counts(p);
      CHECK(c.pieces == 1);
      CHECK(real.pieces == 1);
      CHECK(c.activates == double(real.activates));
    }
  }
  // CNN1 (batch 32): 2 pieces on 256 x 256, 3 on 512 x 512, 4 on 1024 x 1024 (a piece of few
  // samples leaves a wide array's UB rows mostly empty), as the lowering's own search finds; its
  // packed convolutions' activates on the wide arrays, 9,516 and 12,980 counted, are most of the
  // program's (10,543 and 14,528; 2,226 on 256 x 256): the scheduler no longer takes those points
  // for a fifth of their time.
  const Spec spec = one_workload("tpu-v1/cnn1.toml", "256, 512, 1024");
  REQUIRE(spec.points.size() == 3);
  const uint64_t pieces[] = {2, 3, 4};
  for (size_t i = 0; i < 3; ++i) {
    const Point& p = spec.points[i];
    INFO("cnn1 on " << p.arch.array_rows);
    const PointCost c = estimate_costs(spec, {&p}).at(0);
    const ProgramCounts real = compiled_counts(p);
    CHECK(real.pieces == pieces[i]);
    CHECK(c.pieces == pieces[i]);
    if (i > 0) {
      CHECK(c.activates <= double(real.activates));
      CHECK(c.activates >= 0.85 * double(real.activates));
    }
  }
}

// Points of `workloads` on the machines of `points` (the [[points]] tables' lines), for the tests
// below.
namespace {
Spec machines(const std::string& workloads, const std::string& points) {
  return parse_spec("[sweep]\nname = \"machines\"\nengine = \"timing\"\nworkloads = [" + workloads + "]\n" + points,
                    std::string(tpusim::source_dir()) + "/workloads/sweeps/machines.toml");
}
}  // namespace

TEST_CASE("schedule: the pieces are div_up(batch, piece), as lower() runs them (batch 10: pieces of 2 are 5)") {
  // mnist_mlp at batch 10 in a unified buffer of 8 KiB (32 rows, its per-column tables among
  // them), which holds its tensors for 2 samples, not 3. Any count of 5 to 9 pieces gives
  // pieces of 2, and the batch runs in 5 of them, whichever count the search tried (the sweep's
  // own copy of the search once reported the 6 it had tried).
  const Spec spec = machines("\"../small/mnist_mlp.toml\"", "[[points]]\nbatch = 10\nub_bytes = 8192\n");
  REQUIRE(spec.points.size() == 1);
  const Point& p = spec.points[0];
  const PointCost c = estimate_costs(spec, {&p}).at(0);
  const ProgramCounts real = compiled_counts(p);
  CHECK(real.pieces == 5);
  CHECK(c.pieces == 5);
}

TEST_CASE("schedule: the estimate takes lower()'s pieces and packing on odd machines") {
  // Non-square arrays (packing choices differ from a square one's: P x N within array_cols, U x C
  // within array_rows), unified buffers too small for the whole batch (concats' branches live
  // together: inception), few accumulator rows, and the mapper's switches, which the estimate must
  // read as lower() does. Pieces and packing are the compiler's own functions (compiler/lower.h:
  // pieces, packing_for): a copy of either rule that drifts fails here.
  const Spec spec = machines(
      "\"../small/tiny_cnn.toml\", \"../small/lenet5.toml\", \"../small/inception.toml\", \"../small/mnist_mlp.toml\"",
      "[[points]]\narray_rows = 64\narray_cols = 256\n"
      "[[points]]\narray_rows = 256\narray_cols = 32\n"
      "[[points]]\narray_rows = 32\narray_cols = 128\nub_bytes = 65536\nbatch = 16\n"
      "[[points]]\narray_rows = 128\narray_cols = 64\nub_bytes = 131072\nbatch = 12\nacc_entries = 512\n"
      "[[points]]\nbatch = 10\nacc_entries = 1024\nub_bytes = 262144\n"
      "[[points]]\narray_rows = 64\narray_cols = 256\nbatch = 16\nacc_entries = 768\nmapper.pack = \"off\"\n"
      "[[points]]\narray_rows = 64\narray_cols = 128\nub_bytes = 98304\nbatch = 9\nmapper.dense = \"off\"\n");
  REQUIRE(spec.points.size() == 28);
  uint64_t in_pieces = 0, packed = 0;
  for (const Point& p : spec.points) {
    INFO(describe_key(p.key));
    const PointCost c = estimate_costs(spec, {&p}).at(0);
    const ProgramCounts real = compiled_counts(p);
    CHECK(c.pieces == real.pieces);
    CHECK(c.packed == real.packed);
    in_pieces += real.pieces > 1;
    packed += real.packed > 0;
  }
  // (The machines above do exercise both: the batch in pieces, convolutions packed.)
  CHECK(in_pieces >= 8);
  CHECK(packed >= 8);
}

TEST_CASE("schedule: the estimate takes lower()'s accumulator budget") {
  // tiny_cnn (batch 8): conv1's output is 12 x 12 x 8 = 1,152 accumulator rows. With 1,536
  // accumulator rows it fits them all: one pass per N tile (compiler::acc_budget: all of them for
  // an output that fits), not two of half (768: 8 output rows of 96); with 1,024 it does not: passes
  // of at most 512 rows, 5 output rows each, 3 of them. Packed or not, the activates counted are
  // the program's (a copy that always took half, or all, would count others). Input streaming off:
  // its cuts (compiler/lower.cpp, paying_cuts) add chunks the estimate does not count (unpacked
  // at 1,536 rows, conv1 in 2 chunks).
  const Spec spec = machines("\"../small/tiny_cnn.toml\"",
                             "[set]\nmapper.fuse = \"off\"\nmapper.stream = \"off\"\n[grid]\nacc_entries = [1536, 1024]\nmapper.pack = [\"on\", \"off\"]\n");
  REQUIRE(spec.points.size() == 4);
  for (const Point& p : spec.points) {
    INFO(describe_key(p.key));
    const PointCost c = estimate_costs(spec, {&p}).at(0);
    const ProgramCounts real = compiled_counts(p);
    CHECK(c.pieces == 1);
    CHECK(c.activates == double(real.activates));
  }
}

TEST_CASE("schedule: a point that keeps a concat as parts is costed as the model it runs") {
  // small/inception at batch 1 on 64 x 64 with 16 KiB: its concats written in place would be held
  // in host memory, so the worker keeps them as parts (compiler::concats_kept_as_parts) and runs;
  // with 24 MiB they stay in place (tests/sweep/data/concat_fallback.toml). The estimate once
  // costed the 16 KiB point as one that fails (0.05 s, nothing counted: no packed layer, no
  // activate); now it counts the program the worker lowers: its pieces, its 6 packed layers, and
  // its activates as the in-place point's (162 and 161 counted, the programs' 190 and 189: both
  // miss the same 28, pools' and concats' copies; the parts' program has one activate more).
  const Spec spec = machines("\"../small/inception.toml\"",
                             "[set]\narray_rows = 64\narray_cols = 64\nbatch = 1\n[grid]\nub_bytes = [\"16KiB\", \"24MiB\"]\n");
  REQUIRE(spec.points.size() == 2);
  std::vector<PointCost> costs;
  std::vector<ProgramCounts> reals;
  for (const Point& p : spec.points) {
    INFO(describe_key(p.key));
    const PointCost c = estimate_costs(spec, {&p}).at(0);
    const ProgramCounts real = compiled_counts(p);
    CHECK(real.as_parts == (p.arch.ub_bytes == 16384 ? 2 : 0));
    CHECK(c.pieces == real.pieces);
    CHECK(c.packed == real.packed);
    CHECK(real.packed == 6);
    reals.push_back(real);
    costs.push_back(c);
  }
  CHECK(costs[0].activates == 162);
  CHECK(costs[0].activates - costs[1].activates == double(reals[0].activates) - double(reals[1].activates));
}
