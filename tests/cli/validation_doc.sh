#!/usr/bin/env bash
# validation_doc.sh TPUSIM ROOT: the table in docs/validation.md (between its begin and end
# markers) is what `tpusim validate --markdown` prints now. When a change moves the six apps'
# figures, regenerate it: tpusim validate -q --markdown, pasted between the markers.
set -eu
tpusim=$1 root=$2
doc="$root/docs/validation.md"
want=$("$tpusim" validate -q --markdown --workloads "$root/workloads/tpu-v1")
have=$(sed -n '/^<!-- tpusim validate --markdown: begin/,/^<!-- tpusim validate --markdown: end/p' "$doc" | sed '1d;$d')
if [[ "$want" != "$have" ]]; then
  echo "FAIL: docs/validation.md's table is stale; regenerate it with: tpusim validate -q --markdown"
  diff <(echo "$have") <(echo "$want") || true
  exit 1
fi
echo "ok: docs/validation.md's table is current"
