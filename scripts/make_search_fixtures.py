#!/usr/bin/env python3
"""Writes the fixtures of the quantize-search golden test: the data
tests/passes/data/search-x8.npy (64 samples of 8 values), the labels
search-labels.npy (the first model's float classes, int64, with the first four
changed so accuracy is not 100 %), labels of the wrong dtype and too few,
the first model's float outputs (search-reference.npy), and the
two model functions printed to standard output for tests/passes/quantize-search.qir.

Model: dense 8->16, relu, dense 16->16, relu, dense 16->4.
- "outlier activation": fc1's output channel 0 has a bias of 60, so its
  calibrated range is ~[0, 62] and i8 steps of ~0.24 swamp the other channels
  (range ~[0, 2]); fc2 reads channel 0 with weight 0.002. Only fc1's output is
  sensitive, and i16 fixes it.
- "outlier weight": fc2's weight [3][5] is 40 (others ~0.3): per tensor, the
  i8 weight step of ~0.31 erases fc2's other weights. Only fc2 is sensitive,
  and i16 does not help (W8A16 keeps the weights at 8 bits); float does.

Run from the repository root with numpy: python scripts/make_search_fixtures.py
"""
import os
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "passes", "data")
rng = np.random.default_rng(14)
x = rng.standard_normal((64, 8)).astype(np.float32)
# Weights rounded to 1/1000 so the .qir text stays short.
w1 = np.round(rng.standard_normal((16, 8)) * 0.4, 3).astype(np.float32)
w2 = np.round(rng.standard_normal((16, 16)) * 0.3, 3).astype(np.float32)
w3 = np.round(rng.standard_normal((4, 16)) * 0.5, 3).astype(np.float32)
b = np.zeros(16, np.float32)


def dense(v, w, bias):
    return v @ w.T + bias


def forward(w1, b1, w2):
    h = np.maximum(dense(x, w1, b1), 0)
    h = np.maximum(dense(h, w2, b), 0)
    return dense(h, w3, np.zeros(4, np.float32))


def float_text(v):
    text = "%g" % v
    return text if "." in text or "e" in text else text + ".0"


def tensor(a):
    text = np.array2string(a, separator=", ", threshold=1 << 20, max_line_width=1 << 20,
                           formatter={"float_kind": float_text}).replace("\n", "")
    shape = "x".join(str(d) for d in a.shape)
    return "dense<%s> : tensor<%sxf32>" % (text, shape)


def function(name, w1, b1, w2):
    ops = [
        ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b), ("w3", w3), ("b3", np.zeros(4, np.float32)),
    ]
    lines = ["func.func @%s(%%x: tensor<1x8xf32>) -> tensor<1x4xf32> {" % name]
    for n, a in ops:
        shape = "x".join(str(d) for d in a.shape)
        lines.append('  %%%s = fp.constant() {value = %s} : () -> tensor<%sxf32> loc("%s")' % (n, tensor(a), shape, n))
    lines += [
        '  %y1 = fp.dense(%x, %w1, %b1) : (tensor<1x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<1x16xf32> loc("fc1")',
        '  %r1 = fp.relu(%y1) : (tensor<1x16xf32>) -> tensor<1x16xf32> loc("relu1")',
        '  %y2 = fp.dense(%r1, %w2, %b2) : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32> loc("fc2")',
        '  %r2 = fp.relu(%y2) : (tensor<1x16xf32>) -> tensor<1x16xf32> loc("relu2")',
        '  %y3 = fp.dense(%r2, %w3, %b3) : (tensor<1x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("fc3")',
        "  func.return %y3 : tensor<1x4xf32>",
        "}",
    ]
    return "\n".join(lines)


b1 = b.copy()
b1[0] = 60.0
w2a = w2.copy()
w2a[:, 0] = 0.002
w2b = w2.copy()
w2b[3, 5] = 40.0
labels = forward(w1, b1, w2a).argmax(1).astype(np.int64)
labels[:4] = (labels[:4] + 1) % 4
np.save(os.path.join(OUT, "search-x8.npy"), x)
np.save(os.path.join(OUT, "search-labels.npy"), labels)
np.save(os.path.join(OUT, "search-labels-f32.npy"), labels.astype(np.float32))
np.save(os.path.join(OUT, "search-labels-short.npy"), labels[:10])
np.save(os.path.join(OUT, "search-reference.npy"), forward(w1, b1, w2a).astype(np.float32))
print(function("main", w1, b1, w2a))
print()
print(function("main", w1, b, w2b))
