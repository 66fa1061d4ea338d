; A run that fails (a UB hazard at cycle 172) after the shift of its next tile was decided for a
; later cycle (tile 1 lands at 324: 16 bytes at 0.1 GB/s): the debugger's `print fifo` after the
; failure shows the tile still landing, at the session's cycle (tests/debug).
.model "shift_after_failure"
.arch "tpu-v1", array_rows=4, array_cols=4, ub_bytes=1024, acc_entries=128, weight_mem_gbps=0.1, weight_mem_latency_cycles=3, activation_lanes=4, clock_mhz=1000
.weights w, 0, 32, init=random(1)
.input x, 0, 256, init=zero
    rw     waddr=0, tiles=2
    matmul ub=100, acc=0, rows=4, switch
    rhm    host=x, ub=0, rows=32
    matmul ub=0, acc=4, rows=4
    halt
