# tests/data/run/hazard.s: the matmul reads UB rows a DMA is still writing (no sync).
break matmul
continue
units
continue
