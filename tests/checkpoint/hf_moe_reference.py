#!/usr/bin/env python3
"""Independent reference for tests/checkpoint/hf_moe_families.test.cpp: the per-token cross-entropy of
an exported DeepseekV3ForCausalLM, Qwen3ForCausalLM or Qwen3MoeForCausalLM folder on a batch.

The project's transformers (4.44) predates these classes, so this file holds a second implementation
in PyTorch written from Hugging Face's modeling code: it reads config.json and model.safetensors
(PyPI safetensors) by Hugging Face's tensor names, every tensor used exactly once, and computes the
forward as DeepseekV3ForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM do in fp32 (interleaved
RoPE on the MLA positional parts, YaRN rope_scaling as modeling_rope_utils' _compute_yarn_parameters
with DeepSeek's mscale on the softmax scale, sigmoid routing with e_score_correction_bias and
group-limited choice, shared experts, first_k_dense_replace (all layers: a dense model); q_norm/k_norm,
softmax top-k with norm_topk_prob, mlp_only_layers, or no experts at all for Qwen3).
Where the installed transformers has the class (4.51 and later), the folder is also loaded with
from_pretrained (every tensor used, none missing) and its logits must agree with this file's to
1e-4; the result then says so in "transformers".

Usage: hf_moe_reference.py CASES.json OUT.json
CASES: [{"hf_dir": ..., "architecture": ..., "tokens": [[...]], "labels": [[...]]}, ...]
OUT:   [{"token_losses": [[...]], "transformers": "<version> agreed" | "<why not run>"}, ...]"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F


class Weights:
    """The folder's tensors by name; take() marks each used, and leftovers() lists the rest."""

    def __init__(self, tensors):
        self.tensors, self.used = tensors, set()

    def take(self, name):
        if name not in self.tensors:
            sys.exit(f"model.safetensors has no {name}")
        self.used.add(name)
        return self.tensors[name]

    def leftovers(self):
        return sorted(set(self.tensors) - self.used)


def rms_norm(x, w, eps):
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps))


def linear(x, w):
    return x @ w.t()


def swiglu_mlp(W, prefix, x):
    gate, up = linear(x, W.take(prefix + "gate_proj.weight")), linear(x, W.take(prefix + "up_proj.weight"))
    return linear(F.silu(gate) * up, W.take(prefix + "down_proj.weight"))


def yarn_get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_parameters(c, dim):
    """(inv_freq, attention_factor) as transformers' _compute_yarn_parameters (rope_scaling type yarn)."""
    r, base = c["rope_scaling"], c["rope_theta"]
    factor, mscale, mscale_all_dim = r["factor"], r.get("mscale"), r.get("mscale_all_dim")
    original = r.get("original_max_position_embeddings") or c["max_position_embeddings"]
    # Some versions take factor = max_position_embeddings / original_max_position_embeddings instead.
    if "original_max_position_embeddings" in r and c["max_position_embeddings"] / original != factor:
        sys.exit(f"rope_scaling.factor {factor} is not max_position_embeddings / original_max_position_embeddings")
    attention_factor = r.get("attention_factor")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = yarn_get_mscale(factor)
    beta_fast, beta_slow = r.get("beta_fast") or 32, r.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = math.floor(correction_dim(beta_fast)), math.ceil(correction_dim(beta_slow))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, attention_factor


def rope_cos_sin(dim, theta, seq, c=None):
    """cos, sin: [seq, dim]; with c's rope_scaling (yarn) the YaRN frequencies and factor."""
    if c is not None and c.get("rope_scaling"):
        kind = c["rope_scaling"].get("rope_type", c["rope_scaling"].get("type"))
        if kind != "yarn":
            sys.exit(f"rope_scaling type {kind} is not implemented here")
        inv_freq, factor = yarn_parameters(c, dim)
    else:
        inv_freq, factor = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0
    freqs = torch.outer(torch.arange(seq).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def deepseek_softmax_scale(c):
    """DeepseekV3Attention.scaling: qk_head_dim^-0.5, times mscale^2 under rope_scaling's mscale_all_dim."""
    scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
    r = c.get("rope_scaling")
    if r is not None and r.get("mscale_all_dim", 0):
        scale *= yarn_get_mscale(r["factor"], r["mscale_all_dim"]) ** 2
    return scale


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, cos, sin, interleaved=False):
    """x: [b, heads, s, d]. interleaved: DeepseekV3's rope_interleave (pairs (x[2i], x[2i+1]))."""
    if interleaved:
        b, h, s, d = x.shape
        x = x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    return x * cos + rotate_half(x) * sin


