"""Writes the BYOC example's float model (model.qir) and its calibration data
(calib.npy), deterministically, with Python's standard library only.

The model is small on purpose: two layers the toy accelerator takes
(conv 3x3 + relu, conv 3x3 stride 2 + relu), one it does not (a conv with
dilation 2),
one more it takes (conv 1x1 + relu), then a float head (global average pool,
flatten, dense). `partition{target=accel}` therefore finds two regions with
host work between them.

Run from this directory: python3 make_model.py
"""

import random
import struct

rng = random.Random(13)


def weights(n, fan_in):
    bound = (6.0 / fan_in) ** 0.5
    return [rng.uniform(-bound, bound) for _ in range(n)]


def nested(values, shape):
    """The values as a nested list literal of `shape`, as .qir writes dense data."""
    if len(shape) == 1:
        return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"
    step = len(values) // shape[0]
    return "[" + ", ".join(nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def tensor(shape):
    return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"


def constant(name, shape, values):
    t = tensor(shape)
    return f'    %{name} = fp.constant() {{value = dense<{nested(values, shape)}> : {t}}} : () -> {t} loc("{name}")\n'


lines = ["module {\n", f"  func.func @main(%x: {tensor([1, 8, 8, 8])}) -> {tensor([1, 4])} {{\n"]
layers = [
    # name, in, out, kernel, stride, pad, dilation, input shape (HxW)
    ("conv1", 8, 16, 3, 1, 1, 1, 8),
    ("conv2", 16, 16, 3, 2, 1, 1, 8),
    ("conv3", 16, 16, 3, 1, 2, 2, 4),
    ("conv4", 16, 8, 1, 1, 0, 1, 4),
]
value = "x"
for index, (name, cin, cout, k, stride, pad, dilation, hw) in enumerate(layers, start=1):
    out_hw = (hw + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    lines.append(constant(f"{name}.weight", [cout, cin, k, k], weights(cout * cin * k * k, cin * k * k)))
    lines.append(constant(f"{name}.bias", [cout], [rng.uniform(-0.1, 0.1) for _ in range(cout)]))
    attrs = f"{{pad = [{pad}, {pad}, {pad}, {pad}], stride = [{stride}, {stride}]"
    attrs += f", dilation = [{dilation}, {dilation}]}}" if dilation != 1 else "}"
    lines.append(
        f"    %{name} = fp.conv2d(%{value}, %{name}.weight, %{name}.bias) {attrs} : "
        f"({tensor([1, cin, hw, hw])}, {tensor([cout, cin, k, k])}, {tensor([cout])}) -> "
        f'{tensor([1, cout, out_hw, out_hw])} loc("{name}")\n'
    )
    lines.append(
        f"    %relu{index} = fp.relu(%{name}) : ({tensor([1, cout, out_hw, out_hw])}) -> "
        f'{tensor([1, cout, out_hw, out_hw])} loc("relu{index}")\n'
    )
    value = f"relu{index}"
lines.append(
    f"    %pool = fp.global_avg_pool2d(%{value}) : ({tensor([1, 8, 4, 4])}) -> {tensor([1, 8, 1, 1])} "
    'loc("pool")\n'
)
lines.append(f'    %flat = fp.flatten(%pool) : ({tensor([1, 8, 1, 1])}) -> {tensor([1, 8])} loc("flatten")\n')
lines.append(constant("fc.weight", [4, 8], weights(32, 8)))
lines.append(constant("fc.bias", [4], [rng.uniform(-0.1, 0.1) for _ in range(4)]))
lines.append(
    f"    %fc = fp.dense(%flat, %fc.weight, %fc.bias) : ({tensor([1, 8])}, {tensor([4, 8])}, {tensor([4])}) -> "
    f'{tensor([1, 4])} loc("fc")\n'
)
lines.append(f"    func.return %fc : {tensor([1, 4])}\n  }}\n}}\n")
with open("model.qir", "w") as f:
    f.write("".join(lines))

# 24 samples of the input, [24, 8, 8, 8] float32, as a version 1.0 .npy.
samples = 24
data = [rng.uniform(0.0, 1.0) for _ in range(samples * 8 * 8 * 8)]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 8, 8, 8), }" % samples
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open("calib.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack(f"<{len(data)}f", *data))
