"""An independent Mamba-2 mixer in PyTorch (fp64) for tests/model/mamba_mixer.test.cpp, written
from the Mamba-2 paper (Dao and Gu, 2024): the scan in its "minimal SSD" form (section 7's
listing: segment sums, the diagonal blocks as one einsum, chunk states passed by a second
segment-sum decay), torch's grouped Conv1d for the causal conv, and the gated RMSNorm written out.

    [z, xBC, dt] = x W_in^T;  xBC = silu(conv1d(xBC));  [x, B, C] = xBC
    dt = softplus(dt + dt_bias), A = -exp(A_log);  y = SSD(x dt, A dt, B, C) + D x
    out = (rmsnorm_per_group(y * silu(z)) * w_norm) W_out^T

As a module: mixer(params, x, cfg) (hybrid_reference.py's Mamba layers).
Usage: mamba_reference.py DIR (config.txt, params.txt, param_i.bin, x.bin, dout.bin; writes
out.bin, dx.bin, grad_i.bin)."""
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

def segsum(a):
    """a[..., T] -> [..., T, T]: sum of a over (j, i] below the diagonal, -inf above it."""
    T = a.size(-1)
    cs = torch.cumsum(a, dim=-1)
    seg = cs[..., :, None] - cs[..., None, :]
    return seg.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))


def ssd(X, A, B, C, block):
    """X [b, l, h, p], A [b, l, h], B and C [b, l, h, n]; l a multiple of block."""
    b, l = X.shape[:2]
    c = l // block
    X, A, B, C = (t.reshape(b, c, block, *t.shape[2:]) for t in (X, A, B, C))
    A = A.permute(0, 3, 1, 2)  # b h c l
    A_cum = torch.cumsum(A, dim=-1)
    L = torch.exp(segsum(A))
    y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay_states = torch.exp(A_cum[..., -1:] - A_cum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segsum(F.pad(A_cum[..., -1], (1, 0))))
    states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, :-1]
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, torch.exp(A_cum))
    return (y_diag + y_off).reshape(b, l, *y_diag.shape[3:])


def mixer(params, x, cfg):
    """x [S, B, hidden] -> [S, B, hidden]; params keyed in_proj.weight, conv1d.weight, ... ."""
    S, Bt, hidden = x.shape
    H, P, G, N, K = cfg["heads"], cfg["head_dim"], cfg["groups"], cfg["state"], cfg["conv_width"]
    di = H * P
    zxbcdt = x @ params["in_proj.weight"].reshape(-1, hidden).T  # [s, b, io]
    zxbcdt = zxbcdt.transpose(0, 1)  # [b, s, io]
    conv_dim = di + 2 * G * N
    z, xBC, dt = torch.split(zxbcdt, [di, conv_dim, H], dim=-1)
    w = params["conv1d.weight"].reshape(conv_dim, 1, K)
    xBC = F.conv1d(xBC.transpose(1, 2), w, params["conv1d.bias"], padding=K - 1, groups=conv_dim)
    xBC = F.silu(xBC[..., :S]).transpose(1, 2)
    xs, B, C = torch.split(xBC, [di, G * N, G * N], dim=-1)
    dt = F.softplus(dt + params["dt_bias"])
    A = -torch.exp(params["A_log"])
    xs = xs.reshape(Bt, S, H, P)
    head_group = torch.arange(H) // (H // G)
    B = B.reshape(Bt, S, G, N)[:, :, head_group]
    C = C.reshape(Bt, S, G, N)[:, :, head_group]
    block = cfg["ref_block"]
    pad = (-S) % block  # zero steps at the end change nothing before them
    padded = lambda t: F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad))
    y = ssd(padded(xs * dt[..., None]), padded(A * dt), padded(B), padded(C), block)[:, :S]
    y = y + params["D"][:, None] * xs
    g = (y.reshape(Bt, S, di) * F.silu(z)).reshape(Bt, S, G, di // G)
    g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + cfg["eps"])
    normed = g.reshape(Bt, S, di) * params["norm.weight"]
    return (normed @ params["out_proj.weight"].reshape(hidden, di).T).transpose(0, 1)


def main(d):
    cfg = {k: int(v) if v.lstrip("-").isdigit() else float(v)
           for k, v in (line.split("=", 1) for line in (d / "config.txt").read_text().split())}
    names = (d / "params.txt").read_text().split()
    load = lambda p: torch.from_numpy(np.fromfile(p, dtype=np.float64))
    params = {n.split(".", 1)[1]: load(d / f"param_{i}.bin").requires_grad_() for i, n in enumerate(names)}
    S, Bt, hidden = cfg["seq"], cfg["batch"], cfg["hidden"]
    x_in = load(d / "x.bin").reshape(S, Bt, hidden).requires_grad_()
    dout = load(d / "dout.bin").reshape(S, Bt, hidden)
    out = mixer(params, x_in, cfg)
    (out * dout).sum().backward()
    out.detach().numpy().astype(np.float64).tofile(d / "out.bin")
    x_in.grad.numpy().tofile(d / "dx.bin")
    for i, n in enumerate(names):
        params[n.split(".", 1)[1]].grad.numpy().tofile(d / f"grad_{i}.bin")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main(Path(sys.argv[1]))
