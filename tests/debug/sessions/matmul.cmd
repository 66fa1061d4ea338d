# workloads/asm/matmul.s on tpu-v1 (256 x 256): walk the program one issue at a time, stop where
# the matmul starts, look inside the array, watch the output rows, run to the halt.
help
disasm
next
step 3
units
next
break 3
info breakpoints
continue
units
print fifo
# t0 = 1707: at cycle t0 + 4 cell (k, j) holds vector t0 + 4 - 1 - k - j - t0 = 3 - k - j.
step 4
print cell 0 0
print cell 1 2
print cell 3 1
step 100
array
watch ub yout
continue
continue
print host y 0 32
continue
step
