#!/usr/bin/env bash
# validation_doc.sh TPUSIM ROOT: the tables in docs/validation.md and README.md (each between
# its begin and end markers) are what `tpusim validate --markdown` prints now. When a change
# moves the six apps' figures, regenerate them: tpusim validate -q --markdown, pasted between
# the markers. docs/validation.md's "What Table 1 allows" table is `tpusim validate --bounds
# --markdown` between its own markers.
set -eu
tpusim=$1 root=$2
status=0
# check_table DOC MARKER WANT REGENERATE: DOC's lines between "<!-- MARKER: begin" and
# "<!-- MARKER: end" are WANT; else says how to regenerate them.
check_table() {
  local doc=$1 marker=$2 want=$3 regenerate=$4 have
  have=$(sed -n "/^<!-- $marker: begin/,/^<!-- $marker: end/p" "$root/$doc" | sed '1d;$d')
  if [[ -z "$have" ]]; then
    echo "FAIL: $doc has no table between the $marker markers"
    status=1
  elif [[ "$want" != "$have" ]]; then
    echo "FAIL: $doc's $marker table is stale; regenerate it with: $regenerate"
    diff <(echo "$have") <(echo "$want") || true
    status=1
  else
    echo "ok: $doc's $marker table is current"
  fi
}
want=$("$tpusim" validate -q --markdown --workloads "$root/workloads/tpu-v1")
for doc in docs/validation.md README.md; do
  check_table "$doc" "tpusim validate --markdown" "$want" "tpusim validate -q --markdown"
done
check_table docs/validation.md "tpusim validate --bounds --markdown" "$("$tpusim" validate --bounds --markdown)" \
  "tpusim validate --bounds --markdown"
exit $status
