; Deadlock: read_weights asks for 6 tiles, but the weight FIFO holds 4 and the shadow slot one;
; the sixth waits for a slot that only a matmul's switch would free, and the barrier before the
; matmuls waits for read_weights to finish.
.model "deadlock"
.weights w, 0, 6*65536, init=zero
    rw      waddr=w, tiles=6
    barrier
    matmul  ub=0, acc=0, rows=8, switch
    halt
