// Worker processes for sweeps (workers.h).
#include "tools/sweep/workers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "compiler/compile.h"
#include "isa/assembler.h"
#include "isa/error.h"
#include "sim/machine.h"
#include "sim/parallel.h"
#include "sim/report.h"
#include "tools/commands.h"
#include "tools/freed_memory.h"
#include "tools/sweep/schedule.h"

extern char** environ;

namespace tpusim::tools::sweep {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// `threads`: what each worker's parallel work (float reference, quantizer, the fast engine's
// matmuls) may use: this process's CPUs shared among the workers, at least one each.
json request(const Spec& spec, const Point& p, unsigned threads) {
  return {{"point", p.index},
          {"threads", threads},
          {"path", std::filesystem::absolute(p.workload->path).string()},
          {"model", p.workload->is_model},
          {"arch", sim::arch_to_json(p.arch)},
          {"batch", p.batch ? json(*p.batch) : json(nullptr)},
          {"mapper", compiler::mapper_to_json(p.mapper)},
          {"engine", sim::engine_name(spec.engine)},
          {"full_compile", spec.full_compile},
          {"max_cycles", spec.max_cycles}};
}

// One point, in the worker: compile for the point's machine, simulate, report.
ojson run_request(const json& req) {
  sim::Arch arch;
  for (const auto& [key, value] : req.at("arch").items())
    sim::set_param(arch, key, value.is_string() ? value.get<std::string>() : value.dump(), "point");
  // Named as the point's machine (the preset it started from and its own values), not the preset.
  if (const auto v = sim::arch_violation(arch))
    throw InputError(fmt::format("machine {}: {}", sim::machine_name(arch), v->text));
  sim::set_threads(req.value("threads", 0u));
  const std::string path = req.at("path");
  // A worker keeps the models it parsed and quantized (which do not depend on the machine):
  // later points of a workload only lower it again for their architecture. On the timing
  // engine a compile computes no data (LoadOptions::timing_only: a model of CNN1's 100M weights
  // takes a few MB), and the worker keeps every model; otherwise only the last (CNN1's full
  // compile peaked at 0.78 GB).
  static std::map<std::string, compiler::Compiled> cache;
  compiler::Compiled* compiled = nullptr;
  isa::Program loaded;
  const sim::Engine engine = sim::parse_engine(req.at("engine").get<std::string>());
  if (req.at("model").get<bool>()) {
    compiler::LoadOptions o;
    if (!req.at("batch").is_null()) o.batch = req.at("batch").get<uint64_t>();
    o.timing_only = engine == sim::Engine::timing && !req.value("full_compile", false);
    static bool kept = false;  // (keep_freed_memory: only while the points are timing-only)
    if (std::exchange(kept, o.timing_only) != o.timing_only) keep_freed_memory(o.timing_only);
    // (The mapper's concat_inplace changes the quantized graph: a model is kept per value, as the
    // scheduler keys it: model_key.)
    o.mapper = compiler::mapper_from_json(req.value("mapper", json::object()), "point");
    // A concat written in place whose joined tensor this machine would hold in host memory is kept
    // as parts (compiler::place_concats, found once the lowering refuses it: a point that lowers
    // pays nothing for it): the model prepared so is kept under a key of its own, beside the one
    // other machines lower.
    for (;;) {
      std::string key =
          model_key(path, o.batch, compiler::concat_inplace(o.mapper)) + (o.timing_only ? "\ntiming" : "");
      for (const std::string& c : o.mapper.concats_as_parts) key += "\nas parts " + c;
      auto it = cache.find(key);
      if (it == cache.end()) {
        if (!o.timing_only) cache.clear();  // free the previous model first
        it = cache.emplace(key, compiler::prepare_file(path, o)).first;
      }
      compiled = &it->second;
      try {
        compiler::lower_for(*compiled, arch, o.mapper);
        break;
      } catch (const compiler::ConcatInHost& e) {
        o.mapper.concats_as_parts = compiler::concats_kept_as_parts(*compiled, arch, o.mapper, e);
      }
    }
  } else {
    loaded = path.ends_with(".s") ? isa::assemble_file(path) : isa::load_program(path);
  }
  const isa::Program& program = compiled ? compiled->program : loaded;
  sim::RunOptions opt;
  opt.engine = engine;
  opt.max_cycles = req.at("max_cycles").get<uint64_t>();
  const sim::RunResult result = sim::simulate(program, arch, opt);
  // Sweeps measure; they do not check data (output_matches_reference stays null): `tpusim run`
  // checks a point bit for bit.
  const sim::ReportInput in{&program, &arch, opt.engine, &result, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
  return sim::make_report(in);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({}{})", WTERMSIG(status), strsignal(WTERMSIG(status)),
                       WTERMSIG(status) == SIGKILL ? "; out of memory?" : "");
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return "stopped";
}

std::string& worker_executable_override() {
  static std::string path;
  return path;
}

std::string self_executable() {
  if (!worker_executable_override().empty()) return worker_executable_override();
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find the tpusim executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

// A worker process and the points sent to it, in order: it runs the first, the others wait in
// its stdin (kDepth at most).
struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;  // its stdin, its answers
  std::string pending;     // answer bytes not yet ending in a newline
  std::deque<const Point*> sent;
  bool busy() const { return !sent.empty(); }
};

// Points a worker holds at once: the one it runs and the next, so that it starts the next as soon
// as it answers, without waiting for this process to read the answer and send another (on two
// busy cores that round trip left a worker idle 1 to 7 ms per point: 25 to 50 ms of a 0.9 s
// paper-matrix sweep per worker).
constexpr size_t kDepth = 2;

Worker spawn(const std::string& exe) {
  int req[2], res[2];
  if (pipe2(req, O_CLOEXEC) != 0 || pipe2(res, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, req[0], 0);
  posix_spawn_file_actions_adddup2(&fa, res[1], 1);
  std::string a0 = exe, a1 = "sweep", a2 = "worker";
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  Worker w;
  const int rc = posix_spawn(&w.pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(req[0]);
  close(res[1]);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start a worker ({}): {}", exe, strerror(rc)));
  w.to = req[1];
  w.from = res[0];
  return w;
}

// Closes each worker's stdin: a worker exits when its input ends.
void close_inputs(std::vector<Worker>& workers) {
  for (Worker& w : workers) {
    if (w.to >= 0) close(w.to);
    w.to = -1;
  }
}

void stop_worker(Worker& w) {
  if (w.to >= 0) close(w.to);
  if (w.from >= 0) close(w.from);
  int status = 0;
  if (w.pid > 0) waitpid(w.pid, &status, 0);
  w = Worker{};
}

// Stops them all: every worker is told first (its stdin closes), then each is waited for, so that
// they exit (and give back their memory) at the same time.
void stop_workers(std::vector<Worker>& workers) {
  close_inputs(workers);
  for (Worker& w : workers) stop_worker(w);
}

// Workers started by prestart_workers, not yet taken by run_points.
std::vector<Worker>& prestarted() {
  static std::vector<Worker> workers;
  return workers;
}

bool send(Worker& w, const Spec& spec, const Point& p, unsigned threads) {
  const std::string line = request(spec, p, threads).dump() + "\n";
  for (size_t off = 0; off < line.size();) {
    const ssize_t n = write(w.to, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  w.sent.push_back(&p);
  return true;
}

// The workload's path as the spec writes it, so that messages (and the CSV) do not depend on
// where the spec lies on this machine.
std::string relative_paths(std::string text, const Workload& w) {
  const std::string abs = std::filesystem::absolute(w.path).string();
  // From after each replacement: the spec may name the file by its absolute path (no end otherwise).
  for (size_t at = text.find(abs); at != std::string::npos; at = text.find(abs, at + w.file.size()))
    text.replace(at, abs.size(), w.file);
  return text;
}

PointResult answer(const Spec& spec, const Point& p, const std::string& line) {
  PointResult r{&p, &spec, nullptr, "", 0};
  try {
    ojson j = ojson::parse(line);
    if (j.value("point", uint64_t(-1)) != p.index) throw std::runtime_error("answer for another point");
    if (j.contains("report")) r.report = std::move(j["report"]);
    else r.error = relative_paths(j.value("error", std::string("the worker gave no report")), *p.workload);
    r.point_seconds = j.value("seconds", 0.0);
  } catch (const std::exception& e) {
    r.error = fmt::format("unreadable answer from the worker ({}): {}", e.what(), line.substr(0, 200));
  }
  return r;
}

// Stores the answers on a thread of its own, so that the loop giving workers their points never
// waits for the disk: `done` (its SQLite transaction waits for four fdatasyncs, about 5 ms on a
// quiet disk and tens of ms on a busy one, when a worker may be waiting for its next point) and
// `tick` run there, one call at a time; `done` takes every answer that came while the last call
// ran (one transaction, not one per point). Signals stay with the other threads (the loop's poll
// wakes for them).
class Storer {
 public:
  Storer(const Spec& spec, const std::function<void(const std::vector<PointResult>&)>& done,
         const std::function<void()>& tick)
      : spec_(spec), done_(done), tick_(tick) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  Storer(const Storer&) = delete;
  Storer& operator=(const Storer&) = delete;
  ~Storer() {
    try {
      finish();
    } catch (...) {  // (already unwinding from another error, or the caller's finish() threw)
    }
  }
  // A worker's answer line for point p, or a point failed here.
  void answered(const Point* p, std::string line) { push({p, std::move(line), std::nullopt}); }
  void failed(PointResult r) { push({r.point, {}, std::move(r)}); }
  // Throws what `done` or `tick` threw, if either did (nothing is stored after that).
  void check() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  // Stores what is queued, ends the thread, then throws what `done` or `tick` threw, if either did.
  void finish() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      end_ = true;
    }
    wake_.notify_one();
    thread_.join();
    check();
  }

 private:
  struct Item {
    const Point* point;
    std::string line;
    std::optional<PointResult> result;
  };
  void push(Item item) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(item));
    }
    wake_.notify_one();
  }
  void run() {
    auto last_tick = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return !items_.empty() || end_; });
      std::deque<Item> batch = std::exchange(items_, {});
      const bool end = end_;
      lock.unlock();
      try {
        std::vector<PointResult> results;
        for (Item& it : batch) results.push_back(it.result ? std::move(*it.result) : answer(spec_, *it.point, it.line));
        if (!results.empty()) done_(results);
        if (const auto now = std::chrono::steady_clock::now(); now - last_tick >= std::chrono::milliseconds(200)) {
          tick_();
          last_tick = now;
        }
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        return;
      }
      lock.lock();
      if (end && items_.empty()) return;
    }
  }
  const Spec& spec_;
  const std::function<void(const std::vector<PointResult>&)>& done_;
  const std::function<void()>& tick_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> items_;
  bool end_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

