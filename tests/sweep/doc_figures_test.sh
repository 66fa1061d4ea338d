#!/usr/bin/env bash
# The figures docs/sweeps.md, docs/energy.md, docs/python.md and README.md print for their example
# commands are what the commands print now: each command runs as the page writes it, and every line
# of its output (trailing blanks dropped) must appear in the page as it is. They had drifted (the
# tiny sweep's TOPS, the paper-memory walk-through's gains, MLP0's energy line, the Python example's
# TOPS) when the compiler improved and nobody ran the pages again.
#   doc_figures_test.sh TPUSIM SOURCE_DIR WORKDIR
set -euo pipefail
tpusim=$1 src=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
failed="$dir/failed"  # (in_page runs at the end of pipelines, in subshells: a file, not a variable)

# Every line of stdin must be a line of the page $1, and there must be at least one (a query that
# matches no row, or a command that prints nothing, checks nothing).
in_page() {
  local page=$1 what=$2 line seen=0
  while IFS= read -r line; do
    line=${line%"${line##*[! ]}"}
    [ -z "$line" ] && continue
    seen=1
    if ! grep -qxF -- "$line" <(sed 's/^ *//; s/ *$//' "$src/$page") &&
       ! grep -qxF -- "$(sed 's/^ *//' <<<"$line")" <(sed 's/^ *//; s/ *$//' "$src/$page"); then
      echo "FAIL $page ($what): not in the page: $line"
      touch "$failed"
    fi
  done
  if [ "$seen" = 0 ]; then
    echo "FAIL $page ($what): the command printed nothing to check"
    touch "$failed"
  fi
}

cd "$dir"
ln -s "$src/workloads" workloads
mkdir build && ln -s "$tpusim" build/tpusim

# docs/sweeps.md: the dry run, the tiny sweep's database queries.
build/tpusim sweep workloads/sweeps/tiny.toml --dry-run | head -5 | in_page docs/sweeps.md "dry run"
build/tpusim sweep workloads/sweeps/tiny.toml -o tiny.csv -j 2 > /dev/null
if command -v sqlite3 > /dev/null; then
  sqlite3 -header -column tiny.db "SELECT workload, array_rows, weight_mem_gbps, round(tops, 3) AS tops,
    round(\"breakdown.weight_stall\", 2) AS weight_stall FROM results WHERE status = 'ok'
    ORDER BY workload, array_rows, weight_mem_gbps" | head -9 | in_page docs/sweeps.md "tiny sweep query"
  sqlite3 tiny.db "SELECT json_extract(json, '$.report.units_busy.matrix') FROM results WHERE point = 3" |
    in_page docs/sweeps.md "units_busy query"
  # The walk-through: weight-memory bandwidth 0.25x to 4x over the six paper apps.
  build/tpusim sweep workloads/sweeps/paper-memory.toml -o memory.csv -j 2 > /dev/null
  sqlite3 -header -column memory.db "SELECT a.workload, round(a.tops, 2) AS tops_1x,
       round(b.tops, 2) AS tops_4x, round(b.tops / a.tops, 2) AS gain,
       round(a.\"breakdown.weight_stall\", 2) AS stall_1x, round(b.\"breakdown.weight_stall\", 2) AS stall_4x
       FROM results a JOIN results b ON a.workload = b.workload
       WHERE a.weight_mem_gbps = 34 AND b.weight_mem_gbps = 136 ORDER BY a.workload" |
    in_page docs/sweeps.md "walk-through gains"
  sqlite3 memory.db "SELECT round(exp(avg(ln(b.tops / a.tops))), 2) FROM results a JOIN results b
       ON a.workload = b.workload WHERE a.weight_mem_gbps = 34 AND b.weight_mem_gbps = 136" |
    in_page docs/sweeps.md "walk-through geometric mean"
else
  echo "note: no sqlite3; the database queries of docs/sweeps.md not checked"
fi

# docs/energy.md: MLP0's energy line of `tpusim run`.
build/tpusim run workloads/tpu-v1/mlp0.toml --engine timing 2> /dev/null | grep '^energy' |
  in_page docs/energy.md "tpusim run's energy line"

# README.md and docs/python.md: the Python one-liner (python.md gives the first digits). Sanitizer
# builds have no module (python/CMakeLists.txt).
if compgen -G "$(dirname "$tpusim")/python/tpusim*.so" > /dev/null && [ -x /usr/bin/python3 ]; then
  tops=$(PYTHONPATH="$(dirname "$tpusim")/python" /usr/bin/python3 -c "import tpusim; print(tpusim.run('workloads/tpu-v1/mlp0.toml', engine='timing')['tops'])")
  echo "$tops" | in_page README.md "Python one-liner"
  echo "${tops:0:5}..." | in_page docs/python.md "Python one-liner"
fi

[ -e "$failed" ] && exit 1
echo "ok: the pages' example figures are the commands' output"
