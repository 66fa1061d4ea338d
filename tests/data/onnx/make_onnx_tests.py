#!/usr/bin/python3
"""Writes the small ONNX models tests/compiler/onnx_test.cpp imports, one or a few operators
each, with python3-onnx's helper (no framework), and for each a seeded input (x_NAME.npy, batch
first in the ONNX input's layout) and the output the ONNX graph means (y_NAME.npy), computed
here with plain numpy loops. Also bad_*.onnx: graphs the importer must refuse.

    /usr/bin/python3 tests/data/onnx/make_onnx_tests.py   (rewrites the files beside it)

The files are committed: the tests need neither this script nor python.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
N = 3  # batch


def f32(*shape, scale=1.0):
    return (rng.uniform(-1, 1, size=shape) * scale).astype(np.float32)


def save(name, nodes, inputs, output, inits, x=None, y=None, opset=13):
    if y is not None:
        output = helper.make_tensor_value_info(output.name, TensorProto.FLOAT, ["N"] + list(y.shape[1:]))
    graph = helper.make_graph(nodes, name, inputs, [output], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_onnx_tests")
    if not name.startswith("bad_"):
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))
    if x is not None:
        np.save(os.path.join(OUT, "x_" + name + ".npy"), x)
        np.save(os.path.join(OUT, "y_" + name + ".npy"), y.astype(np.float32))


def inp(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def outp(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


# ---- plain references (NCHW) ------------------------------------------------------------------

def conv(x, w, b, stride=1, pad=0, group=1):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), np.float64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    per = m // group
    for j in range(m):
        g = j // per
        for oy in range(oh):
            for ox in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, oy * stride:oy * stride + kh, ox * stride:ox * stride + kw]
                y[:, j, oy, ox] = (patch * w[j]).sum(axis=(1, 2, 3)) + (b[j] if b is not None else 0)
    return y


def pool(x, k, s, op):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            y[:, :, oy, ox] = op(x[:, :, oy * s:oy * s + k, ox * s:ox * s + k], axis=(2, 3))
    return y


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm(x_tnf, w, r, b, hidden):  # ONNX gates i, o, f, c
    t_steps, n, _ = x_tnf.shape
    h = np.zeros((n, hidden))
    c = np.zeros((n, hidden))
    ys = []
    for t in range(t_steps):
        z = x_tnf[t] @ w[0].T + h @ r[0].T + b[0][:4 * hidden] + b[0][4 * hidden:]
        i, o, f, g = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h


relu = lambda v: np.maximum(v, 0)

# ---- operators --------------------------------------------------------------------------------

def gemm():
    x, w1, b1, w2, b2 = f32(N, 12), f32(16, 12), f32(16), f32(16, 5), f32(5)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1, alpha=0.5, beta=2.0),
             helper.make_node("Relu", ["h"], ["r"], name="relu1"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="fc2")]
    y = relu(0.5 * x @ w1.T + 2 * b1) @ w2 + b2
    save("gemm", nodes, [inp("x", ["N", 12])], outp("y"), dict(w1=w1, b1=b1, w2=w2, b2=b2), x, y)


def matmul_add():
    x, w, b = f32(N, 12), f32(12, 8), f32(8)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
             helper.make_node("Sigmoid", ["a"], ["y"], name="sig")]
    save("matmul_add", nodes, [inp("x", ["N", 12])], outp("y"), dict(w=w, b=b), x, sigmoid(x @ w + b))


def matmul_seq():
    x, w = f32(N, 5, 6), f32(6, 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Tanh", ["m"], ["y"], name="tanh")]
    save("matmul_seq", nodes, [inp("x", ["N", 5, 6])], outp("y"), dict(w=w), x, np.tanh(x @ w))


def conv_pad_stride():
    x, w, b = f32(N, 3, 9, 9), f32(8, 3, 3, 3), f32(8)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    save("conv_pad_stride", nodes, [inp("x", ["N", 3, 9, 9])], outp("y"), dict(w=w, b=b), x, relu(conv(x, w, b, 2, 1)))


def conv_group():
    x, w, b = f32(N, 4, 6, 6), f32(6, 2, 3, 3), f32(6)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="gconv", pads=[1, 1, 1, 1], group=2)]
    save("conv_group", nodes, [inp("x", ["N", 4, 6, 6])], outp("y"), dict(w=w, b=b), x, conv(x, w, b, 1, 1, 2))


def conv_same_bn_clip():
    x, w = f32(N, 2, 7, 7), f32(5, 2, 3, 3)
    gamma, beta, mean, var = f32(5) + 1.5, f32(5), f32(5), np.abs(f32(5)) + 0.5
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", auto_pad="SAME_UPPER"),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn", epsilon=1e-3),
             helper.make_node("Clip", ["n", "lo", "hi"], ["y"], name="relu6")]
    c = conv(x, w, None, 1, 1)
    bn = (c - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-3) * gamma[None, :, None, None] + beta[None, :, None, None]
    save("conv_same_bn_clip", nodes, [inp("x", ["N", 2, 7, 7])], outp("y"),
         dict(w=w, gamma=gamma, beta=beta, mean=mean, var=var, lo=np.array(0, np.float32), hi=np.array(6, np.float32)),
         x, np.clip(bn, 0, 6))


def pools():
    x, w, b, w2, b2 = f32(N, 2, 8, 8), f32(4, 2, 3, 3), f32(4), f32(4 * 3 * 3, 6), f32(6)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], name="max", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["p"], ["q"], name="avg", kernel_shape=[2, 2], strides=[1, 1]),
             helper.make_node("Flatten", ["q"], ["f"], name="flat", axis=1),
             helper.make_node("MatMul", ["f", "w2"], ["m"], name="fc"), helper.make_node("Add", ["m", "b2"], ["y"], name="fcb")]
    q = pool(pool(conv(x, w, b, 1, 1), 2, 2, np.max), 2, 1, np.mean)
    save("pools", nodes, [inp("x", ["N", 2, 8, 8])], outp("y"), dict(w=w, b=b, w2=w2, b2=b2), x, q.reshape(N, -1) @ w2 + b2)


def global_avg_reshape():
    x, w, b, w2 = f32(N, 3, 6, 6), f32(8, 3, 3, 3), f32(8), f32(5, 8 * 2 * 2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="head", transB=1)]
    r = relu(conv(x, w, b, 2, 1))
    wg, bg = f32(4, 8), f32(4)
    save("global_avg", nodes, [inp("x", ["N", 3, 6, 6])], outp("y"), dict(w=w, b=b, wg=wg, bg=bg), x,
         r.mean(axis=(2, 3)) @ wg.T + bg)
    # Reshape as a flatten of a 2 x 2 x 8 map (rows in c, h, w order), then a Gemm.
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"], name="reshape"),
             helper.make_node("Gemm", ["f", "w2"], ["y"], name="head", transB=1)]
    x = f32(N, 3, 8, 8)
    p = pool(conv(x, w, b, 2, 1), 2, 2, np.max)
    save("reshape", nodes, [inp("x", ["N", 3, 8, 8])], outp("y"), dict(w=w, b=b, w2=w2, shape=np.array([0, -1], np.int64)),
         x, p.reshape(N, -1) @ w2.T)


def add_mul_softmax():
    x, wa, wb, wc = f32(N, 10), f32(10, 7), f32(10, 7), f32(7, 4)
    nodes = [helper.make_node("MatMul", ["x", "wa"], ["a"], name="a"), helper.make_node("MatMul", ["x", "wb"], ["b"], name="b"),
             helper.make_node("Tanh", ["b"], ["tb"], name="tb"),
             helper.make_node("Add", ["a", "tb"], ["s"], name="sum"), helper.make_node("Mul", ["s", "tb"], ["p"], name="prod"),
             helper.make_node("Relu", ["p"], ["pk"], name="relu"),
             helper.make_node("MatMul", ["pk", "wc"], ["l"], name="logits"),
             helper.make_node("Mul", ["l", "k"], ["lk"], name="scale"),
             helper.make_node("Softmax", ["lk"], ["y"], name="softmax", axis=1)]
    a, tb = x @ wa, np.tanh(x @ wb)
    k = np.array([2.0, 0.5, 1.0, 3.0], np.float32)
    logits = relu((a + tb) * tb) @ wc * k  # the Softmax is the host's: the model's output is the logits
    save("add_mul_softmax", nodes, [inp("x", ["N", 10])], outp("y"), dict(wa=wa, wb=wb, wc=wc, k=k), x, logits)


def lstms():
    t, f, h1, h2 = 5, 4, 6, 3
    x = f32(N, t, f)
    w1, r1, b1 = f32(1, 4 * h1, f), f32(1, 4 * h1, h1), f32(1, 8 * h1, scale=0.5)
    w2, r2, b2 = f32(1, 4 * h2, h1), f32(1, 4 * h2, h2), f32(1, 8 * h2, scale=0.5)
    wf = f32(h2, 4)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="tm", perm=[1, 0, 2]),
             helper.make_node("LSTM", ["xt", "w1", "r1", "b1"], ["y1", "", ""], name="lstm1", hidden_size=h1),
             helper.make_node("Squeeze", ["y1", "ax1"], ["s1"], name="sq1"),
             helper.make_node("LSTM", ["s1", "w2", "r2", "b2"], ["", "yh2"], name="lstm2", hidden_size=h2),
             helper.make_node("Gather", ["yh2", "last"], ["h"], name="last", axis=0),
             helper.make_node("MatMul", ["h", "wf"], ["y"], name="fc")]
    y1, _ = lstm(x.transpose(1, 0, 2), w1, r1, b1, h1)
    _, h = lstm(y1, w2, r2, b2, h2)
    save("lstm", nodes, [inp("x", ["N", t, f])], outp("y"),
         dict(w1=w1, r1=r1, b1=b1, w2=w2, r2=r2, b2=b2, wf=wf, ax1=np.array([1], np.int64), last=np.array(-1, np.int64)),
         x, h @ wf)


def quantized():
    # QDQ: the input, the conv's output and the dense output carry their scales; weights are int8
    # per output channel.
    x = f32(N, 2, 5, 5)
    wq = rng.integers(-127, 128, size=(4, 2, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.015, 0.005], np.float32)
    b = f32(4)
    w2q = rng.integers(-127, 128, size=(4 * 3 * 3, 3)).astype(np.int8)
    w2s = np.array(0.004, np.float32)
    # Scales as a quantization tool would calibrate them: max |x| / 127 of each tensor (1.05x).
    w = wq.astype(np.float64) * ws[:, None, None, None]
    r = relu(conv(x, w, b, 1, 0))
    y = r.reshape(N, -1) @ (w2q.astype(np.float64) * w2s)  # the float model: scales are the int8 model's business
    s_in = np.array(1 / 127, np.float32)
    s_c, s_out = (np.array(1.05 * np.abs(v).max() / 127, np.float32) for v in (r, y))
    z = np.array(0, np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "zw"], ["w"], name="dqw", axis=0),
             helper.make_node("Conv", ["xd", "w", "b"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "s_c", "z"], ["rq"], name="qr"),
             helper.make_node("DequantizeLinear", ["rq", "s_c", "z"], ["rd"], name="dqr"),
             helper.make_node("Flatten", ["rd"], ["f"], name="flat"),
             helper.make_node("DequantizeLinear", ["w2q", "w2s"], ["w2"], name="dqw2"),
             helper.make_node("MatMul", ["f", "w2"], ["m"], name="fc"),
             helper.make_node("QuantizeLinear", ["m", "s_out", "z"], ["mq"], name="qm"),
             helper.make_node("DequantizeLinear", ["mq", "s_out", "z"], ["y"], name="dqm")]
    save("qdq", nodes, [inp("x", ["N", 2, 5, 5])], outp("y"),
         dict(s_in=s_in, z=z, wq=wq, ws=ws, zw=np.zeros(4, np.int8), b=b, s_c=s_c, w2q=w2q, w2s=w2s, s_out=s_out), x, y)
    # QOperator: QLinearConv and QLinearMatMul with an int32 bias.
    bq = rng.integers(-500, 500, size=4).astype(np.int32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="qx"),
             helper.make_node("QLinearConv", ["xq", "s_in", "z", "wq", "ws", "zw", "s_c", "z", "bq"], ["cq"], name="qconv", pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["cq"], ["fq"], name="flat"),
             helper.make_node("QLinearMatMul", ["fq", "s_c", "z", "w3q", "w2s", "z", "s_out", "z"], ["mq"], name="qfc"),
             helper.make_node("DequantizeLinear", ["mq", "s_out", "z"], ["y"], name="dq")]
    w3q = rng.integers(-127, 128, size=(4 * 5 * 5, 3)).astype(np.int8)
    c = conv(x, w, bq * (s_in * ws).astype(np.float64), 1, 1)
    y = c.reshape(N, -1) @ (w3q.astype(np.float64) * w2s)
    s_c, s_out = (np.array(1.05 * np.abs(v).max() / 127, np.float32) for v in (c, y))
    save("qlinear", nodes, [inp("x", ["N", 2, 5, 5])], outp("y"),
         dict(s_in=s_in, z=z, wq=wq, ws=ws, zw=np.zeros(4, np.int8), bq=bq, s_c=s_c, w3q=w3q, w2s=w2s, s_out=s_out), x, y)


def bad():
    w, x4 = f32(4, 2, 3, 3), inp("x", ["N", 2, 6, 6])
    save("bad_op", [helper.make_node("Erf", ["x"], ["y"], name="erf1")], [inp("x", ["N", 4])], outp("y"), {})
    save("bad_pads", [helper.make_node("Conv", ["x", "w"], ["y"], name="asym", pads=[0, 0, 1, 1])], [x4], outp("y"), dict(w=w))
    save("bad_transa", [helper.make_node("Gemm", ["x", "w"], ["y"], name="ta", transA=1)], [inp("x", ["N", 4])], outp("y"),
         dict(w=f32(4, 4)))
    save("bad_clip", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip3")], [inp("x", ["N", 4])], outp("y"),
         dict(lo=np.array(-1, np.float32), hi=np.array(3, np.float32)))
    save("bad_lstm", [helper.make_node("LSTM", ["x", "w", "r"], ["", "y"], name="bi", hidden_size=2, direction="bidirectional")],
         [inp("x", [3, "N", 2])], outp("y"), dict(w=f32(2, 8, 2), r=f32(2, 8, 2)))


def concats():
    """Inception-style branches joined by Concat (axis -3, the channels), read by a 1 x 1 Conv,
    pooled and flattened; and a Concat along another axis, refused."""
    x, wa, ba, wb, bb = f32(N, 3, 6, 6), f32(4, 3, 1, 1), f32(4), f32(5, 3, 3, 3), f32(5)
    wc, bc, wg, bg = f32(6, 9, 1, 1), f32(6), f32(3, 9 + 6), f32(3)
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], name="branch_a"),
             helper.make_node("Relu", ["a"], ["ar"], name="relu_a"),
             helper.make_node("Conv", ["x", "wb", "bb"], ["b"], name="branch_b", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["br"], name="relu_b"),
             helper.make_node("Concat", ["ar", "br"], ["cat"], name="join", axis=-3),
             helper.make_node("Conv", ["cat", "wc", "bc"], ["c"], name="mix"),
             helper.make_node("Concat", ["c", "cat"], ["cat2"], name="join2", axis=1),
             helper.make_node("GlobalAveragePool", ["cat2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="head", transB=1)]
    cat = np.concatenate([relu(conv(x, wa, ba)), relu(conv(x, wb, bb, 1, 1))], axis=1)
    cat2 = np.concatenate([conv(cat, wc, bc), cat], axis=1)
    save("concat", nodes, [inp("x", ["N", 3, 6, 6])], outp("y"), dict(wa=wa, ba=ba, wb=wb, bb=bb, wc=wc, bc=bc, wg=wg, bg=bg),
         x, cat2.mean(axis=(2, 3)) @ wg.T + bg)
    save("bad_concat", [helper.make_node("Concat", ["x", "x"], ["y"], name="rows", axis=2)], [inp("x", ["N", 2, 6, 6])],
         outp("y"), {})


def exported():
    """Graphs as torch.onnx.export writes them by default (no dynamic_axes: the input's batch is
    the example's, 1), run at another batch: an LSTM whose zero initial state is Expand-ed to the
    batch from Shape arithmetic, and x.view(x.size(0), -1) folded to a Reshape to [1, -1]. Then a
    Pad of zeros before an AveragePool (PyTorch's avg_pool2d), a Pad folded into a Conv's padding,
    and ReduceMean over the rows and columns (x.mean((2, 3))) as a global average pool."""
    t, f, h = 4, 3, 5
    x = f32(N, t, f)
    w, r, b, wf, bf = f32(1, 4 * h, f), f32(1, 4 * h, h), f32(1, 8 * h, scale=0.5), f32(2, h), f32(2)
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="/l/Transpose", perm=[1, 0, 2]),
             helper.make_node("Shape", ["xt"], ["sh"], name="/l/Shape"),
             helper.make_node("Gather", ["sh", "one"], ["nb"], name="/l/Gather", axis=0),
             helper.make_node("Unsqueeze", ["nb", "ax0"], ["nb1"], name="/l/Unsqueeze"),
             helper.make_node("Concat", ["c1", "nb1", "ch"], ["shape"], name="/l/Concat", axis=0),
             helper.make_node("Expand", ["zero", "shape"], ["h0"], name="/l/Expand"),
             helper.make_node("Expand", ["zero", "shape"], ["c0"], name="/l/Expand_1"),
             helper.make_node("LSTM", ["xt", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"], name="/l/LSTM",
                              hidden_size=h),
             helper.make_node("Gather", ["yh", "last"], ["hl"], name="/Gather", axis=0),
             helper.make_node("Gemm", ["hl", "wf", "bf"], ["out"], name="/fc/Gemm", transB=1)]
    _, hn = lstm(x.transpose(1, 0, 2), w, r, b, h)
    save("lstm_export", nodes, [inp("x", [1, t, f])], outp("out"),
         dict(w=w, r=r, b=b, wf=wf, bf=bf, one=np.array(1, np.int64), ax0=i64(0), c1=i64(1), ch=i64(h),
              zero=np.zeros((1, 1, h), np.float32), last=np.array(-1, np.int64)), x, hn @ wf.T + bf)
    x, wc, bc, wg = f32(N, 2, 6, 6), f32(4, 2, 3, 3), f32(4), f32(3, 4 * 3 * 3)
    nodes = [helper.make_node("Conv", ["x", "wc", "bc"], ["c"], name="/c/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["rc"], name="/Relu"),
             helper.make_node("MaxPool", ["rc"], ["p"], name="/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["v"], name="/Reshape"),
             helper.make_node("Gemm", ["v", "wg"], ["out"], name="/fc/Gemm", transB=1)]
    pooled = pool(relu(conv(x, wc, bc, 1, 1)), 2, 2, np.max)
    save("reshape_export", nodes, [inp("x", [1, 2, 6, 6])], outp("out"), dict(wc=wc, bc=bc, wg=wg, shape=i64(1, -1)),
         x, pooled.reshape(N, -1) @ wg.T)
    x, wc, bc, wg, bg = f32(N, 2, 6, 6), f32(4, 2, 3, 3), f32(4), f32(3, 4), f32(3)
    nodes = [helper.make_node("Pad", ["x", "zeros"], ["xp"], name="/Pad", mode="constant"),
             helper.make_node("AveragePool", ["xp"], ["a"], name="/AveragePool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Pad", ["a", "pads", "fill"], ["ap"], name="/pad/Pad"),
             helper.make_node("Conv", ["ap", "wc", "bc"], ["c"], name="/c/Conv"),
             helper.make_node("Relu", ["c"], ["rc"], name="/Relu"),
             helper.make_node("ReduceMean", ["rc"], ["m"], name="/ReduceMean", axes=[-1, -2], keepdims=0),
             helper.make_node("Gemm", ["m", "wg", "bg"], ["out"], name="/fc/Gemm", transB=1)]
    c = relu(conv(pool(x, 2, 2, np.mean), wc, bc, 1, 1))
    save("pad_reduce_mean", nodes, [inp("x", ["N", 2, 6, 6])], outp("out"),
         dict(zeros=np.zeros(8, np.int64), pads=i64(0, 0, 1, 1, 0, 0, 1, 1), fill=np.array(0, np.float32),
              wc=wc, bc=bc, wg=wg, bg=bg), x, c.mean(axis=(2, 3)) @ wg.T + bg)
    x4 = inp("x", ["N", 2, 6, 6])
    save("bad_pad_reflect", [helper.make_node("Pad", ["x", "pads"], ["p"], name="refl", mode="reflect"),
                             helper.make_node("Conv", ["p", "wc"], ["y"], name="conv")], [x4], outp("y"),
         dict(pads=i64(0, 0, 1, 1, 0, 0, 1, 1), wc=wc))
    save("bad_pad_pool", [helper.make_node("Pad", ["x", "pads"], ["p"], name="zp"),
                          helper.make_node("MaxPool", ["p"], ["y"], name="mp", kernel_shape=[2, 2])], [x4], outp("y"),
         dict(pads=i64(0, 0, 1, 1, 0, 0, 1, 1)))
    save("bad_reduce_channels", [helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=[1])], [x4], outp("y"), {})


def lstm_outputs():
    """A stacked LSTM (num_layers = 2) as PyTorch exports it: the lower layer's Y read by the upper
    one and its Y_h joined with the upper's into h_n, of which h_n[-1] is read; an LSTM's output
    sequence read at its last step (y[:, -1]); and h_n[0] of the stack, refused."""
    t, f, h = 4, 3, 5
    x = f32(N, t, f)
    w1, r1, b1 = f32(1, 4 * h, f), f32(1, 4 * h, h), f32(1, 8 * h, scale=0.5)
    w2, r2, b2 = f32(1, 4 * h, h), f32(1, 4 * h, h), f32(1, 8 * h, scale=0.5)
    wf, bf = f32(2, h), f32(2)
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731

    def stack(index):
        return [helper.make_node("Transpose", ["x"], ["xt"], name="/l/Transpose", perm=[1, 0, 2]),
                helper.make_node("LSTM", ["xt", "w1", "r1", "b1"], ["y1", "yh1", "yc1"], name="/l/LSTM", hidden_size=h),
                helper.make_node("Squeeze", ["y1", "ax1"], ["s1"], name="/l/Squeeze"),
                helper.make_node("LSTM", ["s1", "w2", "r2", "b2"], ["y2", "yh2", "yc2"], name="/l/LSTM_1", hidden_size=h),
                helper.make_node("Concat", ["yh1", "yh2"], ["hn"], name="/l/Concat_4", axis=0),
                helper.make_node("Gather", ["hn", index], ["hl"], name="/Gather", axis=0),
                helper.make_node("Gemm", ["hl", "wf", "bf"], ["out"], name="/fc/Gemm", transB=1)]
    y1, _ = lstm(x.transpose(1, 0, 2), w1, r1, b1, h)
    _, hn = lstm(y1, w2, r2, b2, h)
    inits = dict(w1=w1, r1=r1, b1=b1, w2=w2, r2=r2, b2=b2, wf=wf, bf=bf, ax1=i64(1), last=np.array(-1, np.int64),
                 first=np.array(0, np.int64))
    save("lstm_stack", stack("last"), [inp("x", ["N", t, f])], outp("out"), inits, x, hn @ wf.T + bf)
    save("bad_lstm_stack_first", stack("first"), [inp("x", ["N", t, f])], outp("out"), inits)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="/l/Transpose", perm=[1, 0, 2]),
             helper.make_node("LSTM", ["xt", "w1", "r1", "b1"], ["y1", "yh1", "yc1"], name="/l/LSTM", hidden_size=h),
             helper.make_node("Squeeze", ["y1", "ax1"], ["s1"], name="/l/Squeeze"),
             helper.make_node("Transpose", ["s1"], ["sb"], name="/l/Transpose_1", perm=[1, 0, 2]),
             helper.make_node("Gather", ["sb", "last"], ["hl"], name="/Gather", axis=1),
             helper.make_node("Gemm", ["hl", "wf", "bf"], ["out"], name="/fc/Gemm", transB=1)]
    _, h1 = lstm(x.transpose(1, 0, 2), w1, r1, b1, h)
    save("lstm_last_step", nodes, [inp("x", ["N", t, f])], outp("out"),
         dict(w1=w1, r1=r1, b1=b1, wf=wf, bf=bf, ax1=i64(1), last=np.array(-1, np.int64)), x, h1 @ wf.T + bf)


def conv_general(x, w, b, stride, pads, dil):
    """Any-rank convolution (1-D [N, C, L] or 2-D), per-axis strides, pads (begin = end) and
    dilations, as plain loops over output positions and taps."""
    sp = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pads])
    k = w.shape[2:]
    out = [(xp.shape[2 + a] - ((k[a] - 1) * dil[a] + 1)) // stride[a] + 1 for a in range(sp)]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for pos in np.ndindex(*out):
        for tap in np.ndindex(*k):
            at = tuple(pos[a] * stride[a] + tap[a] * dil[a] for a in range(sp))
            y[(slice(None), slice(None)) + pos] += xp[(slice(None), slice(None)) + at] @ w[(slice(None), slice(None)) + tap].T
    return y + b.reshape(1, -1, *([1] * sp))


def conv1d():
    """Conv1d as PyTorch exports it ([N, C, L], 1-D attributes): padding and stride, then a dilated
    one, flattened into a Gemm; a batch-first sequence transposed into a Conv1d (x.transpose(1, 2));
    a 2-D Conv dilated and padded differently in the two directions; and 1-D pooling, refused."""
    x, w1, b1, w2, b2 = f32(N, 3, 11), f32(6, 3, 3), f32(6), f32(4, 6, 3), f32(4)
    wg, bg = f32(5, 4 * 6), f32(5)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3], pads=[1, 1], strides=[2],
                              dilations=[1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="/c2/Conv", kernel_shape=[3], pads=[2, 2], dilations=[2]),
             helper.make_node("Flatten", ["c2"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="/fc/Gemm", transB=1)]
    c2 = conv_general(relu(conv_general(x, w1, b1, [2], [1], [1])), w2, b2, [1], [2], [2])
    save("conv1d", nodes, [inp("x", ["N", 3, 11])], outp("y"), dict(w1=w1, b1=b1, w2=w2, b2=b2, wg=wg, bg=bg), x,
         c2.reshape(N, -1) @ wg.T + bg)
    xs, w3, b3, wh, bh = f32(N, 7, 4), f32(5, 4, 3), f32(5), f32(2, 5 * 5), f32(2)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="/Transpose", perm=[0, 2, 1]),
             helper.make_node("Conv", ["xt", "w3", "b3"], ["c"], name="/conv/Conv", kernel_shape=[3]),
             helper.make_node("Tanh", ["c"], ["t"], name="/Tanh"),
             helper.make_node("Flatten", ["t"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wh", "bh"], ["y"], name="/fc/Gemm", transB=1)]
    t = np.tanh(conv_general(xs.transpose(0, 2, 1), w3, b3, [1], [0], [1]))
    save("conv1d_seq", nodes, [inp("x", ["N", 7, 4])], outp("y"), dict(w3=w3, b3=b3, wh=wh, bh=bh), xs,
         t.reshape(N, -1) @ wh.T + bh)
    x2, w4, b4 = f32(N, 2, 7, 8), f32(4, 2, 3, 2), f32(4)
    nodes = [helper.make_node("Conv", ["x", "w4", "b4"], ["y"], name="/dil/Conv", kernel_shape=[3, 2], pads=[2, 1, 2, 1],
                              dilations=[2, 3])]
    save("conv_dilated", nodes, [inp("x", ["N", 2, 7, 8])], outp("y"), dict(w4=w4, b4=b4), x2,
         conv_general(x2, w4, b4, [1, 1], [2, 1], [2, 3]))
    save("bad_pool1d", [helper.make_node("Conv", ["x", "w1"], ["c"], name="/c/Conv", kernel_shape=[3]),
                        helper.make_node("MaxPool", ["c"], ["y"], name="/pool/MaxPool", kernel_shape=[2], strides=[2],
                                         pads=[2, 2])],
         [inp("x", ["N", 3, 11])], outp("y"), dict(w1=w1))


def gru(x_tnf, w, r, b, hidden):  # ONNX gates z, r, h; linear_before_reset = 1 (PyTorch's)
    h = np.zeros((x_tnf.shape[1], hidden))
    ys = []
    for x in x_tnf:
        gx, gh = x @ w[0].T + b[0][:3 * hidden], h @ r[0].T + b[0][3 * hidden:]
        z = sigmoid(gx[:, :hidden] + gh[:, :hidden])
        rr = sigmoid(gx[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])
        n = np.tanh(gx[:, 2 * hidden:] + rr * gh[:, 2 * hidden:])
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


def grus():
    """GRUs as PyTorch exports them (linear_before_reset = 1): one layer over a time-major input
    read by its Y_h (h_n[-1]); two stacked over a batch-first input, the upper's sequence read at
    its last step (y[:, -1]); and ONNX's default linear_before_reset = 0, refused."""
    t, f, h = 5, 4, 6
    x = f32(t, N, f)
    w1, r1, b1 = f32(1, 3 * h, f), f32(1, 3 * h, h), f32(1, 6 * h, scale=0.5)
    wf, bf = f32(3, h), f32(3)
    nodes = [helper.make_node("GRU", ["x", "w1", "r1", "b1"], ["", "yh"], name="/gru/GRU", hidden_size=h, linear_before_reset=1),
             helper.make_node("Gather", ["yh", "last"], ["hl"], name="/Gather", axis=0),
             helper.make_node("Gemm", ["hl", "wf", "bf"], ["y"], name="/fc/Gemm", transB=1)]
    _, hl = gru(x, w1, r1, b1, h)
    inits = dict(w1=w1, r1=r1, b1=b1, wf=wf, bf=bf, last=np.array(-1, np.int64))
    save("gru", nodes, [inp("x", [t, "N", f])], outp("y"), inits, x.transpose(1, 0, 2), hl @ wf.T + bf)
    # (--input files are batch first: x_gru.npy is [N, T, F] for the graph input [T, N, F])
    xb = f32(N, t, f)
    w2, r2, b2 = f32(1, 3 * h, h), f32(1, 3 * h, h), f32(1, 6 * h, scale=0.5)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="/g/Transpose", perm=[1, 0, 2]),
             helper.make_node("GRU", ["xt", "w1", "r1", "b1"], ["y1", "yh1"], name="/g/GRU", hidden_size=h, linear_before_reset=1),
             helper.make_node("Squeeze", ["y1", "ax1"], ["s1"], name="/g/Squeeze"),
             helper.make_node("GRU", ["s1", "w2", "r2", "b2"], ["y2", "yh2"], name="/g/GRU_1", hidden_size=h, linear_before_reset=1),
             helper.make_node("Squeeze", ["y2", "ax1"], ["s2"], name="/g/Squeeze_1"),
             helper.make_node("Transpose", ["s2"], ["sb"], name="/g/Transpose_1", perm=[1, 0, 2]),
             helper.make_node("Gather", ["sb", "last"], ["hl"], name="/Gather", axis=1),
             helper.make_node("Gemm", ["hl", "wf", "bf"], ["y"], name="/fc/Gemm", transB=1)]
    y1, _ = gru(xb.transpose(1, 0, 2), w1, r1, b1, h)
    _, h2 = gru(y1, w2, r2, b2, h)
    inits.update(w2=w2, r2=r2, b2=b2, ax1=np.array([1], np.int64))
    save("gru_stack", nodes, [inp("x", ["N", t, f])], outp("y"), inits, xb, h2 @ wf.T + bf)
    save("bad_gru_reset", [helper.make_node("GRU", ["x", "w1", "r1"], ["", "y"], name="/gru/GRU", hidden_size=h)],
         [inp("x", [t, "N", f])], outp("y"), dict(w1=w1, r1=r1))


