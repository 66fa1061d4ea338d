# workloads/small/mnist_mlp.toml, batch 2, compiled for a 16 x 16 array: 1932 instructions.
disasm 0 12
break unit act end
continue
units
print fifo
disasm
watch host output
info breakpoints
delete 1
continue
print host output
continue
