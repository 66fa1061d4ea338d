#!/usr/bin/env bash
# sweep, sweep merge, compare and validate never write their results over a file they read (as run,
# compile, asm and disasm never do: hostile.sh). `sweep spec.toml -o mlp.toml` (a slip for mlp.csv)
# wrote the CSV over the model description, `sweep merge s0.csv s1.csv -o s1.csv` replaced a shard's
# results, `compare ref.json --csv ref.json` (or `--plot ref`, which writes ref.json) the reference
# data, and `validate --json workloads/tpu-v1/mlp1.toml` the app's description; each is refused
# with exit code 2, the files intact.
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

# compare: the reference data, a --model, a --tpu-report; --plot PREFIX writes PREFIX.json.
fixtures=$src/tests/data/gpu
cp "$fixtures/fixture-gpu.json" ref.json && cp ref.json ref.keep
cp "$fixtures/fixture-tpu-mnist_mlp.json" tpu.json && cp tpu.json tpu.keep
args=(ref.json --models-root "$src" --tpu-report tpu.json --tpu-report "$fixtures/fixture-tpu-tiny_cnn.json")
check 2 "^--csv ref\.json: is the input ref\.json; choose another output" -- "$tpusim" compare "${args[@]}" --csv ref.json
check 2 "^--json ref\.json: is the input ref\.json" -- "$tpusim" compare "${args[@]}" --json ref.json
check 2 "^--plot ref\.json: is the input ref\.json" -- "$tpusim" compare "${args[@]}" --plot ref
check 2 "^--json tpu\.json: is the input tpu\.json" -- "$tpusim" compare "${args[@]}" --json tpu.json
check 2 "^--csv mlp\.toml: is the input mlp\.toml" -- "$tpusim" compare "${args[@]}" --model mlp.toml --csv mlp.toml
check 2 "^--json [^ ]*/mnist_mlp\.toml: is the input" -- "$tpusim" compare "${args[@]}" --json "$src/workloads/small/mnist_mlp.toml"
cmp -s ref.json ref.keep || { echo "FAIL: ref.json was changed"; failed=1; }
cmp -s tpu.json tpu.keep || { echo "FAIL: tpu.json was changed"; failed=1; }
check 0 "^mnist_mlp +16  test-fixture" -- "$tpusim" compare "${args[@]}" --csv c.csv --json c.json

# validate: an app's description, the --arch file.
mkdir apps && cp "$src/workloads/tpu-v1/mlp1.toml" apps/ && cp apps/mlp1.toml mlp1.keep
check 2 "^--json apps/mlp1\.toml: is the input apps/mlp1\.toml" -- "$tpusim" validate -q --workloads apps --app mlp1 --json apps/mlp1.toml
check 2 "^--csv machine\.json: is the input machine\.json" -- "$tpusim" validate -q --workloads apps --app mlp1 --arch machine.json --csv machine.json
cmp -s apps/mlp1.toml mlp1.keep || { echo "FAIL: apps/mlp1.toml was changed"; failed=1; }
cmp -s mlp.toml mlp.keep && cmp -s machine.json machine.keep || { echo "FAIL: an input was changed"; failed=1; }
check 0 "^mlp1 " -- "$tpusim" validate -q --workloads apps --app mlp1 --json v.json

# A description's .npy data (weights_file, input_file) are inputs too: `run wide_mlp.toml --report
# wide_mlp/fc1.npy` and `sweep -o wide_mlp/fc1.npy` replaced the layer's weights.
cp -r "$src/workloads/small/wide_mlp.toml" "$src/workloads/small/wide_mlp" . && cp wide_mlp/fc1.npy fc1.keep
cp wide_mlp/input.npy input.keep
printf '[sweep]\nworkloads = ["wide_mlp.toml"]\n' > wide.toml
check 2 "^--report wide_mlp/fc1\.npy: is the input wide_mlp/fc1\.npy" -- "$tpusim" run wide_mlp.toml --report wide_mlp/fc1.npy
check 2 "^--trace wide_mlp/input\.npy: is the input wide_mlp/input\.npy" -- "$tpusim" run wide_mlp.toml --trace wide_mlp/input.npy
check 2 "^-o wide_mlp/fc1\.npy: is the input wide_mlp/fc1\.npy" -- "$tpusim" compile wide_mlp.toml -o wide_mlp/fc1.npy
check 2 "^-o wide_mlp/fc1\.npy: is the input wide_mlp/fc1\.npy" -- "$tpusim" sweep wide.toml -o wide_mlp/fc1.npy
check 2 "^--csv wide_mlp/input\.npy: is the input wide_mlp/input\.npy" -- "$tpusim" compare "${args[@]}" --model wide_mlp.toml --csv wide_mlp/input.npy
cmp -s wide_mlp/fc1.npy fc1.keep && cmp -s wide_mlp/input.npy input.keep || { echo "FAIL: a model's .npy was changed"; failed=1; }

[ $failed = 0 ] && echo "ok: no output over an input"
exit $failed
