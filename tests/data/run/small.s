; One 16x16 tile times 4 vectors, for the 16x16 machine of small.json.
.model "small"
.arch "small-16"
.weights w, 0, 256, init=random(1)
.input x, 0, 64, init=random(2)
.output y, 64, 64
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=4
    sync   units=host
    matmul ub=0, acc=0, rows=4, switch
    act    acc=0, ub=4, rows=4, shift=6
    sync   units=act
    whm    host=y, ub=4, rows=4
    halt
