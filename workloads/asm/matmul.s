; matmul.s: one matrix multiply on the tpu-v1 machine (a 256 x 256 array).
;
; Computes Y = requant(X * W) for X: 8 x 256 int8 (eight input vectors, a batch of 8) and
; W: 256 x 256 int8 (one weight tile). Each output is the int32 dot product of one row of X
; with one column of W, scaled by mult / 2^shift and saturated to int8:
;   Y[b][n] = clamp(-128, 127, round_half_away( (sum over k<256 of X[b][k] * W[k][n]) / 2^8 ))
; for 0 <= b < 8 and 0 <= n < 256 (act with mult=1, shift=8 and the identity function).
; Assemble:     build/tpusim asm workloads/asm/matmul.s -o matmul.tpu
; Disassemble:  build/tpusim disasm matmul.tpu
; Round trip:   build/tpusim disasm matmul.tpu -o listing.s && build/tpusim asm listing.s -o again.tpu
;               cmp matmul.tpu again.tpu      (identical bytes; see docs/assembly.md)

.model "matmul-8x256x256"          ; the workload name reports will carry
.arch  "tpu-v1"                     ; the architecture this program was written for

.equ B, 8                           ; batch: input vectors per matrix multiply
.equ K, 256                         ; vector length = array rows = bytes per UB row

; Host memory: where the host driver puts the inputs and finds the outputs.
.input  x, 0x0000, B*K, dtype=int8, shape=8x256, init=random(1)   ; X, seeded pseudo-random
.output y, 0x1000, B*K, dtype=int8, shape=8x256                   ; Y, written by the program

; Weight memory: one 256 x 256 tile (64 KiB), row-major: byte r*256 + c is W[r][c].
.weights w, 0, K*K, init=random(2)

; Names for the on-chip buffers the program uses (addresses are rows).
.ub  xin,  0, B                     ; UB rows 0..7 receive X
.ub  yout, B, B                     ; UB rows 8..15 receive Y
.acc acc0, 0, B                     ; accumulator rows 0..7 hold X * W in int32

start:
    rw     waddr=w, tiles=1                 ; fetch tile W from weight memory into the weight FIFO
    rhm    host=x, ub=xin, rows=B           ; DMA the 8 input vectors from the host into the UB
    sync   units=host                       ; wait until the input rows have landed in the UB
    matmul ub=xin, acc=acc0, rows=B, switch ; W becomes the active tile; 8 vectors stream through
    act    acc=acc0, ub=yout, rows=B, mult=1, shift=8
                                            ; Y = round(acc / 2^8), saturated to int8, into the UB
    sync   units=act                        ; wait until the activation unit has written Y
    whm    host=y, ub=yout, rows=B          ; DMA Y back to host memory
    halt                                    ; stop once every unit is idle
