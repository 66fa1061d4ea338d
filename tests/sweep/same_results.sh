#!/usr/bin/env bash
# The sweep's results do not depend on how it ran: -j 1 and -j 4, every shard run separately and
# merged (from databases and from CSVs), and a sweep killed part-way then resumed all give the
# same CSV byte for byte as one unsharded run.
#
#   same_results.sh TPUSIM SPEC WORKDIR
set -euo pipefail
tpusim=$1 spec=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL: $*"; exit 1; }
same() {  # same A B: byte-identical files
  cmp -s "$1" "$2" || { diff "$1" "$2" | head -20; fail "$1 and $2 differ"; }
  echo "ok: $1 = $2"
}

"$tpusim" sweep "$spec" -j 1 -o j1.csv
"$tpusim" sweep "$spec" -j 4 -o j4.csv
same j1.csv j4.csv
rows=$(($(wc -l <j1.csv) - 1))
((rows > 1)) || fail "j1.csv has $rows rows"
failed=$(grep -c ',failed,' j1.csv || true)
echo "$rows points, $failed failed"
# Byte-identical also after sorting, the wording (the files are already in point order).
same <(sort j1.csv) <(sort j4.csv)

# Three shards, run one by one (as a job array would), then merged.
for k in 0 1 2; do "$tpusim" sweep "$spec" --shard "$k/3" -j 2 -o "shard$k.csv"; done
"$tpusim" sweep merge shard0.db shard1.db shard2.db -o merged-db.csv --db merged.db --jsonl merged.jsonl
"$tpusim" sweep merge shard2.csv shard0.csv shard1.csv -o merged-csv.csv
same j1.csv merged-db.csv
same j1.csv merged-csv.csv
[[ $(wc -l <merged.jsonl) == "$rows" ]] || fail "merged.jsonl has $(wc -l <merged.jsonl) lines, not $rows"
# python3's sqlite3 module (python3 comes with python3-matplotlib from install-deps.sh).
[[ $(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from results").fetchone()[0])' merged.db) == "$rows" ]] ||
  fail "merged.db does not hold $rows rows"
# A shard missing is reported, not hidden.
"$tpusim" sweep merge shard0.db shard1.db -o partial.csv 2>&1 | grep -q "of the spec's $rows points missing" ||
  fail "merging two of three shards did not report the missing points"

# Killed part-way (SIGKILL, after whatever it finished), then resumed: the same results.
timeout -s KILL 0.15 "$tpusim" sweep "$spec" -j 2 -o killed.csv || true
"$tpusim" sweep "$spec" -j 2 -o killed.csv --resume
same j1.csv killed.csv
# Resumed from one finished shard: only the rest runs.
cp shard1.db resumed.db
"$tpusim" sweep "$spec" -j 2 -o resumed.csv --resume 2>&1 | tee resume.log
grep -q "already done" resume.log || fail "--resume did not skip the finished shard"
same j1.csv resumed.csv
# Without --resume, a database with results is not overwritten.
rc=0
"$tpusim" sweep "$spec" -o j1.csv 2>err.txt || rc=$?
[[ $rc == 2 ]] || fail "a second run over j1.db exited with $rc, not 2"
grep -q "already holds .* finished points; pass --resume" err.txt || fail "no --resume hint: $(cat err.txt)"
echo "all same"
