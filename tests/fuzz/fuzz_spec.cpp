// fuzz_spec: the input is the text of a sweep spec (TOML; docs/sweeps.md, tools/sweep/spec.h).
// parse_spec must either expand it into numbered points or reject it with an InputError naming
// the line, key, value and what was expected; nothing else. The spec sits in a scratch folder
// beside two small model descriptions and a program (../small/mnist_mlp.toml,
// ../small/tiny_cnn.toml, ../asm/matmul.s, as workloads/sweeps/*.toml name them), so that
// workload paths, globs and the descriptions' own checks are exercised. An accepted spec must
// keep the contract the sweep's shards and --resume rely on: points numbered 0..n-1 in order,
// each with a workload of the spec and a key that no other point has, a batch only on models and
// within the front ends' limit, and describe_key readable on every key.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "compiler/model.h"
#include "isa/error.h"
#include "tests/fuzz/fuzz_common.h"
#include "tools/source_dir.h"
#include "tools/sweep/spec.h"

using namespace tpusim;
using namespace tpusim::tools::sweep;
using tpusim::fuzz::finding;
namespace fs = std::filesystem;

// libsystemc (linked through the sweep's simulator) references sc_main; libFuzzer provides main().
extern "C" int sc_main(int, char**) { return 0; }

namespace {

// <tmp>/tpusim-fuzz-spec-PID/{small,asm,sweeps}; the spec is sweeps/fuzz.toml.
const fs::path& spec_path() {
  static const fs::path path = [] {
    const fs::path root = fs::temp_directory_path() / ("tpusim-fuzz-spec-" + std::to_string(getpid()));
    const fs::path src = source_dir();
    fs::create_directories(root / "small");
    fs::create_directories(root / "asm");
    fs::create_directories(root / "sweeps");
    for (const char* f : {"small/mnist_mlp.toml", "small/tiny_cnn.toml", "asm/matmul.s"})
      fs::copy_file(src / "workloads" / f, root / f, fs::copy_options::overwrite_existing);
    static const struct Cleanup {
      fs::path root;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(root, ec);
      }
    } cleanup{root};
    return root / "sweeps" / "fuzz.toml";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return fuzz::guarded("fuzz_spec", [&] {
    Spec s;
    try {
      s = parse_spec(text, spec_path());
    } catch (const InputError&) {
      return;
    }
    std::set<std::string> keys;
    for (size_t i = 0; i < s.points.size(); ++i) {
      const Point& p = s.points[i];
      if (p.index != i) finding("point %zu is numbered %llu", i, (unsigned long long)p.index);
      if (!p.workload || p.workload < s.workloads.data() || p.workload >= s.workloads.data() + s.workloads.size())
        finding("point %zu has no workload of the spec", i);
      if (p.batch && (!p.workload->is_model || *p.batch == 0 || *p.batch > compiler::kMaxBatch))
        finding("point %zu: batch %llu on %s", i, (unsigned long long)*p.batch, p.workload->file.c_str());
      if (p.key.empty() || !keys.insert(p.key).second) finding("point %zu: key '%s' empty or repeated", i, p.key.c_str());
      if (describe_key(p.key).empty()) finding("point %zu: describe_key gave nothing", i);
    }
  });
}
