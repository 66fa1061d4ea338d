#!/usr/bin/env bash
# tpusim sweep never writes its results over a file it reads: the spec, a workload, the [sweep] arch
# file, and (sweep merge) an input CSV or database. `sweep spec.toml -o mlp.toml` (a slip for
# mlp.csv) wrote the CSV over the model description, and `sweep merge s0.csv s1.csv -o s1.csv`
# replaced a shard's results with the merge; each is refused with exit code 2, the files intact.
#   outputs_over_inputs.sh TPUSIM SOURCE_DIR WORKDIR
set -u
tpusim=$1 src=$2 dir=$3
expect=$src/tests/cli/expect.sh
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 2
cp "$src/workloads/small/mnist_mlp.toml" mlp.toml
printf '{"array_rows": 128}\n' > machine.json
printf '[sweep]\narch = "machine.json"\nworkloads = ["mlp.toml"]\n' > spec.toml
cp mlp.toml mlp.keep && cp machine.json machine.keep && cp spec.toml spec.keep
failed=0
check() { "$expect" "$@" || failed=1; }
check 2 "^-o mlp\\.toml: is the input mlp\\.toml; choose another output \\(tpusim never overwrites its inputs\\)$" \
  -- "$tpusim" sweep spec.toml -o mlp.toml
check 2 "^--db mlp\\.toml: is the input mlp\\.toml" -- "$tpusim" sweep spec.toml -o r.csv --db mlp.toml
check 2 "^--jsonl machine\\.json: is the input machine\\.json" -- "$tpusim" sweep spec.toml -o r.csv --jsonl machine.json
check 2 "^-o machine\\.json: is the input machine\\.json" -- "$tpusim" sweep spec.toml -o machine.json
check 2 "^-o spec\\.toml: is the input spec\\.toml" -- "$tpusim" sweep spec.toml -o spec.toml
for f in mlp machine spec; do
  ext=$( [ $f = machine ] && echo json || echo toml )
  cmp -s $f.$ext $f.keep || { echo "FAIL: $f.$ext was changed"; failed=1; }
done
[ -e r.csv ] || [ -e r.db ] && { echo "FAIL: a refused sweep left results behind"; failed=1; }
# A sweep that runs, in two shards, then merges refused over its inputs.
check 0 "1 points run" -- "$tpusim" sweep spec.toml -o ok.csv
for k in 0 1; do "$tpusim" sweep "$src/workloads/sweeps/tiny.toml" --shard $k/2 -o s$k.csv 2> /dev/null || failed=1; done
cp s1.csv s1.keep
check 2 "^-o s1\\.csv: is the input s1\\.csv" -- "$tpusim" sweep merge s0.csv s1.csv -o s1.csv
check 2 "^--jsonl s0\\.db: is the input s0\\.db" -- "$tpusim" sweep merge s0.db s1.db -o m.csv --jsonl s0.db
cmp -s s1.csv s1.keep || { echo "FAIL: s1.csv was changed"; failed=1; }
check 0 "sweep merge: 14 points from 2 inputs -> m\\.csv" -- "$tpusim" sweep merge s0.csv s1.csv -o m.csv
[ $failed = 0 ] && echo "ok: no sweep output over an input"
exit $failed
