#!/usr/bin/env python3
"""Import test models written the way real exporters write them, with ONNX Runtime's outputs.

Usage (venv of scripts/README.md):

    scripts/.venv/bin/python scripts/make_import_models.py [--out tests/import-models]
    scripts/.venv/bin/python scripts/make_import_models.py --bench scripts/.work/models

Each model is built node by node with `onnx.helper`, copying the graph
patterns of one exporter (the patterns are what the importer must handle;
the weights are seeded random numbers scaled like trained ones, not trained):

- `mobilenetv3_torch`: a MobileNetV3-small-style classifier as PyTorch's
  exporter writes it (opset 17, symbolic batch, HardSwish, HardSigmoid
  squeeze-excite, depthwise 3x3/5x5, `x.view(x.size(0), -1)` as
  Shape/Gather/Unsqueeze/Concat/Reshape).
- `ppocr_cls_paddle`: a text-direction classifier as Paddle2ONNX writes it
  (opset 11, `-1` dimensions, unfused BatchNormalization, hardswish as
  `x * HardSigmoid(x)`, relu6 as Clip with constant inputs, Reshape to
  `[0, -1]`, Softmax).
- `dbnet_paddle`: a DBNet-style text detector (opset 11, input
  `[-1, 3, -1, -1]`, FPN with nearest Resize by `scales`, ConvTranspose head,
  Sigmoid).
- `yolov8n_ultralytics`: a YOLOv8n-style detector (opset 17, SiLU, C2f with
  Split/Concat, SPPF max pools, nearest Resize, DFL head with
  Reshape/Transpose/Softmax/Conv, anchors decoding, Sigmoid classes).
- `orientation_tf2onnx`: an image-orientation classifier as tf2onnx writes
  a Keras model (opset 13, NHWC input with a symbolic batch transposed to
  NCHW, Relu6 as Clip, depthwise convolutions, Squeeze of the pooled map,
  Identity, MatMul + Add head, Softmax).
- `transformer_torch`: a small transformer encoder (opset 17, int64 token
  ids, Gather embeddings, position ids sliced by the run-time sequence
  length, LayerNormalization, multi-head attention with Shape-computed
  Reshapes, Softmax, GELU as PyTorch's Erf decomposition, first-token
  pooling).

Each goes to OUT/<name>/: `model.onnx`, `input_<i>.npy` (one per graph
input), `output_<i>.npy` (ONNX Runtime's outputs, one intra-op thread,
default optimizations) and `args` (the qimport flags the model needs, e.g.
`--input-shape x=1x3x64x64`). `crates/onnx/tests/import_models.rs` imports
each with those flags, runs the interpreter and compares.

`--bench DIR` writes larger versions (224x224 MobileNetV3, 640x640 is not
needed: 320x320 YOLOv8n) for `ort_latency.py`; they are not stored in git.
"""
import argparse
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent


