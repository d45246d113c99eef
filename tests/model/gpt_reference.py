"""Pure-PyTorch GPT written from Megatron-Core's definitions (pre-norm, [s, b, h] layout, fused
QKV grouped by query group, RoPE in halves or interleaved, fp32 softmax, vocab cross-entropy with
a loss mask), with Megatron's attention variants: per-layer RoPE skipping (no_rope_freq), sliding
windows (window_size, window_attn_skip_freq), the softmax sink (softmax_type), RoPE position
interpolation and Llama 3.1 frequency scaling. It is the independent reference for tests/model/pytorch_reference.test.cpp and the
PyTorch side of bench/bench_train_step.

As a program: gpt_reference.py DIR reads DIR/config.txt (dtype=bfloat16|float16 optional), DIR/params.txt (+ one .bin per
parameter), DIR/batch_*.bin, and writes DIR/ref_loss.bin and DIR/ref_grad_<i>.bin (float64)."""
import math
import os
import sys

import torch
import torch.nn.functional as F


def read_config(path):
    cfg = {}
    with open(path) as f:
        for line in f:
            key, value = line.strip().split("=", 1)
            cfg[key] = value
    ints = ["num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
            "num_query_groups", "kv_channels", "seq_length", "max_position_embeddings",
            "padded_vocab_size", "micro_batch_size"]
    floats = ["norm_epsilon", "rotary_base", "rotary_percent", "grad_scale"]
    bools = ["apply_layernorm_1p", "swiglu", "gelu_tanh_approximation", "add_bias_linear",
             "untie_embeddings_and_output_weights"]
    out = dict(cfg)
    for k in ints:
        out[k] = int(cfg[k])
    for k in floats:
        out[k] = float(cfg[k])
    for k in bools:
        out[k] = cfg[k] == "1"
    out["fp32_residual_connection"] = cfg.get("fp32_residual_connection", "0") == "1"
    out["squared_relu"] = cfg.get("squared_relu", "0") == "1"
    out["rotary_interleaved"] = cfg.get("rotary_interleaved", "0") == "1"
    out["qk_layernorm"] = cfg.get("qk_layernorm", "0") == "1"
    out["qk_l2_norm"] = cfg.get("qk_l2_norm", "0") == "1"
    out["rotary_seq_len_interpolation_factor"] = float(cfg.get("rotary_seq_len_interpolation_factor", "1"))
    out["use_rope_scaling"] = cfg.get("use_rope_scaling", "0") == "1"
    out["rope_scaling_factor"] = float(cfg.get("rope_scaling_factor", "8"))
    # Megatron's command-line forms: an int N or a Python list expression; empty: not given.
    for key in ("no_rope_freq", "window_attn_skip_freq"):
        text = cfg.get(key, "")
        out[key] = eval(text, {"__builtins__": {}}) if text else None
    window = cfg.get("window_size", "")
    out["window_size"] = tuple(int(v) for v in window.split(",")) if window else None
    out["softmax_type"] = cfg.get("softmax_type", "vanilla")
    read_glu_variants(cfg, out)
    return out


# --- GLU variants (--quick-geglu, --activation-func-clamp-value, --glu-linear-offset) ---------
def read_glu_variants(cfg, out):
    """quick_geglu=1, activation_func_clamp_value=<float> (absent or empty: none),
    glu_linear_offset=<float>; absent keys keep Megatron's defaults (so do configs without them,
    as train_reference.py's)."""
    out["quick_geglu"] = cfg.get("quick_geglu", "0") == "1"
    clamp = cfg.get("activation_func_clamp_value", "")
    out["activation_func_clamp_value"] = float(clamp) if clamp else None
    out["glu_linear_offset"] = float(cfg.get("glu_linear_offset", "0"))


def gated(cfg):
    return cfg["swiglu"] or cfg.get("quick_geglu", False)


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


def glu(cfg, y):
    """Megatron-Core's unfused gated unit: act(gate clamped above) * (linear clamped + offset)."""
    gate, lin = torch.chunk(y, 2, dim=-1)
    c = cfg.get("activation_func_clamp_value")
    if c is not None:
        gate = torch.clamp(gate, max=c)
        lin = torch.clamp(lin, min=-c, max=c)
    act = quick_gelu(gate) if cfg.get("quick_geglu", False) else F.silu(gate)
    return act * (lin + cfg.get("glu_linear_offset", 0.0))
