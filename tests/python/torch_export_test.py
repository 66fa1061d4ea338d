"""Models as a PyTorch user brings them (docs/onnx.md, "Exporting"): small networks with seeded
weights, exported by torch.onnx.export with its defaults (opset 14 on Debian's PyTorch 1.13, no
dynamic_axes: the file declares batch 1), run by tpusim.run at batch 6 with outputs=True. The
float model tpusim imported must compute what PyTorch computes (within float rounding), the
simulated int8 output must match the golden reference bit for bit, and an operator the machine
lacks is refused naming the node. Needs python3-torch and python3-onnx (scripts/install-deps.sh)."""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tpusim

torch.manual_seed(0)
torch.set_num_threads(1)


class MlpBn(nn.Module):  # a BatchNormalization after a Gemm (the exporter folds only Conv + BN)
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


class Cnn(nn.Module):  # x.view(x.size(0), -1) folds to Reshape [1, -1]; avg_pool2d emits a Pad of zeros
    def __init__(self):
        super().__init__()
        self.c1, self.bn, self.c2 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.avg_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.view(x.size(0), -1))


class MeanHead(nn.Module):  # x.mean((2, 3)): ReduceMean, a global average pool
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(1, 8, 3, padding=1), nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(F.relu(self.c(x)).mean((2, 3)))


class Lstm(nn.Module):  # the zero initial state: Shape, Gather, Concat, Expand to the batch
    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 16, batch_first=True), nn.Linear(16, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


class Lstm2(nn.Module):  # two stacked layers: h_n is a Concat of both layers' Y_h, h_n[-1] the upper's
    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 16, num_layers=2, batch_first=True), nn.Linear(16, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


class LstmLast(nn.Module):  # the output sequence's last step, y[:, -1]
    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 16, batch_first=True), nn.Linear(16, 10)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class Conv1d(nn.Module):  # Conv1d with padding, then strided and dilated: [N, C, L] maps of height 1
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv1d(4, 8, 3, padding=1), nn.Conv1d(8, 8, 3, stride=2, padding=2, dilation=2)
        self.fc = nn.Linear(8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.c2(F.relu(self.c1(x)))), 1))


class SeqConv1d(nn.Module):  # a Conv1d over a batch-first sequence, x.transpose(1, 2)
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv1d(8, 6, 3), nn.Linear(6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.tanh(self.c(x.transpose(1, 2))), 1))


class Pool1d(nn.Module):  # MaxPool1d of the input line, a Conv1d, MaxPool1d and AvgPool1d: [N, C, L] lines
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv1d(4, 8, 3, padding=1), nn.Linear(8 * 3, 10)

    def forward(self, x):
        x = F.max_pool1d(x, 3, stride=1)  # 16 -> 14
        x = F.max_pool1d(F.relu(self.c(x)), 2)  # 14 -> 7
        return self.fc(torch.flatten(nn.AvgPool1d(3, stride=2)(x), 1))  # 7 -> 3


class Pool1dPad(nn.Module):  # padded MaxPool1d, AvgPool1d counting its zeros (a Pad) or not, AdaptiveAvgPool1d(2)
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv1d(4, 8, 3, padding=1), nn.Linear(8 * 2, 10)

    def forward(self, x):
        x = F.relu(self.c(F.max_pool1d(x, 3, stride=2, padding=1)))  # 16 -> 8
        x = nn.AvgPool1d(3, stride=1, padding=1)(x)  # count_include_pad: a Pad and an AveragePool; 8
        x = nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False)(x)  # 8 -> 4
        return self.fc(torch.flatten(nn.AdaptiveAvgPool1d(2)(x), 1))  # an AveragePool of 2, stride 2: 4 -> 2


class Gap1d(nn.Module):  # AdaptiveAvgPool1d(1) (a GlobalAveragePool) or x.mean(2) (a ReduceMean) of a line
    def __init__(self, mean=False):
        super().__init__()
        self.c, self.fc, self.mean = nn.Conv1d(4, 8, 3, stride=2), nn.Linear(8, 10), mean

    def forward(self, x):
        x = F.relu(self.c(x))  # 16 -> 7
        return self.fc(x.mean(2) if self.mean else torch.flatten(nn.AdaptiveAvgPool1d(1)(x), 1))


class ResNetStem(nn.Module):  # ResNet's stem: Conv2d 7x7 stride 2 (no bias) + BatchNorm (folded) + ReLU + MaxPool2d(3, 2, 1)
    def __init__(self):
        super().__init__()
        self.c, self.bn = nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(8)
        self.c2, self.fc = nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = nn.MaxPool2d(3, stride=2, padding=1)(F.relu(self.bn(self.c(x))))  # 16 -> 8 -> 4
        x = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)(F.relu(self.c2(x)))  # 4
        return self.fc(torch.flatten(nn.AvgPool2d(3, stride=2, padding=1)(x), 1))  # a Pad and an AveragePool: 4 -> 2


class CeilPools(nn.Module):  # GoogLeNet's MaxPool2d(3, 2, ceil_mode=True), an AvgPool2d of the pixels, ceil_mode
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8 * 5 * 5, 10)

    def forward(self, x):
        x = nn.MaxPool2d(3, stride=2, ceil_mode=True)(F.relu(self.c(x)))  # 16 -> 8: the last window 2 wide
        x = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)(x)  # 8 + 2 -> 5
        return self.fc(torch.flatten(x, 1))


