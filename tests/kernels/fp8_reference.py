"""numpy + ml_dtypes emulation of Transformer Engine's fp8 quantization, the reference for
kernels/fp8.hpp and for model/fp8_linear (imported by tests/model/fp8_linear_reference.py).

usage: fp8_reference.py DIR ROWS COLS
reads DIR/x.f32 ([ROWS, COLS] float32) and writes DIR/<case>.f32, x rounded through fp8 for each
case of CASES: per tensor with the current scale, and per block with MXFP8's E8M0 scales and
Float8BlockScaling's power-of-two scales.
"""
import sys

import ml_dtypes
import numpy as np

F32 = np.float32
TYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def fp8_max(t):
    return F32(ml_dtypes.finfo(TYPES[t]).max)


def cast(x, t):
    """fp8(x) widened back: nearest-even, saturating (NaN stays NaN)."""
    top = fp8_max(t)
    return np.clip(x.astype(F32), -top, top).astype(TYPES[t]).astype(F32)


def current_scale(amax, top, power_of_two=False):
    """TE's compute_scale_from_amax (epsilon 0, FLT_MAX for an overflowing quotient)."""
    amax = F32(amax)
    if np.isinf(amax) or amax == 0 or np.isnan(amax):
        scale = F32(1)
    else:
        with np.errstate(over="ignore"):
            scale = F32(top) / amax
        if np.isinf(scale):
            scale = F32(np.finfo(F32).max)
        if power_of_two:
            scale = np.array([scale], F32).view(np.uint32)[0] & np.uint32(0xFF800000)
            scale = np.array([scale], np.uint32).view(F32)[0]
    return F32(scale), F32(1) / F32(scale)


def e8m0_scale(amax, top):
    """MXFP8: {scale, scale_inv} from the block amax, TE's float_to_e8m0 and exp2f_rcp."""
    v = F32(amax) * (F32(1) / F32(top))
    if np.isnan(v):
        e = 0xFF
    elif np.isinf(v):
        e = 0xFE
    elif v == 0:
        e = 0
    else:
        u = int(np.array([v], F32).view(np.uint32)[0])
        e, m = u >> 23, u & 0x7FFFFF
        if m > 0 and e != 0xFE and not (e == 0 and m <= 0x400000):
            e += 1
    if e == 0:
        return F32(1), F32(2.0**-127)
    return F32(2.0 ** (127 - e)), F32(2.0 ** (e - 127))


def round_through(x, t, scale, scale_inv):
    return cast(x * F32(scale), t) * F32(scale_inv)


def round_through_tensor(x, t):
    """Per-tensor current scaling (--fp8-recipe tensorwise)."""
    scale, inv = current_scale(np.max(np.abs(x)), fp8_max(t))
    return round_through(x, t, scale, inv)


def round_through_blocks(x, t, br, bc, rule):
    """Each br x bc block of the 2-D x with its own scale; rule 'e8m0' or 'power_of_two'."""
    out = np.empty_like(x, dtype=F32)
    rows, cols = x.shape
    for r in range(0, rows, br):
        for c in range(0, cols, bc):
            blk = x[r:r + br, c:c + bc].astype(F32)
            amax = np.max(np.abs(blk))
            if rule == "e8m0":
                scale, inv = e8m0_scale(amax, fp8_max(t))
            else:
                scale, inv = current_scale(amax, fp8_max(t), power_of_two=True)
            out[r:r + br, c:c + bc] = round_through(blk, t, scale, inv)
    return out


CASES = {}
for _t in TYPES:
    CASES[f"tensor_{_t}"] = lambda x, t=_t: round_through_tensor(x, t)
    for _br, _bc, _rule in ((1, 32, "e8m0"), (32, 1, "e8m0"), (1, 128, "power_of_two"),
                            (128, 128, "power_of_two")):
        CASES[f"{_rule}_{_br}x{_bc}_{_t}"] = (
            lambda x, t=_t, br=_br, bc=_bc, rule=_rule: round_through_blocks(x, t, br, bc, rule))

if __name__ == "__main__":
    d, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    x = np.fromfile(f"{d}/x.f32", dtype=F32).reshape(rows, cols)
    for name, f in CASES.items():
        f(x).astype(F32).tofile(f"{d}/{name}.f32")
