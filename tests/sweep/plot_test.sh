#!/usr/bin/env bash
# scripts/plot.py draws every sweep plot from a small committed CSV (tests/sweep/data/tiny.csv,
# the output of workloads/sweeps/tiny.toml) and the report plots from `tpusim run --report`
# files, as PNG and SVG. Skips (exit 77) where matplotlib is missing.
#   plot_test.sh TPUSIM SOURCE_DIR WORKDIR
set -euo pipefail
tpusim=$1 src=$2 dir=$3
python=/usr/bin/python3
[[ -x $python ]] || python=python3
if ! "$python" -c "import matplotlib" 2>/dev/null; then
  echo "SKIP: no matplotlib (python3-matplotlib)"
  exit 77
fi
rm -rf "$dir"
mkdir -p "$dir"
"$python" "$src/scripts/plot.py" sweep "$src/tests/sweep/data/tiny.csv" --out "$dir/tiny"
for kind in roofline lines heatmap breakdown energy; do
  for ext in png svg; do
    f="$dir/tiny-$kind.$ext"
    [[ -s $f ]] || { echo "FAIL: $f missing or empty"; exit 1; }
  done
  head -c 8 "$dir/tiny-$kind.png" | od -An -c | grep -q "P   N   G" || { echo "FAIL: $kind.png is not a PNG"; exit 1; }
  grep -q "<svg" "$dir/tiny-$kind.svg" || { echo "FAIL: $kind.svg is not SVG"; exit 1; }
done
for m in mnist_mlp tiny_cnn; do
  "$tpusim" run "$src/workloads/small/$m.toml" --engine timing --report "$dir/$m.json"
done
"$python" "$src/scripts/plot.py" report "$dir/mnist_mlp.json" "$dir/tiny_cnn.json" --out "$dir/report"
for f in report-roofline.png report-roofline.svg report-breakdown.png report-breakdown.svg report-energy.png report-energy.svg; do
  [[ -s $dir/$f ]] || { echo "FAIL: $f missing"; exit 1; }
done
# Energy as the metric of the line plots and heatmaps.
"$python" "$src/scripts/plot.py" sweep "$src/tests/sweep/data/tiny.csv" --out "$dir/watt" --metric tops_per_watt
[[ -s $dir/watt-lines.svg && -s $dir/watt-heatmap.svg ]] || { echo "FAIL: --metric tops_per_watt wrote no plots"; exit 1; }
# tpusim sweep --plot runs the same script on the sweep's CSV.
"$tpusim" sweep "$src/workloads/sweeps/tiny.toml" -j 2 -o "$dir/run.csv" --plot "$dir/run"
[[ -s $dir/run-lines.png && -s $dir/run-heatmap.svg ]] || { echo "FAIL: --plot wrote no plots"; exit 1; }
# A folder as the prefix (a trailing /, or a folder that exists): FOLDER/CSV-STEM-*, not FOLDER/-*.
mkdir -p "$dir/plots"
"$python" "$src/scripts/plot.py" sweep "$src/tests/sweep/data/tiny.csv" --out "$dir/plots/"
"$python" "$src/scripts/plot.py" report "$dir/mnist_mlp.json" --out "$dir/plots"
for f in plots/tiny-lines.png plots/tiny-roofline.svg plots/report-roofline.png; do
  [[ -s $dir/$f ]] || { echo "FAIL: --out FOLDER: $f missing"; exit 1; }
done
[[ ! -e $dir/plots/-lines.png ]] || { echo "FAIL: --out FOLDER/ wrote FOLDER/-lines.png"; exit 1; }
# A prefix in a folder that does not exist: exit 2 with the folder named, before any plot.
set +e
out=$("$python" "$src/scripts/plot.py" sweep "$src/tests/sweep/data/tiny.csv" --out "$dir/none/x" 2>&1)
rc=$?
set -e
[[ $rc == 2 && $out == *"the folder $dir/none does not exist"* ]] || { echo "FAIL: missing folder: rc $rc: $out"; exit 1; }
echo "all plots written"
