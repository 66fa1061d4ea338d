; expect: ^too_many_errors\.s:23:1: error: unknown mnemonic 'garbage'$
; expect: ^too_many_errors\.s: too many errors, stopping$
; Thirty bad lines: the first twenty are reported, then the assembler stops.
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
garbage
