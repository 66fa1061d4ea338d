# tests/data/run/shift_after_failure.s: the run fails at cycle 172, after tile 1's shift was
# decided for cycle 324, when it lands. At cycle 172 it is still on its way (no shift begun).
continue
print fifo
units
