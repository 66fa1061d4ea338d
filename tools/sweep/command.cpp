// tpusim sweep, tpusim sweep merge and the hidden tpusim sweep worker (docs/sweeps.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "compiler/model.h"
#include "isa/error.h"
#include "isa/file_io.h"
#include "isa/text.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/sweep/progress.h"
#include "tools/sweep/store.h"
#include "tools/sweep/workers.h"
#include "tools/source_dir.h"

namespace fs = std::filesystem;

namespace tpusim::tools {

namespace {

using namespace sweep;

// Replaces `path` in one step (a reader never sees half a file).
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    errno = 0;
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.flush())  // the file named, with the system's reason (through TMP, renamed when written)
      throw InputError(fmt::format("{}: cannot write: {} (through {})", path.string(),
                                   errno ? std::strerror(errno) : "write failed", tmp.filename().string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InputError(fmt::format("{}: cannot write: {}", path.string(), ec.message()));
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string python_exe(const std::string& given) {
  // Debian's python3-matplotlib belongs to /usr/bin/python3, which a python3 earlier in PATH may not see.
  return !given.empty() ? given : fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

void plot(const std::string& csv, const std::string& prefix, const std::string& python) {
  const std::string script = std::string(tpusim::source_dir()) + "/scripts/plot.py";
  const std::string cmd = fmt::format("{} {} sweep {} --out {}", python_exe(python), shell_quote(script),
                                      shell_quote(csv), shell_quote(prefix));
  if (std::system(cmd.c_str()) != 0)
    throw InputError(
        fmt::format("plot: `{}` failed (needs python3-matplotlib: scripts/install-deps.sh)", cmd));
}

std::string describe(const Point& p) {
  std::string out = fmt::format("{:>6}  {:<12} {}", p.index, p.workload->name, sim::machine_name(p.arch));
  if (p.batch) out += fmt::format(" batch={}", *p.batch);
  if (const std::string m = compiler::describe(p.mapper); !m.empty()) out += fmt::format(", mapper {}", m);
  return out;
}

// Ctrl-C and SIGTERM (Slurm's time limit, scancel) stop the sweep between points: the signal's
// number, 0 while none came.
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }

// Catches SIGINT, SIGTERM and SIGHUP while it lives (without SA_RESTART, so that poll wakes up).
class StopSignals {
 public:
  StopSignals() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3]{};
};

struct Outputs {
  fs::path csv, db, jsonl;
};

Outputs outputs(const std::string& csv, const std::string& db, const std::string& jsonl) {
  Outputs o{csv, db, jsonl};
  if (o.csv.empty()) throw InputError("sweep: -o RESULTS.csv is required");
  if (o.db.empty()) o.db = fs::path(csv).replace_extension(".db");
  if (o.jsonl.empty()) o.jsonl = fs::path(csv).replace_extension(".jsonl");
  if (o.csv == o.db || o.csv == o.jsonl || o.db == o.jsonl)
    throw InputError(
        fmt::format("sweep: -o {}: the CSV, database and JSON Lines files need different names", csv));
  return o;
}

}  // namespace

int cmd_sweep(const SweepArgs& a) {
  if (a.spec.empty()) throw InputError("sweep: a spec is required (see tpusim sweep --help, docs/sweeps.md)");
  Spec spec = load_spec(a.spec);
  spec.full_compile = a.full_compile;
  const Shard shard = a.shard.empty() ? Shard{} : parse_shard(a.shard);
  std::vector<const Point*> mine;
  for (const Point& p : spec.points)
    if (in_shard(p, shard)) mine.push_back(&p);
  if (a.dry_run) {
    fmt::print("{}: {} points ({} workloads, engine {}){}{}\n", spec.path.string(), spec.points.size(),
               spec.workloads.size(), sim::engine_name(spec.engine),
               spec.duplicates ? fmt::format(", {} duplicates dropped", spec.duplicates) : "",
               shard.count > 1
                   ? fmt::format("; shard {}/{}: {} points", shard.index, shard.count, mine.size())
                   : "");
    for (const Point* p : mine) fmt::print("{}\n", describe(*p));
    return 0;
  }
  const Outputs out = outputs(a.output, a.db, a.jsonl);
  // Every file the sweep reads: the spec, its workloads (with the .npy files they name) and its
  // [sweep] arch file (`-o mlp.toml` for `-o mlp.csv` wrote the results over the model description).
  std::vector<std::string> inputs = {a.spec, spec.arch_file.string()};
  for (const Workload& w : spec.workloads) compiler::append_model_files(inputs, {w.path.string()});
  for (const auto& [flag, f] : {std::pair{"-o", out.csv}, std::pair{a.db.empty() ? "-o" : "--db", out.db},
                                std::pair{a.jsonl.empty() ? "-o" : "--jsonl", out.jsonl}})
    io::refuse_input_as_output(f.string(), flag, inputs);
  // Each output's folder exists: -o's first (the database and JSON Lines go beside it unless given),
  // so the message names the file the user gave.
  for (const auto& [flag, f] : {std::pair{"-o", out.csv}, std::pair{a.db.empty() ? "-o" : "--db", out.db},
                                std::pair{a.jsonl.empty() ? "-o" : "--jsonl", out.jsonl}}) {
    std::error_code ec;
    const fs::path dir = fs::absolute(f, ec).parent_path();
    if (!fs::is_directory(dir, ec))
      throw InputError(fmt::format("{}: cannot write: no folder {} ({})", f.string(), dir.string(), flag));
  }
  const io::FileLock lock(out.db,
                          "another sweep is writing these results now; wait for it to finish, or give this "
                          "one another -o (a finished or killed sweep holds no lock: --resume it)");
  const unsigned jobs = a.jobs ? a.jobs : available_cpus();
  prestart_workers(static_cast<unsigned>(std::min<size_t>(jobs, mine.size())));
  ResultStore store(out.db);
  if (!a.resume && !a.retry_failed && fs::exists(out.db) && store.meta().size() && store.count() > 0)
    throw InputError(
        fmt::format("{}: already holds {} finished points; pass --resume to finish the sweep, or "
                    "remove it to start over",
                    out.db.string(), store.count()));
  store.attach_spec(spec);
  if (a.retry_failed) {
    std::set<std::string> keys;
    for (const Point* p : mine) keys.insert(p->key);
    if (const uint64_t n = store.forget_failed(keys))
      fmt::print(stderr, "sweep {}: running {} failed point{} again (--retry-failed)\n", spec.name, n,
                 n == 1 ? "" : "s");
  }
  const std::set<std::string> finished = store.finished_keys();
  std::vector<const Point*> todo;
  for (const Point* p : mine)
    if (!finished.contains(p->key)) todo.push_back(p);
  // The CSV and JSON Lines start as exports of what the database holds (after a kill they may end
  // in half a line) and grow as points finish.
  write_atomically(out.csv, store.csv());
  write_atomically(out.jsonl, store.jsonl());
  std::ofstream csv(out.csv, std::ios::app | std::ios::binary),
      jsonl(out.jsonl, std::ios::app | std::ios::binary);
  ProgressBar bar(fmt::format("sweep {}", spec.name), mine.size(), mine.size() - todo.size());
  bar.draw(true);
  const StopSignals signals;
  const bool complete = run_points(
      spec, todo, jobs,
      [&](const std::vector<PointResult>& results) {
        store.record(results);
        for (const PointResult& r : results) {
          csv << csv_line(make_row(r));
          jsonl << json_line(r) << '\n';
          bar.point_done(r.report.is_null());
        }
        csv << std::flush;
        jsonl << std::flush;
      },
      [&] { bar.draw(); }, [] { return g_signal != 0; });
  bar.finish();
  csv.close();
  jsonl.close();
  write_atomically(out.csv, store.csv());  // in point order: identical whatever -j, order or shards
  write_atomically(out.jsonl, store.jsonl());
  const double secs = bar.elapsed_seconds();
  if (!complete) {
    const int sig = g_signal;
    fmt::print(stderr,
               "\nsweep {}: stopped by {} after {} points this run; {} points stored, --resume to continue\n",
               spec.name, sigabbrev_np(sig) ? fmt::format("SIG{}", sigabbrev_np(sig)) : std::to_string(sig),
               bar.done_now(), store.count());
    return 128 + sig;
  }
  // -j as asked: a resumed sweep with fewer points left than workers starts only as many.
  const size_t started = std::min<size_t>(jobs, todo.size());
  fmt::print(stderr,
             "sweep {}: {} points run{} in {:.1f} s ({:.2f} points/s, -j {}{}){}; {} stored -> {}, {}, {}\n",
             spec.name, bar.done_now(), bar.failed() ? fmt::format(" ({} failed)", bar.failed()) : "", secs,
             secs > 0 ? double(bar.done_now()) / secs : 0.0, jobs,
             started < jobs ? fmt::format(": {} worker{} for {} point{}", started, started == 1 ? "" : "s",
                                          todo.size(), todo.size() == 1 ? "" : "s")
                            : "",
             mine.size() > todo.size() ? fmt::format(", {} already done", mine.size() - todo.size()) : "",
             store.count(), out.csv.string(), out.db.string(), out.jsonl.string());
  if (!a.plot_prefix.empty()) plot(out.csv.string(), a.plot_prefix, a.python);
  return 0;
}

int cmd_sweep_merge(const SweepMergeArgs& a) {
  if (a.inputs.empty()) throw InputError("sweep merge: no inputs (shard databases .db or CSVs)");
  if (a.output.empty() && a.db.empty())
    throw InputError("sweep merge: -o MERGED.csv (and/or --db MERGED.db) is required");
  bool all_db = true;
  for (const std::string& in : a.inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec))
      throw InputError(fmt::format("{}: a folder, not a sweep's results (a shard's .db or .csv)", in));
    if (!fs::is_regular_file(in, ec)) throw InputError(fmt::format("{}: no such file", in));
    all_db &= fs::path(in).extension() != ".csv";
  }
  // `sweep merge shard-0.csv shard-1.csv -o shard-1.csv` replaced a shard's results with the merge.
  for (const auto& [flag, f] : {std::pair{"-o", a.output}, std::pair{"--jsonl", a.jsonl}})
    io::refuse_input_as_output(f, flag, a.inputs);
  if (!a.db.empty() && !all_db)
    throw InputError("sweep merge: --db needs every input to be a database (.db)");
  if (!a.jsonl.empty() && !all_db)
    throw InputError("sweep merge: --jsonl needs every input to be a database (.db)");
  // Every input becomes CSV records keyed by point; a point two inputs hold must be the same row.
  std::string header;
  std::map<int64_t, std::string> rows;
  uint64_t expected = 0;
  std::unique_ptr<ResultStore> merged;
  if (all_db) {
    if (!a.db.empty() && fs::exists(a.db))
      throw InputError(fmt::format("{}: exists; merge into a new file", a.db));
    merged = std::make_unique<ResultStore>(a.db.empty() ? fs::path(":memory:") : fs::path(a.db));
  }
  for (const std::string& in : a.inputs) {
    std::string text;
    if (fs::path(in).extension() == ".csv") {
      text = io::read_text_file(in, io::kMaxDataFileBytes, "a sweep CSV");
    } else {
      ResultStore db(in, /*read_only=*/true);
      const auto meta = db.meta();
      // (An empty file opens as an empty database: the merge's own store then named itself.)
      std::error_code ec;
      if (!meta.contains("columns"))
        throw InputError(fmt::format("{}: not a tpusim sweep database (no meta columns{})", in,
                                     fs::file_size(in, ec) == 0 ? ": an empty file" : ""));
      if (merged) {
        if (merged->meta().empty()) merged->create(meta);
        merged->merge_from(in);
      }
      if (meta.contains("spec_points"))
        expected = std::max<uint64_t>(expected, std::stoull(meta.at("spec_points")));
      text = db.csv();
    }
    const auto records = parse_csv(text, in);
    if (records.empty()) throw InputError(fmt::format("{}: empty (no header)", in));
    std::string h = csv_line(Row(records[0].begin(), records[0].end()));
    // A sweep's CSV starts with the sweep's own columns (later ones follow the report's keys,
    // which change between versions; the check below compares inputs with each other).
    const std::string all = csv_header();
    size_t end = 0;
    for (int i = 0; i < 5; ++i) end = all.find(',', end + (i > 0));
    const std::string own = all.substr(0, end);  // point,workload,workload_file,engine,arch
    if (!h.starts_with(own + ","))
      throw InputError(fmt::format("{}: not a tpusim sweep's results: its header does not start with `{}`", in, own));
    if (header.empty()) header = h;
    if (h != header) throw InputError(fmt::format("{}: its columns differ from {}'s", in, a.inputs.front()));
    for (size_t i = 1; i < records.size(); ++i) {
      if (records[i].size() != records[0].size())
        throw InputError(
            fmt::format("{}: record {} has {} fields, the header {} (a truncated file? the database "
                        "beside it holds every finished point)",
                        in, i, records[i].size(), records[0].size()));
      int64_t point = -1;
      try {
        point = std::stoll(records[i][0]);
      } catch (const std::exception&) {
        throw InputError(fmt::format("{}: record {}: point '{}' is not a number", in, i, records[i][0]));
      }
      std::string line = csv_line(Row(records[i].begin(), records[i].end()));
      const auto [it, added] = rows.emplace(point, line);
      if (!added && it->second != line)
        throw InputError(
            fmt::format("{}: point {} differs from the same point in an earlier input: the inputs come "
                        "from different specs or tpusim versions",
                        in, point));
    }
  }
  std::string csv = header;
  for (const auto& [point, line] : rows) csv += line;
  if (!a.output.empty()) write_atomically(a.output, csv);
  if (!a.jsonl.empty()) write_atomically(a.jsonl, merged->jsonl());
  std::string missing;
  if (expected > rows.size()) {
    uint64_t shown = 0;
    for (uint64_t p = 0; p < expected && shown < 10; ++p)
      if (!rows.contains(static_cast<int64_t>(p))) missing += fmt::format("{}{}", shown++ ? ", " : "", p);
    missing = fmt::format("; {} of the spec's {} points missing ({}{})", expected - rows.size(), expected,
                          missing, expected - rows.size() > 10 ? ", ..." : "");
  }
  fmt::print(stderr, "sweep merge: {} points from {} inputs{} -> {}\n", rows.size(), a.inputs.size(), missing,
             a.output.empty() ? a.db : a.output);
  return 0;
}