def conv_dilated3():
    """PyTorch's dilated 3 x 3 (Conv2d(4, 8, 3, padding=2, dilation=2), then a depthwise one alike):
    9 taps each, read by the machine as a 5 x 5 kernel with zeros between them."""
    x, w1, b1, w2, b2 = f32(N, 4, 6, 6), f32(8, 4, 3, 3), f32(8), f32(8, 1, 3, 3), f32(8)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3, 3], pads=[2, 2, 2, 2],
                              dilations=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="/c2/Conv", kernel_shape=[3, 3], pads=[2, 2, 2, 2],
                              dilations=[2, 2], group=8)]
    r1 = relu(conv_general(x, w1, b1, [1, 1], [2, 2], [2, 2]))
    y = np.concatenate([conv_general(r1[:, c:c + 1], w2[c:c + 1], b2[c:c + 1], [1, 1], [2, 2], [2, 2]) for c in range(8)],
                       axis=1)
    save("conv_dilated3", nodes, [inp("x", ["N", 4, 6, 6])], outp("y"), dict(w1=w1, b1=b1, w2=w2, b2=b2), x, y)


def pool1d(x, k, s, op):  # [N, C, L]
    out = (x.shape[2] - k) // s + 1
    return np.stack([op(x[:, :, o * s:o * s + k], axis=2) for o in range(out)], axis=2)


