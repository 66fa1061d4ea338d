; mm_weight_hi takes 0 or 1 (docs/isa.md): the matmul that would run with 2 is refused.
.model "bad_weight_hi"
.weights w, 0, 65536, init=random(1)
    rw     waddr=w, tiles=1
    setcfg reg=mm_weight_hi, value=2
    matmul ub=0, acc=0, rows=8, switch
    halt
