"""PyTorch's roundings, the reference for tensor/half_float.hpp.

usage: half_float_reference.py DIR
reads DIR/inputs.f32 (float32 values) and writes DIR/bf16.u16 and DIR/fp16.u16 (their
torch.bfloat16 / torch.float16 bit patterns) and DIR/bf16_wide.f32, DIR/fp16_wide.f32 (every one
of the 65536 bit patterns of each type widened to float32).
"""
import sys

import numpy as np
import torch

d = sys.argv[1]
x = torch.from_numpy(np.fromfile(f"{d}/inputs.f32", dtype=np.float32))
x.to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16).tofile(f"{d}/bf16.u16")
x.to(torch.float16).view(torch.int16).numpy().astype(np.uint16).tofile(f"{d}/fp16.u16")
patterns = torch.arange(65536, dtype=torch.int32).to(torch.int16)
patterns.view(torch.bfloat16).float().numpy().tofile(f"{d}/bf16_wide.f32")
patterns.view(torch.float16).float().numpy().tofile(f"{d}/fp16_wide.f32")