class Graph:
    """A graph under construction: nodes, initializers, unique names."""

    def __init__(self, seed, name_style):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = {}
        self.style = name_style

    def name(self, kind):
        i = self.count.get(kind, 0)
        self.count[kind] = i + 1
        if self.style == "torch":
            return f"/{kind}_{i}/{kind.capitalize()}"
        if self.style == "tf":
            return f"StatefulPartitionedCall/model/{kind}_{i}"
        return f"{kind}_{i}.tmp_0"

    def const(self, array, hint="const"):
        name = f"{hint}_{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, n_out=1, name=None, **attrs):
        name = name or self.name(op.lower())
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def weight(self, cout, cin_per_group, k):
        fan_in = cin_per_group * k * k
        return (self.rng.standard_normal((cout, cin_per_group, k, k)) * math.sqrt(2.0 / fan_in)).astype(np.float32)

    def conv(self, x, cin, cout, k, s=1, groups=1, bias=True, pad=None):
        pad = k // 2 if pad is None else pad
        w = self.const(self.weight(cout, cin // groups, k), "w")
        inputs = [x, w]
        if bias:
            inputs.append(self.const((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        return self.node("Conv", inputs, kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4, group=groups)

    def bn(self, x, c):
        scale = self.const((1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_scale")
        bias = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_bias")
        mean = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_mean")
        var = self.const((0.5 + self.rng.random(c)).astype(np.float32), "bn_var")
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)

    def i64(self, values):
        return self.const(np.array(values, dtype=np.int64), "shape")

    def f32(self, value):
        return self.const(np.array(value, dtype=np.float32), "scalar")

    def model(self, inputs, outputs, opset, producer):
        graph = helper.make_graph(self.nodes, "main", inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=producer)
        model.ir_version = 8
        # Shape inference cannot follow `-1` sizes (Paddle's dynamic dimensions): a structural check then.
        dynamic = any(d.dim_value < 0 for i in inputs for d in i.type.tensor_type.shape.dim)
        onnx.checker.check_model(model, full_check=not dynamic)
        return model


def hardswish_torch(g, x):
    return g.node("HardSwish", [x])


def hardswish_paddle(g, x):
    return g.node("Mul", [x, g.node("HardSigmoid", [x], alpha=1.0 / 6.0, beta=0.5)])


def act(g, x, kind):
    if kind == "relu":
        return g.node("Relu", [x])
    if kind == "hswish":
        return hardswish_torch(g, x)
    if kind == "hswish_paddle":
        return hardswish_paddle(g, x)
    if kind == "relu6":
        return g.node("Clip", [x, g.f32(0.0), g.f32(6.0)])
    raise ValueError(kind)


def squeeze_excite(g, x, c, paddle):
    squeeze = max(8, c // 4)
    s = g.node("GlobalAveragePool", [x])
    s = g.node("Relu", [g.conv(s, c, squeeze, 1)])
    s = g.conv(s, squeeze, c, 1)
    s = g.node("HardSigmoid", [s], alpha=(0.2 if paddle else 1.0 / 6.0), beta=0.5)
    return g.node("Mul", [x, s])


def bneck(g, x, cin, exp, cout, k, s, se, kind, paddle=False):
    y = x
    if exp != cin:
        y = g.conv(y, cin, exp, 1, bias=not paddle)
        if paddle:
            y = g.bn(y, exp)
        y = act(g, y, kind)
    y = g.conv(y, exp, exp, k, s, groups=exp, bias=not paddle)
    if paddle:
        y = g.bn(y, exp)
    y = act(g, y, kind)
    if se:
        y = squeeze_excite(g, y, exp, paddle)
    y = g.conv(y, exp, cout, 1, bias=not paddle)
    if paddle:
        y = g.bn(y, cout)
    if s == 1 and cin == cout:
        y = g.node("Add", [x, y])
    return y


def mobilenetv3_torch(size=64, width=0.25, classes=10, seed=1):
    g = Graph(seed, "torch")
    c = lambda n: max(8, int(n * width + 4) // 8 * 8)  # noqa: E731
    x = g.conv("input", 3, c(16), 3, 2)
    x = hardswish_torch(g, x)
    blocks = [  # k, exp, out, se, act, stride
        (3, 16, 16, True, "relu", 2),
        (3, 72, 24, False, "relu", 2),
        (3, 88, 24, False, "relu", 1),
        (5, 96, 40, True, "hswish", 2),
        (5, 240, 40, True, "hswish", 1),
        (5, 120, 48, True, "hswish", 1),
        (5, 288, 96, True, "hswish", 2),
    ]
    cin = c(16)
    for k, exp, out, se, kind, s in blocks:
        x = bneck(g, x, cin, c(exp), c(out), k, s, se, kind)
        cin = c(out)
    x = hardswish_torch(g, g.conv(x, cin, c(576), 1))
    x = g.node("GlobalAveragePool", [x])
    # x.view(x.size(0), -1)
    shape = g.node("Shape", [x])
    n = g.node("Gather", [shape, g.const(np.array(0, dtype=np.int64), "idx")], axis=0)
    n = g.node("Unsqueeze", [n, g.i64([0])])
    target = g.node("Concat", [n, g.i64([-1])], axis=0)
    x = g.node("Reshape", [x, target])
    w1 = g.const((g.rng.standard_normal((c(1024), c(576))) * math.sqrt(2.0 / c(576))).astype(np.float32), "fc1_w")
    b1 = g.const(np.zeros(c(1024), np.float32), "fc1_b")
    x = hardswish_torch(g, g.node("Gemm", [x, w1, b1], transB=1))
    w2 = g.const((g.rng.standard_normal((classes, c(1024))) * math.sqrt(1.0 / c(1024))).astype(np.float32), "fc2_w")
    b2 = g.const(np.zeros(classes, np.float32), "fc2_b")
    logits = g.node("Gemm", [x, w2, b2], transB=1, name="/classifier/Gemm")
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch_size", 3, size, size])]
    outputs = [helper.make_tensor_value_info(logits, TensorProto.FLOAT, ["batch_size", classes])]
    return g.model(inputs, outputs, 17, "pytorch"), f"--input-shape input=1x3x{size}x{size}"


def ppocr_cls_paddle(seed=2):
    g = Graph(seed, "paddle")
    x = g.bn(g.conv("x", 3, 8, 3, 2, bias=False), 8)
    x = hardswish_paddle(g, x)
    blocks = [(3, 8, 8, True, "relu6", 1), (3, 32, 16, False, "relu6", 2), (5, 48, 16, True, "hswish_paddle", 1)]
    cin = 8
    for k, exp, out, se, kind, s in blocks:
        x = bneck(g, x, cin, exp, out, k, s, se, kind, paddle=True)
        cin = out
    x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Reshape", [x, g.i64([0, -1])])
    w = g.const((g.rng.standard_normal((16 * 6 * 24, 2)) * 0.02).astype(np.float32), "fc_w")
    x = g.node("MatMul", [x, w])
    x = g.node("Add", [x, g.const(np.array([0.1, -0.1], np.float32), "fc_b")])
    y = g.node("Softmax", [x], axis=1)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, 48, 192])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [-1, 2])]
    return g.model(inputs, outputs, 11, "PaddlePaddle"), "--input-shape x=1x3x48x192"


def dbnet_paddle(size=64, seed=3):
    g = Graph(seed, "paddle")
    def cbr(x, cin, cout, k, s):  # noqa: E306
        return g.node("Relu", [g.bn(g.conv(x, cin, cout, k, s, bias=False), cout)])
    c2 = cbr(cbr("x", 3, 8, 3, 2), 8, 8, 3, 1)  # /2
    c3 = cbr(c2, 8, 16, 3, 2)  # /4
    c4 = cbr(c3, 16, 24, 3, 2)  # /8
    c5 = cbr(c4, 24, 32, 3, 2)  # /16
    inner = 16
    in5, in4, in3, in2 = (g.conv(c, ch, inner, 1, bias=False) for c, ch in ((c5, 32), (c4, 24), (c3, 16), (c2, 8)))
    roi = g.const(np.zeros(0, np.float32), "roi")
    up2 = g.const(np.array([1, 1, 2, 2], np.float32), "scales")
    def up(x, scales):  # noqa: E306
        return g.node("Resize", [x, roi, scales], mode="nearest", coordinate_transformation_mode="asymmetric",
                      nearest_mode="floor")
    out4 = g.node("Add", [in4, up(in5, up2)])
    out3 = g.node("Add", [in3, up(out4, up2)])
    out2 = g.node("Add", [in2, up(out3, up2)])
    p5 = up(g.conv(in5, inner, 4, 3, bias=False), g.const(np.array([1, 1, 8, 8], np.float32), "scales"))
    p4 = up(g.conv(out4, inner, 4, 3, bias=False), g.const(np.array([1, 1, 4, 4], np.float32), "scales"))
    p3 = up(g.conv(out3, inner, 4, 3, bias=False), up2)
    p2 = g.conv(out2, inner, 4, 3, bias=False)
    fuse = g.node("Concat", [p5, p4, p3, p2], axis=1)
    h = g.node("Relu", [g.bn(g.conv(fuse, 16, 4, 3, bias=False), 4)])
    w1 = g.const((g.rng.standard_normal((4, 4, 2, 2)) * 0.5).astype(np.float32), "convt_w")
    h = g.node("ConvTranspose", [h, w1, g.const(np.zeros(4, np.float32), "convt_b")], kernel_shape=[2, 2],
               strides=[2, 2])
    h = g.node("Relu", [g.bn(h, 4)])
    w2 = g.const((g.rng.standard_normal((4, 1, 2, 2)) * 0.5).astype(np.float32), "convt_w")
    h = g.node("ConvTranspose", [h, w2, g.const(np.zeros(1, np.float32), "convt_b")], kernel_shape=[2, 2],
               strides=[2, 2])
    y = g.node("Sigmoid", [h])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, -1, -1])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [-1, 1, -1, -1])]
    return g.model(inputs, outputs, 11, "PaddlePaddle"), f"--input-shape x=1x3x{size}x{size}"


