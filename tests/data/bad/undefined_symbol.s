; expect: ^undefined_symbol\.s:4:10: error: unknown name 'wieghts' \(constants and regions must be defined before use\)$
; A misspelt region name.
.weights weights, 0, 65536
rw waddr=wieghts, tiles=1
