; A matmul reads UB rows a DMA is still writing: the program lacks `sync units=host`.
; (The DMA runs [2, 34085); the matmul would start at 1707, once its tile has shifted in.)
.model "hazard"
.weights w, 0, 65536, init=random(1)
.input x, 0, 524288, init=zero
    rw     waddr=w, tiles=1
    rhm    host=x, ub=0, rows=2048           ; 512 KiB: about 34,000 cycles
    matmul ub=0, acc=0, rows=8, switch
    halt
