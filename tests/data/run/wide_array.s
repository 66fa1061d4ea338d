; One 8 x 1024 tile times 4 vectors, for an 8-row, 1024-column array (--set array_rows=8
; --set array_cols=1024): the debugger's `array` view of columns past 999 (tests/debug).
.model "wide_array"
.weights w, 0, 8192, init=random(1)
.input x, 0, 4096, init=random(2)
.output y, 4096, 4096
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=4
    sync   units=host
    matmul ub=0, acc=0, rows=4, switch
    act    acc=0, ub=4, rows=4, shift=6
    sync   units=act
    whm    host=y, ub=4, rows=4
    halt
