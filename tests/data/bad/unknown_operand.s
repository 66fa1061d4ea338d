; expect: ^unknown_operand\.s:3:21: error: matmul has no operand 'row' \(operands: accumulate, switch, unsigned, ub, acc, rows, repeat, stride, lane\)$
; An operand matmul does not have.
matmul ub=0, acc=0, row=8
