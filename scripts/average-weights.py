#!/usr/bin/env python3
"""Mixes the weights of two nets of the same architecture and features,
tensor by tensor (batch norm's running averages too):
OUT = (1 - ALPHA) * A + ALPHA * B. For nets fine-tuned from one another,
where the mixture stays a working net (docs/results/selfplay.md).

    python3 scripts/average-weights.py nets/value.safetensors \\
        nets/value-selfplay.safetensors 0.25 value-mix.safetensors

With --dtype f16 it stores the result in half the bytes: a run's state
kept in the repo between GPU leases is a net of itself (ALPHA 0),
converted so (configs/resnet-policy-continue.toml):

    python3 scripts/average-weights.py resnet-best.safetensors \\
        resnet-best.safetensors 0 --dtype f16 nets/runs/resnet-gpu/continued.safetensors

Needs the `safetensors` and `numpy` packages. OUT keeps A's `go_train`
metadata (net and features; its step only with ALPHA 0) with the checksum
go-train checks recomputed, and is never written over.
"""
import argparse
import os
import struct
import sys
import zlib

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError:
    sys.exit("average-weights.py: needs the safetensors and numpy packages (pip install safetensors numpy)")


def weights(path):
    try:
        return safe_open(path, "np")
    except Exception as e:  # a missing file, or one that is not safetensors
        sys.exit(f"average-weights.py: cannot read {path} as safetensors weights: {e}")


def fields(meta):
    return dict(f.split("=", 1) for f in meta.get("go_train", "").split() if "=" in f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("alpha", type=float, help="B's share, 0 to 1")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["same", "f16"], default="same", help="the floats OUT stores (default: A's)")
    x = ap.parse_args()
    if not 0.0 <= x.alpha <= 1.0:
        sys.exit(f"average-weights.py: alpha {x.alpha} is not between 0 and 1")
    if os.path.exists(x.out):
        sys.exit(f"average-weights.py: {x.out} exists; give another name")
    fa, fb = weights(x.a), weights(x.b)
    ma, mb = fields(fa.metadata() or {}), fields(fb.metadata() or {})
    for key in ("net", "features"):
        if ma.get(key) != mb.get(key):
            sys.exit(f"average-weights.py: {x.a} has {key}={ma.get(key)}, {x.b} {key}={mb.get(key)}")
    if set(fa.keys()) != set(fb.keys()):
        sys.exit(f"average-weights.py: {x.a} and {x.b} hold different tensors")
    mixed = {}
    for k in fa.keys():
        try:
            ta, tb = fa.get_tensor(k), fb.get_tensor(k)
        except TypeError as e:  # a dtype numpy has not, such as bf16
            sys.exit(f"average-weights.py: {k} of {x.a} or {x.b} cannot be read into numpy: {e}")
        if ta.shape != tb.shape:
            sys.exit(f"average-weights.py: {k} is {tuple(ta.shape)} in {x.a}, {tuple(tb.shape)} in {x.b}")
        dtype = np.float16 if x.dtype == "f16" else ta.dtype
        floating = np.issubdtype(ta.dtype, np.floating)
        mixed[k] = ((1 - x.alpha) * ta.astype(np.float64) + x.alpha * tb.astype(np.float64)).astype(dtype) if floating else ta
    # A placeholder as long as the checksum, replaced in place once the
    # data's bytes are known.
    # A's step only when OUT is A's weights alone: a mixture was trained
    # to no step of either.
    dropped = ("data_crc32", "dataset") if x.alpha == 0 else ("data_crc32", "dataset", "step")
    meta = " ".join(f"{k}={v}" for k, v in ma.items() if k not in dropped)
    save_file(mixed, x.out, metadata={"go_train": f"{meta} data_crc32=00000000"})
    with open(x.out, "r+b") as f:
        raw = bytearray(f.read())
        n = struct.unpack("<Q", raw[:8])[0]
        crc = zlib.crc32(bytes(raw[8 + n:])) & 0xFFFFFFFF
        header = raw[8 : 8 + n].replace(b"data_crc32=00000000", b"data_crc32=%08x" % crc)
        f.seek(8)
        f.write(header)
    print(f"{x.out}: {1 - x.alpha:g} of {x.a}, {x.alpha:g} of {x.b}")


if __name__ == "__main__":
    main()
