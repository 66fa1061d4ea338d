#!/usr/bin/env bash
# Small models on small machines: every point either runs bit-exact against the reference
# executor and the golden model or is refused (exit code 2, a model that does not fit); a
# mismatch (exit code 1), a crash or a hang fails. The grid crosses what makes the compiler cut a
# model up on small arrays: arrays 4 x 4 to 16 x 16, unified buffers of 3 and 8 KiB (maps in
# bands of rows from host memory, batches in pieces), accumulators of 256 and 1,024 rows, and the
# mapper switches that change how (pieces=on: the piece schedule; concat_inplace=off). Each
# wrong result it caught is named in docs/compiler.md: a 1 x 1 convolution with padding 1 in
# bands ("Bands of rows"), a resident tensor's copies in the piece schedule after a 16-bit LSTM
# cell, and the piece planner with no plan that fits.
#
#   small_grid.sh TPUSIM SOURCE_DIR
set -u
tpusim=$1
src=$2
small=$src/workloads/small
onnx=$src/tests/data/onnx
fail=0
runs=0
point() {  # point ARGS...: one run of tpusim run ARGS
  local out rc
  out=$(timeout 60 "$tpusim" run "$@" --engine fast 2>&1)
  rc=$?
  runs=$((runs + 1))
  if [ "$rc" = 2 ]; then return; fi
  if [ "$rc" != 0 ] || ! grep -q '^check .*results match' <<<"$out"; then
    echo "FAIL (exit code $rc): tpusim run $* --engine fast"
    grep -E 'differ|error|rror:' <<<"$out" | head -3
    fail=1
  fi
}
for array in "4 4" "4 8" "8 4" "8 8" "16 16"; do
  set -- $array
  a=(--set array_rows=$1 --set array_cols=$2)
  for acc in 256 1024; do
    for ub in 3072 8192; do
      m=(--set ub_bytes=$ub --set acc_entries=$acc)
      point "$small/inception.toml" "${a[@]}" "${m[@]}" --batch 1
      point "$small/inception.toml" "${a[@]}" "${m[@]}" --mapper concat_inplace=off
      point "$small/resblock.toml" "${a[@]}" "${m[@]}" --batch 3 --mapper pieces=on
      point "$small/tiny_cnn.toml" "${a[@]}" "${m[@]}" --batch 2 --mapper pieces=on
      point "$src/tests/data/models/proj_in_bands.toml" "${a[@]}" "${m[@]}"
      point "$onnx/concat.onnx" "${a[@]}" "${m[@]}" --input "$onnx/x_concat.npy"
      point "$onnx/conv_pad_stride.onnx" "${a[@]}" "${m[@]}" --input "$onnx/x_conv_pad_stride.npy"
    done
    for ub in 4096 6144; do
      m=(--set ub_bytes=$ub --set acc_entries=$acc)
      point "$small/lstm1.toml" "${a[@]}" "${m[@]}" --batch 3 --mapper pieces=on
      point "$small/gru1.toml" "${a[@]}" "${m[@]}" --batch 3 --mapper pieces=on
    done
  done
done
echo "$runs points"
exit $fail
