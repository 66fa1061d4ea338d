; expect: ^missing_file\.s:3:29: error: .*no_such_input\.bin: cannot open: No such file or directory$
; Input data from a file that is not there.
.input x, 0, 256, init=file("no_such_input.bin")
