"""Transformer Engine FusedAdam's low-precision optimizer states, emulated with torch casts and
ml_dtypes (for tests/model/precision_adam_reference.py and tests/training/train_reference.py).

store(x, dtype) returns what FusedAdam keeps after an fp32 update: bf16 is a plain
round-to-nearest-even cast; fp16 is rounded after dividing by scale = absmax / (65504 / 2); fp8
(E4M3, kept as uint8) after multiplying by 1 / (absmax / 448). load() gives back the fp32 values
the next update starts from (get_unscaled_state)."""
import ml_dtypes
import numpy as np
import torch


def store(x, dtype):
    """x: an fp32 tensor. Returns an opaque stored state for load()."""
    x = x.detach().to(torch.float32)
    if dtype == "fp32":
        return ("fp32", x.clone(), None)
    if dtype == "bf16":
        return ("bf16", x.to(torch.bfloat16), None)
    absmax = x.abs().max() if x.numel() else torch.tensor(0.0)
    if dtype == "fp16":
        scale = absmax / torch.tensor(65504.0 / 2.0, dtype=torch.float32)
        rscale = scale.reciprocal() if scale > 0 else torch.tensor(0.0)
        return ("fp16", (x * rscale).to(torch.float16), scale)
    if dtype == "fp8":
        scale = absmax / torch.tensor(448.0, dtype=torch.float32)
        quantize = scale.reciprocal() if scale > 0 else torch.tensor(0.0)
        scaled = (x * quantize).clamp(-448.0, 448.0).numpy()
        codes = scaled.astype(ml_dtypes.float8_e4m3fn)
        scale_inv = quantize.reciprocal() if quantize > 0 else torch.tensor(0.0)
        return ("fp8", codes, scale_inv)
    raise ValueError(f"unknown state dtype {dtype}")


def load(stored):
    kind, data, scale = stored
    if kind == "fp32":
        return data.clone()
    if kind == "bf16":
        return data.to(torch.float32)
    if kind == "fp16":
        return data.to(torch.float32) * scale
    return torch.from_numpy(data.astype(np.float32)) * scale


def round_trip(x, dtype):
    """The fp32 values an fp32 update leaves once stored in dtype and loaded again."""
    return load(store(x, dtype))
