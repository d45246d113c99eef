"""Transformer Engine's delayed-scaling update written again in numpy, the reference for
model/fp8_recipe's delayed_scaling.

usage: fp8_recipe_reference.py DIR
reads DIR/cases.txt (one case a line: history_len algo margin fp8_max) and DIR/amax.f32 (the
amaxes recorded before each update, the same for every case) and writes DIR/case<i>.f32: for
each update, the scale, the scale's inverse and the history after it.
"""
import sys

import numpy as np

F32 = np.float32


def update(history, scale, algo, margin, fp8_max):
    """TE's amax_and_scale_update: amax from the history, new scale, history rolled left."""
    amax = np.fmax.reduce(history) if algo == "max" else history[0]
    scaled_max = F32(fp8_max) * F32(2.0 ** -margin)
    if np.isfinite(amax) and amax > 0:
        scale = F32(scaled_max / amax)
    history = np.roll(history, -1)
    history[0] = 0
    return history, scale, F32(1) / scale


d = sys.argv[1]
amaxes = np.fromfile(f"{d}/amax.f32", dtype=F32)
with open(f"{d}/cases.txt") as f:
    cases = [line.split() for line in f if line.strip()]
for i, (length, algo, margin, fp8_max) in enumerate(cases):
    history, scale, rows = np.zeros(int(length), F32), F32(1), []
    for a in amaxes:
        history[0] = np.fmax(history[0], a)
        history, scale, inv = update(history, scale, algo, int(margin), F32(fp8_max))
        rows.append(np.concatenate([[scale, inv], history]).astype(F32))
    np.array(rows, F32).tofile(f"{d}/case{i}.f32")
