#!/usr/bin/env bash
# A hostile-input probe (docs/limits.md): every architecture parameter at and beyond the ends of
# its range, special and huge files as every kind of input, outputs that name inputs, a full disk
# (a 64 KiB tmpfs when this runs as root, and /dev/full). Each case must end within 20 s with
# exit 0 or 2 (2: a message naming the parameter or file), never a crash, a hang, "internal
# error" or "out of memory", and must leave every input unchanged.
#
#   scripts/probe_limits.sh [BUILD_DIR]      (default: build)
# Prints one line per misbehaving case and the counts; exits 1 when any case misbehaved.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
tpusim=$(cd "${1:-build}" && pwd)/tpusim
work=$(mktemp -d)
trap 'umount "$work/full" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
S=$src/workloads/asm/matmul.s
M=$src/workloads/small/tiny_cnn.toml
cp "$S" a.s && "$tpusim" asm a.s -o p.tpu 2>/dev/null && cp "$M" m.toml || exit 1
sum() { md5sum a.s p.tpu m.toml; }
before=$(sum)
total=0 bad=0

# probe EXPECT NAME -- COMMAND...: EXPECT is "0", "2" or "0|2"; NAME must appear in a refusal.
probe() {
  local want=$1 name=$2
  shift 3
  total=$((total + 1))
  local out rc
  out=$(timeout 20 "$@" 2>&1)
  rc=$?
  local why=""
  if [ "$rc" = 124 ]; then why="hang (20 s)"
  elif ! [[ "$rc" =~ ^($want)$ ]]; then why="exit $rc, expected $want"
  elif [ "$rc" = 2 ] && ! grep -qF -- "$name" <<<"$out"; then why="refusal does not name '$name'"
  elif grep -qE "internal error|out of memory|bad_alloc" <<<"$out"; then why="internal error"
  elif [ ${#out} -gt 4000 ]; then why="message of ${#out} characters"
  fi
  if [ "$(sum)" != "$before" ]; then why="${why:+$why; }an input changed"; cp "$S" a.s; "$tpusim" asm a.s -o p.tpu 2>/dev/null; cp "$M" m.toml; fi
  if [ -n "$why" ]; then
    bad=$((bad + 1))
    echo "MISBEHAVED ($why): $*"
    head -c 300 <<<"$out" | sed 's/^/    /'
  fi
}

# ---- every parameter at and beyond its range (ranges from docs/arch.md's table) ---------------
while IFS='|' read -r _ name _ range _; do
  name=$(tr -d '` ' <<<"$name")
  lo=$(awk '{print $1}' <<<"$range") hi=$(awk '{print $3}' <<<"$range")
  [ -n "$name" ] && [ -n "$hi" ] || continue
  below=$(awk -v v="$lo" 'BEGIN { if (v >= 1) printf "%.0f", v - 1; else printf "%g", v / 10 }')
  above=$(awk -v v="$hi" 'BEGIN { if (v >= 1) printf "%.0f", v + 1; else printf "%g", v * 10 }')
  case $name in
    # A program cannot change shape: compile the model. A program using 8 accumulator rows on a
    # machine with fewer is refused naming the instruction and the rows: compile the model too.
    array_rows | array_cols | acc_entries) prog=m.toml ;;
    *) prog=p.tpu ;;
  esac
  for engine in timing fast; do
    probe "0|2" "$name" -- "$tpusim" run $prog --engine $engine --no-check --max-memory 2GiB --set "$name=$lo"
    probe "0|2" "$name" -- "$tpusim" run $prog --engine $engine --no-check --max-memory 2GiB --set "$name=$hi"
    # (a range starting at 0 has no value just below it but negatives, probed below)
    [ "$lo" = 0 ] || probe 2 "$name" -- "$tpusim" run $prog --engine $engine --set "$name=$below"
    probe 2 "$name" -- "$tpusim" run $prog --engine $engine --set "$name=$above"
  done
  for v in 0 -1 18446744073709551615 18446744073709551616 1e308 1e-308 nan inf 0x 1.5 ""; do
    probe "0|2" "$name" -- "$tpusim" run p.tpu --engine timing --set "$name=$v"
  done
done < <("$tpusim" arch --markdown | grep '^| `')

# ---- special and huge files as every kind of input --------------------------------------------
ln -s /dev/zero zero && ln -s /dev/urandom urandom && mkfifo fifo && mkdir dir && truncate -s 10G huge
for f in zero urandom fifo dir huge; do
  for ext in tpu s toml csv json; do ln -sf "$f" "$f.$ext" 2>/dev/null; done
  probe 2 "$f" -- "$tpusim" run "$f.tpu"
  probe 2 "$f" -- "$tpusim" run "$f.s"
  probe 2 "$f" -- "$tpusim" run "$f.toml"
  probe 2 "$f" -- "$tpusim" run "$f.csv"
  probe 2 "$f" -- "$tpusim" asm "$f.s" -o out.tpu
  probe 2 "$f" -- "$tpusim" disasm "$f.tpu"
  probe 2 "$f" -- "$tpusim" compile "$f.toml" -o out.tpu
  probe 2 "$f" -- "$tpusim" run p.tpu --arch "$f.json"
  probe 2 "$f" -- "$tpusim" compare "$f.json"
  probe 2 "$f" -- "$tpusim" compare "$src/workloads/gpu-reference" --models-root "$src" --tpu-report "$f.json"
  probe 2 "$f" -- "$tpusim" sweep "$f.toml" -o sw.csv
done

# ---- outputs that name inputs (the path, a hard link, a symlink) ------------------------------
ln a.s hard.s && ln -s p.tpu link.tpu
probe 2 a.s -- "$tpusim" asm a.s -o a.s
probe 2 hard.s -- "$tpusim" asm a.s -o hard.s
probe 2 p.tpu -- "$tpusim" disasm p.tpu -o p.tpu
probe 2 link.tpu -- "$tpusim" disasm p.tpu -o link.tpu
probe 2 m.toml -- "$tpusim" compile m.toml -o m.toml
for opt in --report --trace --vcd --log; do
  probe 2 p.tpu -- "$tpusim" run p.tpu $opt p.tpu
  probe 2 a.s -- "$tpusim" run a.s $opt a.s
  probe 2 link.tpu -- "$tpusim" run p.tpu $opt link.tpu
done

# ---- a full disk ---------------------------------------------------------------------------
full_targets=(/dev/full)
if mkdir -p full && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  head -c 60000 /dev/zero >full/filler
  full_targets+=(full)
fi
for t in "${full_targets[@]}"; do
  o=$t
  [ -d "$t" ] && o=$t/out
  probe 2 "$o" -- "$tpusim" asm a.s -o "$o"
  probe 2 "$o" -- "$tpusim" compile m.toml -o "$o"
  probe 2 "$o" -- "$tpusim" disasm p.tpu -o "$o"
  for opt in --report --trace --vcd --log; do probe 2 "$o" -- "$tpusim" run p.tpu $opt "$o"; done
  if [ -d "$t" ]; then
    left=$(find "$t" -name '.*tmp*' -o -name out)
    total=$((total + 1))
    [ -z "$left" ] || { bad=$((bad + 1)); echo "MISBEHAVED (partial files left on the full disk): $left"; }
  fi
done

echo "probe: $total cases, $bad misbehaved"
[ "$bad" = 0 ]
