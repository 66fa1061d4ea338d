#!/bin/bash
# How long the compiler's input-streaming estimate takes to lower tall images (docs/compiler.md,
# "Which cuts pay": the search's cost). Lowering a 224 x 224 x 3 input into a 7 x 7 stride-2
# convolution and a 3 x 3 one, unpacked, took 5.3 to 7.8 s while paying_cuts and stream_pays
# estimated every count of cuts, each recomputing the layer's tiles per chunk (8e52ca9), and 0.04
# to 0.14 s since 3033b74; 448 x 448 with 64 MiB 57.8 s, then 0.17 to 0.18 s; 224 x 224 x 128 into
# 3 x 3 convolutions (default mapper) 6.2 s, then under 0.01 s.
# Prints each model's lower time and cycles (tpusim run's own figures); asserts nothing.
#
# Usage: bench/stream_lower_time.sh [TPUSIM]   (default build/tpusim)
set -euo pipefail
tpusim=${1:-build/tpusim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model() {  # name h w c filters1 kernel1 stride1 padding1
  cat > "$dir/$1.toml" <<TOML
[model]
name = "$1"
batch = 1
input = [$2, $3, $4]

[[layer]]
name = "conv1"
type = "conv2d"
filters = $5
kernel = $6
stride = $7
padding = $8
activation = "relu"

[[layer]]
name = "conv2"
type = "conv2d"
filters = $5
kernel = 3
padding = "same"
activation = "relu"
TOML
}
model stem224 224 224 3 64 7 2 3
model stem448 448 448 3 64 7 2 3
model wide224 224 224 128 128 3 1 1
run() {  # model, args...
  local m=$1
  shift
  printf '%-10s %-45s ' "$m" "$*"
  "$tpusim" run "$dir/$m.toml" --engine timing "$@" 2>&1 |
    awk '/lower [0-9.]+ s/ { match($0, /lower [0-9.]+ s/); l = substr($0, RSTART, RLENGTH) } /^cycles/ { c = $2 }
         END { printf "%s, %s cycles\n", l, c }'
}
run stem224 --mapper pack=off
run stem448 --mapper pack=off --set ub_bytes=64MiB
run wide224
