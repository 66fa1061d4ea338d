#!/usr/bin/env bash
# validation_doc.sh TPUSIM ROOT: the tables in docs/validation.md and README.md (each between
# its begin and end markers) are what `tpusim validate --markdown` prints now. When a change
# moves the six apps' figures, regenerate them: tpusim validate -q --markdown, pasted between
# the markers. docs/validation.md's "What Table 1 allows" table is `tpusim validate --bounds
# --markdown` between its own markers.
set -eu
tpusim=$1 root=$2
want=$("$tpusim" validate -q --markdown --workloads "$root/workloads/tpu-v1")
status=0
for doc in docs/validation.md README.md; do
  have=$(sed -n '/^<!-- tpusim validate --markdown: begin/,/^<!-- tpusim validate --markdown: end/p' "$root/$doc" | sed '1d;$d')
  if [[ -z "$have" ]]; then
    echo "FAIL: $doc has no table between the tpusim validate markers"
    status=1
  elif [[ "$want" != "$have" ]]; then
    echo "FAIL: $doc's table is stale; regenerate it with: tpusim validate -q --markdown"
    diff <(echo "$have") <(echo "$want") || true
    status=1
  else
    echo "ok: $doc's table is current"
  fi
done
want=$("$tpusim" validate --bounds --markdown)
have=$(sed -n '/^<!-- tpusim validate --bounds --markdown: begin/,/^<!-- tpusim validate --bounds --markdown: end/p' \
  "$root/docs/validation.md" | sed '1d;$d')
if [[ "$want" != "$have" ]]; then
  echo "FAIL: docs/validation.md's bounds table is stale or missing; regenerate it with: tpusim validate --bounds --markdown"
  diff <(echo "$have") <(echo "$want") || true
  status=1
else
  echo "ok: docs/validation.md's bounds table is current"
fi
exit $status
