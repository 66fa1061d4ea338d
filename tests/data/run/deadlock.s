; Switches to a weight tile that no read_weights fetches: the matrix unit waits forever.
.model "deadlock"
    matmul ub=0, acc=0, rows=8, switch
    halt
