"""tpusim.run on an ONNX model with data (docs/python.md, "Accuracy"): samples, calibration samples
and labels as arrays or .npy paths give the same figures as `tpusim run --input --calibrate
--labels` (tests/CMakeLists.txt pins digits_mlp.onnx at 96.80% float and int8 on its 250 test
images); outputs=True gives the simulated int8 output dequantized and the float model's, whose
top-1 recomputed here is the report's; check=True checks the output bit for bit; bad data raises
InputError."""
import sys

import numpy as np

import tpusim
from refusal import refused  # (tests/python/refusal.py)

src = sys.argv[1]
t = f"{src}/workloads/trained"
model = f"{t}/digits_mlp.onnx"
x, y = np.load(f"{t}/test_mlp.npy"), np.load(f"{t}/test_labels.npy").astype(np.int64)

# Arrays (labels int64, as numpy and torch make them) and paths give the same report.
r = tpusim.run(model, input=x, labels=y, calibrate=f"{t}/calib_mlp.npy", outputs=True)
p = tpusim.run(model, input=f"{t}/test_mlp.npy", labels=f"{t}/test_labels.npy", calibrate=f"{t}/calib_mlp.npy")
assert r["accuracy"] == {"samples": 250, "top1_float": 0.968, "top1_int8": 0.968}, r["accuracy"]
assert p["accuracy"] == r["accuracy"], p["accuracy"]
assert r["output_matches_reference"] is True and p["output_matches_reference"] is True
assert r["cycles"] == p["cycles"] == 5602, r["cycles"]  # docs/onnx.md's table: digits_mlp, batch 250
assert r["batch"] == 250, r["batch"]
# The outputs: [250, 10] float32; their top-1 is the report's; the int8 output is within the
# quantization error the report gives of the float one (max |int8 - float| logit).
out, ref = r["output"], r["float_output"]
assert out.shape == ref.shape == (250, 10) and out.dtype == np.float32, (out.shape, out.dtype)
assert np.mean(out.argmax(1) == y) == r["accuracy"]["top1_int8"]
assert np.mean(ref.argmax(1) == y) == r["accuracy"]["top1_float"]
max_abs = r["quantization_error"]["max_abs"]
assert abs(np.abs(out - ref).max() - max_abs) <= 1e-5 * max_abs, (np.abs(out - ref).max(), max_abs)
assert 0 < max_abs < 0.05 * np.abs(ref).max()
# check=True alone: the golden check, no accuracy; without data arguments nothing is checked.
c = tpusim.run(model, input=x[:8], check=True)
assert c["output_matches_reference"] is True and c["accuracy"] is None and c["batch"] == 8
assert tpusim.run(model, input=x[:8])["output_matches_reference"] is None
# compile() takes the same data: the program holds the 8 samples.
assert tpusim.compile(model, input=x[:8], calibrate=x[:32])["batch"] == 8


refused(lambda: tpusim.run(model, input=x, labels=y[:10]), "labels: 10 labels for 250 samples (one class per input sample)")
refused(lambda: tpusim.run(model, input=x, labels=y + 0.5), "labels: 7.5 is not a class number")  # the first label is 7
refused(lambda: tpusim.run(model, input=x[:, :32]), "shape [250, 32]; expected [250, 64] (the ONNX input x")
refused(lambda: tpusim.run(model, input=x, labels=y, engine="timing"),
        "engine 'timing' computes no data: labels needs engine='fast' or 'stepped'")
refused(lambda: tpusim.run(f"{src}/workloads/asm/matmul.s", input=x), "input applies to models, not programs")
refused(lambda: tpusim.run(model, input=[["a"]]), "input: not an array of numbers")
print("ok")
