; expect: ^bad_region\.s:3:9: error: host region "y": shape does not match its 100 bytes of int32$
; A region whose shape disagrees with its size.
.output y, 0x1000, 100, dtype=int32, shape=5x4