def yolov8n_ultralytics(size=64, width=4, classes=4, seed=4):
    g = Graph(seed, "torch")
    def cv(x, cin, cout, k, s=1):  # noqa: E306  Conv + SiLU
        y = g.conv(x, cin, cout, k, s)
        return g.node("Mul", [y, g.node("Sigmoid", [y])])
    def c2f(x, cin, cout, n, shortcut):  # noqa: E306
        hidden = cout // 2
        y = cv(x, cin, 2 * hidden, 1)
        parts = list(g.node("Split", [y, g.i64([hidden, hidden])], n_out=2, axis=1))
        for _ in range(n):
            z = cv(cv(parts[-1], hidden, hidden, 3), hidden, hidden, 3)
            parts.append(g.node("Add", [parts[-1], z]) if shortcut else z)
        return cv(g.node("Concat", parts, axis=1), (2 + n) * hidden, cout, 1)
    w = width
    x = cv("images", 3, w, 3, 2)
    x = cv(x, w, 2 * w, 3, 2)
    x = c2f(x, 2 * w, 2 * w, 1, True)
    p3 = c2f(cv(x, 2 * w, 4 * w, 3, 2), 4 * w, 4 * w, 1, True)  # /8
    p4 = c2f(cv(p3, 4 * w, 8 * w, 3, 2), 8 * w, 8 * w, 1, True)  # /16
    x = cv(p4, 8 * w, 8 * w, 3, 2)  # /32
    x = c2f(x, 8 * w, 8 * w, 1, True)
    # SPPF
    y = cv(x, 8 * w, 4 * w, 1)
    m1 = g.node("MaxPool", [y], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m2 = g.node("MaxPool", [m1], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m3 = g.node("MaxPool", [m2], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    p5 = cv(g.node("Concat", [y, m1, m2, m3], axis=1), 16 * w, 8 * w, 1)
    roi = g.const(np.zeros(0, np.float32), "roi")
    scales = g.const(np.array([1, 1, 2, 2], np.float32), "scales")
    def up(x):  # noqa: E306
        return g.node("Resize", [x, roi, scales], mode="nearest", coordinate_transformation_mode="asymmetric",
                      nearest_mode="floor")
    h4 = c2f(g.node("Concat", [up(p5), p4], axis=1), 16 * w, 8 * w, 1, False)
    h3 = c2f(g.node("Concat", [up(h4), p3], axis=1), 12 * w, 4 * w, 1, False)
    reg = 16
    heads = []
    anchors, strides = [], []
    for feat, ch, stride in ((h3, 4 * w, 8), (h4, 8 * w, 16), (p5, 8 * w, 32)):
        box = g.conv(cv(cv(feat, ch, 16, 3), 16, 16, 3), 16, 4 * reg, 1)
        cls = g.conv(cv(cv(feat, ch, 16, 3), 16, 16, 3), 16, classes, 1)
        out = g.node("Concat", [box, cls], axis=1)
        heads.append(g.node("Reshape", [out, g.i64([1, 4 * reg + classes, -1])]))
        n = size // stride
        ys, xs = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        anchors.append(np.stack([xs.ravel(), ys.ravel()]))
        strides.append(np.full(n * n, stride))
    cat = g.node("Concat", heads, axis=2)
    box, cls = g.node("Split", [cat, g.i64([4 * reg, classes])], n_out=2, axis=1)
    # DFL: softmax over 16 bins, expectation by a fixed 1x1 conv.
    a = sum(x.shape[1] for x in anchors)
    d = g.node("Reshape", [box, g.i64([1, 4, reg, a])])
    d = g.node("Softmax", [g.node("Transpose", [d], perm=[0, 2, 1, 3])], axis=1)
    proj = g.const(np.arange(reg, dtype=np.float32).reshape(1, reg, 1, 1), "dfl_w")
    d = g.node("Reshape", [g.node("Conv", [d, proj], kernel_shape=[1, 1]), g.i64([1, 4, a])])
    lt, rb = g.node("Slice", [d, g.i64([0]), g.i64([2]), g.i64([1])]), g.node("Slice", [d, g.i64([2]), g.i64([4]),
                                                                                           g.i64([1])])
    anchor = g.const(np.concatenate(anchors, axis=1)[None].astype(np.float32), "anchors")
    x1y1 = g.node("Sub", [anchor, lt])
    x2y2 = g.node("Add", [anchor, rb])
    c_xy = g.node("Div", [g.node("Add", [x1y1, x2y2]), g.f32(2.0)])
    wh = g.node("Sub", [x2y2, x1y1])
    dbox = g.node("Mul", [g.node("Concat", [c_xy, wh], axis=1),
                          g.const(np.concatenate(strides)[None, None].astype(np.float32), "strides")])
    y = g.node("Concat", [dbox, g.node("Sigmoid", [cls])], axis=1, name="/model.22/Concat_5")
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 4 + classes, a])]
    return g.model(inputs, outputs, 17, "pytorch"), ""


