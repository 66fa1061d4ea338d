; expect: ^duplicate_label\.s:5:1: error: 'loop' is already defined$
; The same label twice.
loop:
    nop
loop: halt
