#!/usr/bin/python3
"""Trains the three small models of workloads/trained/ on scikit-learn's handwritten digits
(1,797 8x8 images that ship with python3-sklearn: no download) with PyTorch (python3-torch),
and exports them to ONNX beside the test split as .npy files, so that tpusim's tests and
`tpusim run` need no framework.

    apt-get install python3-torch python3-sklearn python3-onnx
    /usr/bin/python3 scripts/train_models.py [OUT_DIR]    (default workloads/trained)

Writes:
  digits_mlp.onnx   64 -> 64 (ReLU) -> 10                      input [N, 64]
  digits_cnn.onnx   conv 3x3x16 + BN + ReLU, max pool 2, conv 3x3x32 + ReLU, max pool 2,
                    flatten, dense 10                           input [N, 1, 8, 8]
  digits_lstm.onnx  LSTM (32 units) over the 8 rows, dense 10 on the last h
                                                                input [N, 8, 8] (rows as steps)
  test_mlp.npy, test_cnn.npy, test_lstm.npy    the test split (250 images, pixels / 16) in each
                                               model's input layout, float32
  test_labels.npy                              their classes, int32
  calib_mlp.npy, calib_cnn.npy, calib_lstm.npy 256 training images to calibrate the int8 scales on
  float_accuracy.json                          PyTorch's top-1 accuracy of each model on the test split

Deterministic: seeds are fixed and PyTorch runs single-threaded, so a rerun on the same
versions writes the same files.
"""
import json
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

torch.manual_seed(0)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 10))

    def forward(self, x):
        return self.net(x)


class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 32, batch_first=True)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


def train(model, x, y, epochs, lr):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "workloads", "trained")
    os.makedirs(out, exist_ok=True)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=250, random_state=0, stratify=y)
    layouts = {"mlp": (-1, 64), "cnn": (-1, 1, 8, 8), "lstm": (-1, 8, 8)}
    models = {"mlp": (Mlp(), 60, 1e-3), "cnn": (Cnn(), 40, 2e-3), "lstm": (Lstm(), 60, 5e-3)}
    accuracy = {}
    np.save(os.path.join(out, "test_labels.npy"), y_test.astype(np.int32))
    for name, (model, epochs, lr) in models.items():
        shape = layouts[name]
        xt = torch.from_numpy(x_train.reshape(shape))
        train(model, xt, torch.from_numpy(y_train), epochs, lr)
        test = x_test.reshape(shape)
        with torch.no_grad():
            pred = model(torch.from_numpy(test)).argmax(1).numpy()
        accuracy[name] = float((pred == y_test).mean())
        np.save(os.path.join(out, f"test_{name}.npy"), test)
        np.save(os.path.join(out, f"calib_{name}.npy"), x_train[:256].reshape(shape))
        torch.onnx.export(model, torch.from_numpy(test[:1]), os.path.join(out, f"digits_{name}.onnx"),
                          input_names=["x"], output_names=["logits"], opset_version=13,
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        print(f"{name}: float top-1 {accuracy[name]:.4f} on {len(y_test)} test images")
    with open(os.path.join(out, "float_accuracy.json"), "w") as f:
        json.dump({"test_images": len(y_test), "top1": accuracy}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
