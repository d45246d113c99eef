"""Multi-token prediction in plain PyTorch, written from DeepSeek-V3's description and
Megatron-Core's MultiTokenPredictionBlock semantics, on top of gpt_reference.py's layers.

Usage: mtp_reference.py DIR. DIR holds gpt_reference.py's inputs plus mtp_num_layers and
mtp_loss_scaling_factor in config.txt. Depth k embeds the ids rolled k + 1 places left (the
vacated positions get id 0), normalizes that embedding (enorm) and the previous depth's output
(hnorm; the decoder's output after its final norm for k = 0), projects their concatenation
(eh_proj, 2h -> h), runs one transformer layer with the decoder's last layer's spec and a final
norm, and scores the labels (and loss mask) rolled k + 1 places with the shared output layer.
The backward objective is grad_scale * LM loss sum + factor / depths * sum_k mean_k, as
MTPLossAutoScaler injects it with a backward scale of 1; with per_token=1 in config.txt
(--calculate-per-token-loss) grad_scale * (LM loss sum + factor / depths * sum_k sum_k). Writes ref_loss.bin (the LM loss sum),
ref_mtp.bin (each depth's sum(mask * loss) / sum(mask)) and ref_grad_<i>.bin (float64).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as g  # noqa: E402


def mtp_shapes(cfg):
    shapes = g.parameter_shapes(cfg)
    h = cfg["hidden_size"]
    last = cfg["num_layers"] - 1
    layer_keys = [n for n in shapes if n.startswith(f"decoder.layers.{last}.")]
    for k in range(cfg["mtp_num_layers"]):
        p = f"mtp.layers.{k}."
        for norm in ("enorm", "hnorm", "final_layernorm"):
            for part in (".weight", ".bias"):
                if "decoder.final_layernorm" + part in shapes:
                    shapes[p + norm + part] = (h,)
        shapes[p + "eh_proj.weight"] = (h, 2 * h)
        for name in layer_keys:
            shapes[name.replace(f"decoder.layers.{last}.", p + "transformer_layer.")] = shapes[name]
    return shapes


def layer(cfg, x, params, p, index):
    x = x + g.attention(cfg, g.normalize(cfg, x, params, p + "input_layernorm"), params,
                        p + "self_attention.", index)
    return x + g.mlp(cfg, g.normalize(cfg, x, params, p + "pre_mlp_layernorm"), params, p + "mlp.")


def roll(t):
    """Megatron's roll_tensor(shifts=-1) on [b, s]: one place left, the last position zeroed."""
    out = torch.roll(t, shifts=-1, dims=-1)
    out[:, -1] = 0
    return out


def token_losses(logits, labels):
    s, b, _ = logits.shape
    return F.cross_entropy(logits.float().reshape(s * b, -1), labels.t().reshape(-1),
                           reduction="none").view(s, b).t()


def losses(cfg, params, tokens, labels, mask):
    """The LM loss sum and each MTP depth's masked mean."""
    emb = params["embedding.word_embeddings.weight"]
    x = emb[tokens].transpose(0, 1)
    for i in range(cfg["num_layers"]):
        x = layer(cfg, x, params, f"decoder.layers.{i}.", i)
    x = g.normalize(cfg, x, params, "decoder.final_layernorm")
    out_w = params.get("output_layer.weight", emb)
    lm = (token_losses(g.linear(x, out_w), labels) * mask).sum()
    depth_means, depth_counts = [], []
    ids, lab, m = tokens, labels, mask
    for k in range(cfg["mtp_num_layers"]):
        p = f"mtp.layers.{k}."
        ids, lab, m = roll(ids), roll(lab), roll(m)
        e = g.normalize(cfg, emb[ids].transpose(0, 1), params, p + "enorm")
        hn = g.normalize(cfg, x, params, p + "hnorm")
        y = g.linear(torch.cat((e, hn), -1), params[p + "eh_proj.weight"])
        y = layer(cfg, y, params, p + "transformer_layer.", cfg["num_layers"] - 1)
        x = g.normalize(cfg, y, params, p + "final_layernorm")
        depth_means.append((token_losses(g.linear(x, out_w), lab) * m).sum() / m.sum())
        depth_counts.append(m.sum())
    return lm, depth_means, depth_counts


def main(folder):
    cfg = g.read_config(os.path.join(folder, "config.txt"))
    cfg["mtp_num_layers"] = int(cfg["mtp_num_layers"])
    cfg["mtp_loss_scaling_factor"] = float(cfg["mtp_loss_scaling_factor"])
    shapes = mtp_shapes(cfg)
    with open(os.path.join(folder, "params.txt")) as f:
        names = [line.strip() for line in f if line.strip()]
    if sorted(names) != sorted(shapes):
        sys.exit(f"parameter names differ: got {sorted(names)}, expected {sorted(shapes)}")
    params = {}
    for i, name in enumerate(names):
        value = g.read_bin(os.path.join(folder, f"param_{i}.bin"), torch.float32, shapes[name])
        params[name] = value.requires_grad_(True)
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    tokens = g.read_bin(os.path.join(folder, "tokens.bin"), torch.int32, (b, s)).long()
    labels = g.read_bin(os.path.join(folder, "labels.bin"), torch.int32, (b, s)).long()
    mask = g.read_bin(os.path.join(folder, "loss_mask.bin"), torch.float32, (b, s))
    lm, depth_means, depth_counts = losses(cfg, params, tokens, labels, mask)
    factor = cfg["mtp_loss_scaling_factor"] / cfg["mtp_num_layers"]
    if int(cfg.get("per_token", 0)):
        # --calculate-per-token-loss: gpt_model.py hands MTPLossAutoScaler the depth's loss sum
        # (not its mean), and the whole gradient is divided by the LM loss's tokens at finalize.
        depth_sums = [mean * count for mean, count in zip(depth_means, depth_counts)]
        ((lm + factor * sum(depth_sums)) * cfg["grad_scale"]).backward()
    else:
        (lm * cfg["grad_scale"] + factor * sum(depth_means)).backward()
    torch.tensor([lm.item()], dtype=torch.float64).numpy().tofile(os.path.join(folder, "ref_loss.bin"))
    torch.tensor([d.item() for d in depth_means], dtype=torch.float64).numpy().tofile(
        os.path.join(folder, "ref_mtp.bin"))
    for i, name in enumerate(names):
        params[name].grad.double().numpy().tofile(os.path.join(folder, f"ref_grad_{i}.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
