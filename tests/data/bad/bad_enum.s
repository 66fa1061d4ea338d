; expect: ^bad_enum\.s:3:31: error: 'relu7' is not a func value \(one of: identity, relu, relux, sigmoid, tanh\)$
; An activation function that does not exist.
act acc=0, ub=0, rows=1, func=relu7