def pools1d():
    """MaxPool1d and AvgPool1d as PyTorch exports them ([N, C, L], 1-D attributes): a max pool of the
    model's input line, a Conv1d, a max pool of 2 stride 2, an average pool of 3 stride 1, flattened
    into a Gemm; and 1-D pools the machine cannot run, refused."""
    x, w1, b1 = f32(N, 3, 13), f32(4, 3, 3), f32(4)
    nodes = [helper.make_node("MaxPool", ["x"], ["p0"], name="/p0/MaxPool", kernel_shape=[3], strides=[1], pads=[0, 0],
                              ceil_mode=0),
             helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="/p1/MaxPool", kernel_shape=[2], strides=[2]),
             helper.make_node("AveragePool", ["p1"], ["p2"], name="/p2/AveragePool", kernel_shape=[3], strides=[1],
                              pads=[0, 0], ceil_mode=0, count_include_pad=1),
             helper.make_node("Flatten", ["p2"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="/fc/Gemm", transB=1)]
    p0 = pool1d(x, 3, 1, np.max)  # 13 -> 11
    r1 = relu(conv_general(p0, w1, b1, [1], [1], [1]))  # 11
    p2 = pool1d(pool1d(r1, 2, 2, np.max), 3, 1, np.mean)  # 11 -> 5 -> 3
    wg, bg = f32(3, 4 * 3), f32(3)
    save("pools1d", nodes, [inp("x", ["N", 3, 13])], outp("y"), dict(w1=w1, b1=b1, wg=wg, bg=bg), x,
         p2.reshape(N, -1) @ wg.T + bg)
    line = [inp("x", ["N", 3, 13])]
    save("bad_pool1d_window", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[16])],
         line, outp("y"), {})
    save("bad_pool1d_dims", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool", kernel_shape=[2, 2])],
         line, outp("y"), {})
    save("bad_pool1d_dilation", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[2],
                                                  dilations=[2])], line, outp("y"), {})
    save("bad_pool1d_ceil", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool", kernel_shape=[2],
                                              strides=[2], ceil_mode=1, count_include_pad=1)], line, outp("y"), {})
    save("bad_pool1d_ceil_start", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[3],
                                                    strides=[3], pads=[0, 2], ceil_mode=1)],
         [inp("x", ["N", 3, 14])], outp("y"), {})


