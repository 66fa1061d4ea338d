// The machine's top level: builds the units once, runs programs on them, gathers the counters.
#include "sim/machine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sim/debugger_hooks.h"
#include "sim/program_check.h"
#include "sim/units.h"

namespace tpusim::sim {

namespace {

// The TPU (Jouppi et al., Figure 1): control, host interface, weight path, matrix unit,
// activation unit, bound through ports. Elaborated once per process; each run resets it.
class Machine : public sc_core::sc_module {
 public:
  Context ctx;
  Hazards hazards{ctx};
  HostInterface host{"host_interface", ctx, hazards};
  WeightPath weights{"weight_path", ctx};
  MatrixUnit matrix{"matrix_unit", ctx, hazards};
  ActivationUnit activation{"activation_unit", ctx, hazards};
  ControlUnit control{"control", ctx, hazards, weights};

  explicit Machine(sc_core::sc_module_name name) : sc_module(name) {
    control.host(host);
    control.weights(weights);
    control.matrix(matrix);
    control.activation(activation);
    matrix.weights(weights);
    ctx.queues = {&host.queue(), &weights.queue(), &matrix.queue(), &activation.queue()};
    ctx.pop_listener = &control;
    ctx.matrix_retire = &matrix;
    ctx.weight_retire = &weights;
    for (Waitable& w : ctx.completed_events) ctx.add_waitable(w);
    SC_HAS_PROCESS(Machine);
    SC_METHOD(abort);
    sensitive << ctx.abort_request;
    dont_initialize();
  }
  // A run failed in the previous cycle: every process wakes and returns to its idle loop.
  void abort() {
    ctx.aborted = true;
    ctx.wake_all();
    matrix.drain();  // (its retire() clears what is left, at the next end, as it always did)
    weights.abort_drain();
  }
  void reset(ArrayModel* array) {
    ctx.reset_run();
    hazards.reset();
    host.reset();
    weights.reset();
    weights.on_shift = nullptr;
    if (ctx.engine == Engine::stepped)
      weights.on_shift = [this](const FetchedTile& f, uint64_t s) { matrix.shift_started(f, s); };
    matrix.reset(array);
    activation.reset();
    control.reset();
  }
};

Machine& machine() {
  static Machine* m = [] {
    sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
    auto* machine = new Machine("tpu");
    // Initialisation: every process runs up to its wait for a run to start.
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    return machine;
  }();
  return *m;
}

// Cycles of `spans` not covered by `cover` (both sorted, each disjoint).
uint64_t uncovered(const std::vector<Span>& spans, const std::vector<Span>& cover) {
  uint64_t total = 0;
  size_t c = 0;
  for (const Span& s : spans) {
    uint64_t len = s.end - s.begin;
    while (c < cover.size() && cover[c].end <= s.begin) ++c;
    for (size_t k = c; k < cover.size() && cover[k].begin < s.end; ++k)
      len -= std::min(s.end, cover[k].end) - std::max(s.begin, cover[k].begin);
    total += len;
  }
  return total;
}

uint64_t halt_index(const isa::Program& program) {
  for (uint64_t i = 0; i < program.code.size(); ++i)
    if (program.code[i].opcode == isa::Opcode::halt) return i;
  throw SimError(program.code.size(), fmt::format("program ends without halt (after instruction {})",
                                                  program.code.empty() ? 0 : program.code.size() - 1));
}

// What a run records, counted from the program up to halt (run_record_bytes).
struct RecordCounts {
  uint64_t instructions = 0, matmuls = 0, syncs = 0, interrupts = 0, settings = 1;  // (the reset's setting)
  uint64_t tile_uses = 0, matmul_macs = 0;
};

RecordCounts record_counts(const isa::Program& program) {
  RecordCounts n;
  for (const isa::Instruction& in : program.code) {
    ++n.instructions;
    n.matmuls += in.opcode == isa::Opcode::matmul;
    n.syncs += in.opcode == isa::Opcode::sync;
    n.interrupts += in.opcode == isa::Opcode::interrupt;
    n.settings += in.opcode == isa::Opcode::set_config;
    if (in.opcode == isa::Opcode::halt) break;
  }
  const auto entries = [&](const char* key) {
    const auto it = program.meta.find(key);
    return it != program.meta.end() && it->is_array() ? uint64_t(it->size()) : 0;
  };
  n.tile_uses = entries("tile_uses");
  n.matmul_macs = entries("matmul_macs");
  return n;
}

// The run's record vectors reserved whole (run_record_bytes): sync_act and sync_host each to the
// most either may take (the bytes counted are their sum's bound, syncs + 2 x ints: a sync holds
// once; reserved pages that are never written take no memory).
void reserve_records(Context& ctx, const RecordCounts& n) {
  ctx.matrix_spans.reserve(2 * n.matmuls);
  ctx.sync_act.reserve(n.syncs + n.interrupts);
  ctx.sync_host.reserve(n.syncs + n.interrupts);
  ctx.host_launch.reserve(n.interrupts);
  ctx.reg_values.reserve(n.settings);
}

// The weight FIFO in program order, as the reference executor sees it: a `switch` takes the
// next tile an earlier read_weights fetched. The machine would otherwise hand it a tile that a
// later read_weights fetches (or wait forever), so this is checked before the run.
void check_weight_order(const isa::Program& program, uint64_t code_size) {
  uint64_t tiles = 0;
  bool active = false;
  for (uint64_t i = 0; i < code_size; ++i) {
    const isa::Instruction& in = program.code[i];
    if (in.opcode == isa::Opcode::read_weights) tiles += in[isa::Field::tiles];
    if (in.opcode != isa::Opcode::matmul) continue;
    if (in[isa::Field::switch_weights]) {
      if (tiles == 0) throw SimError(i, describe(i, in) + ": " + kNoTileFetched);
      --tiles;
      active = true;
    } else if (!active) {
      throw SimError(i, describe(i, in) + ": " + kNoActiveTile);
    }
  }
}

// A co-simulation array (RunOptions::array) must fit the run.
void check_array_model(const ArrayModel& array, const Arch& arch, Engine engine) {
  if (engine != Engine::stepped)
    throw InputError(fmt::format("RunOptions::array is for the stepped engine, not '{}'", engine_name(engine)));
  if (array.rows() != arch.array_rows || array.cols() != arch.array_cols)
    throw InputError(fmt::format("RunOptions::array is {} x {}, the architecture's array is {} x {}", array.rows(),
                                 array.cols(), arch.array_rows, arch.array_cols));
}

std::string deadlock_message(const Context& ctx) {
  std::string why;
  for (int u = 0; u < kUnitCount; ++u)
    if (const Context::Blocked* b = ctx.blocked_now(u))
      why += (why.empty() ? "" : "; ") + b->text();
  return fmt::format("deadlock at cycle {}: {}", ctx.now(), why.empty() ? "no unit can make progress" : why);
}

void finish_counters(Context& ctx) {
  RunResult& r = ctx.result;
  MatrixCounters& m = r.matrix;
  // (Matmuls start in program order: the spans come sorted but for the rare exception.)
  const auto by_begin = [](const Span& a, const Span& b) { return a.begin < b.begin; };
  if (!std::is_sorted(ctx.matrix_spans.begin(), ctx.matrix_spans.end(), by_begin))
    std::sort(ctx.matrix_spans.begin(), ctx.matrix_spans.end(), by_begin);
  // Non-matrix: the cycles no matrix span covers (spans never overlap: each is a matmul
  // streaming or waiting for its tile, one matmul at a time).
  uint64_t covered = 0, until = 0;
  for (const Span& s : ctx.matrix_spans) {
    covered += s.end - std::max(s.begin, std::min(until, s.end));
    until = std::max(until, s.end);
  }
  m.non_matrix = r.cycles - covered;
  m.raw_stall = uncovered(ctx.sync_act, ctx.matrix_spans);
  m.input_stall = uncovered(ctx.sync_host, ctx.matrix_spans);
  m.host_launch = uncovered(ctx.host_launch, ctx.matrix_spans);
  r.unit_busy[int(isa::Unit::control)] = r.cycles;
  r.timeline = std::move(ctx.timeline);
}

}  // namespace

std::string_view engine_name(Engine e) {
  switch (e) {
    case Engine::fast: return "fast";
    case Engine::stepped: return "stepped";
    default: return "timing";
  }
}

Engine parse_engine(std::string_view name) {
  for (Engine e : {Engine::fast, Engine::stepped, Engine::timing})
    if (engine_name(e) == name) return e;
  throw InputError(fmt::format("unknown engine '{}' (one of: fast stepped timing)", name));
}

TileUse tile_use(const uint8_t* tile, uint64_t rows, uint64_t cols) {
  TileUse u;
  for (uint64_t k = rows; k-- > 0;) {
    const uint8_t* row = tile + k * cols;
    if (std::any_of(row, row + cols, [](uint8_t b) { return b != 0; })) {
      u.rows = uint32_t(k + 1);
      break;
    }
  }
  // Columns: scan each used row only right of the widest column found so far.
  for (uint64_t k = 0; k < u.rows && u.cols < cols; ++k) {
    const uint8_t* row = tile + k * cols;
    for (uint64_t j = cols; j-- > u.cols;)
      if (row[j]) {
        u.cols = uint32_t(j + 1);
        break;
      }
  }
  return u;
}

std::vector<std::pair<std::string, uint64_t>> run_record_bytes(const isa::Program& program) {
  const RecordCounts n = record_counts(program);
  const auto mul = [](uint64_t a, uint64_t b) {
    uint64_t p = 0;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
  };
  return {{fmt::format("timeline of {} instructions", n.instructions),
           mul(n.instructions, sizeof(InstructionTiming) + sizeof(uint32_t))},  // timeline, regs_at
          {fmt::format("matrix spans of {} matmuls", n.matmuls), mul(2 * n.matmuls, sizeof(Span))},
          {"issue holds", mul(n.syncs + 3 * n.interrupts, sizeof(Span))},      // sync_*, host_launch
          {"setcfg settings", mul(n.settings, sizeof(Context::IssueRegs))},
          {"tile and matmul records",
           mul(n.tile_uses, sizeof(isa::WeightTileUse)) + mul(n.matmul_macs, sizeof(isa::MatmulMacs))}};
}

// One machine per process: MachineRun and simulate() refuse to start a second run on it.
bool run_in_progress = false;

MachineRun::MachineRun(const isa::Program& program, const Arch& arch, const RunOptions& options)
    : options_(options) {
  if (run_in_progress) throw std::logic_error("a run is already in progress on this process's machine");
  validate(arch);
  if (std::string why = program_arch_mismatch(program.arch, arch); !why.empty()) throw InputError(why);
  if (std::string why = program_driver_mismatch(program, arch); !why.empty()) throw InputError(why);
  check_static(program, arch);
  const uint64_t code_size = halt_index(program) + 1;
  check_weight_order(program, code_size);
  if (options.array) check_array_model(*options.array, arch, options.engine);
  Machine& m = machine();
  Context& ctx = m.ctx;
  ctx.program = &program;
  ctx.tile_uses = isa::tile_uses(program, arch.array_rows, arch.array_cols);
  if (program.weights_not_computed && ctx.tile_uses.empty())
    throw InputError("a program without its weight image's bytes needs meta.tile_uses");
  ctx.matmul_macs = isa::matmul_macs(program, arch.array_rows, arch.array_cols);
  ctx.arch = arch;
  ctx.engine = options.engine;
  ctx.trace = options.trace;
  ctx.progress = options.progress;
  ctx.code_size = code_size;
  if (program.weights_not_computed && options.engine != Engine::timing)
    throw InputError(fmt::format("a timing-only compile's program (its weight image not computed) runs on the timing "
                                 "engine only, not the {} engine",
                                 engine_name(options.engine)));
  if (options.engine != Engine::timing) state_ = make_state(program, arch);
  ctx.state = state_ ? &*state_ : nullptr;
  ctx.period = sc_core::sc_time(1e6 / arch.clock_mhz, sc_core::SC_PS);
  if (ctx.period.value() == 0) ctx.period = sc_core::sc_time::from_value(1);
  m.reset(options.array);
  reserve_records(ctx, record_counts(program));
  ctx.base = sc_core::sc_time_stamp();
  const uint64_t reach = (sc_core::sc_max_time().value() - ctx.base.value()) / ctx.period.value();
  if (reach <= 2 * Context::kHorizonMargin)
    throw InputError(
        fmt::format("architecture '{}': clock_mhz = {} leaves this process too little simulated time "
                    "({} cycles) for a run",
                    arch.name, arch.clock_mhz, reach));
  ctx.horizon = reach - Context::kHorizonMargin;
  ctx.ahead_limit = options.max_cycles ? options.max_cycles : UINT64_MAX;
  ctx.start_event.notify(sc_core::SC_ZERO_TIME);
  run_in_progress = true;
}

MachineRun::~MachineRun() {
  if (!finished_) unwind();
}

void MachineRun::run_to_end() {
  const Context& ctx = machine().ctx;
  const sc_core::sc_time limit =
      options_.max_cycles ? sc_core::sc_time::from_value(ctx.period.value() * (options_.max_cycles + 1))
                          : sc_core::sc_max_time() - ctx.base - ctx.period;
  const auto wall = std::chrono::steady_clock::now();
  const sc_core::sc_time stop = sc_core::sc_time_stamp() + limit;
  sc_core::sc_start(limit, sc_core::SC_EXIT_ON_STARVATION);
  // Stopped (a deadlock, an error) with matmul ends still to come: the kernel runs on through
  // each of them as it did when every end had its event, so that the run stops at the same
  // cycle (the deadlock's message names it) or at the cycle limit.
  Machine& m = machine();
  if (!ctx.halted && (m.matrix.retire_pending() || m.weights.drain_pending()) && sc_core::sc_time_stamp() < stop) {
    m.matrix.drain();
    m.weights.drain();
    sc_core::sc_start(stop - sc_core::sc_time_stamp(), sc_core::SC_EXIT_ON_STARVATION);
  }
  wall_ += std::chrono::steady_clock::now() - wall;
}

void MachineRun::run_to_cycle(uint64_t cycle) {
  const Context& ctx = machine().ctx;
  const auto wall = std::chrono::steady_clock::now();
  const sc_core::sc_time target = ctx.at(cycle);
  // sc_start(d) stops at the target time before running what is due then; the delta cycles of
  // that time follow one by one (halt pauses the kernel: the run stops there).
  if (sc_core::sc_time_stamp() < target && !over())
    sc_core::sc_start(target - sc_core::sc_time_stamp(), sc_core::SC_RUN_TO_TIME);
  while (!over() && sc_core::sc_pending_activity_at_current_time()) sc_core::sc_start(sc_core::SC_ZERO_TIME);
  // The array as every cycle before this one left it (the debugger looks at it: MatrixUnit::catch_up).
  Machine& m = machine();
  if (m.matrix.stepped_array()) m.matrix.catch_up(ctx.now());
  wall_ += std::chrono::steady_clock::now() - wall;
}

uint64_t MachineRun::cycle() const { return machine().ctx.now(); }

bool MachineRun::over() const {
  const Context& ctx = machine().ctx;
  return ctx.halted || ctx.error || ctx.aborted || !sc_core::sc_pending_activity() ||
         (options_.max_cycles && ctx.now() > options_.max_cycles);
}

uint64_t MachineRun::next_activity() const {
  const Context& ctx = machine().ctx;
  if (!sc_core::sc_pending_activity()) return UINT64_MAX;
  const sc_core::sc_time at = sc_core::sc_time_stamp() + sc_core::sc_time_to_pending_activity();
  const uint64_t p = ctx.period.value(), since = at.value() - ctx.base.value();
  return std::max(ctx.now() + 1, (since + p - 1) / p);
}

MachineUnits MachineRun::units() const {
  Machine& m = machine();
  return {m.ctx, m.weights, m.matrix};
}

// Unwinds every process back to its idle loop, ready for the next run.
void MachineRun::unwind() {
  Context& ctx = machine().ctx;
  ctx.aborted = true;
  ctx.wake_all();
  // (Every wait goes through Context, which returns false once aborted: no process schedules
  // anything after this, so the kernel starves as soon as all of them wait for the next run.)
  sc_core::sc_start(sc_core::sc_max_time() - sc_core::sc_time_stamp(), sc_core::SC_EXIT_ON_STARVATION);
  finished_ = true;
  run_in_progress = false;
}

RunResult MachineRun::finish() {
  Context& ctx = machine().ctx;
  if (!ctx.halted && !ctx.error) {
    ctx.error_index = ctx.next_issue;
    // Stopped with events still pending: the cycle limit; with none: nothing can ever happen.
    ctx.error =
        !sc_core::sc_pending_activity() ? deadlock_message(ctx)
        : options_.max_cycles
            ? fmt::format("the program did not halt within --max-cycles {} (instruction {} was issuing)",
                          options_.max_cycles, ctx.next_issue)
            : fmt::format(
                  "the program did not halt by cycle {}, the last a run can reach at clock_mhz = {} "
                  "(instruction {} was issuing)",
                  ctx.horizon, ctx.arch.clock_mhz, ctx.next_issue);
  }
  unwind();
  if (ctx.error) throw SimError(*ctx.error_index, *ctx.error, ctx.error_cycle);
  finish_counters(ctx);
  RunResult r = std::move(ctx.result);
  r.host_seconds = std::chrono::duration<double>(wall_).count();
  r.state = std::move(state_);
  if (r.state) r.state->weights = std::span<const uint8_t>(ctx.program->weights);
  return r;
}

RunResult simulate(const isa::Program& program, const Arch& arch, const RunOptions& options) {
  MachineRun run(program, arch, options);
  run.run_to_end();
  return run.finish();
}

}  // namespace tpusim::sim