void set_worker_executable(const std::string& path) { worker_executable_override() = path; }

void prestart_workers(unsigned count) {
  const std::string exe = self_executable();
  while (prestarted().size() < count) prestarted().push_back(spawn(exe));
}

unsigned available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

bool run_points(const Spec& spec, const std::vector<const Point*>& todo, unsigned jobs,
                const std::function<void(const std::vector<PointResult>&)>& done, const std::function<void()>& tick,
                const std::function<bool()>& stop) {
  signal(SIGPIPE, SIG_IGN);  // a worker that died shows as a failed write, not our death
  const std::string exe = self_executable();
  std::vector<Worker> workers(std::min<size_t>(jobs, todo.size()));
  // Those prestart_workers started first (they have been starting up while this process opened the
  // database), the others now; prestarted workers beyond the count needed are stopped.
  std::vector<Worker> early = std::exchange(prestarted(), {});
  for (size_t i = 0; i < workers.size() && i < early.size(); ++i) workers[i] = std::exchange(early[i], Worker{});
  stop_workers(early);
  // (0: the worker's default, when TPUSIM_THREADS says how many.)
  const unsigned threads =
      std::getenv("TPUSIM_THREADS") ? 0 : std::max<unsigned>(1, available_cpus() / std::max<unsigned>(1, jobs));
  for (Worker& w : workers)
    if (w.pid < 0) w = spawn(exe);
  // (While the workers start: the points' costs, longest first, each model kept on one worker
  // where that pays; schedule.h.)
  Scheduler queue(todo, estimate_costs(spec, todo), workers.size());
  const auto stopping = [&] { return stop && stop(); };
  Storer storer(spec, done, tick);
  std::set<const Point*> retried;  // points whose worker a termination signal killed once
  const auto died = [&](Worker& w) {
    // The first point sent is the one it was running; those waiting behind it go back to the
    // queue as they were (not run, not failed).
    const Point* p = w.sent.empty() ? nullptr : w.sent.front();
    for (size_t i = 1; i < w.sent.size(); ++i) queue.put_back(w.sent[i]);
    w.sent.clear();
    close(w.to), close(w.from);
    w.to = w.from = -1;
    int status = 0;
    waitpid(w.pid, &status, 0);
    w.pid = -1;
    const bool terminated = WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM ||
                                                    WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGHUP);
    if (p && stopping()) return;  // interrupted: the point stays to do (--resume)
    if (p && terminated && retried.insert(p).second) {
      fmt::print(stderr, "\nsweep: the worker running point {} was {}; running it again\n", p->index,
                 describe_exit(status));
      queue.put_back(p);
    } else if (p)
      storer.failed(PointResult{p, &spec, nullptr,
                                fmt::format("the worker process {} while running this point", describe_exit(status)),
                                0});
    queue.restart(static_cast<size_t>(&w - workers.data()));
    if (!queue.empty()) w = spawn(exe);
  };
  const auto kill_all = [&] {
    for (Worker& w : workers)
      if (w.pid > 0) kill(w.pid, SIGKILL);
    stop_workers(workers);
  };
  // Idle workers take their next points; then, unless one of them is left without (the points
  // left are of models other workers hold: it waits to share them, schedule.h), busy workers
  // take a point to queue behind their current one (kDepth).
  const auto give = [&](Worker& w, const Point* p) {
    if (!send(w, spec, *p, threads)) {
      w.sent.push_back(p);
      died(w);
    }
  };
  const auto dispatch = [&] {
    bool waiting = false;
    for (Worker& w : workers)
      if (w.pid > 0 && !w.busy() && !queue.empty()) {
        const bool others_busy = std::any_of(workers.begin(), workers.end(),
                                             [&](const Worker& o) { return &o != &w && o.busy(); });
        if (const Point* p = queue.next(static_cast<size_t>(&w - workers.data()), others_busy)) give(w, p);
        else waiting = true;
      }
    if (waiting) return;
    for (Worker& w : workers)
      while (w.pid > 0 && w.busy() && w.sent.size() < kDepth && !queue.empty()) {
        const Point* p = queue.queued(static_cast<size_t>(&w - workers.data()), w.sent.front());
        if (!p) break;
        give(w, p);
      }
  };
  for (;;) {
    if (stopping()) {
      kill_all();
      storer.finish();
      return false;
    }
    try {
      storer.check();
    } catch (...) {
      kill_all();
      throw;
    }
    dispatch();
    std::vector<pollfd> fds;
    std::vector<Worker*> owner;
    for (Worker& w : workers)
      if (w.busy()) fds.push_back({w.from, POLLIN, 0}), owner.push_back(&w);
    // No worker busy: every point was run, or a write to a worker failed (it had died) and the
    // fresh worker that replaced it has yet to be given a point (the next dispatch does).
    if (fds.empty()) {
      if (queue.empty()) break;
      continue;
    }
    const int n = poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR) throw std::runtime_error(fmt::format("poll: {}", strerror(errno)));
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Worker& w = *owner[i];
      char buf[65536];
      const ssize_t got = read(w.from, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        died(w);
        continue;
      }
      w.pending.append(buf, static_cast<size_t>(got));
      for (size_t nl; w.busy() && (nl = w.pending.find('\n')) != std::string::npos;) {
        storer.answered(w.sent.front(), w.pending.substr(0, nl));
        w.sent.pop_front();
        w.pending.erase(0, nl + 1);
      }
    }
  }
  // The workers are told to end (their stdin closes) and exit, giving back their memory, while the
  // last answers are stored.
  close_inputs(workers);
  storer.finish();
  stop_workers(workers);
  return true;
}