# --- end of GLU variants ------------------------------------------------------------------------


def parameter_shapes(cfg):
    """Megatron-Core state-dict names and shapes of the tp=1 model."""
    if cfg.get("hybrid_layers"):  # a hybrid Mamba model (MambaModel)
        import hybrid_reference
        return hybrid_reference.parameter_shapes(cfg)
    h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    heads, groups, d = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"]
    bias = cfg["add_bias_linear"]
    layer_norm = cfg["normalization"] == "LayerNorm"
    shapes = {"embedding.word_embeddings.weight": (v, h)}
    if cfg["position_embedding_type"] == "learned_absolute":
        shapes["embedding.position_embeddings.weight"] = (cfg["max_position_embeddings"], h)

    def norm(name, width=h):
        shapes[name + ".weight"] = (width,)
        if layer_norm:
            shapes[name + ".bias"] = (width,)

    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        norm(p + "input_layernorm")
        if cfg.get("softmax_type") == "learnable":
            shapes[p + "self_attention.core_attention.softmax_offset"] = (heads,)
        qkv_rows = groups * (heads // groups + 2) * d
        shapes[p + "self_attention.linear_qkv.weight"] = (qkv_rows, h)
        if bias:
            shapes[p + "self_attention.linear_qkv.bias"] = (qkv_rows,)
        shapes[p + "self_attention.linear_proj.weight"] = (h, heads * d)
        if bias:
            shapes[p + "self_attention.linear_proj.bias"] = (h,)
        if cfg.get("qk_layernorm") and not cfg.get("qk_l2_norm"):  # L2Norm has no parameters
            norm(p + "self_attention.q_layernorm", d)
            norm(p + "self_attention.k_layernorm", d)
        norm(p + "pre_mlp_layernorm")
        fc1 = 2 * f if gated(cfg) else f
        shapes[p + "mlp.linear_fc1.weight"] = (fc1, h)
        if bias:
            shapes[p + "mlp.linear_fc1.bias"] = (fc1,)
        shapes[p + "mlp.linear_fc2.weight"] = (h, f)
        if bias:
            shapes[p + "mlp.linear_fc2.bias"] = (h,)
    norm("decoder.final_layernorm")
    if cfg["untie_embeddings_and_output_weights"]:
        shapes["output_layer.weight"] = (v, h)
    return shapes


def linear(x, w, b=None):
    """F.linear; in fp16 and bf16 an fp32 GEMM rounded to the 16-bit dtype, as a GPU's 16-bit GEMM
    accumulates in fp32 and rounds its output once. PyTorch's CPU has no fp16 GEMM, and its bf16
    GEMM accumulates in fp32 only where the CPU has bf16 instructions (on an AMD Zen 3 without them,
    torch 1.13's bf16 runs drifted 4-6% in loss from the fp32 run within 20 training steps)."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        return F.linear(x, w, b)
    return F.linear(x.float(), w.float(), None if b is None else b.float()).to(x.dtype)


def matmul(a, b):
    if a.dtype not in (torch.float16, torch.bfloat16):
        return torch.matmul(a, b)
    return torch.matmul(a.float(), b.float()).to(a.dtype)


def l2_norm(cfg, x):
    """x * rsqrt(mean(x^2) + eps) over the last dimension in fp32, rounded to x's dtype, written
    through the Euclidean norm (mean(x^2) = |x|^2 / d) rather than RMSNorm's formula."""
    xf = x.float()
    mean_square = torch.linalg.vector_norm(xf, ord=2, dim=-1, keepdim=True).square() / x.shape[-1]
    return (xf / torch.sqrt(mean_square + cfg["norm_epsilon"])).to(x.dtype)


def normalize(cfg, x, params, name):
    """In fp32 whatever x's dtype (as Transformer Engine's norms), rounded to the model's dtype
    (x's, or bf16/fp16 from an fp32 residual stream)."""
    w = params[name + ".weight"].float()
    if cfg["apply_layernorm_1p"]:
        w = w + 1
    eps = cfg["norm_epsilon"]
    xf = x.float()
    if cfg["normalization"] == "LayerNorm":
        y = F.layer_norm(xf, (x.shape[-1],), w, params[name + ".bias"].float(), eps)
    else:
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w
    return y.to(params[name + ".weight"].dtype)


def llama3_scaled(inv_freq, factor, low_freq_factor=1.0, high_freq_factor=4.0, context=8192):
    """Llama 3.1's frequency rule: wavelengths longer than context / low_freq_factor are slowed by
    the factor, shorter than context / high_freq_factor kept, in between a linear blend."""
    wavelength = 2 * math.pi / inv_freq
    blend = (context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - blend) * inv_freq / factor + blend * inv_freq
    out = torch.where(wavelength < context / high_freq_factor, inv_freq, blended)
    return torch.where(wavelength > context / low_freq_factor, inv_freq / factor, out)


def layer_marked(freq, layer):
    """Megatron's int-or-list selector for 0-based `layer`: an int N marks layers N, 2N, ...
    (counted from 1); a list marks the layers whose entry is 1."""
    if isinstance(freq, int):
        return (layer + 1) % freq == 0
    return freq[layer] == 1


def rope(cfg, t):
    """t: [s, b, n, d]; Megatron's RotaryEmbedding + apply_rotary_pos_emb_bshd."""
    dim = int(cfg["kv_channels"] * cfg["rotary_percent"])
    inv_freq = 1.0 / (cfg["rotary_base"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if cfg.get("use_rope_scaling"):
        inv_freq = llama3_scaled(inv_freq, cfg.get("rope_scaling_factor", 8.0))
    seq = torch.arange(t.shape[0], dtype=torch.float32) / cfg.get("rotary_seq_len_interpolation_factor", 1.0)
    freqs = torch.outer(seq, inv_freq)[:, None, None, :]  # one angle per rotated pair
    cos, sin = torch.cos(freqs).to(t.dtype), torch.sin(freqs).to(t.dtype)  # Megatron: .to(t.dtype)
    rot, rest = t[..., :dim], t[..., dim:]
    if cfg.get("rotary_interleaved"):  # pairs (x[2i], x[2i+1])
        a, b = rot[..., 0::2], rot[..., 1::2]
        turned = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    else:  # pairs (x[i], x[i + dim/2])
        a, b = torch.chunk(rot, 2, dim=-1)
        turned = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    return torch.cat((turned, rest), dim=-1)


def attention_mask(cfg, s, layer):
    """True where query i may not see key j: causal, and outside a sliding window."""
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    hidden = j > i
    window = cfg.get("window_size")
    skip = cfg.get("window_attn_skip_freq")
    windowed = window is not None and (
        skip is None or (not layer_marked(skip, layer) if isinstance(skip, int) else skip[layer] == 1))
    if windowed and window[0] >= 0:
        hidden = hidden | (j < i - window[0])
    return hidden


def softmax(cfg, scores, params, p):
    """softmax over the last dimension, with a per-head sink logit in the denominator for
    softmax_type off-by-one (0) and learnable (the softmax_offset parameter). Callers' configs
    without the variant keys (train_reference.py, the benchmark) get Megatron's defaults."""
    if cfg.get("softmax_type", "vanilla") == "vanilla":
        return torch.softmax(scores, dim=-1)
    heads = scores.shape[1]
    if cfg["softmax_type"] == "off-by-one":
        sink = torch.zeros(heads, dtype=torch.float32)
    else:
        sink = params[p + "core_attention.softmax_offset"].float()
    sink = sink.view(1, heads, 1, 1)
    top = torch.maximum(scores.amax(dim=-1, keepdim=True), sink)
    e = torch.exp(scores - top)
    return e / (e.sum(dim=-1, keepdim=True) + torch.exp(sink - top))


def attention(cfg, x, params, p, layer):
    s, b, _ = x.shape
    heads, groups, d = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"]
    per = heads // groups
    qkv = linear(x, params[p + "linear_qkv.weight"], params.get(p + "linear_qkv.bias"))
    qkv = qkv.view(s, b, groups, (per + 2) * d)
    q, k, v = torch.split(qkv, [per * d, d, d], dim=3)
    q = q.reshape(s, b, heads, d)
    if cfg.get("qk_l2_norm"):  # Llama 4's parameter-free L2 norm of each head, before RoPE
        q, k = l2_norm(cfg, q), l2_norm(cfg, k)
    elif cfg.get("qk_layernorm"):  # each head normalized over its d channels, before RoPE
        q = normalize(cfg, q, params, p + "q_layernorm")
        k = normalize(cfg, k, params, p + "k_layernorm")
    no_rope = cfg.get("no_rope_freq")
    if cfg["position_embedding_type"] == "rope" and not (no_rope and layer_marked(no_rope, layer)):
        q, k = rope(cfg, q), rope(cfg, k)
    k = k.repeat_interleave(per, dim=2)
    v = v.repeat_interleave(per, dim=2)
    q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, n, s, d]
    scores = matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(attention_mask(cfg, s, layer), float("-inf"))
    probs = softmax(cfg, scores.float(), params, p).to(v.dtype)
    ctx = matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, heads * d)
    return linear(ctx, params[p + "linear_proj.weight"], params.get(p + "linear_proj.bias"))


def mlp(cfg, x, params, p):
    y = linear(x, params[p + "linear_fc1.weight"], params.get(p + "linear_fc1.bias"))
    dtype = y.dtype
    if dtype == torch.float16:  # no fp16 activations on the CPU: in fp32, rounded once
        y = y.float()
    if gated(cfg):
        y = glu(cfg, y)
    elif cfg.get("squared_relu"):  # Megatron's squared_relu: pow(relu(x), 2)
        y = torch.pow(F.relu(y), 2)
    else:
        y = F.gelu(y, approximate="tanh" if cfg["gelu_tanh_approximation"] else "none")
    y = y.to(dtype)
    return linear(y, params[p + "linear_fc2.weight"], params.get(p + "linear_fc2.bias"))


def loss_sum(cfg, params, tokens, labels, mask):
    """tokens, labels: [b, s] int64; mask [b, s] float. Returns sum(loss * mask)."""
    b, s = tokens.shape
    x = params["embedding.word_embeddings.weight"][tokens]
    if cfg["position_embedding_type"] == "learned_absolute":
        x = x + params["embedding.position_embeddings.weight"][torch.arange(s)][None]
    x = x.transpose(0, 1)  # [s, b, h]
    if cfg.get("fp32_residual_connection"):  # Megatron's LanguageModelEmbedding: embeddings.float()
        x = x.float()
    if cfg.get("hybrid_layers"):  # MambaModel's MambaStack
        import hybrid_reference
        x = hybrid_reference.decoder(cfg, x, params)
    for i in range(0 if cfg.get("hybrid_layers") else cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        x = x + attention(cfg, normalize(cfg, x, params, p + "input_layernorm"), params,
                          p + "self_attention.", i)
        x = x + mlp(cfg, normalize(cfg, x, params, p + "pre_mlp_layernorm"), params, p + "mlp.")
    if not cfg.get("hybrid_layers"):
        x = normalize(cfg, x, params, "decoder.final_layernorm")
    out_w = params.get("output_layer.weight", params["embedding.word_embeddings.weight"])
    logits = linear(x, out_w)  # [s, b, v]
    losses = F.cross_entropy(logits.float().reshape(s * b, -1), labels.t().reshape(-1),
                             reduction="none").view(s, b).t()
    return (losses * mask).sum()


def read_bin(path, dtype, shape):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=dtype).reshape(shape).clone()


def main(folder):
    cfg = read_config(os.path.join(folder, "config.txt"))
    # dtype=bfloat16 / float16: the model in half precision as Megatron's Float16Module runs it
    # (norms and the loss in fp32); the parameters are read as fp32 and cast.
    dtype = getattr(torch, cfg.get("dtype", "float32"))
    shapes = parameter_shapes(cfg)
    params = {}
    with open(os.path.join(folder, "params.txt")) as f:
        names = [line.strip() for line in f if line.strip()]
    if sorted(names) != sorted(shapes):
        sys.exit(f"parameter names differ from Megatron's: got {sorted(names)}, "
                 f"expected {sorted(shapes)}")
    for i, name in enumerate(names):
        value = read_bin(os.path.join(folder, f"param_{i}.bin"), torch.float32, shapes[name])
        params[name] = value.to(dtype).requires_grad_(True)
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    tokens = read_bin(os.path.join(folder, "tokens.bin"), torch.int32, (b, s)).long()
    labels = read_bin(os.path.join(folder, "labels.bin"), torch.int32, (b, s)).long()
    mask = read_bin(os.path.join(folder, "loss_mask.bin"), torch.float32, (b, s))
    total = loss_sum(cfg, params, tokens, labels, mask)
    (total * cfg["grad_scale"]).backward()
    torch.tensor([total.item()], dtype=torch.float64).numpy().tofile(
        os.path.join(folder, "ref_loss.bin"))
    for i, name in enumerate(names):
        params[name].grad.double().numpy().tofile(os.path.join(folder, f"ref_grad_{i}.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
