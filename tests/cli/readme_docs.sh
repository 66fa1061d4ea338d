#!/usr/bin/env bash
# readme_docs.sh ROOT: every document in docs/ is linked from the README's "Documentation" list.
set -u
cd "$1" || exit 2
list=$(sed -n '/^## Documentation$/,/^## /p' README.md)
missing=0
for f in docs/*.md; do
  if ! grep -qF "]($f)" <<<"$list"; then
    echo "README.md, Documentation: no link to $f"
    missing=1
  fi
done
[ "$missing" = 0 ] && echo "ok: every docs/*.md is in the README's Documentation list"
exit $missing
