// The sweep's worker processes (tools/sweep/workers.h): a worker that dies is replaced and the
// sweep runs every point.
#include "tools/sweep/workers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

using namespace tpusim::tools::sweep;

TEST_CASE("workers: a worker gone before its first point is replaced and every point is answered") {
  // A "worker" that closes its stdin at once and exits a second later: the sweep's write of the
  // first point fails (EPIPE) before it sees the worker exit. Each point's worker dies without
  // answering, so each point fails, but the sweep must hand out all three (before the fix, the
  // replacement worker started after the failed write was never given a point: the sweep ended
  // with one point answered of three and returned true).
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tpusim-workers-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / "worker.sh";
  std::ofstream(script) << "#!/bin/sh\nexec 0<&-\nsleep 1\n";
  chmod(script.c_str(), 0755);
  const Spec spec = parse_spec(
      "[sweep]\nworkloads = [\"../asm/matmul.s\"]\nengine = \"fast\"\n[grid]\nclock_mhz = [700, 800, 900]\n",
      TPUSIM_SOURCE_DIR "/workloads/sweeps/test.toml");
  REQUIRE(spec.points.size() == 3);
  std::vector<const Point*> todo;
  for (const Point& p : spec.points) todo.push_back(&p);

  set_worker_executable(script.string());
  prestart_workers(1);
  usleep(300000);  // (the worker has closed its stdin: the first write fails)
  std::set<uint64_t> answered;
  std::vector<std::string> errors;
  const bool all = run_points(
      spec, todo, 1,
      [&](const std::vector<PointResult>& results) {
        for (const PointResult& r : results) answered.insert(r.point->index), errors.push_back(r.error);
      },
      [] {});
  set_worker_executable("");
  std::filesystem::remove_all(dir);
  CHECK(all);
  CHECK(answered.size() == 3);
  for (const std::string& e : errors) CHECK_THAT(e, Catch::Matches("the worker process .* while running this point"));
}
