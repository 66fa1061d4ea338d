; expect: ^unknown_mnemonic\.s:5:5: error: unknown mnemonic 'matmull'$
; A misspelt mnemonic.
.equ N, 8
    nop
    matmull ub=0, acc=0, rows=N
