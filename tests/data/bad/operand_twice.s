; expect: ^operand_twice\.s:3:18: error: operand 'acc' given twice$
; The same operand given twice.
act acc=0, ub=0, acc=1, rows=1
