// The sweep's worker processes (tools/sweep/workers.h): a worker that dies is replaced and the
// sweep runs every point.
#include "tools/sweep/workers.h"
#include "tools/source_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

using namespace tpusim::tools::sweep;

TEST_CASE("workers: a worker gone before its first point is replaced and every point is answered") {
  // The first "worker" closes its stdin, says so (the file `closed`), and then writes more than a
  // pipe holds to its stdout: it cannot exit until the sweep closes that pipe without reading it,
  // which the sweep does only when its write of the first point fails (EPIPE). So the first point
  // fails by that path and no other: its worker exits with code 7 (its write failed, by SIGPIPE or
  // EPIPE). Had the write gone through (the stdin still open), the sweep would have read the
  // 128 KiB and the worker exited with code 0. Each replacement reads one point and exits with
  // code 3 without answering. The sweep must hand out all three points (before the fix, the
  // replacement worker started after the failed write was never given a point: the sweep ended
  // with one point answered of three and returned true). Nothing waits on a clock.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tpusim-workers-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / "worker.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "if mkdir '" << (dir / "first").string() << "' 2>/dev/null; then\n"
                           "  exec 0<&-\n"
                           "  : > '" << (dir / "closed").string() << "'\n"
                           "  head -c 131072 /dev/zero || exit 7\n"
                           "  exit 0\n"
                           "fi\n"
                           "read line\n"
                           "exit 3\n";
  chmod(script.c_str(), 0755);
  const Spec spec = parse_spec(
      "[sweep]\nworkloads = [\"../asm/matmul.s\"]\nengine = \"fast\"\n[grid]\nclock_mhz = [700, 800, 900]\n",
      std::string(tpusim::source_dir()) + "/workloads/sweeps/test.toml");
  REQUIRE(spec.points.size() == 3);
  std::vector<const Point*> todo;
  for (const Point& p : spec.points) todo.push_back(&p);

  set_worker_executable(script.string());
  prestart_workers(1);
  // Until the first worker has closed its stdin (at most 20 s, for a loaded host).
  for (int i = 0; i < 2000 && !std::filesystem::exists(dir / "closed"); ++i) usleep(10000);
  REQUIRE(std::filesystem::exists(dir / "closed"));
  std::map<uint64_t, std::string> errors;
  const bool all = run_points(
      spec, todo, 1,
      [&](const std::vector<PointResult>& results) {
        for (const PointResult& r : results) errors[r.point->index] = r.error;
      },
      [] {});
  set_worker_executable("");
  std::filesystem::remove_all(dir);
  CHECK(all);
  REQUIRE(errors.size() == 3);
  // The points run longest first; all three cost the same, so in point order.
  CHECK(errors[0] == "the worker process exited with code 7 while running this point");
  CHECK(errors[1] == "the worker process exited with code 3 while running this point");
  CHECK(errors[2] == "the worker process exited with code 3 while running this point");
}
