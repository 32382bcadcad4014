#!/usr/bin/env python3
"""Writes the small .npy/.npz fixtures of tests/passes/data (calibrate's golden
tests). Standard library only: the .npy format is written by hand.

Run from the repository root: python3 scripts/make_calibrate_fixtures.py
"""
import os
import struct
import zipfile

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "passes", "data")


def npy_bytes(values, shape, dtype="<f4"):
    fmt = {"<f4": "<f", "<f8": "<d"}[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype,
        "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0],
    )
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    body = b"".join(struct.pack(fmt, v) for v in values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body


def write(name, values, shape, dtype="<f4"):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(npy_bytes(values, shape, dtype))


def main():
    os.makedirs(os.path.join(OUT, "calib-dir"), exist_ok=True)
    # Six samples of 4 values: sample i holds [i - 2, 0.5 * i, -i, 3 - i].
    six = [v for i in range(6) for v in (i - 2.0, 0.5 * i, -float(i), 3.0 - i)]
    write("calib-x4.npy", six, (6, 4))
    # The same six samples split over two files of a directory (2 + 4 samples).
    write(os.path.join("calib-dir", "a.npy"), six[:8], (2, 4))
    write(os.path.join("calib-dir", "b.npy"), six[8:], (4, 4))
    # Bad data: NaN in sample 1, element 2; float64; wrong sample shape; no samples.
    bad = list(six[:12])
    bad[4 + 2] = float("nan")
    write("calib-nan.npy", bad, (3, 4))
    write("calib-f64.npy", six[:12], (3, 4), "<f8")
    write("calib-shape.npy", [0.0] * 15, (3, 5))
    write("calib-empty.npy", [], (0, 4))
    # round-weights' golden: 16 samples of 4 correlated values,
    # [a, b, c, a + b + c/2] with small dyadic a, b, c (exact in f32).
    rows = []
    for i in range(16):
        a, b, c = ((i * 5) % 7 - 3) / 2.0, ((i * 3) % 5 - 2) / 2.0, ((i * 7) % 11 - 5) / 4.0
        rows += [a, b, c, a + b + c / 2.0]
    write("round-x4.npy", rows, (16, 4))
    # Two arguments in one archive, by name.
    with zipfile.ZipFile(os.path.join(OUT, "calib-args.npz"), "w") as z:
        z.writestr("arg0.npy", npy_bytes(six, (6, 4)))
        z.writestr("arg1.npy", npy_bytes([float(i) for i in range(6)], (6, 1)))


if __name__ == "__main__":
    main()
