# Mistakes get a message naming what was expected; the session goes on.
frobnicate
back
reverse-continue
break layer conv1
array 0 0
array 16 0 4
array 0 0 0
print tile
print tile 99
print tile shadow
print tile 0 0 16
print weights 0
print weights shadow 0 0 0
step x
step 0
step 1 2
step 2
back 3
back 0
back x
back 1
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
# an error in any number deletes none of them
break matmul
delete 1 7
info breakpoints
delete 1 1
disasm 0 0
print host x 0 0
print/x cell 0 0
print/x weights
print/x ub 4 1
step 99999999999999999999
back 0x10000000000000000
# near misses get a suggestion
contineu
help stpe
break mamtul
break unit hots
break unit activaton
break unit weight_fech
print fifi
watch acx 0
print host yy
quit now
quit
step
