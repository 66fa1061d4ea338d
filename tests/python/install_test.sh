#!/usr/bin/env bash
# `cmake --install` into a scratch prefix: the installed Python module imports and runs a program,
# and a C++ program built against the installed CMake package (find_package(tpusim)) simulates
# workloads/asm/matmul.s in 3077 cycles, as `tpusim run` does.
#   install_test.sh BUILD_DIR SOURCE_DIR WORKDIR PYTHON
set -euo pipefail
build=$1 src=$2 dir=$3 python=$4
rm -rf "$dir"
mkdir -p "$dir/consumer"
cmake --install "$build" --prefix "$dir/prefix" >"$dir/install.log"
[[ -x $dir/prefix/bin/tpusim ]] || { echo "FAIL: no bin/tpusim"; exit 1; }
module=$(find "$dir/prefix" -name 'tpusim.cpython-*.so' | head -1)
[[ -n $module ]] || { echo "FAIL: the Python module was not installed"; exit 1; }
echo "ok: installed $module"
PYTHONPATH=$(dirname "$module") "$python" -c "
import tpusim, sys
assert tpusim.__file__.startswith(sys.argv[1]), tpusim.__file__
r = tpusim.run(sys.argv[2] + '/workloads/asm/matmul.s', engine='timing')
assert r['cycles'] == 3077, r['cycles']
print('ok: the installed module ran matmul.s:', r['cycles'], 'cycles,', round(r['average_watts'], 2), 'W')
" "$dir/prefix" "$src"

cat >"$dir/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(tpusim 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE tpusim::sim)
CMAKE
cat >"$dir/consumer/main.cpp" <<'CPP'
// A C++ program using the installed tpusim libraries: assemble, simulate, report.
#include <cstdio>

#include "isa/assembler.h"
#include "sim/machine.h"
#include "sim/report.h"

extern "C" int sc_main(int argc, char** argv) {  // libsystemc.so provides main() and calls it
  if (argc != 2) return 2;
  const tpusim::isa::Program p = tpusim::isa::assemble_file(argv[1]);
  const tpusim::sim::Arch arch;
  tpusim::sim::RunOptions opt;
  opt.engine = tpusim::sim::Engine::timing;
  const tpusim::sim::RunResult r = tpusim::sim::simulate(p, arch, opt);
  const tpusim::sim::ReportInput in{&p, &arch, opt.engine, &r, std::nullopt, "", std::nullopt, std::nullopt, std::nullopt};
  std::printf("cycles %llu machine %s\n", static_cast<unsigned long long>(r.cycles),
              tpusim::sim::make_report(in)["machine"].get<std::string>().c_str());
  return 0;
}
CPP
cmake -S "$dir/consumer" -B "$dir/consumer/build" -DCMAKE_PREFIX_PATH="$dir/prefix" -DCMAKE_BUILD_TYPE=Release >"$dir/consumer.log"
cmake --build "$dir/consumer/build" >>"$dir/consumer.log" 2>&1 || { tail -30 "$dir/consumer.log"; echo "FAIL: the consumer did not build"; exit 1; }
out=$("$dir/consumer/build/consumer" "$src/workloads/asm/matmul.s")
echo "$out"
[[ $out == "cycles 3077 machine tpu-v1" ]] || { echo "FAIL: the consumer printed '$out'"; exit 1; }
echo "ok: a C++ program built against the installed package"
