; expect: ^value_out_of_range\.s:4:11: error: ub = 16777216 is out of range \(0\.\.16777215\)$
; A UB address one past the 24-bit field.
.equ UB_ROWS, 1 << 24
matmul ub=UB_ROWS, acc=0, rows=1
