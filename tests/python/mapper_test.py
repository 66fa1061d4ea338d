"""tpusim.run / tpusim.compile with mapper= (compiler/lower_options.h): the same switches and
figures as `tpusim run --mapper` (tests/CMakeLists.txt pins LeNet-5 at batch 8 on tpu-v1: 7 weight
tiles and 49,814 cycles packed and dense, 56,002 with dense off; 77 tiles and 193,614 cycles with
pack off), and clear refusals."""
import sys

import tpusim
from refusal import refused  # (tests/python/refusal.py)

src = sys.argv[1]
lenet = f"{src}/workloads/small/lenet5.toml"

packed = tpusim.run(lenet, engine="timing")
plain = tpusim.run(lenet, engine="timing", mapper={"pack": False})
assert packed["cycles"] == 49814, packed["cycles"]
assert tpusim.run(lenet, engine="timing", mapper={"dense": False})["cycles"] == 56002
assert plain["cycles"] == 193614, plain["cycles"]
assert packed["mapper"] == {}, packed["mapper"]
assert plain["mapper"] == {"pack": False}, plain["mapper"]
assert tpusim.run(lenet, engine="timing", mapper={"pack": "off"})["cycles"] == 193614
assert tpusim.compile(lenet, mapper={"pack": False})["weight_tiles"] == 77
assert tpusim.compile(lenet)["weight_tiles"] == 7


refused(lambda: tpusim.run(lenet, engine="timing", mapper={"packing": False}),
        "mapper: 'packing': unknown mapper switch; expected one of fuse, pack")
refused(lambda: tpusim.run(lenet, engine="timing", mapper=["pack=off"]), "mapper: expected a dict")
refused(lambda: tpusim.run(f"{src}/workloads/asm/matmul.s", engine="timing", mapper={"pack": False}),
        "mapper applies to models, not programs")
print("ok")

# precision= as --precision (tests/CMakeLists.txt: wide_mlp.toml takes 3,538 cycles with int8 weights,
# 3,795 with the 16-bit fc1 the automatic choice gives it).
wide = f"{src}/workloads/small/wide_mlp.toml"
assert tpusim.run(wide, engine="timing")["cycles"] == 3795
assert tpusim.run(wide, engine="timing", precision="int8")["cycles"] == 3538
# The user's precision sets the description's keys aside, as --precision does (tests/CMakeLists.txt:
# wide16.toml 92,553 cycles as described, 77,436 all int8).
wide16 = f"{src}/tests/data/models/wide16.toml"
assert tpusim.run(wide16, engine="timing")["cycles"] == 92553
assert tpusim.run(wide16, engine="timing", precision="int8")["cycles"] == 77436
refused(lambda: tpusim.run(wide, engine="timing", precision="int16"),
        "precision: 'int16': expected 'auto', 'int8' or 'wide'")
refused(lambda: tpusim.run(f"{src}/workloads/asm/matmul.s", engine="timing", precision="int8"),
        "precision applies to models, not programs")
print("ok: precision")
