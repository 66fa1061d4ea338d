; A program with an error, for bad_program.toml: the sweep refuses it when it reads the spec.
    matmul ub=0, acc=0, rows=8, swich
    halt
