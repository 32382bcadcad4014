#!/usr/bin/env python3
"""Writes the ConvTranspose fixtures of tests/onnx/conv_transpose: small ONNX
models with one ConvTranspose node each (weights and bias as initializers),
a random input and ONNX Runtime's output, which crates/onnx/tests/conv_transpose.rs
compares qimport + the interpreter against. The cases cover groups
(depthwise too), strides, dilations, asymmetric pads, output_padding,
auto_pad SAME_UPPER / SAME_LOWER / VALID (including a SAME target of
input · stride beyond the full output, which ONNX Runtime does not reach) and
output_shape (including one larger than the full output, which ONNX Runtime
extends at the end), 1-D and 2-D.

Needs numpy, onnx and onnxruntime (scripts/requirements.txt). Run from the
repository root: scripts/.venv/bin/python scripts/make_conv_transpose_fixtures.py
It prints, per case, the output shape and the largest difference between
ONNX Runtime and a float64 reference computed here from the definition, with
the pads resolved as the importer does.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx", "conv_transpose")

# name: (input shape, weight shape, bias?, attributes)
CASES = {
    "basic_stride2_pad_outpad": ((1, 3, 4, 4), (3, 2, 3, 3), True,
                                 dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    "groups2_dilation_asym_pads": ((2, 4, 5, 4), (4, 3, 3, 2), False,
                                   dict(group=2, dilations=[2, 1], strides=[1, 2], pads=[0, 1, 2, 0])),
    "depthwise_stride2_outpad": ((1, 4, 5, 5), (4, 1, 3, 3), True,
                                 dict(group=4, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 1])),
    "same_upper": ((1, 2, 3, 3), (2, 2, 3, 3), False, dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "same_lower": ((1, 2, 3, 3), (2, 2, 3, 3), True, dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    "same_lower_k1_full": ((1, 2, 3, 3), (2, 2, 1, 1), False, dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    "valid_outpad": ((1, 2, 3, 4), (2, 2, 2, 3), False,
                     dict(strides=[3, 2], auto_pad="VALID", output_padding=[2, 1])),
    "output_shape_smaller": ((1, 2, 3, 3), (2, 3, 3, 3), True, dict(strides=[2, 2], output_shape=[6, 5])),
    "output_shape_larger": ((1, 1, 3, 3), (1, 2, 3, 3), False, dict(strides=[3, 2], output_shape=[10, 8])),
    "conv1d_stride3_dilation2": ((1, 3, 7), (3, 4, 3), True,
                                 dict(strides=[3], pads=[2, 1], output_padding=[2], dilations=[2])),
}


def resolve(x_shape, w_shape, a):
    """Begin/end pads and output padding, as qopt's importer resolves them."""
    n = len(x_shape) - 2
    s = a.get("strides", [1] * n)
    d = a.get("dilations", [1] * n)
    op = list(a.get("output_padding", [0] * n))
    mode = a.get("auto_pad", "NOTSET")
    target = a.get("output_shape")
    explicit = target is not None
    if target is None and mode.startswith("SAME"):
        target = [x_shape[2 + i] * s[i] for i in range(n)]
    if target is None:
        return (a.get("pads", [0] * 2 * n) if mode == "NOTSET" else [0] * 2 * n), op
    pads = [0] * 2 * n
    for i in range(n):
        full = s[i] * (x_shape[2 + i] - 1) + op[i] + (w_shape[2 + i] - 1) * d[i] + 1
        total = full - target[-n + i]
        if not explicit:
            total = max(total, 0)  # a SAME target is not reached (ONNX Runtime, ONNX shape inference)
        if total >= 0:
            small, large = total // 2, total - total // 2
            pads[i], pads[n + i] = (small, large) if mode == "SAME_UPPER" else (large, small)
        else:
            op[i] -= total
    return pads, op


def reference(x, w, b, a):
    """ConvTranspose from its definition, in float64."""
    n = x.ndim - 2
    if n == 1:
        x, w = x[:, :, None, :], w[:, :, None, :]
        a = dict(a)
        for key, one in (("strides", 1), ("dilations", 1), ("output_padding", 0)):
            if key in a:
                a[key] = [one] + list(a[key])
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
        if "output_shape" in a:
            a["output_shape"] = [1] + list(a["output_shape"])[-1:]
    pads, op = resolve(x.shape, w.shape, a)
    s = a.get("strides", [1, 1])
    d = a.get("dilations", [1, 1])
    g = a.get("group", 1)
    nb, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // g
    full = [s[0] * (h - 1) + op[0] + (kh - 1) * d[0] + 1, s[1] * (wd - 1) + op[1] + (kw - 1) * d[1] + 1]
    y = np.zeros((nb, og * g, full[0], full[1]))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for ci in range(c):
        gi = ci // cg
        for ki in range(kh):
            for kj in range(kw):
                rows = slice(ki * d[0], ki * d[0] + s[0] * (h - 1) + 1, s[0])
                cols = slice(kj * d[1], kj * d[1] + s[1] * (wd - 1) + 1, s[1])
                y[:, gi * og:(gi + 1) * og, rows, cols] += (
                    x64[:, ci, None, :, :] * w64[ci, :, ki, kj][None, :, None, None])
    y = y[:, :, pads[0]:full[0] - pads[2], pads[1]:full[1] - pads[3]]
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y[:, :, 0, :] if n == 1 else y


def model(name, x_shape, y_shape, w, b, attrs):
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.flatten())]
    inputs = ["x", "w"]
    if b is not None:
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, b.shape, b.flatten()))
        inputs.append("b")
    node = helper.make_node("ConvTranspose", inputs, ["y"], name=name, **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="qopt fixtures")
    onnx.checker.check_model(m)
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261124)
    for name, (x_shape, w_shape, with_bias, attrs) in CASES.items():
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        b = rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(np.float32) if with_bias else None
        want = reference(x, w, b, attrs)
        m = model(name, x_shape, want.shape, w, b, attrs)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
        y = session.run(None, {"x": x})[0]
        assert want.shape == y.shape, (name, want.shape, y.shape)
        err = np.abs(want - y).max() / np.abs(want).max()
        print(f"{name:28s} {str(y.shape):18s} ORT vs float64 definition: max |error| / max |output| = {err:.2e}")
        onnx.save(m, os.path.join(OUT, f"{name}.onnx"))
        np.save(os.path.join(OUT, f"{name}.input.npy"), x)
        np.save(os.path.join(OUT, f"{name}.ort.npy"), y)


if __name__ == "__main__":
    main()
