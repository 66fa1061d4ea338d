; expect: ^unexpected_character\.s:3:13: error: unexpected character '@'$
; A character the assembler does not use.
tag tag=1 + @2
