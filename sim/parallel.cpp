// parallel.h: a small pool of workers that help whichever parallel_for call is oldest.
#include "sim/parallel.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tpusim::sim {
namespace {

std::atomic<unsigned> g_threads{0};  // set_threads; 0: the default

unsigned default_threads() {
  static const unsigned n = [] {
    if (const char* env = std::getenv("TPUSIM_THREADS")) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(env, &end, 10);
      if (end != env && *end == '\0' && v >= 1 && v <= 4096) return static_cast<unsigned>(v);
    }
    return usable_cpus();
  }();
  return n;
}

// One parallel_for call: items [0, n) handed out in order by `next`.
struct Job {
  const std::function<void(uint64_t)>* f = nullptr;
  uint64_t n = 0;
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> finished{0};  // items done or skipped
  std::atomic<bool> failed{false};
  unsigned helpers = 0, max_helpers = 0;  // workers that joined, and how many may (pool's lock)
  std::mutex m;  // guards error, error_item; with cv, the caller's wait
  std::condition_variable cv;
  std::exception_ptr error;
  uint64_t error_item = UINT64_MAX;

  // Runs items until none is left to hand out; true when this thread finished the last one.
  bool work() {
    bool last = false;
    for (uint64_t i; (i = next.fetch_add(1)) < n;) {
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          (*f)(i);
        } catch (...) {
          std::lock_guard lock(m);
          if (i < error_item) error = std::current_exception(), error_item = i;
          failed = true;
        }
      }
      last = finished.fetch_add(1) + 1 == n;
    }
    return last;
  }
};

class Pool {
 public:
  // Makes sure `want` - 1 workers exist (never fewer than before); false when none can be started.
  void grow(unsigned want) {
    std::lock_guard lock(m_);
    while (workers_ + 1 < want) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (const std::system_error&) {
        break;  // no more threads to be had: the callers do the work
      }
      ++workers_;
    }
  }
  void post(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard lock(m_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
  }
  void retire(const std::shared_ptr<Job>& job) {
    std::lock_guard lock(m_);
    if (auto it = std::find(jobs_.begin(), jobs_.end(), job); it != jobs_.end()) jobs_.erase(it);
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // oldest first; a job leaves when its caller is done
  unsigned workers_ = 0;

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] {
          while (!jobs_.empty() && jobs_.front()->next.load() >= jobs_.front()->n) jobs_.pop_front();
          for (const std::shared_ptr<Job>& j : jobs_)
            if (j->helpers < j->max_helpers && j->next.load() < j->n) {
              job = j;
              return true;
            }
          return false;
        });
        ++job->helpers;
      }
      if (job->work()) {
        std::lock_guard lock(job->m);
        job->cv.notify_all();
      }
    }
  }
};

// Never destroyed: its detached workers may still wait on it while the process exits.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

}  // namespace

unsigned usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

unsigned threads() {
  const unsigned n = g_threads.load();
  return n ? n : default_threads();
}

void set_threads(unsigned n) { g_threads = n; }

void parallel_for(uint64_t n, const std::function<void(uint64_t)>& f) {
  const unsigned t = threads();
  if (n <= 1 || t <= 1) {
    for (uint64_t i = 0; i < n; ++i) f(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->f = &f;
  job->n = n;
  job->max_helpers = static_cast<unsigned>(std::min<uint64_t>(t, n)) - 1;
  Pool& p = pool();
  p.grow(static_cast<unsigned>(std::min<uint64_t>(t, n)));
  p.post(job);
  job->work();
  {
    std::unique_lock lock(job->m);
    job->cv.wait(lock, [&] { return job->finished.load() >= n; });
  }
  p.retire(job);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace tpusim::sim
