"""A hybrid Mamba model's decoder in PyTorch, for gpt_reference.py when its config has
hybrid_layers (a pattern such as "M*-M"): Megatron-Core's MambaStack as its mamba_stack_spec
builds it, written from its definitions: layer i is
    'M'  x + mixer(norm(x))           (MambaLayer; the Mamba-2 mixer of mamba_reference.py)
    '*'  x + attention(norm(x))       (a TransformerLayer whose MLP is an IdentityOp)
    '-'  x + mlp(norm(x))             (MLPLayer: a TransformerLayer without attention)
each norm fused into the next linear as Transformer Engine names it (<linear>.layer_norm_weight),
then the final norm decoder.final_norm. Config keys: hybrid_layers, mamba_state, mamba_head_dim,
mamba_groups, mamba_heads (0: 2 * hidden / head_dim)."""
import torch.nn.functional as F

import gpt_reference as gpt
import mamba_reference


def mamba_shape(cfg):
    h = cfg["hidden_size"]
    P, G, N = int(cfg["mamba_head_dim"]), int(cfg["mamba_groups"]), int(cfg["mamba_state"])
    H = int(cfg["mamba_heads"]) or 2 * h // P
    return {"heads": H, "head_dim": P, "groups": G, "state": N, "conv_width": 4, "ref_block": 8,
            "eps": 1e-5}


def parameter_shapes(cfg):
    """Megatron-Core's state-dict names and shapes of the hybrid model (tp = 1)."""
    h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    heads, groups, d = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"]
    bias, layer_norm = cfg["add_bias_linear"], cfg["normalization"] == "LayerNorm"
    shapes = {"embedding.word_embeddings.weight": (v, h)}
    if cfg["position_embedding_type"] == "learned_absolute":
        shapes["embedding.position_embeddings.weight"] = (cfg["max_position_embeddings"], h)

    def fused_norm(linear):
        shapes[linear + ".layer_norm_weight"] = (h,)
        if layer_norm:
            shapes[linear + ".layer_norm_bias"] = (h,)

    def linear(name, rows, cols):
        shapes[name + ".weight"] = (rows, cols)
        if bias:
            shapes[name + ".bias"] = (rows,)

    m = mamba_shape(cfg)
    di, gn = m["heads"] * m["head_dim"], m["groups"] * m["state"]
    for i, kind in enumerate(cfg["hybrid_layers"]):
        p = f"decoder.layers.{i}."
        if kind == "M":
            fused_norm(p + "mixer.in_proj")
            shapes[p + "mixer.in_proj.weight"] = (2 * di + 2 * gn + m["heads"], h)
            shapes[p + "mixer.conv1d.weight"] = (di + 2 * gn, 1, 4)
            shapes[p + "mixer.conv1d.bias"] = (di + 2 * gn,)
            for name in ("dt_bias", "A_log", "D"):
                shapes[p + "mixer." + name] = (m["heads"],)
            shapes[p + "mixer.norm.weight"] = (di,)
            shapes[p + "mixer.out_proj.weight"] = (h, di)
        elif kind == "*":
            fused_norm(p + "self_attention.linear_qkv")
            linear(p + "self_attention.linear_qkv", groups * (heads // groups + 2) * d, h)
            linear(p + "self_attention.linear_proj", h, heads * d)
        else:
            fused_norm(p + "mlp.linear_fc1")
            linear(p + "mlp.linear_fc1", 2 * f if gpt.gated(cfg) else f, h)
            linear(p + "mlp.linear_fc2", h, f)
    shapes["decoder.final_norm.weight"] = (h,)
    if layer_norm:
        shapes["decoder.final_norm.bias"] = (h,)
    if cfg["untie_embeddings_and_output_weights"]:
        shapes["output_layer.weight"] = (v, h)
    return shapes


def fused_normalize(cfg, x, params, linear):
    """gpt.normalize over the weights Transformer Engine fuses into `linear`."""
    renamed = {"n.weight": params[linear + ".layer_norm_weight"]}
    if cfg["normalization"] == "LayerNorm":
        renamed["n.bias"] = params[linear + ".layer_norm_bias"]
    return gpt.normalize(cfg, x, renamed, "n")


def decoder(cfg, x, params):
    """x [s, b, h] through the hybrid layers and the final norm."""
    m = mamba_shape(cfg)
    for i, kind in enumerate(cfg["hybrid_layers"]):
        p = f"decoder.layers.{i}."
        if kind == "M":
            mixer = {k[len(p + "mixer."):]: v for k, v in params.items() if k.startswith(p + "mixer.")}
            x = x + mamba_reference.mixer(mixer, fused_normalize(cfg, x, params, p + "mixer.in_proj"), m)
        elif kind == "*":
            ln = fused_normalize(cfg, x, params, p + "self_attention.linear_qkv")
            x = x + gpt.attention(cfg, ln, params, p + "self_attention.", i)
        else:
            x = x + gpt.mlp(cfg, fused_normalize(cfg, x, params, p + "mlp.linear_fc1"), params, p + "mlp.")
    renamed = {"n.weight": params["decoder.final_norm.weight"]}
    if cfg["normalization"] == "LayerNorm":
        renamed["n.bias"] = params["decoder.final_norm.bias"]
    return gpt.normalize(cfg, x, renamed, "n")
