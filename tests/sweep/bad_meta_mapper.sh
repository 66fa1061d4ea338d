#!/bin/sh
# A sweep over a program whose meta.mapper this tpusim cannot read (tests/sweep/CMakeLists.txt):
# matmul.s with `.meta mapper, json "{\"pack\":3}"` added, swept once; prints the CSV.
# Usage: bad_meta_mapper.sh TPUSIM MATMUL_S WORKDIR
set -e
tpusim=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
sed '/^\.arch/a .meta mapper, json "{\\"pack\\":3}"' "$src" > m.s
grep -q '^\.meta mapper, json "{\\"pack\\":3}"$' m.s
"$tpusim" run m.s --engine timing > /dev/null
printf '[sweep]\nname = "badmeta"\nengine = "timing"\nworkloads = ["m.s"]\n' > s.toml
"$tpusim" sweep s.toml -j 1 -o r.csv
cat r.csv
