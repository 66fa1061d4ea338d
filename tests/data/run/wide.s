; A 16 x 16-bit matmul (docs/timing.md "16-bit operands"): 8 input vectors of 16-bit values
; (low bytes in UB rows 0..7, high bytes in rows 8..15) times a 16-bit 256 x 256 weight matrix
; (low plane tile, fetched unsigned, then high plane tile): two matmuls of two byte-plane passes.
.model "wide"
.weights w, 0, 131072, init=random(5)
.input x, 0, 4096, init=random(6)
.output y, 4096, 8192
    rw     unsigned, waddr=w, tiles=1
    rw     waddr=w+65536, tiles=1
    rhm    host=x, ub=0, rows=16
    sync   units=host
    setcfg reg=mm_in_hi, value=8
    matmul ub=0, acc=0, rows=8, switch
    setcfg reg=mm_weight_hi, value=1
    matmul ub=0, acc=0, rows=8, accumulate, switch
    act    acc=0, ub=16, rows=8, shift=24
    sync   units=act
    whm    host=y, ub=16, rows=8
    halt
