; expect: ^division_by_zero\.s:4:13: error: division by zero$
; A constant divided by another that is zero.
.equ ZERO, 0
.equ X, 256 / ZERO
