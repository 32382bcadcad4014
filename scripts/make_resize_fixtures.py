#!/usr/bin/env python3
"""Writes the ONNX Resize fixtures of crates/onnx/tests/data/resize: one small
model per case (a graph input X, one Resize node, constant scales or sizes)
and refs.npz with, per case, the input (`<case>__x`) and the output of ONNX's
reference implementation (`<case>__ref`, onnx.reference), or ONNX Runtime's
(`<case>__ort`) for the case the reference cannot run (tf_half_pixel_for_nn,
dropped from ONNX in opset 18). The Rust test
crates/onnx/tests/resize_reference.rs imports each model, runs it in the
interpreter and compares: bit for bit with the reference, to 1e-6 of the
largest output with ONNX Runtime (which computes in f32). This script checks
ONNX Runtime against the reference on every other case and prints the
largest difference; they disagree, by design, where noted below.

Needs numpy, onnx and onnxruntime (scripts/requirements.txt). Run from the
repository root: scripts/.venv/bin/python scripts/make_resize_fixtures.py
It prints, per case, how the reference and ONNX Runtime compare.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "onnx", "tests", "data", "resize")


def model(shape, opset, scales=None, sizes=None, roi_input=False, **attrs):
    """A model of one Resize node on an f32 input of `shape`."""
    inputs = ["X", "roi" if roi_input else "", ""]
    inits = []
    if roi_input:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [0], []))
    if scales is not None:
        inputs[2] = "scales"
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
    elif opset < 13:
        # Opset 11 requires the scales input: an empty tensor when sizes are given.
        inputs[2] = "scales"
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [0], []))
    if sizes is not None:
        inputs.append("sizes")
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Resize", inputs, ["Y"], name="resize", **attrs)
    graph = helper.make_graph(
        [node],
        "resize",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None] * len(shape))],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


S = [1, 1, 3, 4]  # the usual input shape: N, C, H, W

# name: (input shape, opset, Resize arguments)
CASES = {
    # nearest
    "nearest_up_half_pixel": ([1, 2, 3, 4], 13, dict(scales=[1, 1, 2, 2.5])),
    "nearest_down_asymmetric_floor": (
        [1, 1, 5, 7], 13,
        dict(scales=[1, 1, 0.6, 0.5], coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    ),
    "nearest_sizes_align_corners_ceil": (
        S, 13, dict(sizes=[1, 1, 5, 7], coordinate_transformation_mode="align_corners", nearest_mode="ceil"),
    ),
    "nearest_pytorch_half_pixel_prefer_ceil": (
        S, 13,
        dict(sizes=[1, 1, 1, 9], coordinate_transformation_mode="pytorch_half_pixel",
             nearest_mode="round_prefer_ceil"),
    ),
    "nearest_tf_half_pixel_for_nn": (
        S, 13, dict(scales=[1, 1, 1.5, 0.75], coordinate_transformation_mode="tf_half_pixel_for_nn"),
    ),
    "nearest_opset11_sizes": (S, 11, dict(sizes=[1, 1, 7, 3], roi_input=True)),
    "nearest_5d_every_axis": ([2, 1, 2, 3, 2], 13, dict(scales=[1.5, 2, 1, 0.7, 2])),
    # linear
    "linear_up_half_pixel": (S, 13, dict(scales=[1, 1, 2, 2], mode="linear")),
    "linear_scales_fractional": (S, 13, dict(scales=[1, 1, 1.7, 2.3], mode="linear")),
    "linear_sizes_align_corners": (
        S, 13, dict(sizes=[1, 1, 5, 7], mode="linear", coordinate_transformation_mode="align_corners"),
    ),
    "linear_scales_align_corners": (
        S, 13, dict(scales=[1, 1, 2.5, 1.5], mode="linear", coordinate_transformation_mode="align_corners"),
    ),
    "linear_asymmetric": (
        S, 13, dict(scales=[1, 1, 0.5, 1.5], mode="linear", coordinate_transformation_mode="asymmetric"),
    ),
    "linear_pytorch_half_pixel": (
        S, 13, dict(sizes=[1, 1, 1, 6], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    ),
    "linear_down_sizes": (S, 13, dict(sizes=[1, 1, 2, 3], mode="linear")),
    "linear_opset11_roi": (S, 11, dict(scales=[1, 1, 2, 3], roi_input=True, mode="linear")),
    "linear_3d_channels": ([1, 3, 5], 13, dict(scales=[1, 2, 1.5], mode="linear")),
    # cubic
    "cubic_up_half_pixel": (S, 13, dict(scales=[1, 1, 2, 2], mode="cubic")),
    "cubic_a_exclude_outside": (
        S, 13,
        dict(scales=[1, 1, 2.5, 1.5], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1,
             coordinate_transformation_mode="asymmetric"),
    ),
    "cubic_down_sizes": ([1, 1, 6, 7], 13, dict(sizes=[1, 1, 4, 3], mode="cubic")),
    # opset 18: axes, antialias, keep_aspect_ratio_policy
    "linear_axes_scales": (S, 18, dict(scales=[1.5, 2], axes=[3, 2], mode="linear")),
    "linear_antialias_down": ([1, 1, 6, 8], 18, dict(scales=[1, 1, 0.5, 0.6], mode="linear", antialias=1)),
    "cubic_antialias_down": ([1, 1, 6, 8], 18, dict(sizes=[1, 1, 4, 3], mode="cubic", antialias=1)),
    "nearest_not_larger": (
        S, 18, dict(sizes=[7, 7], axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
    ),
    "linear_not_smaller": (
        S, 18, dict(sizes=[4, 6], axes=[2, 3], mode="linear", keep_aspect_ratio_policy="not_smaller"),
    ),
    # a dynamic batch: the importer leaves its size to run time (sizes = -1)
    "linear_dynamic_batch": (["N", 1, 3, 4], 13, dict(scales=[1, 1, 1.5, 0.5], mode="linear")),
    # opset 19: half_pixel_symmetric
    "linear_half_pixel_symmetric": (
        S, 19, dict(scales=[1, 1, 1.7, 0.6], mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    ),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20250611)
    arrays = {}
    for name, (shape, opset, kwargs) in CASES.items():
        m = model(shape, opset, **kwargs)
        onnx.checker.check_model(m)
        x = rng.standard_normal([2 if d == "N" else d for d in shape]).astype(np.float32)
        onnx.save(m, os.path.join(OUT, name + ".onnx"))
        arrays[name + "__x"] = x
        try:
            ref = ReferenceEvaluator(m).run(None, {"X": x})[0]
        except Exception as e:  # noqa: BLE001 - the reference lacks some modes
            ref = None
            print(f"{name}: reference: {type(e).__name__}: {e}")
        try:
            sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            got = sess.run(None, {"X": x})[0]
        except Exception as e:  # noqa: BLE001
            got = None
            print(f"{name}: onnxruntime: {type(e).__name__}: {e}")
        if ref is not None:
            arrays[name + "__ref"] = ref
        if got is not None and ref is not None:
            if got.shape != ref.shape:
                print(f"{name}: shapes differ: reference {ref.shape}, onnxruntime {got.shape}")
                continue
            diff = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
            scale = float(np.max(np.abs(ref))) if ref.size else 1.0
            agree = diff <= 1e-5 * scale
            print(f"{name}: shape {ref.shape}, max |ORT - reference| = {diff:.3g} "
                  f"({'agree' if agree else 'DISAGREE'}; max |reference| {scale:.3g})")
        elif got is not None:
            print(f"{name}: shape {got.shape}, onnxruntime only")
            arrays[name + "__ort"] = got
    np.savez_compressed(os.path.join(OUT, "refs.npz"), **arrays)


if __name__ == "__main__":
    main()
