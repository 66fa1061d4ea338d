# tests/data/run/small.s on a 16 x 16 array: a window SIZE past the array's edge stops at the
# edge, up to the largest SIZE (2^64 - 1: row + SIZE must not wrap around to an empty window).
break matmul
continue
step 3
array 15 15 18446744073709551615
print weights 15 15 18446744073709551615
print weights shadow 14 0 18446744073709551615
array 0 14 3
print weights 0 14 3
quit
