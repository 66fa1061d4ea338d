; expect: ^unknown_directive\.s:3:1: error: unknown directive '\.section' \(directives:
; A directive from another assembler.
.section .text
