#!/usr/bin/env bash
# Runs the 16-machine sweep (tests/sweep/data/roofs16.toml) and checks the plots of issue 16 on its
# CSV with plot_fixes_test.py. Skips (77) without Debian's python3-matplotlib.
#   plot_fixes_test.sh TPUSIM SOURCE_DIR WORKDIR
set -euo pipefail
tpusim=$1 src=$2 dir=$3
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "SKIP: no python3-matplotlib"; exit 77; }
rm -rf "$dir"
mkdir -p "$dir"
"$tpusim" sweep "$src/tests/sweep/data/roofs16.toml" -j 2 -o "$dir/roofs16.csv"
/usr/bin/python3 "$src/tests/sweep/plot_fixes_test.py" "$src" "$dir/roofs16.csv" "$dir"
