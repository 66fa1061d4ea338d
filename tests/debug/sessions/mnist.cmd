# workloads/small/mnist_mlp.toml, batch 2, compiled for a 16 x 16 array: 1980 instructions.
disasm 0 12
break layer nosuch
break layer hiden2
break layer hidden2
continue
print weights 0 0 4
print tile active 0 0 4
break layer hidden1
reverse-continue
back
delete 1 2
break unit act end
continue
units
print fifo
disasm
watch host output
info breakpoints
delete 3
continue
print host output
continue
