#!/usr/bin/env bash
# Installs the Debian (bookworm) packages tpusim needs to build, test and fuzz: only the missing
# ones, so a second run does nothing but check. Needs root (uses sudo when not root).
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config ninja-build  # toolchain
  ccache                                 # compiler cache (scripts/lib.sh uses it when present)
  verilator libsystemc-dev               # RTL simulation, SystemC kernel
  catch2 libfmt-dev libboost-dev libcli11-dev nlohmann-json3-dev
  libdnnl-dev                            # oneDNN: the int8 GEMM the benchmarks measure against
  libtomlplusplus-dev                    # toml++: model descriptions (compiler/model.cpp)
  libonnx-dev libprotobuf-dev            # ONNX's generated protobuf classes: .onnx models (compiler/onnx.cpp)
  libsqlite3-dev                         # SQLite: the sweep results database (tools/sweep/store.cpp)
  python3-matplotlib                     # plots: scripts/plot_compare.py, scripts/plot.py
  pybind11-dev python3-dev python3-pandas  # the Python module tpusim (python/, docs/python.md)
  python3-torch python3-onnx             # PyTorch exports in tests/python/torch_export_test.py (docs/onnx.md)
  slurm-wlm munge                        # the live single-node Slurm test (tests/sweep/slurm_live_test.sh)
  jq                                     # JSON checks in the CLI tests (tests/CMakeLists.txt, tests/cli/*.sh)
  libreadline-dev tmux                   # the debugger's line editing; its terminal test (tests/debug)
  chromium                               # headless browser: tpusim view's page test (tests/view)
  clang libclang-rt-14-dev libfuzzer-14-dev  # fuzzing (scripts/fuzz.sh): clang, sanitizers, libFuzzer
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ $status == installed ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run this script as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
