; expect: ^missing_operand\.s:4:5: error: rhm needs operand 'rows' \(number of rows\)$
; rhm without its row count.
.equ X, 0
    rhm host=X, ub=0