class GapLong(nn.Module):  # AdaptiveAvgPool2d(1) over a 16 x 16 map: beyond the pool's 15 x 15, on the matrix unit
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.AdaptiveAvgPool2d(1)(F.relu(self.c(x))), 1))


class Gap16(nn.Module):  # AdaptiveAvgPool1d(1) of the input line of 16 values
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.AdaptiveAvgPool1d(1)(x), 1))


class Gru(nn.Module):  # a GRU's h_n[-1]
    def __init__(self):
        super().__init__()
        self.gru, self.fc = nn.GRU(8, 16, batch_first=True), nn.Linear(16, 10)

    def forward(self, x):
        _, h = self.gru(x)
        return self.fc(h[-1])


class Gru2(nn.Module):  # two stacked GRU layers, the output sequence's last step
    def __init__(self):
        super().__init__()
        self.gru, self.fc = nn.GRU(8, 16, num_layers=2, batch_first=True), nn.Linear(16, 10)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.fc(y[:, -1])


class Gelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 16), nn.Linear(16, 10)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


rng = np.random.default_rng(1)
x = rng.random((6, 64), dtype=np.float32)
images = rng.random((6, 3 * 16 * 16), dtype=np.float32)  # (drawn after x: x stays the same)
cases = [(MlpBn(), (-1, 64)), (Cnn(), (-1, 1, 8, 8)), (MeanHead(), (-1, 1, 8, 8)), (Lstm(), (-1, 8, 8)),
         (Lstm2(), (-1, 8, 8)), (LstmLast(), (-1, 8, 8)), (Conv1d(), (-1, 4, 16)), (SeqConv1d(), (-1, 8, 8)),
         (Pool1d(), (-1, 4, 16)), (Pool1dPad(), (-1, 4, 16)), (Gap1d(), (-1, 4, 16)), (Gap1d(mean=True), (-1, 4, 16)),
         (Gru(), (-1, 8, 8)), (Gru2(), (-1, 8, 8)), (ResNetStem(), (-1, 3, 16, 16), images),
         (GapLong(), (-1, 3, 16, 16), images), (Gap16(), (-1, 4, 16)),
         (CeilPools(), (-1, 3, 16, 16), images)]
with tempfile.TemporaryDirectory() as d:
    for model, shape, *data in cases:
        name = type(model).__name__ + ("Mean" if getattr(model, "mean", False) is True else "")
        for m in model.modules():  # trained-looking statistics, so that folding them matters
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        model.eval()
        xi = (data[0] if data else x).reshape(shape)
        with torch.no_grad():
            want = model(torch.from_numpy(xi)).numpy()
        path = os.path.join(d, name + ".onnx")
        torch.onnx.export(model, torch.from_numpy(xi[:1]), path)
        # calibrated on all 6 samples: the reported error then covers each of them (else the first 4)
        r = tpusim.run(path, input=xi, calibrate=xi, outputs=True, layer_errors=True)
        got = r["float_output"]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        err = np.abs(got - want).max()
        assert err <= 1e-4 * np.abs(want).max(), (name, err)
        assert r["output_matches_reference"] is True, name
        assert r["batch"] == 6, (name, r["batch"])
        # The int8 model: within the reported quantization error of the float one, which is small.
        assert np.abs(r["output"] - got).max() <= r["quantization_error"]["max_abs"] + 1e-6, name
        assert r["quantization_error"]["relative"] < 0.05, (name, r["quantization_error"])
        # Per layer (--layer-errors): the last row is the model's output, whose error is the one above.
        layers = r["layer_quantization_error"]
        assert layers[-1]["max_abs"] == r["quantization_error"]["max_abs"], (name, layers[-1])
        assert all(e["rms_relative"] < 0.02 for e in layers), (name, layers)
        print(f"{name}: float within {err:.2g} of PyTorch, int8 {r['quantization_error']['relative']:.2%}")
    gelu = os.path.join(d, "gelu.onnx")
    torch.onnx.export(Gelu().eval(), torch.from_numpy(x[:1]), gelu)
    try:
        tpusim.run(gelu, input=x)
        raise AssertionError("GELU not refused")
    except tpusim.InputError as e:
        assert "gelu.onnx: node /Div (Div): the operator is not supported; the importer takes Add," in str(e), str(e)
    # A global average beyond the pool instruction's windows runs on the matrix unit (GapLong, Gap16
    # above) up to 2^24 weights: AdaptiveAvgPool1d(1) of 512 channels over 128 values would take 2^25.
    gap = os.path.join(d, "gap_big.onnx")
    big = rng.random((2, 512, 128), dtype=np.float32)
    torch.onnx.export(nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(512, 10)).eval(),
                      torch.from_numpy(big[:1]), gap)
    try:
        tpusim.run(gap, input=big)
        raise AssertionError("AdaptiveAvgPool1d(1) of 512 channels over 128 values not refused")
    except tpusim.InputError as e:
        assert "gap_big.onnx: node /0/GlobalAveragePool (GlobalAveragePool): the average over the 128 values of the " \
               "line [2, 512, 128] is beyond the pool instruction's windows (1..15, square) and would take 33554432 " \
               "weights on the matrix unit (L x C x C); at most 16777216" in str(e), str(e)
print("ok")
