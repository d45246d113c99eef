"""ml_dtypes' fp8 roundings, the reference for tensor/float8.hpp.

usage: float8_reference.py DIR
reads DIR/inputs.f32 (float32 values) and writes DIR/e4m3.u8 and DIR/e5m2.u8 (their
float8_e4m3fn / float8_e5m2 bit patterns after clamping to +-max, which models Transformer
Engine's saturating cast; NaN stays NaN) and DIR/e4m3_wide.f32, DIR/e5m2_wide.f32 (every one of
the 256 bit patterns of each type widened to float32).
"""
import sys

import ml_dtypes
import numpy as np

d = sys.argv[1]
x = np.fromfile(f"{d}/inputs.f32", dtype=np.float32)
for name, t in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
    top = np.float32(ml_dtypes.finfo(t).max)
    np.clip(x, -top, top).astype(t).view(np.uint8).tofile(f"{d}/{name}.u8")
    np.arange(256, dtype=np.uint8).view(t).astype(np.float32).tofile(f"{d}/{name}_wide.f32")
