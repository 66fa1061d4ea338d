#!/usr/bin/env bash
# Hostile and careless inputs (issue 19): each case must end quickly with the exit code and
# message it names, and leave every input file byte for byte as it was.
#
#   hostile.sh TPUSIM SOURCE_DIR WORK_DIR CASE
#
# CASE is one of the functions below (case_NAME). Every case runs in its own empty WORK_DIR/CASE.
set -u
tpusim=$1 src=$2 work=$3 name=$4
dir=$work/$name
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 99
M=$src/workloads/small/mnist_mlp.toml
S=$src/workloads/asm/matmul.s

fail() {
  echo "FAIL ($name): $*"
  exit 1
}

# expect CODE REGEX -- COMMAND...: exit code and a line of output matching REGEX, within 20 s.
expect() {
  local want=$1 pattern=$2
  shift 3
  local out rc
  out=$(timeout 20 "$@" 2>&1)
  rc=$?
  [ "$rc" = "$want" ] || fail "exit code $rc, expected $want: $*"$'\n'"$out"
  grep -Eq -- "$pattern" <<<"$out" || fail "no line matches '$pattern': $*"$'\n'"$out"
  [ ${#out} -lt 4000 ] || fail "message of ${#out} characters: $*"
  expect_out=$out
}

# unchanged FILE...: each FILE is identical to its copy FILE.orig (made by keep).
keep() { for f in "$@"; do cp -p "$f" "$f.orig"; done; }
unchanged() { for f in "$@"; do cmp -s "$f" "$f.orig" || fail "$f was changed"; done; }
no_temp_left() {
  local left
  left=$(find . -name '.*.tmp-*')
  [ -z "$left" ] || fail "temporary files left: $left"
}

# ---- 1. simulated time --------------------------------------------------------------------
case_latency_beyond_range() {
  expect 2 "weight_mem_latency_cycles = 4611686018427387904 exceeds the maximum 1000000000" \
    -- "$tpusim" run "$M" --engine timing --set weight_mem_latency_cycles=4611686018427387904
  expect 2 "host_latency_cycles = 18446744073709551615 exceeds the maximum 1000000000" \
    -- "$tpusim" run "$M" --set host_latency_cycles=18446744073709551615
  expect 2 "activation_latency_cycles = 9223372036854775807 exceeds the maximum 1000000000" \
    -- "$tpusim" run "$M" --set activation_latency_cycles=9223372036854775807
}
case_bandwidth_and_clock_below_range() {
  expect 2 "weight_mem_gbps = 1e-12 must be at least 0.001" -- "$tpusim" run "$M" --set weight_mem_gbps=1e-12
  expect 2 "host_gbps = 1e-15 must be at least 0.001" -- "$tpusim" run "$M" --set host_gbps=1e-15
  expect 2 "clock_mhz = 1e-300 must be at least 1" -- "$tpusim" run "$M" --set clock_mhz=1e-300
}
# At the edges of the ranges the run completes (event-driven time: a second-long latency costs
# nothing to simulate) and is slower than the default machine, not faster.
case_extremes_in_range_run() {
  expect 0 "cycles" -- "$tpusim" run "$S" --engine timing --report r.json --set host_latency_cycles=1000000000 \
    --set weight_mem_latency_cycles=1000000000 --set activation_latency_cycles=1000000000 --set host_gbps=0.001 \
    --set weight_mem_gbps=0.001 --set clock_mhz=100000
  # At 1e5 MHz and 0.001 GB/s a byte takes 1e5 cycles. rw requests its tile at 1 (issue_cycles):
  # 65536 bytes take 6553600000 cycles, it lands 1e9 later at 7553600001; shifting 256 rows
  # gives t0 = 7553600257; the matmul ends at t0 + 8 + 256 + 256 - 1 = 7553600776; act takes
  # 1e9 + 8 rows = 8553600784; whm issues after the sync, starts at +1 and takes
  # 1e9 + 2048 bytes x 1e5 = 1204800000: 9758400785.
  grep -q '"cycles": 9758400785,' r.json || fail "cycles: $(grep '"cycles"' r.json), expected 9758400785"
}

# ---- 2. bounded reads ---------------------------------------------------------------------
case_special_files() {
  ln -s /dev/zero zero.tpu && ln -s /dev/zero zero.s && ln -s /dev/zero zero.json && ln -s /dev/zero zero.toml
  mkfifo fifo.s
  expect 2 "zero\.tpu: is a character device, not a regular file" -- "$tpusim" run zero.tpu
  expect 2 "zero\.s: is a character device, not a regular file" -- "$tpusim" asm zero.s -o z.tpu
  expect 2 "zero\.tpu: is a character device, not a regular file" -- "$tpusim" disasm zero.tpu
  expect 2 "zero\.json: is a character device, not a regular file" -- "$tpusim" run "$S" --arch zero.json
  expect 2 "zero\.toml: is a character device, not a regular file" -- "$tpusim" run zero.toml
  expect 2 "zero\.json: is a character device, not a regular file" -- "$tpusim" compare zero.json
  expect 2 "fifo\.s: is a FIFO, not a regular file" -- "$tpusim" asm fifo.s -o f.tpu
}
case_huge_sparse_files() {
  truncate -s 10G big.tpu big.s big.json big.toml && truncate -s 3G junk.tpu
  expect 2 "big\.tpu: 10737418240 bytes \(10\.0 GiB\), more than the 4294967296 bytes \(4\.0 GiB\) allowed for a program" \
    -- "$tpusim" run big.tpu
  expect 2 "big\.s: 10737418240 bytes .*, more than the 1073741824 bytes .* allowed for an assembly source" \
    -- "$tpusim" asm big.s -o b.tpu
  expect 2 "big\.tpu: 10737418240 bytes" -- "$tpusim" disasm big.tpu
  expect 2 "big\.json: 10737418240 bytes .* allowed for an architecture file" -- "$tpusim" run "$S" --arch big.json
  expect 2 "big\.toml: 10737418240 bytes .* allowed for a model description" -- "$tpusim" run big.toml
  expect 2 "junk\.tpu: not a tpusim program \(bad magic" -- "$tpusim" run junk.tpu
}

# ---- 3. sizes within the per-value limits that would exhaust memory ----------------------------
case_memory_estimates() {
  # UB 4 GiB + accumulators 4096 x 256 x 4 + host buffers 2 x 2048 = 4299165696 bytes, twice that
  # with the reference executor's copy, + the program as loaded (8 instructions x 96 bytes
  # (isa::Instruction), its 65,536-byte weight tile and manifest: 69,072 bytes, isa::program_bytes)
  # and the run's records (sim::run_record_bytes: 488 bytes).
  expect 2 "matmul\.s: the run needs about 8598400952 bytes \(8\.0 GiB\) \(UB \(ub_bytes\) 4294967296 bytes \(4\.0 GiB\), .*program of 8 instructions 69072 bytes, the run's records 488 bytes; the memories twice, for the reference check\), more than the 1073741824 bytes \(1\.0 GiB\) allowed by --max-memory" \
    -- "$tpusim" run "$S" --set ub_bytes=4GiB --max-memory 1GiB
  expect 2 "needs about 4299235256 bytes .*allowed by --max-memory" \
    -- "$tpusim" run "$S" --set ub_bytes=4GiB --max-memory 1GiB --no-check
  # The stepped engine's array, once (sim::SystolicArray::register_bytes): 256 x 256 cells of 14
  # bytes (weight, shadow, x and its flags twice, psum) 917,504 + the bottom row's 256 x 5 + the
  # rows' switch counts 256 x 4, and tpu-v1's skewed shift's delay registers: the rows given,
  # 256 x 8, and the triangle of 256 x 255 / 2 weights x 2 bytes = 65,280: 987,136
  # (919,808 unskewed); 8,598,400,952 + 987,136 = 8,599,388,088.
  expect 2 "needs about 8599388088 bytes .*, systolic array registers 987136 bytes, program of 8 instructions .*allowed by --max-memory" \
    -- "$tpusim" run "$S" --engine stepped --set ub_bytes=4GiB --max-memory 1GiB
  expect 2 "systolic array registers 919808 bytes, program" \
    -- "$tpusim" run "$S" --engine stepped --set ub_bytes=4GiB --set weight_shift_skewed=0 --max-memory 1GiB
  # The timing engine holds no memories, but the program, its records and the compiled model count
  # on every engine: CNN1 at batch 32, 19,140 instructions: the program 2,565,280 bytes (96 each
  # and the manifest), the records 1,025,368, the compiled model 2,235,190, and what its lowering
  # held beside it, 1,597,930 (its tables, tile indexes and fetches, the tiles of the concats'
  # identity copies: Compiled::lowering_bytes): 7,423,768 > 2 MiB.
  expect 2 "cnn1\.toml: the run needs about 7423768 bytes .*program of 19140 instructions 2565280 bytes.*the lowering's working state 1597930 bytes.*more than the 2097152 bytes \(2\.0 MiB\) allowed by --max-memory" \
    -- "$tpusim" run "$src/workloads/tpu-v1/cnn1.toml" --engine timing --max-memory 2MiB
  printf '[model]\nname = "wide"\nbatch = 1\ninput = [46340, 46340, 1]\n\n[[layer]]\ntype = "conv2d"\nfilters = 1\nkernel = 3\n' >wide.toml
  expect 2 "wide\.toml: compiling model wide needs about .*GiB.*more than the 1073741824 bytes \(1\.0 GiB\) allowed by --max-memory" \
    -- "$tpusim" run wide.toml --max-memory 1GiB
  printf '[model]\nname = "big_batch"\nbatch = 32768\ninput = [65535]\n\n[[layer]]\ntype = "dense"\nunits = 10\n' >batch.toml
  # A batch beyond half the accumulators runs in pieces; this one's 32768 x 65535 inputs are refused
  # by the memory estimate before any is generated.
  expect 2 "batch\.toml: compiling model big_batch needs about .*more than the 1073741824 bytes \(1\.0 GiB\) allowed by --max-memory" \
    -- "$tpusim" run batch.toml --max-memory 1GiB
  # An ONNX model's compile is estimated by the same rule (compiler/compile_memory.h), before its
  # batch's inputs are generated: conv_pad_stride (a 3 x 3 conv, 8 filters, stride 2, 9 x 9 x 3 in,
  # 5 x 5 x 8 out) at batch 1000: 224 float parameters x 4 + quantized 216 + 8 x 4 + weight image
  # 216 + inputs 1000 x 243 x 6 + calibration 4 x (200 + 243) x 4 + the golden reference's 1000 x
  # 200 = 1,666,448 > 1 MiB. Timing-only, a model that calibrates (add_mul_softmax: 168 weights, 10
  # inputs, 32 layer outputs) at batch 30000: 168 x 5 + inputs 30000 x 10 x 5 + calibration
  # 4 x (32 + 10) x 4 = 1,501,512 > 1 MiB (conv_pad_stride's timing-only compile calibrates nothing:
  # 1,144 bytes at any batch).
  local onnx=$src/tests/data/onnx/conv_pad_stride.onnx
  expect 2 "conv_pad_stride\.onnx: compiling model conv_pad_stride needs about 1666448 bytes \(1\.6 MiB\) \(896 for 224 float parameters, .*200000 for the golden reference's batch 1000 x 200 layer output values\), more than the 1048576 bytes \(1\.0 MiB\) allowed by --max-memory" \
    -- "$tpusim" run "$onnx" --batch 1000 --max-memory 1MiB
  expect 2 "add_mul_softmax\.onnx: compiling model add_mul_softmax needs about 1501512 bytes \(1\.4 MiB\) \(840 for a timing-only compile: 168 biases and weights from files, 1500000 for batch 30000 x 10 input values, .*more than the 1048576 bytes \(1\.0 MiB\) allowed by --max-memory" \
    -- "$tpusim" run "$src/tests/data/onnx/add_mul_softmax.onnx" --batch 30000 --engine timing --max-memory 1MiB
  expect 2 "mnist_mlp\.toml: acc_entries = 1 on 'tpu-v1': the compiler needs at least 2 accumulator rows" \
    -- "$tpusim" run "$M" --set acc_entries=1
}

# ---- 5. outputs that name inputs ------------------------------------------------------------
case_output_is_input() {
  cp "$S" a.s && cp "$M" m.toml && "$tpusim" asm a.s -o p.tpu 2>/dev/null && cp a.s p.s && ln a.s hard.s &&
    ln -s p.tpu link.tpu || fail "setup"
  keep a.s p.tpu m.toml p.s
  expect 2 "^-o a\.s: is the input a\.s; choose another output" -- "$tpusim" asm a.s -o a.s
  expect 2 "^-o hard\.s: is the input a\.s" -- "$tpusim" asm a.s -o hard.s
  expect 2 "^--report p\.tpu: is the input p\.tpu" -- "$tpusim" run p.tpu --report p.tpu
  expect 2 "^--report link\.tpu: is the input p\.tpu" -- "$tpusim" run p.tpu --report link.tpu
  expect 2 "^-o p\.tpu: is the input p\.tpu" -- "$tpusim" disasm p.tpu -o p.tpu
  expect 2 "^-o m\.toml: is the input m\.toml" -- "$tpusim" compile m.toml -o m.toml
  expect 2 "^--trace p\.s: is the input p\.s" -- "$tpusim" run p.s --trace p.s
  expect 2 "^--vcd p\.s: is the input p\.s" -- "$tpusim" run p.s --vcd p.s
  unchanged a.s p.tpu m.toml p.s
}
# A full disk: the OS reason, and no partial file or temporary file left behind.
case_full_disk() {
  cp "$S" a.s && keep a.s
  expect 2 "^/dev/full: cannot write: No space left on device$" -- "$tpusim" asm a.s -o /dev/full
  expect 2 "^/dev/full: cannot write: No space left on device$" -- "$tpusim" run a.s --report /dev/full
  expect 2 "^/dev/full: cannot write: No space left on device$" -- "$tpusim" run a.s --trace /dev/full
  expect 2 "^no_dir/x\.tpu: cannot write: No such file or directory$" -- "$tpusim" asm a.s -o no_dir/x.tpu
  unchanged a.s
  no_temp_left
}
case_trace_max_bytes() {
  expect 2 "t\.json: not written: more than 1000 bytes \(--trace-max-bytes" \
    -- "$tpusim" run "$S" --trace t.json --trace-max-bytes 1000
  [ ! -e t.json ] || fail "t.json was left behind"
  no_temp_left
  expect 0 "wrote t\.json \(Chrome trace" -- "$tpusim" run "$S" --trace t.json --trace-max-bytes 10000000
}

# A cell-level VCD records every register change in memory before writing: --trace-max-bytes
# bounds the recording too (16 bytes a change), so a long stepped run cannot exhaust memory.
case_vcd_cells_bounded() {
  expect 2 "--vcd w\.vcd: not written: the traced cells' registers changed more than 6250 times by cycle [0-9]+ .*over --trace-max-bytes 100000 bytes; narrow --vcd-scope" \
    -- "$tpusim" run "$M" --batch 2 --set array_rows=16 --set array_cols=16 --engine stepped --vcd w.vcd \
    --vcd-scope array --trace-max-bytes 100000
  [ ! -e w.vcd ] || fail "w.vcd was left behind"
  no_temp_left
  expect 0 "wrote w\.vcd \(VCD" -- "$tpusim" run "$M" --batch 2 --set array_rows=16 --set array_cols=16 \
    --engine stepped --vcd w.vcd --vcd-scope cells=0-1x0-1 --trace-max-bytes 100000000
}

# ---- 6. numbers on the command line ---------------------------------------------------------
case_numbers() {
  expect 2 "--max-cycles: '-5' is not a whole number >= 0" -- "$tpusim" run "$S" --max-cycles -5
  expect 2 "--max-cycles: '1e9' is not a whole number >= 0" -- "$tpusim" run "$S" --max-cycles 1e9
  expect 2 "--batch: 0 is less than 1: expected a whole number >= 1" -- "$tpusim" run "$M" --batch 0
  expect 2 "--batch: '-1' is not a whole number >= 1" -- "$tpusim" run "$M" --batch -1
  expect 2 "--batch: '99999999999999999999999' is not a whole number" -- "$tpusim" compile "$M" --batch 99999999999999999999999
  local out
  out=$("$tpusim" run "$M" --batch -1 2>&1)
  ! grep -q 18446744073709551615 <<<"$out" || fail "--batch -1 shown wrapped: $out"
}

# ---- 6b. usage errors before any work ------------------------------------------------------
# only CODE REGEX -- COMMAND...: the output is one line, matching REGEX (nothing compiled or run first).
only() {
  expect "$@"
  shift 3
  [ "$(wc -l <<<"$expect_out")" -eq 1 ] || fail "not one line: $*"$'\n'"$expect_out"
}
# A misspelt engine, a trace option without its file, a bad window and an output that cannot be
# written are found before a model is compiled (they were found after: seconds for a paper app).
case_usage_before_work() {
  mkdir adir
  only 2 "^run: unknown engine 'turbo' \(one of: fast stepped timing\), or rtl" -- "$tpusim" run "$M" --engine turbo
  only 2 "^run: --trace-window and --trace-filter go with --trace, --vcd or --log$" -- "$tpusim" run "$M" --trace-window 1:
  only 2 "^run: --vcd-scope goes with --vcd$" -- "$tpusim" run "$M" --vcd-scope units
  only 2 "^--trace-window 5:x: 'x' is not a cycle number$" -- "$tpusim" run "$M" --trace-window 5:x --trace t.json
  # (bad.toml would fail to compile: the output is checked first, so it is never compiled)
  printf '[model]\nname = "bad"\nbatch = 0\n' >bad.toml
  only 2 "^adir: cannot write: Is a directory$" -- "$tpusim" compile bad.toml -o adir
  only 2 "^no_dir/x\.tpu: cannot write: No such file or directory$" -- "$tpusim" compile bad.toml -o no_dir/x.tpu
  only 2 "^bad\.toml:3: \[model\]: batch: 0: expected an integer 1\.\.65535" -- "$tpusim" compile bad.toml -o x.tpu
  [ ! -e t.json ] || fail "t.json was written"
}

# ONNX operators the machine cannot run (docs/onnx.md): one line naming the file, the node, the
# attribute and its value, and what is supported; exit 2, nothing written.
case_onnx_refusals() {
  local d=$src/tests/data/onnx
  only 2 "bad_pool2d_pads\.onnx: node /pool/MaxPool \(MaxPool\): pads \[1, 3, 1, 1\]: expected 0\.\.2 on each side for a 3 x 3 window \(every window must hold a pixel of the map\)$" \
    -- "$tpusim" compile "$d/bad_pool2d_pads.onnx" -o x.tpu
  only 2 "bad_pool2d_count\.onnx: node /pool/AveragePool \(AveragePool\): pads \[3, 3, 3, 3\] with count_include_pad = 0: output pixel \(1, 2\)'s window holds 30 pixels of the map, .* supported: count_include_pad = 1, or pads" \
    -- "$tpusim" compile "$d/bad_pool2d_count.onnx" -o x.tpu
  only 2 "bad_pool2d_window\.onnx: node /pool/MaxPool \(MaxPool\): kernel_shape \[16, 16\]: the machine's pool windows are 1\.\.15 on a side$" \
    -- "$tpusim" compile "$d/bad_pool2d_window.onnx" -o x.tpu
  only 2 "bad_pool2d_ceil\.onnx: node /pool/AveragePool \(AveragePool\): ceil_mode = 1 with a partial last window of an average that counts its padding is not supported: .*supported: ceil_mode = 1 for MaxPool and for AveragePool with count_include_pad = 0, or windows that fit exactly$" \
    -- "$tpusim" run "$d/bad_pool2d_ceil.onnx" --engine timing
  only 2 "bad_pool_count_flag\.onnx: node /pool/AveragePool \(AveragePool\): attribute count_include_pad = 5: expected 0 or 1$" \
    -- "$tpusim" compile "$d/bad_pool_count_flag.onnx" -o x.tpu
  only 2 "bad_conv_pads_auto\.onnx: node /c/Conv \(Conv\): pads \[1, 1, 1, 1\] with auto_pad SAME_LOWER: ONNX's pads cannot be used with an auto_pad other than NOTSET; give the node pads or auto_pad, not both$" \
    -- "$tpusim" compile "$d/bad_conv_pads_auto.onnx" -o x.tpu
  only 2 "bad_pool_kernel\.onnx: node /pool/MaxPool \(MaxPool\): attribute kernel_shape is missing: ONNX requires it of MaxPool \(the window's size\)$" \
    -- "$tpusim" compile "$d/bad_pool_kernel.onnx" -o x.tpu
  # A padded or 1-D pool that cannot run in bands of rows (its copy into the padded map, or into
  # the line's rows, cannot be cut), refused naming its tensors and the UB rows they need together:
  # too many for the buffer, or held in host memory with a Conv before it that runs in bands
  # (they said "reads or writes part of a tensor (a time step)"; pool2d_long took minutes to say it).
  only 2 "pool2d_long\.onnx: model pool2d_long: layer _pool_AveragePool: a padded pool cannot run in bands of rows \(its map is first copied into a padded map by vec passes over parts of rows, which cannot be cut into bands\): its input x \[8, 4000, 8\] \(32000 UB rows\), the padded map _pool_AveragePool\.padded \[12, 4004, 8\] \(48048\) and output _pool_AveragePool \[8, 4000, 8\] \(32000\) take 112048 UB rows together for 1 sample, more than the 98304 the unified buffer has; use a ub_bytes of more than 28684288 \(--set ub_bytes=\.\.\.\), or a smaller map$" \
    -- "$tpusim" compile "$d/pool2d_long.onnx" -o x.tpu
  only 2 "pools1d_asym\.onnx: model pools1d_asym: layer _a_MaxPool: a 1-D pool cannot run in bands of rows \(its line is first copied into its window's rows by vec passes over parts of rows, which cannot be cut into bands\): its input x \[1, 13, 3\] \(13 UB rows\), the line's rows _a_MaxPool\.rows \[3, 14, 3\] \(42\) and output _a_MaxPool \[1, 12, 3\] \(12\) take 67 UB rows together for 1 sample, more than the 8 the unified buffer has; use a ub_bytes of more than 17152 \(--set ub_bytes=\.\.\.\), or a shorter line$" \
    -- "$tpusim" compile "$d/pools1d_asym.onnx" --set ub_bytes=2048 -o x.tpu
  only 2 "conv_pool_big\.onnx: model conv_pool_big: layer _p_MaxPool: a padded pool cannot run in bands of rows \(its map is first copied into a padded map by vec passes over parts of rows, which cannot be cut into bands\): its input _c_Conv \[181, 181, 8\] \(32761 UB rows\), the padded map _p_MaxPool\.padded \[183, 183, 8\] \(33489\) and output _p_MaxPool \[91, 91, 8\] \(8281\) take 74531 UB rows together for 1 sample, of the 98297 the unified buffer has beside 7 rows of tables, but are held in host memory, to run in bands, with the tensors of the layers joined to them, one of which does not fit the unified buffer; use a larger ub_bytes, enough for those layers, or a smaller input$" \
    -- "$tpusim" compile "$d/conv_pool_big.onnx" -o x.tpu
  only 2 "bad_pad_pool\.onnx: node mp \(MaxPool\): input 0 \(p\) is a Pad's output: .*a MaxPool pads by its own pads" \
    -- "$tpusim" compile "$d/bad_pad_pool.onnx" -o x.tpu
  only 2 "bad_gap_big\.onnx: node /GlobalAveragePool \(GlobalAveragePool\): the average over the 16 x 16 pixels of \[N, 512, 16, 16\] .* at most 16777216$" \
    -- "$tpusim" compile "$d/bad_gap_big.onnx" -o x.tpu
  [ ! -e x.tpu ] || fail "x.tpu was written"
}

# ---- 7. silent wrong work -------------------------------------------------------------------
case_program_for_another_machine() {
  expect 2 "matmul\.s: the program was compiled for a 256 x 256 array \(architecture 'tpu-v1'\), this machine's is 64 x 64" \
    -- "$tpusim" run "$S" --set array_rows=64 --set array_cols=64
  # Timing parameters may differ: the program means the same on that machine.
  expect 0 "cycles" -- "$tpusim" run "$S" --set weight_mem_gbps=17 --set host_latency_cycles=0
  # The host software's choices may not: they shaped the compiled program (partial tiles whole
  # here), and a run reported with another would claim what it did not do. --set builds on the
  # program's own machine; an --arch file is a whole machine (driver_partial_tiles 1 by default).
  expect 0 "wrote" -- "$tpusim" compile "$M" --set driver_partial_tiles=0 -o whole.tpu
  expect 0 "machine +tpu-v1 weight_mem_gbps=17 driver_partial_tiles=0 " -- "$tpusim" run whole.tpu --set weight_mem_gbps=17
  expect 2 "^whole\.tpu: the program was compiled with driver_partial_tiles = 0 \(architecture 'tpu-v1'\), this machine's is 1: .* or run the program with driver_partial_tiles = 0$" \
    -- "$tpusim" run whole.tpu --set driver_partial_tiles=1
  printf '{"base": "tpu-v1", "weight_mem_gbps": 17}\n' >v1.json
  expect 2 "^whole\.tpu: the program was compiled with driver_partial_tiles = 0" -- "$tpusim" run whole.tpu --arch v1.json
  expect 2 "^whole\.tpu: the program was compiled with driver_host_loop = 1 \(architecture 'tpu-v1'\), this machine's is 0" \
    -- "$tpusim" run whole.tpu --set driver_host_loop=0
  # A program assembled by hand was compiled with no choices: its `.arch` names the machine only.
  expect 0 "machine +tpu-v1 driver_host_loop=0 driver_partial_tiles=0 " -- "$tpusim" run "$S" --set driver_host_loop=0 --set driver_partial_tiles=0
}
# A kernel smaller than twice its padding (4 x 4, padding 3) whose one output row does not fit:
# the refusal names the map rows a band stores for it (1: padded rows 0-3 are 3 border rows and map
# row 0), where it had printed rows - 2 x pad wrapped around (18446744073709551614).
case_band_row_past_the_padding() {
  cat >k4p3.toml <<'TOML'
[model]
name = "k4p3"
batch = 4
seed = 1
input = [5, 7, 4]

[[layer]]
name = "conv"
type = "conv2d"
filters = 15
kernel = 4
padding = 3
activation = "none"
TOML
  # A band of one output row for one sample: its input 1 map row + 2 x 3 border rows of 7 + 2 x 3
  # pixels, 7 x 13 = 91 UB rows (4 channels fill a 4-byte row), and its output row 10 pixels x 4
  # slices of the 15 channels = 40: 131 rows, against a 512-byte buffer's 128 (100 free).
  expect 2 "k4p3\.toml: model k4p3: layer conv: even one output row of tensor conv \(\[8, 10, 15\]\) does not fit in the unified buffer: with the 1 input rows it reads it needs 131 UB rows, the largest free block is 100 rows of 128 \(4 bytes per row\); use a larger ub_bytes$" \
    -- "$tpusim" run k4p3.toml --set array_rows=4 --set array_cols=4 --set ub_bytes=512
}

case_arch_file_duplicate_key() {
  printf '{\n  "array_rows": 128,\n  "clock_mhz": 700,\n  "array_rows": 64\n}\n' >dup.json
  expect 2 "^dup\.json:4: \"array_rows\" is given twice" -- "$tpusim" run "$M" --arch dup.json
}

# ---- 8. messages ----------------------------------------------------------------------------
case_arch_name_with_nul() {
  printf '{"name": "ab\\u0000cd"}\n' >nul.json
  expect 2 "name = 'ab\\\\x00cd'" -- "$tpusim" run "$M" --arch nul.json
}
case_huge_identifier() {
  { printf '{"'; head -c 10000000 /dev/zero | tr '\0' a; printf '": 1}\n'; } >long.json
  expect 2 "unknown parameter 'aaaa.*\.\.\. \(10000000 bytes\)" -- "$tpusim" run "$M" --arch long.json
}

"case_$name"
echo "ok: $name"
