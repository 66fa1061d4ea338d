; A skewed shift (weight_shift_skewed = 1) whose last columns are written while the array idles,
; and the run ends soon after: tile 1 shifts into the shadow tile at cycles 36..39 (it lands at
; 1 + 16 + 16 cycles on the bus at 1 GB/s + 3 latency = 36, after the switch at 24 freed the
; slot), cell (r, j) is written in cycle 36 + r + j (the last, (3, 3), in 42), and the rhm keeps
; the machine running until 44 (2 + 10 latency + 32 bytes at 1 GB/s). The traces and the
; debugger show every cell of tile 1 in the shadow registers at the end (tests/trace, tests/hw).
.model "skew_end"
.arch "tpu-v1", array_rows=4, array_cols=4, ub_bytes=1024, acc_entries=64, weight_fifo_tiles=4, weight_mem_gbps=1, weight_mem_latency_cycles=3, host_gbps=1, host_latency_cycles=10, activation_lanes=4, clock_mhz=1000
.weights w, 0, 32, init=random(1)
.input x, 0, 64, init=random(2)
    rw     waddr=w, tiles=2
    rhm    host=x, ub=8, rows=8
    matmul ub=0, acc=0, rows=1, switch
    halt