def causal_attention(q, k, v, scale):
    s = q.shape[2]
    scores = (q @ k.transpose(2, 3)) * scale
    scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(scores.float(), dim=-1) @ v


def routed_experts(W, prefix, x, weights, indices, n_experts):
    out = torch.zeros_like(x)
    for e in range(n_experts):
        token, slot = torch.where(indices == e)
        expert = lambda rows: swiglu_mlp(W, f"{prefix}experts.{e}.", rows)  # noqa: E731
        if token.numel() == 0:
            for part in ("gate_proj", "up_proj", "down_proj"):
                W.take(f"{prefix}experts.{e}.{part}.weight")
            continue
        out.index_add_(0, token, expert(x[token]) * weights[token, slot].unsqueeze(-1))
    return out


def qwen3_layer(W, c, i, x, cos, sin):
    p = f"model.layers.{i}."
    b, s, _ = x.shape
    heads, kv_heads, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps = c["rms_norm_eps"]
    h = rms_norm(x, W.take(p + "input_layernorm.weight"), eps)
    q = rms_norm(linear(h, W.take(p + "self_attn.q_proj.weight")).view(b, s, heads, d),
                 W.take(p + "self_attn.q_norm.weight"), eps).transpose(1, 2)
    k = rms_norm(linear(h, W.take(p + "self_attn.k_proj.weight")).view(b, s, kv_heads, d),
                 W.take(p + "self_attn.k_norm.weight"), eps).transpose(1, 2)
    v = linear(h, W.take(p + "self_attn.v_proj.weight")).view(b, s, kv_heads, d).transpose(1, 2)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    k, v = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    ctx = causal_attention(q, k, v, d ** -0.5).transpose(1, 2).reshape(b, s, heads * d)
    x = x + linear(ctx, W.take(p + "self_attn.o_proj.weight"))
    h = rms_norm(x, W.take(p + "post_attention_layernorm.weight"), eps)
    sparse = (i not in c.get("mlp_only_layers", []) and c.get("num_experts", 0) > 0
              and (i + 1) % c["decoder_sparse_step"] == 0)  # Qwen3ForCausalLM: never
    if not sparse:
        return x + swiglu_mlp(W, p + "mlp.", h)
    flat = h.reshape(-1, h.shape[-1])
    probs = torch.softmax(linear(flat, W.take(p + "mlp.gate.weight")).float(), dim=-1)
    weights, indices = torch.topk(probs, c["num_experts_per_tok"], dim=-1)
    if c["norm_topk_prob"]:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return x + routed_experts(W, p + "mlp.", flat, weights, indices, c["num_experts"]).view_as(h)


