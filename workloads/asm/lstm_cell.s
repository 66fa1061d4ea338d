; lstm_cell.s: one time step of an LSTM cell, written by hand for the default tpu-v1 machine.
;
; WHAT IT COMPUTES (batch B = 8, input size 256, hidden size 256, no biases)
;   inputs from the host:  x  (8 x 256 int8)   the input vectors of this time step
;                          h  (8 x 256 int8)   the previous hidden state, Q0.7 (value q/128)
;                          c  (8 x 256 int8)   the previous cell state,   Q3.4 (value q/16)
;   weights, per gate G in {i, f, o, g}: WG (256 x 256, multiplies x) and UG (256 x 256,
;   multiplies h), stored one after the other, so each gate has a 512 x 256 matrix [WG; UG].
;
;   1. gate pre-activations (matrix unit):  aG = x * WG + h * UG            int32, 8 x 256
;   2. gate activations (activation unit, with requantization by 2^7 into Q7.8 first):
;        i = sigmoid(ai), f = sigmoid(af), o = sigmoid(ao)                 Q0.7
;        g = tanh(ag)                                                       Q0.7
;      exactly: q = round_half_away(aG / 2^7) read as q/256 (clamped to [-2048, 2047], where the
;      curves are flat), then round(127 * sigmoid(q/256)) (or tanh), saturated to int8.
;   3. cell update (vector unit, element-wise, each result rounded half away and saturated):
;        fc = round(f * c / 2^7)          Q0.7 x Q3.4 = 11 fraction bits -> Q3.4
;        ig = round(i * g / 2^10)         Q0.7 x Q0.7 = 14 fraction bits -> Q3.4
;        c' = fc + ig                      Q3.4 (saturates at -8.0 and +7.9375)
;        t  = tanh(c')                     Q3.4 times 16 (vec mult) is Q7.8 in, Q0.7 out
;        h' = round(o * t / 2^7)          Q0.7 x Q0.7 -> Q0.7
;   4. h' and c' go back to the host, in the same formats as h and c, ready for the next step.
;   Every integer here is int8 except the int32 accumulators and the int32 intermediate r of
;   each vec operation (see `vec` in docs/isa.md). The data are pseudo-random (init=random),
;   so the numbers mean nothing; the program shows the instruction pattern of an LSTM layer.
;
; HOW IT MAPS ONTO THE MACHINE
;   * Eight weight tiles (Wi Ui Wf Uf Wo Uo Wg Ug) but only a 4-deep weight FIFO: the first
;     `rw` fills the FIFO with the four tiles of gates i and f; the later `rw`s ask for two
;     more tiles each once matmuls have started taking tiles out. An `rw` that finds no free
;     FIFO slot waits (and holds issue) until a matmul's `switch` frees one.
;   * Each gate is two matmuls into the same accumulator rows: x * WG overwrites, h * UG adds
;     (`accumulate`). Every matmul uses a new tile, so every matmul carries `switch`.
;   * Gates i, f, o sit in consecutive accumulator rows and consecutive UB rows, so one `act`
;     with func=sigmoid and rows=24 does all three; gate g needs tanh, a second `act`.
;   * `act` and `vec` run on the same activation unit, one after the other in program order,
;     so the vec instructions need no sync to see what the acts wrote.
;   * `barrier` waits for everything before the results are DMAed to the host.
;
; MEMORY MAP
;   host memory (bytes)  0x0000 x, 0x0800 h, 0x1000 c       (inputs, 2048 bytes each)
;                        0x1800 h_out, 0x2000 c_out        (outputs, 2048 bytes each)
;   weight memory        0x00000 w_i, 0x20000 w_f, 0x40000 w_o, 0x60000 w_g
;                        (each 128 KiB: WG tile then UG tile)
;   unified buffer rows  0..7 x, 8..15 h, 16..23 c, 24..31 gi, 32..39 gf, 40..47 go,
;                        48..55 gg, 56..63 fc, 64..71 ig, 72..79 c_new, 80..87 tc, 88..95 h_new
;   accumulator rows     0..7 a_i, 8..15 a_f, 16..23 a_o, 24..31 a_g
;
; Assemble:   build/tpusim asm workloads/asm/lstm_cell.s -o lstm_cell.tpu

.model "lstm-cell-8x256"            ; workload name
.arch  "tpu-v1"                     ; default machine: 256 x 256 array, 4-deep weight FIFO

.equ B,    8                        ; batch: vectors per matmul
.equ ROW,  256                      ; bytes per UB row = input size = hidden size
.equ TILE, ROW*ROW                  ; bytes per weight tile (64 KiB)
.equ GATE, 2*TILE                   ; bytes per gate: WG tile + UG tile

; ---- host memory ----
.input  x,     0x0000, B*ROW, dtype=int8, shape=(B, ROW), init=random(10)  ; x_t
.input  h,     0x0800, B*ROW, dtype=int8, shape=(B, ROW), init=random(11)  ; h_{t-1}, Q0.7
.input  c,     0x1000, B*ROW, dtype=int8, shape=(B, ROW), init=random(12)  ; c_{t-1}, Q3.4
.output h_out, 0x1800, B*ROW, dtype=int8, shape=(B, ROW)                  ; h_t, Q0.7
.output c_out, 0x2000, B*ROW, dtype=int8, shape=(B, ROW)                  ; c_t, Q3.4

; ---- weight memory: four gates, two tiles each ----
.weights w_i, 0,       GATE, init=random(20) ; [Wi; Ui] input gate
.weights w_f, w_i.end, GATE, init=random(21) ; [Wf; Uf] forget gate
.weights w_o, w_f.end, GATE, init=random(22) ; [Wo; Uo] output gate
.weights w_g, w_o.end, GATE, init=random(23) ; [Wg; Ug] candidate (cell input)

; ---- unified buffer (rows) ----
.ub xv,    0,          B            ; x_t   (names x, h, c are taken by the host regions)
.ub hv,    xv.end,     B            ; h_{t-1}
.ub cv,    hv.end,     B            ; c_{t-1}
.ub gi,    cv.end,     B            ; i gate, Q0.7  -+
.ub gf,    gi.end,     B            ; f gate, Q0.7   | written by one act (rows = 3*B)
.ub go,    gf.end,     B            ; o gate, Q0.7  -+
.ub gg,    go.end,     B            ; g (candidate), Q0.7
.ub fc,    gg.end,     B            ; f * c, Q3.4
.ub ig,    fc.end,     B            ; i * g, Q3.4
.ub c_new, ig.end,     B            ; c_t, Q3.4
.ub tc,    c_new.end,  B            ; tanh(c_t), Q0.7
.ub h_new, tc.end,     B            ; h_t, Q0.7

; ---- accumulators (rows of 256 int32) ----
.acc a_i, 0,       B                ; pre-activation of i
.acc a_f, a_i.end, B                ; pre-activation of f
.acc a_o, a_f.end, B                ; pre-activation of o
.acc a_g, a_o.end, B                ; pre-activation of g

    tag    tag=0                    ; phase 0: weights and inputs
    rw     waddr=w_i, tiles=4       ; Wi Ui Wf Uf (w_i and w_f are adjacent): FIFO full
    rhm    host=x, ub=xv, rows=B    ; x_t -> UB (host_stride/host_row_bytes at reset: 256)
    rhm    host=h, ub=hv, rows=B    ; h_{t-1} -> UB
    rhm    host=c, ub=cv, rows=B    ; c_{t-1} -> UB
    sync   units=host               ; the matmuls read x and h: wait for the DMAs

gates:                              ; four gates, two matmuls each
    tag    tag=1                    ; phase 1: gate pre-activations
    matmul ub=xv, acc=a_i, rows=B, switch             ; Wi active: a_i  = x * Wi
    matmul ub=hv, acc=a_i, rows=B, switch, accumulate ; Ui active: a_i += h * Ui
    rw     waddr=w_o, tiles=2       ; refill the FIFO with Wo Uo (waits for free slots)
    matmul ub=xv, acc=a_f, rows=B, switch             ; Wf active: a_f  = x * Wf
    matmul ub=hv, acc=a_f, rows=B, switch, accumulate ; Uf active: a_f += h * Uf
    rw     waddr=w_g, tiles=2       ; refill with Wg Ug
    matmul ub=xv, acc=a_o, rows=B, switch             ; Wo active: a_o  = x * Wo
    matmul ub=hv, acc=a_o, rows=B, switch, accumulate ; Uo active: a_o += h * Uo
    matmul ub=xv, acc=a_g, rows=B, switch             ; Wg active: a_g  = x * Wg
    matmul ub=hv, acc=a_g, rows=B, switch, accumulate ; Ug active: a_g += h * Ug

acts:                               ; nonlinearities (activation unit)
    tag    tag=2                    ; phase 2: gate activations
    act    acc=a_i, ub=gi, rows=3*B, func=sigmoid, shift=7  ; i, f, o = sigmoid(a / 2^7 as Q7.8)
    act    acc=a_g, ub=gg, rows=B, func=tanh, shift=7       ; g = tanh(a_g / 2^7 as Q7.8)

cell:                               ; element-wise cell update (same activation unit, in order)
    tag    tag=3                    ; phase 3: c_t and h_t
    vec    op=mul, src=gf, src_b=cv, ub=fc, rows=B, shift=7     ; fc = f * c / 2^7   (Q3.4)
    vec    op=mul, src=gi, src_b=gg, ub=ig, rows=B, shift=10    ; ig = i * g / 2^10  (Q3.4)
    vec    op=add, src=fc, src_b=ig, ub=c_new, rows=B           ; c_t = fc + ig      (Q3.4)
    vec    op=pass, src=c_new, src_b=0, ub=tc, rows=B, mult=16, func=tanh ; tc = tanh(c_t) (Q3.4 x 16 = Q7.8 in, Q0.7 out); pass reads no b
    vec    op=mul, src=go, src_b=tc, ub=h_new, rows=B, shift=7  ; h_t = o * tc / 2^7 (Q0.7)

out:                                ; results to the host
    tag    tag=4                    ; phase 4: output DMA
    barrier                         ; drain every unit: c_new and h_new are final
    whm    host=h_out, ub=h_new, rows=B ; h_t -> host
    whm    host=c_out, ub=c_new, rows=B ; c_t -> host
    halt                            ; end of program
