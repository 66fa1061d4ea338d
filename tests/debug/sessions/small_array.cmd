# tests/data/run/small.s on a 16 x 16 array: the wavefront of a 4-vector matmul, cell by cell.
break matmul
continue
# t0 = 708: nothing has entered the array yet (cycle t0's inputs move at its end).
array
step
array
print cell 0 0
step 3
array
# x[k][j] at cycle T is element k of the vector that entered row 0 at T - 1 - k - j.
print cell 2 1
print cell 0 3
print ub 0 4
units
# The first result leaves the bottom row at the end of t0 + 15 and is written in t0 + 16.
watch acc 0 4
continue
array
delete 2
step 12
array
units
break 4 end
continue
print ub 4 4
watch host y
continue
print host y
info breakpoints
continue
restart
info breakpoints
continue
disasm
quit
