"""PyTorch side of bench_gpu_train_step: the Llama-style GPT pretrain_gpt trains there (RMSNorm,
SwiGLU, rotary embeddings, untied embeddings, no biases, no dropout), written the way a PyTorch
user would: fp32 weights under bf16 autocast, scaled_dot_product_attention (flash attention on a
GPU), fused AdamW, gradient accumulation over micro-batches of one sequence. Prints one RESULT line
with the mean step time after the warm-up and the peak memory."""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary_tables(seq, head_dim, device):
    inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq, device=device).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Block(nn.Module):
    def __init__(self, hidden, ffn, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if hasattr(F, "scaled_dot_product_attention"):
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.x (Debian's, for the host smoke run): the same causal softmax attention
            scores = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
            causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            attn = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, h))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embedding = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.ffn, a.heads) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.output = nn.Linear(a.hidden, a.vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, cos, sin):
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.output(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    for name in ["layers", "hidden", "ffn", "heads", "seq", "vocab", "global_batch", "iters", "warmup"]:
        ap.add_argument("--" + name.replace("_", "-"), type=int, required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    torch.manual_seed(1234)
    device = torch.device(a.device)
    model = GPT(a).to(device)
    fused = {"fused": True} if a.device == "cuda" else {}  # older CPU builds lack the argument
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, **fused)
    cos, sin = rotary_tables(a.seq, a.hidden // a.heads, device)
    tokens = torch.randint(0, a.vocab, (a.global_batch, a.seq + 1), device=device)

    def step():
        for i in range(a.global_batch):
            with torch.autocast(device_type=a.device, dtype=torch.bfloat16):
                logits = model(tokens[i:i + 1, :-1], cos, sin)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), tokens[i:i + 1, 1:].reshape(-1))
            (loss / a.global_batch).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(a.iters - a.warmup):
        step()
    sync()
    seconds = (time.perf_counter() - start) / (a.iters - a.warmup)
    peak = torch.cuda.max_memory_allocated() / 2**30 if a.device == "cuda" else 0.0
    print(f"RESULT ms_per_iter={seconds * 1e3:.3f} peak_memory_gb={peak:.3f}")


if __name__ == "__main__":
    main()
