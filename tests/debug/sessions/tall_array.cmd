# A 128 x 2 array: the whole array's view, one character per 4 x 4 block (2 columns: one block
# wide), numbers its one column of blocks with one line of digits.
array
array 120 0 8
quit