def pool1d_padded(x, k, s, p, op, count_pad=True, end=None, ceil=False):  # [N, C, L], p values at the start, end at the end (p)
    n, c, length = x.shape
    end = p if end is None else end
    out = (length + p + end - k) // s + 1
    if ceil:  # a partial last window: the part of it within the padded line (starting within the line)
        out = -(-(length + p + end - k) // s) + 1
        assert (out - 1) * s < p + length and (op == "max" or not count_pad)
    y = np.zeros((n, c, out))
    for o in range(out):
        a = o * s - p
        vals = x[:, :, max(a, 0):min(a + k, length)].astype(np.float64)
        y[:, :, o] = vals.max(axis=2) if op == "max" else vals.sum(axis=2) / (k if count_pad else vals.shape[2])
    return y


def pools1d_pad():
    """Padded MaxPool1d and AvgPool1d (count_include_pad both ways, and as PyTorch exports the
    default: a Pad of zeros then an unpadded AveragePool), auto_pad SAME, global 1-D average pools
    (GlobalAveragePool: AdaptiveAvgPool1d(1); ReduceMean over axis 2: x.mean(2)); and what stays
    refused."""
    x, w1, b1 = f32(N, 3, 13), f32(4, 3, 3), f32(4)
    wg, bg = f32(3, 4 * 5), f32(3)
    nodes = [helper.make_node("MaxPool", ["x"], ["p0"], name="/p0/MaxPool", kernel_shape=[3], strides=[2], pads=[1, 1]),
             helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("AveragePool", ["r1"], ["p1"], name="/p1/AveragePool", kernel_shape=[5], strides=[2],
                              pads=[2, 2], count_include_pad=0),
             helper.make_node("AveragePool", ["p1"], ["p2"], name="/p2/AveragePool", kernel_shape=[2], strides=[1],
                              pads=[1, 1], count_include_pad=1),
             helper.make_node("Flatten", ["p2"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="/fc/Gemm", transB=1)]
    p0 = pool1d_padded(x, 3, 2, 1, "max")  # 13 -> 7
    r1 = relu(conv_general(p0, w1, b1, [1], [1], [1]))  # 7
    p1 = pool1d_padded(r1, 5, 2, 2, "avg", count_pad=False)  # 7 -> 4: windows of 3, 5, 5, 3 values
    p2 = pool1d_padded(p1, 2, 1, 1, "avg")  # 4 -> 5
    save("pools1d_pad", nodes, [inp("x", ["N", 3, 13])], outp("y"), dict(w1=w1, b1=b1, wg=wg, bg=bg), x,
         p2.reshape(N, -1) @ wg.T + bg)
    # A Pad of zeros and an AveragePool (PyTorch's AvgPool1d(4, 3, padding=2)), a MaxPool of auto_pad
    # SAME_UPPER, a global average (AdaptiveAvgPool1d(1)), the model's output the line [N, C, 1].
    x2 = f32(N, 2, 11)
    pads = np.array([0, 0, 2, 0, 0, 2], np.int64)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
             helper.make_node("AveragePool", ["xp"], ["a"], name="/a/AveragePool", kernel_shape=[4], strides=[3],
                              pads=[0, 0], ceil_mode=0),
             helper.make_node("MaxPool", ["a"], ["m"], name="/m/MaxPool", kernel_shape=[3], auto_pad="SAME_UPPER"),
             helper.make_node("GlobalAveragePool", ["m"], ["y"], name="/GlobalAveragePool")]
    a = pool1d_padded(x2, 4, 3, 2, "avg")  # 11 + 4 -> 4
    m = pool1d_padded(a, 3, 1, 1, "max")  # 4 -> 4
    save("pools1d_padop", nodes, [inp("x", ["N", 2, 11])], outp("y"), dict(pads=pads), x2, m.mean(axis=2, keepdims=True))
    # x.mean(2) of the input line (ReduceMean, keepdims 0) into a Gemm.
    x3, wm, bm = f32(N, 4, 6), f32(3, 4), f32(3)
    nodes = [helper.make_node("ReduceMean", ["x"], ["mu"], name="/ReduceMean", axes=[2], keepdims=0),
             helper.make_node("Gemm", ["mu", "wm", "bm"], ["y"], name="/fc/Gemm", transB=1)]
    # (x3 is read by a ReduceMean only: a 3-D graph input is then a sequence; a MaxPool of window 1
    # first makes it a line, as a Conv1d would)
    nodes.insert(0, helper.make_node("MaxPool", ["x"], ["x1"], name="/id/MaxPool", kernel_shape=[1]))
    nodes[1].input[0] = "x1"
    save("mean1d", nodes, [inp("x", ["N", 4, 6])], outp("y"), dict(wm=wm, bm=bm), x3,
         x3.astype(np.float64).mean(axis=2) @ wm.T + bm)
    line = [inp("x", ["N", 3, 13])]
    save("bad_pool1d_pad_mixed", [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
                                  helper.make_node("AveragePool", ["xp"], ["y"], name="/pool/AveragePool",
                                                   kernel_shape=[3], pads=[1, 1])],
         line, outp("y"), dict(pads=np.array([0, 0, 1, 0, 0, 1], np.int64)))
    save("bad_pool1d_pad_max", [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
                                helper.make_node("MaxPool", ["xp"], ["y"], name="/pool/MaxPool", kernel_shape=[3])],
         line, outp("y"), dict(pads=np.array([0, 0, 1, 0, 0, 1], np.int64)))
    save("bad_pool1d_named", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[16])],
         [inp("x", ["batch", 3, 13])], outp("y"), {})
    # auto_pad SAME after a Pad: ONNX pads the Pad's output (9 + 4 = 13: 5 windows of 5 at stride 3),
    # which the padding folded from the Pad cannot express (it gave 4): refused, as for a Conv.
    save("bad_pool1d_pad_same", [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
                                 helper.make_node("AveragePool", ["xp"], ["y"], name="/pool/AveragePool",
                                                  kernel_shape=[5], strides=[3], auto_pad="SAME_UPPER",
                                                  count_include_pad=1)],
         [inp("x", ["N", 2, 9])], outp("y"), dict(pads=np.array([0, 0, 2, 0, 0, 2], np.int64)))
    # A Pad wider than the window: the error names the Pad's share of the padding.
    save("bad_pool1d_pad_wide", [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
                                 helper.make_node("AveragePool", ["xp"], ["y"], name="/pool/AveragePool",
                                                  kernel_shape=[3], pads=[1, 1], count_include_pad=1)],
         [inp("x", ["N", 2, 9])], outp("y"), dict(pads=np.array([0, 0, 4, 0, 0, 4], np.int64)))