int cmd_sweep_worker() { return worker_main(); }

SweepCommand::SweepCommand(CLI::App& app) {
  sweep_ = app.add_subcommand("sweep",
                              "Run a design-space sweep (docs/sweeps.md): workloads x architecture points");
  sweep_->add_option("spec", args_.spec, "sweep spec (.toml, docs/sweeps.md)");
  sweep_->add_option("-o,--output", args_.output,
                     "results CSV; the database (RESULTS.db) and JSON Lines (RESULTS.jsonl) go beside it");
  sweep_->add_option("-j,--jobs", args_.jobs, "worker processes (default: every core this process may use)")
      ->check(count_option(1, "worker processes", false, kMaxJobs));
  sweep_->add_option("--shard", args_.shard,
                     "run only the K-th of N disjoint slices (points whose number is K mod N), as K/N");
  sweep_->add_flag("--resume", args_.resume, "continue a sweep: skip the points the database already holds");
  sweep_->add_flag("--retry-failed", args_.retry_failed,
                   "with --resume: run the stored failed points again (a worker killed by the OOM killer, a "
                   "fixed bug)");
  sweep_->add_option("--db", args_.db, "the SQLite database (default: RESULTS.db beside the CSV)");
  sweep_->add_option("--jsonl", args_.jsonl, "the JSON Lines file (default: RESULTS.jsonl beside the CSV)");
  sweep_->add_option("--plot", args_.plot_prefix,
                     "then plot the CSV with scripts/plot.py: PREFIX-*.png and .svg");
  sweep_->add_option("--python", args_.python,
                     "Python with matplotlib (default: /usr/bin/python3, else python3)");
  sweep_->add_flag("--dry-run", args_.dry_run, "list the points (of this shard) and run nothing");
  sweep_->add_flag("--full-compile", args_.full_compile,
                   "compile with data (seeded weights, calibration, the weight image) even on the timing engine, "
                   "as before timing-only compiles: their reference in bench/timing_bench (same results, slower)");
  sweep_->require_subcommand(0, 1);
  merge_ = sweep_->add_subcommand("merge",
                                  "Join the results of shards (databases or CSVs) into one CSV or database");
  merge_->add_option("inputs", merge_args_.inputs, "shard results: .db files, or .csv files")->required();
  merge_->add_option("-o,--output", merge_args_.output, "the merged CSV (rows in point order)");
  merge_->add_option("--db", merge_args_.db, "also a merged database (every input a .db)");
  merge_->add_option("--jsonl", merge_args_.jsonl, "also merged JSON Lines (every input a .db)");
  worker_ =
      sweep_->add_subcommand("worker", "");  // hidden: one worker process of a sweep (tools/sweep/workers.h)
  worker_->group("");
}

bool SweepCommand::chosen() const { return sweep_->parsed(); }

int SweepCommand::run() const {
  if (merge_->parsed()) return cmd_sweep_merge(merge_args_);
  if (worker_->parsed()) return cmd_sweep_worker();
  return cmd_sweep(args_);
}

}  // namespace tpusim::tools
