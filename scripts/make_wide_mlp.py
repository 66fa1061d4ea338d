#!/usr/bin/env python3
"""Writes workloads/small/wide_mlp/{fc1.npy,input.npy} for workloads/small/wide_mlp.toml.

A constructed case where int8 weights lose too much (docs/compiler.md, "16-bit layers"): the
first layer's inputs 0..3 are dead (0 in every sample) but their weights are 40x the others',
so they set every column's int8 scale and the weights that matter round to a few steps. Plain
Python (no NumPy): a seeded uniform generator and the .npy 1.0 format written by hand.
"""
import os
import random
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads", "small", "wide_mlp")
IN, UNITS, BATCH, DEAD = 64, 32, 16, 4


def save_npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


def main():
    rng = random.Random(14)
    bound = (6.0 / (IN + UNITS)) ** 0.5  # Glorot uniform, as seeded layers
    w = [rng.uniform(-bound, bound) * (40.0 if k < DEAD else 1.0) for k in range(IN) for _ in range(UNITS)]
    x = [0.0 if k < DEAD else rng.uniform(-1.0, 1.0) for _ in range(BATCH) for k in range(IN)]
    os.makedirs(HERE, exist_ok=True)
    save_npy(os.path.join(HERE, "fc1.npy"), (IN, UNITS), w)
    save_npy(os.path.join(HERE, "input.npy"), (BATCH, IN), x)


if __name__ == "__main__":
    main()
