# Mistakes get a message naming what was expected; the session goes on.
frobnicate
step x
step 0
step 1 2
step 2
break
break 999
break cycle 0
break frob
break unit gpu
break matmul later
print
print ub
print ub 99999999
print ub 0 0
print acc nosuch
print cell 99 0
print cell 1
print host nosuch
print host y 999
print fifo now
watch
watch ub
watch host
delete 42
delete x
info
help nosuch
help s
disasm 99
disasm x
next 0
next
quit now
quit
step
