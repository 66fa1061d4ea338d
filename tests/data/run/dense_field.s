; A dense read whose segments do not fit their logical row's field: 4 logical rows of 64 bytes
; per 256-byte UB row, but gather_bytes 128 from lane 0 (tpu-v1). Refused before the run (exit 2).
.model "dense_field"
.weights w, 0, 65536, init=random(1)
    rw     waddr=w, tiles=1
    setcfg reg=gather_bytes, value=128
    setcfg reg=dense_rows, value=4
    setcfg reg=dense_bytes, value=64
    matmul ub=0, acc=0, rows=8, switch
    halt
