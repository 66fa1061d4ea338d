; mlp2.s: a two-layer perceptron (MLP), written by hand for the default tpu-v1 machine.
;
; WHAT IT COMPUTES
;   X  : 16 x 512 int8    a batch of B = 16 input vectors of K = 512 features (host, row-major)
;   W1 : 512 x 256 int8   hidden-layer weights   (weight memory, row-major: byte k*256 + j = W1[k][j])
;   W2 : 256 x 256 int8   output-layer weights, only columns 0..9 are meaningful (see PADDING)
;   H  = relu(requant(X * W1, shift 11))          16 x 256 int8, values 0..127
;   Y  = requant(H * W2, shift 10)                16 x 10 int8 (identity activation)
; where, for an int32 accumulator value a, requant(a, shift s) = round_half_away(a / 2^s)
; saturated to -128..127 (act with mult=1, shift=s; relu is applied before saturation).
; Written element by element:
;   H[b][j] = min(127, max(0, round_half_away( (sum over k<512 of X[b][k]*W1[k][j]) / 2^11 )))
;   Y[b][n] = clamp(-128, 127, round_half_away( (sum over j<256 of H[b][j]*W2[j][n]) / 2^10 ))
; for 0 <= b < 16, 0 <= j < 256, 0 <= n < 10. Y goes back to the host as a dense 16 x 10 array.
; There are no biases (a bias needs act's perchan table; see docs/isa.md).
;
; WHY THESE SHIFTS
;   X and W are filled with pseudo-random bytes (init=random), i.e. int8 values spread evenly
;   over -128..127 (standard deviation about 74). A sum of 512 such products has a standard
;   deviation of about 74*74*sqrt(512) ~ 124,000, so dividing by 2^11 brings it to about 60 and
;   most hidden values land inside int8 instead of saturating. Layer 2 adds 256 products of
;   H (0..127, half of them 0) with W2, a standard deviation of about 45,000, hence 2^10.
;   (Worked out with the formulas above on these seeds: 51% of H is 0 after the ReLU, 1.4% is
;   clipped at 127; Y has a standard deviation of about 44 and 1.9% of it saturates.)
;
; HOW IT MAPS ONTO THE MACHINE (256 x 256 systolic array, UB rows of 256 bytes)
;   * One matmul multiplies up to 65,535 input vectors of 256 int8 by ONE 256 x 256 weight tile.
;     K = 512 does not fit in the 256 array rows, so W1 is split into two tiles along K:
;       W1a = W1 rows 0..255    (multiplies features   0..255 of X)
;       W1b = W1 rows 256..511  (multiplies features 256..511 of X)
;     and X * W1 = X[:, 0:256] * W1a + X[:, 256:512] * W1b: the first matmul overwrites the
;     accumulators, the second adds to them (`accumulate`).
;     Because W1 is row-major, W1a and W1b are simply the first and second 64 KiB of W1.
;   * A UB row holds 256 bytes, but an input row has 512. Two DMAs bring the two halves of
;     every row into two separate UB areas, using setcfg host_stride = 512 (distance between
;     rows in host memory) and host_row_bytes = 256 (bytes per row moved).
;   * Weights are prefetched: all three tiles (W1a, W1b, W2) are requested with `rw` at the
;     very start, so they stream from weight memory into the 4-deep weight FIFO while the
;     input DMA runs. Each matmul that starts a new tile carries `switch`, which makes the
;     next tile (already shifted into the shadow slot) the active one.
;   * `act` reads the accumulators and writes int8 results into the UB. The matrix unit does
;     not watch for that write, so a `sync units=act` comes before the layer-2 matmul that
;     reads H (a read-after-write dependency through the UB).
;
; PADDING
;   The array always computes 256 output columns. Layer 2 has only 10 outputs, so W2 is stored
;   as a full 256 x 256 tile whose columns 10..255 are padding: a compiler fills them with zeros,
;   and then columns 10..255 of the result are zero too. Column n of a matmul result depends
;   only on column n of the tile, so the padding can never change Y[:, 0..9]. (The assembler
;   has no directive to fill only some columns of a region, so here the whole tile is random:
;   columns 10..255 of the accumulators hold meaningless values. They are computed, they cost
;   the same cycles, and they are simply never sent to the host: the final DMA moves only the
;   first 10 bytes of each UB row.) 246 of the 256 columns doing useless work is exactly the
;   "unused MACs" the TPU paper counts for narrow layers.
;
; MEMORY MAP
;   host memory (bytes)       0x0000 .. 0x1fff  x   16 rows x 512 bytes (input, random seed 1)
;                             0x2000 .. 0x209f  y   16 rows x  10 bytes (output, dense)
;   weight memory (bytes)     0x00000 .. 0x1ffff  w1  two tiles: W1a at 0x00000, W1b at 0x10000
;                             0x20000 .. 0x2ffff  w2  one tile (random seed 3)
;   unified buffer (rows)     0..15   x_lo  features   0..255 of each input row
;                             16..31  x_hi  features 256..511 of each input row
;                             32..47  h     hidden activations H
;                             48..63  yv    output activations Y (256 wide, 10 used)
;   accumulators (rows)       0..15   acc_h   int32 X * W1
;                             16..31  acc_y   int32 H * W2
;
; Assemble:     build/tpusim asm workloads/asm/mlp2.s -o mlp2.tpu
; Round trip:   build/tpusim disasm mlp2.tpu -o mlp2_dis.s && build/tpusim asm mlp2_dis.s -o mlp2_rt.tpu
;               cmp mlp2.tpu mlp2_rt.tpu      (identical bytes)

.model "mlp2-16x512x256x10"         ; workload name carried into the container and reports
.arch  "tpu-v1"                     ; written for the default machine: 256 x 256 array
.meta  layers, 2                    ; free-form metadata: number of layers
.meta  note, "hand-written two-layer MLP, see workloads/asm/mlp2.s"  ; and a note

.equ B,    16                       ; batch: input vectors (rows) per matmul
.equ K,    512                      ; input features
.equ HID,  256                      ; hidden units = one tile's columns
.equ N,    10                       ; outputs actually used
.equ ROW,  256                      ; bytes in one UB row = array rows = array columns
.equ TILE, ROW*ROW                  ; bytes in one weight tile (64 KiB)

; ---- host memory: what the host driver provides and reads back ----
.input  x, 0x0000, B*K, dtype=int8, shape=(B, K), init=random(1)   ; X, row-major 16 x 512
.output y, 0x2000, B*N, dtype=int8, shape=(B, N)                  ; Y, row-major 16 x 10

; ---- weight memory: the weight image the driver loads before the run ----
.weights w1, 0,      K*HID, init=random(2)   ; W1: 512 x 256 = two tiles, W1a then W1b
.weights w2, w1.end, TILE,  init=random(3)   ; W2: one 256 x 256 tile, columns 10..255 padding

; ---- unified buffer regions (addresses and sizes in 256-byte rows) ----
.ub x_lo, 0,        B               ; rows  0..15: X[:,   0..255]
.ub x_hi, x_lo.end, B               ; rows 16..31: X[:, 256..511]
.ub h,    x_hi.end, B               ; rows 32..47: H
.ub yv,   h.end,    B               ; rows 48..63: Y (first 10 bytes of each row used)

; ---- accumulator regions (rows of 256 int32) ----
.acc acc_h, 0,         B            ; rows  0..15: X * W1
.acc acc_y, acc_h.end, B            ; rows 16..31: H * W2

start:                              ; label: instruction index 0
    tag    tag=0                    ; marker "phase 0": prefetch and input DMA
    rw     waddr=w1, tiles=2        ; prefetch W1a and W1b (2 of the 4 FIFO slots)
    rw     waddr=w2, tiles=1        ; prefetch W2 as well (3 of 4 slots): all weights in flight
    setcfg reg=host_stride, value=K ; host rows are 512 bytes apart ...
    setcfg reg=host_row_bytes, value=ROW ; ... and each DMA row moves 256 of them
    rhm    host=x, ub=x_lo, rows=B  ; first halves: bytes 0..255 of each X row -> UB rows 0..15
    rhm    host=x+ROW, ub=x_hi, rows=B ; second halves: bytes 256..511 -> UB rows 16..31
    sync   units=host               ; wait until both DMAs have written the UB

layer1:                             ; H = relu(X * W1)
    tag    tag=1                    ; marker "layer 1" for traces and the debugger
    matmul ub=x_lo, acc=acc_h, rows=B, switch ; W1a becomes active; acc_h = X_lo * W1a
    matmul ub=x_hi, acc=acc_h, rows=B, switch, accumulate ; W1b active; acc_h += X_hi * W1b
    act    acc=acc_h, ub=h, rows=B, func=relu, shift=11 ; H = relu(round(acc_h / 2^11)) -> UB
    sync   units=act                ; RAW: the next matmul reads H, so wait for act to finish

layer2:                             ; Y = H * W2
    tag    tag=2                    ; marker "layer 2"
    matmul ub=h, acc=acc_y, rows=B, switch ; W2 becomes active; acc_y = H * W2
    act    acc=acc_y, ub=yv, rows=B, func=identity, shift=10 ; Y = round(acc_y / 2^10) -> UB

output:                             ; send Y to the host
    tag    tag=3                    ; marker "output"
    barrier                         ; drain: every unit idle, so Y is complete in the UB
    setcfg reg=host_stride, value=N ; output rows are 10 bytes apart in host memory ...
    setcfg reg=host_row_bytes, value=N ; ... and only bytes 0..9 of each UB row are sent
    whm    host=y, ub=yv, rows=B    ; UB rows 48..63 (first 10 bytes each) -> host y, dense
    halt                            ; end of program once the DMA has finished