def pool2d_padded(x, k, s, pads, op, count_pad=True, ceil=False):  # [N, C, H, W]; pads top, left, bottom, right
    n, c, h, w = x.shape
    t, l, b, r = pads
    oh, ow = (h + t + b - k) // s + 1, (w + l + r - k) // s + 1
    if ceil:  # the last window partial: the part of it within the padded map (that starts within the map)
        oh, ow = -(-(h + t + b - k) // s) + 1, -(-(w + l + r - k) // s) + 1
        assert (oh - 1) * s < t + h and (ow - 1) * s < l + w and (op == "max" or not count_pad)
    y = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            a, e = oy * s - t, ox * s - l
            vals = x[:, :, max(a, 0):min(a + k, h), max(e, 0):min(e + k, w)].astype(np.float64)
            y[:, :, oy, ox] = vals.max(axis=(2, 3)) if op == "max" else \
                vals.sum(axis=(2, 3)) / (k * k if count_pad else vals.shape[2] * vals.shape[3])
    return y


def pools2d_pad():
    """Padded 2-D MaxPool and AveragePool (symmetric and asymmetric pads, count_include_pad both ways,
    ResNet's MaxPool2d(3, 2, 1), PyTorch's Pad + AveragePool export of AvgPool2d, auto_pad SAME),
    and what stays refused."""
    x, w1, b1 = f32(N, 3, 9, 9), f32(4, 3, 3, 3), f32(4)
    wg, bg = f32(3, 4 * 1 * 2), f32(3)
    nodes = [helper.make_node("MaxPool", ["x"], ["p0"], name="/p0/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("AveragePool", ["r1"], ["p1"], name="/p1/AveragePool", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], count_include_pad=0),
             helper.make_node("AveragePool", ["p1"], ["p2"], name="/p2/AveragePool", kernel_shape=[2, 2],
                              pads=[0, 0, 1, 1], count_include_pad=1),
             helper.make_node("MaxPool", ["p2"], ["p3"], name="/p3/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 2, 0, 2]),
             helper.make_node("AveragePool", ["p3"], ["p4"], name="/p4/AveragePool", kernel_shape=[2, 2],
                              strides=[2, 2], pads=[1, 0, 0, 1], count_include_pad=0),
             helper.make_node("Flatten", ["p4"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="/fc/Gemm", transB=1)]
    p0 = pool2d_padded(x, 3, 2, (1, 1, 1, 1), "max")  # 9 -> 5
    r1 = relu(conv(p0, w1, b1, 1, 1))  # 5
    p1 = pool2d_padded(r1, 3, 1, (1, 1, 1, 1), "avg", count_pad=False)  # 5: corners of 4 pixels, edges of 6
    p2 = pool2d_padded(p1, 2, 1, (0, 0, 1, 1), "avg")  # 5 + 1 -> 5
    p3 = pool2d_padded(p2, 3, 2, (1, 2, 0, 2), "max")  # 6 x 9 -> 2 x 4
    p4 = pool2d_padded(p3, 2, 2, (1, 0, 0, 1), "avg", count_pad=False)  # 3 x 5 -> 1 x 2: windows of 2 pixels
    save("pools2d_pad", nodes, [inp("x", ["N", 3, 9, 9])], outp("y"), dict(w1=w1, b1=b1, wg=wg, bg=bg), x,
         p4.reshape(N, -1) @ wg.T + bg)
    # PyTorch's AvgPool2d(3, 2, padding=1) (a Pad of zeros and an unpadded AveragePool), a MaxPool of
    # auto_pad SAME_UPPER (window 2: pads 0 before, 1 after), a global average: the output [N, C, 1, 1].
    x2 = f32(N, 2, 7, 7)
    pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"], name="/Pad", mode="constant"),
             helper.make_node("AveragePool", ["xp"], ["a"], name="/a/AveragePool", kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("MaxPool", ["a"], ["m"], name="/m/MaxPool", kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
             helper.make_node("GlobalAveragePool", ["m"], ["y"], name="/GlobalAveragePool")]
    a = pool2d_padded(x2, 3, 2, (1, 1, 1, 1), "avg")  # 7 + 2 -> 4
    m = pool2d_padded(a, 2, 1, (0, 0, 1, 1), "max")  # 4 -> 4
    save("pools2d_padop", nodes, [inp("x", ["N", 2, 7, 7])], outp("y"), dict(pads=pads), x2,
         m.mean(axis=(2, 3), keepdims=True))
    mp = [inp("x", ["N", 2, 9, 9])]
    save("bad_pool2d_pads", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[3, 3],
                                              pads=[1, 3, 1, 1])], mp, outp("y"), {})
    save("bad_pool2d_count", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                               kernel_shape=[7, 7], pads=[3, 3, 3, 3], count_include_pad=0)],
         mp, outp("y"), {})
    # The same refusal where ceil_mode's partial last window is what leaves the odd count (7 x 7 at stride 2
    # over 10 x 10: one more row and column at the bottom and right).
    save("bad_pool2d_count_ceil", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                                    kernel_shape=[7, 7], strides=[2, 2], ceil_mode=1)],
         [inp("x", ["N", 2, 10, 10])], outp("y"), {})
    save("bad_pool2d_window", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[16, 16],
                                                pads=[4, 4, 4, 4])], [inp("x", ["N", 2, 20, 20])], outp("y"), {})
    save("bad_pool2d_ceil", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                                              count_include_pad=1)],
         [inp("x", ["N", 2, 8, 8])], outp("y"), {})
    save("bad_pool2d_ceil_start", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool",
                                                    kernel_shape=[3, 3], strides=[3, 3], pads=[0, 0, 2, 2],
                                                    ceil_mode=1)],
         [inp("x", ["N", 2, 5, 5])], outp("y"), {})


