# tests/data/run/wide_array.s on an 8 x 1024 array: the columns' numbers in the `array` header
# read downwards, one line per digit place, up to the thousands (column 1000 reads 1, 0, 0, 0).
break matmul
continue
step 1010
array
array 0 992 32
array 0 1016 8
quit
