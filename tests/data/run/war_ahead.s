; A UB write-after-read the timing engine must see although it starts matmuls 4 and 5 ahead of
; simulated time: the act (7) after `sync units=weights` writes rows 0-1, which matmul 4 reads
; earlier in program order but later in time (review30 #1).
.arch "tpu-v1", array_rows=4, array_cols=4, ub_bytes=1024, acc_entries=128, weight_fifo_tiles=1, weight_mem_gbps=4, weight_mem_latency_cycles=3, activation_lanes=4, clock_mhz=1000
.weights w, 0, 64, init=random(1)
    rw waddr=0, tiles=1
    rw waddr=16, tiles=3
    matmul ub=100, acc=0, rows=32, switch
    matmul ub=100, acc=32, rows=32, switch
    matmul ub=0, acc=64, rows=4, switch
    matmul ub=100, acc=68, rows=4, switch
    sync units=weights
    act acc=100, ub=0, rows=2
    halt
