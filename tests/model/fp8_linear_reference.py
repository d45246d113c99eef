"""A numpy + ml_dtypes emulation of Transformer Engine's Linear under fp8_autocast, the reference
for model/fp8_linear: two training steps of one linear layer (y = x W^T, dW = dy^T x, dx = dy W)
with each GEMM's operands rounded through fp8 as the recipe quantizes them.

usage: fp8_linear_reference.py DIR ROWS IN OUT RECIPE FORMAT WGRAD
reads DIR/w.f32 [OUT, IN], DIR/x<s>.f32 [ROWS, IN] and DIR/dy<s>.f32 [ROWS, OUT] for steps s = 0,
1 and writes DIR/y<s>.f32, DIR/dw<s>.f32 (this step's weight gradient alone) and DIR/dx<s>.f32.
The delayed recipe runs with an amax history of 2, the max algorithm and margin 1.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels"))
import fp8_reference as q  # noqa: E402

F32 = np.float32
HISTORY, MARGIN = 2, 1


class Delayed:
    """One tensor's DelayedScaling state (max algorithm)."""

    def __init__(self, t):
        self.history, self.scale, self.max = np.zeros(HISTORY, F32), F32(1), q.fp8_max(t)

    def record_and_update(self, amax):
        self.history[0] = np.fmax(self.history[0], amax)
        a = np.fmax.reduce(self.history)
        if np.isfinite(a) and a > 0:
            self.scale = F32(F32(self.max * F32(2.0 ** -MARGIN)) / a)
        self.history = np.roll(self.history, -1)
        self.history[0] = 0


def rounded(v, recipe, t, operand, rowwise, scale=None):
    """v (2-D) as the GEMM sees it: rowwise sums over columns, else over rows."""
    if recipe == "delayed":
        return q.round_through(v, t, scale, F32(1) / scale)
    if recipe == "tensorwise":
        return q.round_through_tensor(v, t)
    if recipe == "mxfp8":
        return q.round_through_blocks(v, t, 1 if rowwise else 32, 32 if rowwise else 1, "e8m0")
    across = 128 if operand == "weight" else 1
    br, bc = (across, 128) if rowwise else (128, across)
    return q.round_through_blocks(v, t, br, bc, "power_of_two")


def main():
    d, rows, n_in, n_out, recipe, fmt, wgrad = sys.argv[1:8]
    rows, n_in, n_out, wgrad = int(rows), int(n_in), int(n_out), wgrad == "1"
    fwd_t, bwd_t = "e4m3", ("e5m2" if fmt == "hybrid" else "e4m3")
    w = np.fromfile(f"{d}/w.f32", F32).reshape(n_out, n_in)
    sx, sw, sg = Delayed(fwd_t), Delayed(fwd_t), Delayed(bwd_t)
    for s in range(2):
        x = np.fromfile(f"{d}/x{s}.f32", F32).reshape(rows, n_in)
        dy = np.fromfile(f"{d}/dy{s}.f32", F32).reshape(rows, n_out)
        xs, ws = sx.scale, sw.scale
        y = rounded(x, recipe, fwd_t, "input", True, xs) @ rounded(w, recipe, fwd_t, "weight", True, ws).T
        if recipe == "delayed":
            sx.record_and_update(np.max(np.abs(x)))
            sw.record_and_update(np.max(np.abs(w)))
        if recipe == "delayed" and not wgrad:
            dw = dy.T @ x
        else:
            dw = rounded(dy, recipe, bwd_t, "grad", False, sg.scale).T @ rounded(x, recipe, fwd_t, "input", False, xs)
        dx = rounded(dy, recipe, bwd_t, "grad", True, sg.scale) @ rounded(w, recipe, fwd_t, "weight", False, ws)
        if recipe == "delayed":
            sg.record_and_update(np.max(np.abs(dy)))
        for name, v in (("y", y), ("dw", dw), ("dx", dx)):
            v.astype(F32).tofile(f"{d}/{name}{s}.f32")


main()