def transformer_torch(vocab=100, dim=32, heads=4, layers=2, seq=16, max_len=64, classes=3, seed=5):
    g = Graph(seed, "torch")
    hd = dim // heads
    def lin(x, cin, cout):  # noqa: E306  MatMul + Add as torch writes nn.Linear on 3-D input
        w = g.const((g.rng.standard_normal((cin, cout)) / math.sqrt(cin)).astype(np.float32), "linear_w")
        return g.node("Add", [g.const((0.02 * g.rng.standard_normal(cout)).astype(np.float32), "linear_b"),
                              g.node("MatMul", [x, w])])
    def ln(x):  # noqa: E306
        return g.node("LayerNormalization", [x, g.const(np.ones(dim, np.float32), "ln_w"),
                                             g.const(np.zeros(dim, np.float32), "ln_b")], axis=-1, epsilon=1e-5)
    def gelu_erf(x):  # noqa: E306
        e = g.node("Erf", [g.node("Div", [x, g.f32(1.4142135381698608)])])
        return g.node("Mul", [g.node("Mul", [x, g.node("Add", [e, g.f32(1.0)])]), g.f32(0.5)])
    emb = g.const((g.rng.standard_normal((vocab, dim)) * 0.5).astype(np.float32), "tok_emb")
    x = g.node("Gather", [emb, "input_ids"], axis=0)
    # position_ids[:, :seq_len] from a registered buffer, seq_len from Shape
    shape = g.node("Shape", ["input_ids"])
    seq_len = g.node("Gather", [shape, g.const(np.array(1, dtype=np.int64), "idx")], axis=0)
    seq_len = g.node("Unsqueeze", [seq_len, g.i64([0])])
    pos_ids = g.node("Slice", [g.const(np.arange(max_len, dtype=np.int64)[None], "position_ids"), g.i64([0]), seq_len,
                               g.i64([1])])
    pos = g.node("Gather", [g.const((g.rng.standard_normal((max_len, dim)) * 0.5).astype(np.float32), "pos_emb"),
                            pos_ids], axis=0)
    x = ln(g.node("Add", [x, pos]))
    for _ in range(layers):
        xs = g.node("Shape", [x])
        b = g.node("Unsqueeze", [g.node("Gather", [xs, g.const(np.array(0, np.int64), "idx")], axis=0), g.i64([0])])
        s = g.node("Unsqueeze", [g.node("Gather", [xs, g.const(np.array(1, np.int64), "idx")], axis=0), g.i64([0])])
        split_shape = g.node("Concat", [b, s, g.i64([heads]), g.i64([hd])], axis=0)
        def split_heads(t, perm):  # noqa: E306
            return g.node("Transpose", [g.node("Reshape", [t, split_shape])], perm=perm)
        q = split_heads(lin(x, dim, dim), [0, 2, 1, 3])
        k = split_heads(lin(x, dim, dim), [0, 2, 3, 1])
        v = split_heads(lin(x, dim, dim), [0, 2, 1, 3])
        scores = g.node("Div", [g.node("MatMul", [q, k]), g.f32(math.sqrt(hd))])
        attn = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
        merged = g.node("Reshape", [g.node("Transpose", [attn], perm=[0, 2, 1, 3]),
                                    g.node("Concat", [b, s, g.i64([dim])], axis=0)])
        x = ln(g.node("Add", [x, lin(merged, dim, dim)]))
        f = lin(gelu_erf(lin(x, dim, 4 * dim)), 4 * dim, dim)
        x = ln(g.node("Add", [x, f]))
    cls = g.node("Gather", [x, g.const(np.array(0, np.int64), "idx")], axis=1)
    w = g.const((g.rng.standard_normal((classes, dim)) / math.sqrt(dim)).astype(np.float32), "head_w")
    y = g.node("Gemm", [cls, w, g.const(np.zeros(classes, np.float32), "head_b")], transB=1)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["batch", classes])]
    return g.model(inputs, outputs, 17, "pytorch"), f"--input-shape input_ids=1x{seq}"


