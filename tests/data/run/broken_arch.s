; A program whose .arch breaks a rule between parameters: array_rows=300 leaves tpu-v1's 24 MiB
; unified buffer no multiple of a 300-byte row (tests/CMakeLists.txt, "run of a program whose .arch ...").
.model "broken_arch"
.arch "tpu-v1", array_rows=300
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