def gap_long():
    """Global averages beyond the pool instruction's 15 x 15 windows: over a map of 18 x 18
    (GlobalAveragePool), a non-square map (ReduceMean over axes 2 and 3), a line of 24 (x.mean(2));
    the importer computes them on the matrix unit. And one too large for it."""
    x, w1, b1, wg, bg = f32(N, 3, 18, 18), f32(4, 3, 3, 3), f32(4), f32(3, 4), f32(3)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/c1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/Relu"),
             helper.make_node("GlobalAveragePool", ["r1"], ["g"], name="/GlobalAveragePool"),
             helper.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="/fc/Gemm", transB=1)]
    g = relu(conv(x, w1, b1, 1, 1)).mean(axis=(2, 3))
    save("gap_long", nodes, [inp("x", ["N", 3, 18, 18])], outp("y"), dict(w1=w1, b1=b1, wg=wg, bg=bg), x, g @ wg.T + bg)
    x2 = f32(N, 2, 5, 7)
    save("gap_rect", [helper.make_node("ReduceMean", ["x"], ["y"], name="/ReduceMean", axes=[2, 3], keepdims=1)],
         [inp("x", ["N", 2, 5, 7])], outp("y"), {}, x2, x2.astype(np.float64).mean(axis=(2, 3), keepdims=True))
    x3 = f32(N, 4, 24)
    nodes = [helper.make_node("MaxPool", ["x"], ["x1"], name="/id/MaxPool", kernel_shape=[1]),  # (a line, as mean1d)
             helper.make_node("ReduceMean", ["x1"], ["y"], name="/ReduceMean", axes=[2], keepdims=1)]
    save("gap_line", nodes, [inp("x", ["N", 4, 24])], outp("y"), {}, x3, x3.astype(np.float64).mean(axis=2, keepdims=True))
    save("bad_gap_big", [helper.make_node("GlobalAveragePool", ["x"], ["y"], name="/GlobalAveragePool")],
         [inp("x", ["N", 512, 16, 16])], outp("y"), {})


