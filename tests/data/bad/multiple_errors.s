; expect: ^multiple_errors\.s:6:1: error: unknown mnemonic 'mov'$
; expect: ^multiple_errors\.s:7:12: error: 'hots' is not a units name \(one of: host, weights, matrix, act\)
; expect: ^multiple_errors\.s:8:6: error: halt has no operand 'now' \(operands: none\)$
; Three independent mistakes, all reported in one run (the good line between them is fine).
nop
mov ub=0
sync units=hots
halt now
