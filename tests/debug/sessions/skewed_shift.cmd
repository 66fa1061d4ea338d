# tests/data/run/small.s on a 16 x 16 array: tile 0 shifts into the shadow tile skewed by column
# (weight_shift_skewed = 1) from cycle 107: cell (r, j) is written in cycle 107 + r + j, so at
# cycle T the cells with r + j <= T - 108 hold it (row 15, column 15 from cycle 138), while the
# array idles (its first matmul starts at 708).
break cycle 130
continue
# At 130: r + j <= 22.
print weights shadow 8 8 8
print cell 15 7
print cell 15 8
# At 125 (the run replayed from cycle 0): r + j <= 17.
back 5
print weights shadow 8 8 8
delete 1
break cycle 500
continue
# At 500 every cell holds the tile.
print weights shadow 12 12 4
print tile 0 12 12 4
print cell 15 15
quit
