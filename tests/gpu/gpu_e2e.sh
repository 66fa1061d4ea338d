#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs every small workload through build/tpusim-gpu, which
# checks each output byte for byte against the golden reference (exit 1 on a difference), at
# two batch sizes, with one quick timing each. Skipped (exit 77) where no GPU answers.
#   gpu_e2e.sh TPUSIM_GPU SOURCE_DIR OUT_DIR
set -euo pipefail
runner=$1 src=$2 out=$3
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU here: skipped"
  exit 77
fi
mkdir -p "$out"
cd "$src"
"$runner" workloads/small/{mnist_mlp,tiny_cnn,lenet5,resblock,lstm1}.toml --batch 1 --batch 5 \
  --timing device --l2 warm --graphs both --warmup 1 --warmup-seconds 0 --iterations 2 --repeats 1 -o "$out/e2e.json"
grep -q '"output_matches_reference": true' "$out/e2e.json"
! grep -q '"output_matches_reference": false' "$out/e2e.json"
echo "all outputs match the golden reference"
