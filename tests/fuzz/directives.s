; A seed for fuzz_assemble (scripts/fuzz.sh passes it to fuzz_seeds with workloads/asm/*.s):
; every directive and option form of docs/assembly.md once, with small data, so mutations start
; from each syntax the assembler knows.
.model "seed: \"every\" directive\t;#"
.arch "small", array_rows=128, clock_mhz=700.5, "array-rows"=128, k=-1.5e3, big=1e+300, tiny=2.5E-7
.meta layers, 2
.meta n, -5
.meta eps, 1e-5
.meta b, -0.5
.meta note, "hand written"
.meta shape, json "[16, 512, {\"a\": null, \"b\": [true, false, -0.0, 1.5e300]}]"
.meta "my-key", 0x7fff_ffff
.meta "", 0b1010
.equ B, 4
.equ ROW, (B << 2) * 2 - 1 + 1
.equ M, ~0 & 0xff | 1 % 3 / 1 >> 1
.input  x, 0x0000, B*ROW, dtype=int8, shape=(B, ROW), init=random(10), scale=0.05
.input  z, 0x0100, 8, dtype=uint8, shape=8, init=zero
.output y, 0x2000, 16*4, dtype=int32, shape=16x1, scale=3
.weights w1, 0, 64, init=random(2)
.weights w2, w1.end, w1.size, init=zero
.wimage random(7)
.ub  a, 0, B
.ub  b, a.end, 2*B
.acc acc0, 0, B
top:
    setcfg reg=host_row_bytes, value=ROW
    tag tag=0xdead
    rhm host=x, ub=a, rows=B
    rw waddr=w1, tiles=1, unsigned
    sync units=host|weights
    matmul ub=a, acc=acc0, rows=B, repeat=2, stride=1, switch, accumulate
    act acc=acc0, ub=b, rows=B, func=relux, clip=6, mult=3, shift=2, perchan, qtable=b
    vec op=mul, func=tanh, src=a, src_b=b, ub=b, rows=1, mult=2, shift=1
    pool kind=avg, src=b, ub=a, in_w=2, out_h=1, out_w=1, batch=1, window=2, pstride=2
    whm host=y, ub=b, rows=B
loop: nop
    barrier
    halt
