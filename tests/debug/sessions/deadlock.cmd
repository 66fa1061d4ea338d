# tests/data/run/deadlock.s: the barrier waits for read_weights, which waits for a FIFO slot.
continue
units
print fifo
step