int worker_main() {
  // Answers go to the original stdout; whatever else prints to stdout (SystemC reports) goes to
  // stderr, so it cannot corrupt the answers.
  signal(SIGINT, SIG_IGN);  // Ctrl-C reaches the whole process group: the sweep stops its workers
  const int answers = dup(1);
  dup2(2, 1);
  FILE* out = fdopen(answers, "w");
  // A test hook, not a user option (tests/sweep/resume_test.sh; docs/sweeps.md, "How it works"):
  // TPUSIM_SWEEP_TEST_SIGTERM=N:FILE makes the first worker to be given its Nth point (the one
  // that creates FILE) kill itself with SIGTERM instead of running it, as Slurm or a user might,
  // at a moment that does not depend on timing.
  unsigned term_at = 0;
  std::string term_file;
  if (const char* t = std::getenv("TPUSIM_SWEEP_TEST_SIGTERM")) {
    const std::string v = t;
    if (const size_t colon = v.find(':'); colon != std::string::npos) {
      term_at = static_cast<unsigned>(std::strtoul(v.substr(0, colon).c_str(), nullptr, 10));
      term_file = v.substr(colon + 1);
    }
  }
  unsigned given = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (++given == term_at) {
      const int fd = open(term_file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd >= 0) {
        close(fd);
        raise(SIGTERM);
      }
    }
    ojson reply;
    const auto start = std::chrono::steady_clock::now();
    try {
      const json req = json::parse(line);
      reply["point"] = req.at("point");
      try {
        reply["report"] = run_request(req);
      } catch (const InputError& e) {  // sim::SimError included
        reply["error"] = e.what();
      } catch (const std::bad_alloc&) {
        reply["error"] = "out of memory";
      } catch (const std::exception& e) {
        reply["error"] = fmt::format("internal error: {}", e.what());
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "tpusim sweep worker: bad request: {}\n", e.what());
      return 2;
    }
    reply["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = reply.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n";
    std::fwrite(text.data(), 1, text.size(), out);
    std::fflush(out);
  }
  return 0;
}

}  // namespace tpusim::tools::sweep
