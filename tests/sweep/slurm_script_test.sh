#!/usr/bin/env bash
# scripts/slurm/sweep.sbatch, run as Slurm would run each task of `sbatch --array=1-3` (the
# environment of an array task, without a scheduler), then merged: the same CSV as one
# unsharded run. slurm_live_test.sh submits the same script to a live single-node Slurm.
#   slurm_script_test.sh TPUSIM SOURCE_DIR WORKDIR
set -euo pipefail
tpusim=$1 src=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
spec=$src/workloads/sweeps/tiny.toml
for id in 1 2 3; do
  env SPEC="$spec" OUT="$dir/shards" TPUSIM="$tpusim" SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 \
    SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=3 SLURM_CPUS_PER_TASK=2 bash "$src/scripts/slurm/sweep.sbatch"
done
ls "$dir/shards"
"$tpusim" sweep merge "$dir"/shards/shard-*.db -o "$dir/merged.csv"
"$tpusim" sweep "$spec" -o "$dir/whole.csv"
cmp "$dir/merged.csv" "$dir/whole.csv" && echo "ok: merged shards = unsharded run"
# A task rerun (requeued) resumes: nothing left to do, the results stay.
env SPEC="$spec" OUT="$dir/shards" TPUSIM="$tpusim" SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=1 \
  SLURM_ARRAY_TASK_MAX=3 SLURM_CPUS_PER_TASK=2 bash "$src/scripts/slurm/sweep.sbatch" 2>&1 | grep "0 points run"
