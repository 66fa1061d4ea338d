; expect: ^rows_zero\.s:3:26: error: rows = 0 is out of range \(1\.\.65535\)$
; A count of zero.
matmul ub=0, acc=0, rows=0