def pools2d_ceil():
    """ceil_mode = 1 with partial last windows: GoogLeNet's MaxPool2d(3, 2, ceil_mode=True), and an
    AveragePool of the pixels it holds (count_include_pad = 0), padded."""
    x = f32(N, 3, 8, 8)
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], name="/m/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                              ceil_mode=1),
             helper.make_node("AveragePool", ["m"], ["y"], name="/a/AveragePool", kernel_shape=[2, 2], strides=[2, 2],
                              pads=[1, 1, 0, 0], ceil_mode=1, count_include_pad=0)]
    m = pool2d_padded(x, 3, 2, (0, 0, 0, 0), "max", ceil=True)  # 8 -> 4 (the last window of 2 x 3, 3 x 2, 2 x 2)
    a = pool2d_padded(m, 2, 2, (1, 1, 0, 0), "avg", count_pad=False, ceil=True)  # 4 + 1 -> 3
    save("pools2d_ceil", nodes, [inp("x", ["N", 3, 8, 8])], outp("y"), {}, x, a)


def pools1d_asym():
    """1-D pools padded unequally at the two ends (pads, auto_pad SAME_LOWER of an even window) and
    ceil_mode = 1 with a partial last window."""
    x = f32(N, 3, 13)
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], name="/a/MaxPool", kernel_shape=[3], pads=[0, 1]),
             helper.make_node("AveragePool", ["a"], ["b"], name="/b/AveragePool", kernel_shape=[2],
                              auto_pad="SAME_LOWER", count_include_pad=0),
             helper.make_node("MaxPool", ["b"], ["c"], name="/c/MaxPool", kernel_shape=[3], strides=[2], ceil_mode=1),
             helper.make_node("AveragePool", ["c"], ["y"], name="/d/AveragePool", kernel_shape=[3], strides=[2],
                              pads=[2, 0], ceil_mode=1, count_include_pad=0)]
    a = pool1d_padded(x, 3, 1, 0, "max", end=1)  # 13 + 1 -> 12
    b = pool1d_padded(a, 2, 1, 1, "avg", count_pad=False, end=0)  # 12 + 1 -> 12
    c = pool1d_padded(b, 3, 2, 0, "max", ceil=True)  # ceil(9 / 2) + 1 = 6, the last window [10, 12) of 2
    d = pool1d_padded(c, 3, 2, 2, "avg", count_pad=False, end=0, ceil=True)  # 2 + 6: ceil(5 / 2) + 1 = 4
    save("pools1d_asym", nodes, [inp("x", ["N", 3, 13])], outp("y"), {}, x, d)


