; conv3x3.s: a 3x3 convolution as nine accumulating matmuls, for the default tpu-v1 machine.
;
; WHAT IT COMPUTES (one image, "valid" convolution: no padding, stride 1, no bias)
;   I : 6 x 6 pixels x 256 input channels, int8        (host, pixel-major: byte (y*6 + x)*256 + ci)
;   F : 3 x 3 x 256 x 256 int8 kernel                   (weight memory, one tile per kernel position)
;   O : 4 x 4 pixels x 256 output channels, int8        (host, same pixel-major layout)
;   O[y][x][co] = min(127, max(0, round_half_away( S / 2^12 )))   (ReLU, saturated to int8)
;   S           = sum over r < 3, s < 3, ci < 256 of I[y+r][x+s][ci] * F[r][s][ci][co]
;   for 0 <= y, x < 4 and 0 <= co < 256.
;   S adds 9 * 256 = 2304 products; with random int8 data its standard deviation is about
;   74 * 74 * sqrt(2304) ~ 263,000, so 2^12 brings it to about 64 before the ReLU.
;
; HOW A CONVOLUTION MAPS ONTO THE ARRAY
;   Input channels go to the 256 array rows, output channels to the 256 array columns. Each
;   pixel is one UB row (its 256 channels), so the input map is 36 UB rows: pixel (y, x) at
;   row in + y*6 + x. For one kernel position (r, s) the weight tile is F[r][s] (256 x 256,
;   byte ci*256 + co), and every output pixel (y, x) needs input pixel (y+r, x+s):
;     output row y, pixels x = 0..3  <-  input rows in + (y+r)*6 + s  ..  + 3   (4 consecutive rows)
;   so one matmul with rows=4 (one output row), repeat=4 (four output rows) and stride=6 (one
;   input row further per group) covers the whole output for that kernel position:
;     matmul ub = in + r*6 + s, rows = 4, repeat = 4, stride = 6
;   reads group g (= output row y) at in + r*6 + s + g*6, and result i = y*4 + x lands in
;   accumulator row out + i, which is exactly the pixel-major output layout.
;   Nine kernel positions = nine matmuls into the same 16 accumulator rows: the first
;   overwrites, the other eight add (`accumulate`). Each uses a new tile (`switch`).
;
; WEIGHT FIFO
;   Nine tiles, four FIFO slots. The first `rw` fills the FIFO; later `rw`s top it up while
;   the matrix unit works. An `rw` with no free slot holds issue until a `switch` frees one,
;   so each refill is placed after the matmuls whose tiles make room for it.
;
; MEMORY MAP
;   host memory      0x0000 img (36 rows x 256 = 9216 bytes), 0x4000 res (16 x 256 = 4096 bytes)
;   weight memory    0x00000 .. 0x8ffff  f: 9 tiles, tile k = 3*r + s at k * 0x10000
;   unified buffer   rows 0..35 in (input map), 36..51 outp (output map)
;   accumulators     rows 0..15 sums (one per output pixel)
;
; Assemble:   build/tpusim asm workloads/asm/conv3x3.s -o conv3x3.tpu

.model "conv3x3-6x6x256-to-4x4x256"  ; workload name
.arch  "tpu-v1"                     ; default machine: 256 x 256 array

.equ IH, 6                          ; input height (pixels)
.equ IW, 6                          ; input width (pixels)
.equ OH, IH-2                       ; output height: 4
.equ OW, IW-2                       ; output width: 4
.equ C, 256                         ; channels in and out = bytes per UB row
.equ TILE, C*C                      ; bytes per weight tile (64 KiB)

.input  img, 0x0000, IH*IW*C, dtype=int8, shape=(IH, IW, C), init=random(30)  ; I
.output res, 0x4000, OH*OW*C, dtype=int8, shape=(OH, OW, C)                   ; O
.weights f, 0, 9*TILE, init=random(31)   ; F: tile k = 3*r + s holds F[r][s][ci][co]

.ub  in,   0,      IH*IW            ; input map, one pixel per row
.ub  outp, in.end, OH*OW            ; output map, one pixel per row
.acc sums, 0,      OH*OW            ; int32 sums, one row per output pixel

    tag    tag=0                    ; phase 0: load
    rw     waddr=f, tiles=4         ; tiles (0,0) (0,1) (0,2) (1,0): FIFO full
    rhm    host=img, ub=in, rows=IH*IW ; the 36 input pixels -> UB (256 bytes each)
    sync   units=host               ; matmuls read the input map: wait for the DMA

conv:                               ; nine kernel positions (r, s)
    tag    tag=1                    ; phase 1: convolution
    matmul ub=in+0*IW+0, acc=sums, rows=OW, repeat=OH, stride=IW, switch             ; (0,0) overwrite
    matmul ub=in+0*IW+1, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (0,1) add
    rw     waddr=f+4*TILE, tiles=2  ; refill: tiles (1,1) (1,2)
    matmul ub=in+0*IW+2, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (0,2) add
    matmul ub=in+1*IW+0, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (1,0) add
    rw     waddr=f+6*TILE, tiles=2  ; refill: tiles (2,0) (2,1)
    matmul ub=in+1*IW+1, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (1,1) add
    matmul ub=in+1*IW+2, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (1,2) add
    rw     waddr=f+8*TILE, tiles=1  ; refill: the last tile (2,2)
    matmul ub=in+2*IW+0, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (2,0) add
    matmul ub=in+2*IW+1, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (2,1) add
    matmul ub=in+2*IW+2, acc=sums, rows=OW, repeat=OH, stride=IW, switch, accumulate ; (2,2) add

    tag    tag=2                    ; phase 2: activation
    act    acc=sums, ub=outp, rows=OH*OW, func=relu, shift=12 ; O = relu(round(S / 2^12)) -> UB

    tag    tag=3                    ; phase 3: store
    barrier                         ; drain every unit: the output map is complete
    whm    host=res, ub=outp, rows=OH*OW ; the 16 output pixels -> host
    halt                            ; end of program