def orientation_tf2onnx(size=64, classes=4, seed=6):
    """An image-orientation classifier as tf2onnx writes a Keras MobileNetV2-style model."""
    g = Graph(seed, "tf")
    x = g.node("Transpose", ["input_1"], perm=[0, 3, 1, 2])  # NHWC in, NCHW inside
    def relu6(y):  # noqa: E306  tf2onnx: Relu6 as Clip with constant bounds
        return g.node("Clip", [y, g.f32(0.0), g.f32(6.0)])
    x = relu6(g.conv(x, 3, 8, 3, 2))
    cin = 8
    for exp, cout, s in ((16, 8, 1), (24, 12, 2), (36, 12, 1), (48, 16, 2)):
        y = relu6(g.conv(x, cin, exp, 1))
        y = relu6(g.conv(y, exp, exp, 3, s, groups=exp))
        y = g.conv(y, exp, cout, 1)
        x = g.node("Add", [x, y]) if s == 1 and cin == cout else y
        cin = cout
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Squeeze", [x, g.i64([2, 3])])
    x = g.node("Identity", [x])
    w = g.const((g.rng.standard_normal((cin, classes)) / math.sqrt(cin)).astype(np.float32), "dense_kernel")
    x = g.node("Add", [g.node("MatMul", [x, w]), g.const(np.zeros(classes, np.float32), "dense_bias")])
    y = g.node("Softmax", [x], axis=-1)
    inputs = [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["unk__17", size, size, 3])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["unk__18", classes])]
    return g.model(inputs, outputs, 13, "tf2onnx"), f"--input-shape input_1=1x{size}x{size}x3"


