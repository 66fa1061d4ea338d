#!/usr/bin/env bash
# report_keys.sh TPUSIM PROGRAM OUT.json: runs PROGRAM with --report and checks that the JSON
# has every key of docs/report.md, top level and breakdown, in the documented order.
set -eu
tpusim=$1 prog=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
"$tpusim" run "$prog" --report "$out" 2>/dev/null
# Keys as documented: the table rows' first column, in order.
want=$(grep -E '^\| `[a-z_]+` \|' "$root/docs/report.md" | sed -E 's/^\| `([a-z_]+)`.*/\1/' | tr '\n' ' ')
# Keys in the file: top level (two-space indent), then the breakdown's (four spaces), in order.
top=$(grep -E '^  "[a-z_]+":' "$out" | sed -E 's/^  "([a-z_]+)".*/\1/' | tr '\n' ' ')
breakdown=$(sed -n '/^  "breakdown": {/,/^  }/p' "$out" | grep -E '^    "[a-z_]+":' |
  sed -E 's/^    "([a-z_]+)".*/\1/' | tr '\n' ' ')
got="$top$breakdown"
if [[ "$got" != "$want" ]]; then
  echo "FAIL: report keys differ from docs/report.md"
  echo "  documented: $want"
  echo "  written:    $got"
  exit 1
fi
echo "ok: $(wc -w <<<"$want") keys in the documented order"