def bad_pool_attributes():
    """Pool and Conv attributes ONNX itself rules out, refused: a flag of neither 0 nor 1, pads beside an
    auto_pad other than NOTSET, a pool without its required kernel_shape."""
    mp, line = [inp("x", ["N", 2, 9, 9])], [inp("x", ["N", 3, 13])]
    save("bad_pool_ceil_flag", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[3, 3],
                                                 strides=[2, 2], ceil_mode=2)], mp, outp("y"), {})
    save("bad_pool_count_flag", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=5)],
         mp, outp("y"), {})
    save("bad_pool1d_ceil_flag", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                                   kernel_shape=[3], ceil_mode=-1)], line, outp("y"), {})
    save("bad_pool_pads_auto", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", kernel_shape=[3, 3],
                                                 pads=[1, 1, 1, 1], auto_pad="SAME_UPPER")], mp, outp("y"), {})
    save("bad_pool1d_pads_auto", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool",
                                                   kernel_shape=[3], pads=[0, 0], auto_pad="VALID")],
         line, outp("y"), {})
    save("bad_conv_pads_auto", [helper.make_node("Conv", ["x", "w"], ["y"], name="/c/Conv", kernel_shape=[3, 3],
                                                 pads=[1, 1, 1, 1], auto_pad="SAME_LOWER")],
         mp, outp("y"), dict(w=np.zeros((4, 2, 3, 3), np.float32)))
    save("bad_pool_kernel", [helper.make_node("MaxPool", ["x"], ["y"], name="/pool/MaxPool", strides=[2, 2])],
         mp, outp("y"), {})
    save("bad_pool1d_kernel", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool", pads=[1, 1])],
         line, outp("y"), {})


def pool2d_long():
    """A padded AveragePool of count_include_pad = 0 over a long map (5 x 5 windows, pads 2, over
    8 x 4000): each of its 16,016 windows that reach the padding is averaged again on its own, two
    tensors and several ops each; the compile once grew as ops x tensors. No data: the CLI runs it
    on seeded input (tests/CMakeLists.txt)."""
    save("pool2d_long", [helper.make_node("AveragePool", ["x"], ["y"], name="/pool/AveragePool", kernel_shape=[5, 5],
                                          pads=[2, 2, 2, 2], count_include_pad=0)],
         [inp("x", ["N", 8, 8, 4000])], inp("y", ["N", 8, 8, 4000]), {})


def conv_pool_big():
    """A Conv (3 x 3, stride 2) whose input, 3 x 363 x 363, the default unified buffer cannot hold at
    batch 1, then ResNet's padded MaxPool, whose own tensors it could: the Conv runs in bands, its
    output, the pool's input, is held in host memory with it, and the pool, whose copy into the
    padded map cannot run in bands, is refused saying so."""
    w = f32(8, 3, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/c/Conv", kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("MaxPool", ["c"], ["y"], name="/p/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1])]
    save("conv_pool_big", nodes, [inp("x", ["N", 3, 363, 363])], inp("y", ["N", 8, 91, 91]), dict(w=w))


def bad_flags():
    """Flags ONNX defines as 0 or 1 given another value, refused (each was read as its truth value)."""
    x4 = [inp("x", ["N", 4])]
    seq = [inp("x", [3, "N", 2])]
    save("bad_gemm_transb_flag", [helper.make_node("Gemm", ["x", "w"], ["y"], name="tb", transB=2)], x4, outp("y"),
         dict(w=f32(4, 4)))
    save("bad_reduce_keepdims_flag", [helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=[2, 3], keepdims=3)],
         [inp("x", ["N", 2, 6, 6])], outp("y"), {})
    save("bad_lstm_layout_flag", [helper.make_node("LSTM", ["x", "w", "r"], ["", "y"], name="lt", hidden_size=2,
                                                   layout=2)], [inp("x", ["N", 3, 2])], outp("y"), dict(w=f32(1, 8, 2), r=f32(1, 8, 2)),
         opset=14)
    save("bad_gru_reset_flag", [helper.make_node("GRU", ["x", "w", "r"], ["", "y"], name="gr", hidden_size=2,
                                                 linear_before_reset=7)], seq, outp("y"),
         dict(w=f32(1, 6, 2), r=f32(1, 6, 2)))
    # allowzero = 1 makes the shape's 0 a dimension of size 0, not the batch copied
    save("bad_reshape_allowzero", [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs", allowzero=1)],
         [inp("x", ["N", 2, 3, 3])], outp("y"), dict(s=np.array([0, -1], np.int64)), opset=14)
    save("bad_reshape_allowzero_flag", [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs", allowzero=2)],
         [inp("x", ["N", 2, 3, 3])], outp("y"), dict(s=np.array([0, -1], np.int64)), opset=14)


# (New models go last: the generator's draws for the earlier ones, and so their files, stay the same.)
for make in (gemm, matmul_add, matmul_seq, conv_pad_stride, conv_group, conv_same_bn_clip, pools, global_avg_reshape,
             add_mul_softmax, lstms, quantized, bad, concats, exported, lstm_outputs, conv1d, grus, conv_dilated3,
             pools1d, pools1d_pad, pools2d_pad, gap_long, pools2d_ceil, pools1d_asym, bad_pool_attributes,
             pool2d_long, conv_pool_big, bad_flags):
    make()