MODELS = {
    "mobilenetv3_torch": mobilenetv3_torch,
    "ppocr_cls_paddle": ppocr_cls_paddle,
    "dbnet_paddle": dbnet_paddle,
    "yolov8n_ultralytics": yolov8n_ultralytics,
    "transformer_torch": transformer_torch,
    "orientation_tf2onnx": orientation_tf2onnx,
}

BENCH = {
    "mobilenetv3_224": lambda: mobilenetv3_torch(size=224, width=1.0, classes=1000, seed=11),
    "yolov8n_320": lambda: yolov8n_ultralytics(size=320, width=16, classes=80, seed=12),
}


def shapes_from_args(args):
    """The input shapes an `args` line fixes."""
    out = {}
    parts = args.split()
    for flag, value in zip(parts[::2], parts[1::2]):
        assert flag == "--input-shape"
        name, dims = value.split("=")
        out[name] = [int(d) for d in dims.split("x")]
    return out


def write(name, model, args, out_dir, seed):
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, d / "model.onnx")
    (d / "args").write_text(args + "\n")
    fixed = shapes_from_args(args)
    rng = np.random.default_rng(seed)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(d / "model.onnx"), options, providers=["CPUExecutionProvider"])
    feeds = {}
    for i, spec in enumerate(session.get_inputs()):
        shape = fixed.get(spec.name) or [dim if isinstance(dim, int) and dim > 0 else 1 for dim in spec.shape]
        if spec.type == "tensor(int64)":
            value = rng.integers(0, 100, size=shape, dtype=np.int64)
        else:
            value = rng.standard_normal(shape).astype(np.float32)
        feeds[spec.name] = value
        np.save(d / f"input_{i}.npy", value)
    for i, value in enumerate(session.run(None, feeds)):
        np.save(d / f"output_{i}.npy", value)
    size = sum(f.stat().st_size for f in d.iterdir())
    print(f"{name}: {len(model.graph.node)} nodes, {size / 1024:.0f} KiB in {d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "import-models")
    ap.add_argument("--bench", type=Path, help="write the larger benchmark versions here instead")
    ap.add_argument("--only", nargs="*", help="model names to write (default: all)")
    a = ap.parse_args()
    table = BENCH if a.bench else MODELS
    out = a.bench or a.out
    for i, (name, build) in enumerate(table.items()):
        if a.only and name not in a.only:
            continue
        model, args = build()
        write(name, model, args, out, seed=100 + i)


if __name__ == "__main__":
    main()