def deepseek_router(W, c, prefix, flat):
    n, E, k = flat.shape[0], c["n_routed_experts"], c["num_experts_per_tok"]
    groups, topk_group = c["n_group"], c["topk_group"]
    scores = torch.sigmoid(linear(flat.float(), W.take(prefix + "gate.weight").float()))
    choice = scores + W.take(prefix + "gate.e_score_correction_bias").unsqueeze(0)
    group_scores = choice.view(n, groups, E // groups).topk(2, dim=-1)[0].sum(dim=-1)
    group_mask = torch.zeros_like(group_scores).scatter_(1, torch.topk(group_scores, topk_group, dim=-1)[1], 1)
    score_mask = group_mask.unsqueeze(-1).expand(n, groups, E // groups).reshape(n, E)
    indices = torch.topk(choice.masked_fill(~score_mask.bool(), 0.0), k, dim=-1)[1]
    weights = scores.gather(1, indices)
    if c["norm_topk_prob"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * c["routed_scaling_factor"], indices


def deepseek_v3_layer(W, c, i, x, cos, sin):
    p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
    b, s, _ = x.shape
    heads, nope, pe, vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    eps = c["rms_norm_eps"]
    h = rms_norm(x, W.take(p + "input_layernorm.weight"), eps)
    if c.get("q_lora_rank") is None:
        q = linear(h, W.take(a + "q_proj.weight"))
    else:  # q_a_layernorm and kv_a_layernorm keep DeepseekV3RMSNorm's default epsilon
        q = linear(rms_norm(linear(h, W.take(a + "q_a_proj.weight")), W.take(a + "q_a_layernorm.weight"), 1e-6),
                   W.take(a + "q_b_proj.weight"))
    q = q.view(b, s, heads, nope + pe).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [nope, pe], dim=-1)
    compressed = linear(h, W.take(a + "kv_a_proj_with_mqa.weight"))
    k_pass, k_rot = torch.split(compressed, [c["kv_lora_rank"], pe], dim=-1)
    kv = linear(rms_norm(k_pass, W.take(a + "kv_a_layernorm.weight"), 1e-6), W.take(a + "kv_b_proj.weight"))
    k_pass, v = torch.split(kv.view(b, s, heads, nope + vd).transpose(1, 2), [nope, vd], dim=-1)
    interleaved = c.get("rope_interleave", True)
    q_rot = rope(q_rot, cos, sin, interleaved)
    k_rot = rope(k_rot.view(b, 1, s, pe), cos, sin, interleaved).expand(b, heads, s, pe)
    q, k = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
    ctx = causal_attention(q, k, v, deepseek_softmax_scale(c)).transpose(1, 2).reshape(b, s, heads * vd)
    x = x + linear(ctx, W.take(a + "o_proj.weight"))
    h = rms_norm(x, W.take(p + "post_attention_layernorm.weight"), eps)
    if i < c["first_k_dense_replace"]:
        return x + swiglu_mlp(W, p + "mlp.", h)
    flat = h.reshape(-1, h.shape[-1])
    weights, indices = deepseek_router(W, c, p + "mlp.", flat)
    out = routed_experts(W, p + "mlp.", flat, weights, indices, c["n_routed_experts"])
    return x + (out + swiglu_mlp(W, p + "mlp.shared_experts.", flat)).view_as(h)


def reference_logits(hf_dir, architecture, tokens):
    from safetensors.torch import load_file
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = json.load(f)
    W = Weights(load_file(os.path.join(hf_dir, "model.safetensors")))
    s = tokens.shape[1]
    if architecture == "DeepseekV3ForCausalLM":
        layer, cos, sin = deepseek_v3_layer, *rope_cos_sin(c["qk_rope_head_dim"], c["rope_theta"], s, c)
    elif architecture in ("Qwen3MoeForCausalLM", "Qwen3ForCausalLM"):
        if c.get("rope_scaling") is not None:
            sys.exit("rope_scaling on Qwen3 is not implemented here")
        c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
        layer, cos, sin = qwen3_layer, *rope_cos_sin(c["head_dim"], c["rope_theta"], s)
    else:
        sys.exit(f"unknown architecture {architecture}")
    embed = W.take("model.embed_tokens.weight")
    x = embed[tokens]
    for i in range(c["num_hidden_layers"]):
        x = layer(W, c, i, x, cos, sin)
    x = rms_norm(x, W.take("model.norm.weight"), c["rms_norm_eps"])
    head = embed if c.get("tie_word_embeddings", False) else W.take("lm_head.weight")
    if W.leftovers():
        sys.exit(f"{hf_dir}: tensors the model does not use: {W.leftovers()}")
    return linear(x, head)


def transformers_logits(hf_dir, architecture, tokens):
    """(logits, note): the installed transformers' own class, or None and why it was not run."""
    import transformers
    cls = getattr(transformers, architecture, None)
    if cls is None:
        return None, f"transformers {transformers.__version__} has no {architecture}"
    with open(os.path.join(hf_dir, "config.json")) as f:
        if architecture == "DeepseekV3ForCausalLM" and json.load(f).get("q_lora_rank") is None:
            import inspect
            if "q_lora_rank is None" not in inspect.getsource(transformers.models.deepseek_v3.modeling_deepseek_v3):
                return None, f"transformers {transformers.__version__}'s DeepseekV3 needs q_lora_rank"
    model, info = cls.from_pretrained(hf_dir, output_loading_info=True, torch_dtype=torch.float32,
                                      attn_implementation="eager")
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"{hf_dir}: from_pretrained reported {bad}")
    with torch.no_grad():
        return model.eval()(input_ids=tokens, use_cache=False).logits.float(), f"transformers {transformers.__version__} agreed"


def main():
    cases_path, out_path = sys.argv[1], sys.argv[2]
    with open(cases_path) as f:
        cases = json.load(f)
    results = []
    for case in cases:
        tokens = torch.tensor(case["tokens"], dtype=torch.long)
        labels = torch.tensor(case["labels"], dtype=torch.long)
        with torch.no_grad():
            logits = reference_logits(case["hf_dir"], case["architecture"], tokens)
            theirs, note = transformers_logits(case["hf_dir"], case["architecture"], tokens)
            if theirs is not None and not torch.allclose(theirs, logits, rtol=0, atol=1e-4):
                sys.exit(f"{case['hf_dir']}: transformers' logits differ from this reference by "
                         f"{(theirs - logits).abs().max().item()}")
            losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        results.append({"token_losses": losses.view(labels.shape).double().tolist(), "transformers": note})
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
