; expect: ^malformed_number\.s:3:9: error: malformed number '0x12G4'$
; A hex literal with a stray letter.
tag tag=0x12G4
