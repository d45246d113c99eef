"""An independent multi-latent attention in PyTorch (fp64), written from the DeepSeek-V2 paper's
equations (section 2.1.2-2.1.3) and DeepSeek's reference inference code, for
tests/model/multi_latent_attention.test.cpp:

    c_q = W_DQ h, q = W_UQ norm(c_q)        (or q = W_Q h without a query latent)
    [c_kv, k_R] = W_DKV h, [k_C, v] = W_UKV norm(c_kv)
    q_i = [q_C,i ; RoPE(q_R,i)], k_i = [k_C,i ; RoPE(k_R)]  (k_R shared by the heads)
    o_i = softmax(q_i k_i^T * scale + causal mask) v_i, out = W_O [o_1; ...; o_n]

RoPE multiplies complex pairs (x[2j] + i x[2j+1]) by exp(i * pos * f_j) and leaves them
interleaved (DeepSeek's layout); mactor, like Megatron, writes the rotated pairs as halves. The
scores do not depend on that order (the query and key use the same one), so the outputs and
gradients must agree. YaRN: frequencies blended between f and f / factor by a linear ramp over the
correction dimensions of beta_fast and beta_slow rotations; the rotation scaled by
m(factor, mscale) / m(factor, mscale_all_dim), the softmax by m(factor, mscale_all_dim)^2,
m(s, k) = 0.1 k ln s + 1 (s > 1).

Usage: mla_reference.py DIR (config.txt, params.txt, param_i.bin, x.bin, dout.bin; writes out.bin,
dx.bin, grad_i.bin)."""
import math
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
d = Path(sys.argv[1])
cfg = dict(line.split("=", 1) for line in (d / "config.txt").read_text().split())
i_ = lambda k: int(cfg[k])
f_ = lambda k: float(cfg[k])
H, n, S, B = i_("hidden"), i_("heads"), i_("seq"), i_("batch")
q_rank, kv_rank, dn, dr, dv = i_("q_lora_rank"), i_("kv_lora_rank"), i_("qk_head_dim"), i_("rope_dim"), i_("v_head_dim")

names = (d / "params.txt").read_text().split()
params = {}
for i, name in enumerate(names):
    params[name.split(".", 1)[1]] = torch.tensor(np.fromfile(d / f"param_{i}.bin", dtype=np.float64), requires_grad=True)


def weight(key, rows, cols):
    return params[key].view(rows, cols)


def norm(x, key):
    if not i_("norms"):
        return x
    w = params[key + ".weight"]
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + f_("eps")) * w  # RMSNorm


def m(scale, k):
    return 1.0 if scale <= 1 else 0.1 * k * math.log(scale) + 1.0


def frequencies():
    f = 1.0 / (f_("base") ** (torch.arange(0, dr, 2, dtype=torch.float64) / dr))
    if not i_("yarn"):
        return f, 1.0
    factor, base, original = f_("factor"), f_("base"), f_("original_max")
    dim_of = lambda rot: dr * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(dim_of(f_("beta_fast"))), 0)
    high = min(math.ceil(dim_of(f_("beta_slow"))), dr - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dr // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # the share of the unscaled frequency
    return f / factor * (1 - keep) + f * keep, m(factor, f_("mscale")) / m(factor, f_("mscale_all_dim"))


def rope(x, freqs, attention_factor):  # x [..., S, heads, dr] as complex pairs
    angles = torch.outer(torch.arange(S, dtype=torch.float64), freqs)
    rot = torch.polar(torch.full_like(angles, attention_factor), angles)[:, None, :]
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], dr // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2)


h = torch.tensor(np.fromfile(d / "x.bin", dtype=np.float64).reshape(S, B, H), requires_grad=True)
hb = h.transpose(0, 1)  # [B, S, H]
if q_rank > 0:
    q = norm(hb @ weight("linear_q_down_proj.weight", q_rank, H).T, "q_layernorm") @ weight(
        "linear_q_up_proj.weight", n * (dn + dr), q_rank).T
else:
    q = hb @ weight("linear_q_proj.weight", n * (dn + dr), H).T
q = q.view(B, S, n, dn + dr)
kv_a = hb @ weight("linear_kv_down_proj.weight", kv_rank + dr, H).T
c_kv, k_r = kv_a[..., :kv_rank], kv_a[..., kv_rank:]
kv = (norm(c_kv, "kv_layernorm") @ weight("linear_kv_up_proj.weight", n * (dn + dv), kv_rank).T).view(B, S, n, dn + dv)
freqs, attention_factor = frequencies()
q_full = torch.cat([q[..., :dn], rope(q[..., dn:], freqs, attention_factor)], -1)
k_rot = rope(k_r[:, :, None, :], freqs, attention_factor).expand(B, S, n, dr)
k_full = torch.cat([kv[..., :dn], k_rot], -1)
v = kv[..., dn:]
scale = m(f_("factor"), f_("mscale_all_dim")) ** 2 / math.sqrt(dn + dr)
scores = torch.einsum("bsnd,btnd->bnst", q_full, k_full) * scale
scores = scores.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
o = torch.einsum("bnst,btnd->bsnd", scores.softmax(-1), v).reshape(B, S, n * dv)
out = (o @ weight("linear_proj.weight", H, n * dv).T).transpose(0, 1)
dout = torch.tensor(np.fromfile(d / "dout.bin", dtype=np.float64).reshape(S, B, H))
(out * dout).sum().backward()
out.detach().numpy().tofile(d / "out.bin")
h.grad.numpy().tofile(d / "dx.bin")
for i, name in enumerate(names):
    params[name.split(".", 1)[1]].grad.numpy().tofile(d / f"grad_{i}.bin")
