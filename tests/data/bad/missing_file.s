; expect: ^missing_file\.s:3:29: error: cannot read ".*no_such_input\.bin": No such file or directory$
; Input data from a file that is not there.
.input x, 0, 256, init=file("no_such_input.bin")
