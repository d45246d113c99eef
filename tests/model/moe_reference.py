"""An independent PyTorch MoE layer written from Megatron-Core's formulas (router.py,
moe_utils.py, experts.py): top-k softmax routing, the load-balancing and z losses, the experts
with the probabilities multiplied in after the activation. Reads dir/config.txt and the .bin
files the C++ test writes; writes the output, the routing probabilities, the losses and every
gradient in float64. The auxiliary losses enter the backward as MoEAuxLossAutoScaler makes
them: d(loss)/d(loss) = aux_loss_scale."""
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

d = Path(sys.argv[1])
cfg = {}
for line in (d / "config.txt").read_text().splitlines():
    k, v = line.split("=", 1)
    cfg[k] = v
E, K, H, FF = (int(cfg[n]) for n in ("experts", "topk", "hidden", "ffn"))
S, B = int(cfg["seq"]), int(cfg["batch"])
T = S * B
act_name = cfg["activation"]
pre_softmax = cfg["pre_softmax"] == "1"
sf = float(cfg["scaling"]) if cfg["scaling"] else None
balancing = cfg["balancing"]
aux_coeff = float(cfg["aux_coeff"])
z_coeff = float(cfg["z_coeff"]) if cfg["z_coeff"] else None
per_token = cfg["per_token"] == "1"
scale = float(cfg["aux_scale"])
training = cfg["training"] == "1"
gated = act_name == "swiglu"
score_function = cfg.get("score_function", "softmax")
num_groups = int(cfg.get("num_groups", "0"))
group_topk = int(cfg.get("group_topk", "0"))
FC1 = 2 * FF if gated else FF
probs_on_input = cfg.get("probs_on_input") == "1"  # --moe-apply-probs-on-input


def load(name, *shape):
    a = np.fromfile(d / name, dtype=np.float32).astype(np.float64)
    return torch.tensor(a.reshape(shape), dtype=torch.float64, requires_grad=True)


x = load("x.bin", T, H)
dy = torch.tensor(np.fromfile(d / "dy.bin", dtype=np.float32).astype(np.float64).reshape(T, H))
wr = load("router.bin", E, H)
w1 = [load(f"fc1_{e}.bin", FC1, H) for e in range(E)]
w2 = [load(f"fc2_{e}.bin", H, FF) for e in range(E)]
SH = int(cfg.get("shared", "0"))
if SH:
    s1 = load("shared_fc1.bin", 2 * SH if gated else SH, H)
    s2 = load("shared_fc2.bin", H, SH)


def activation(h):
    if gated:
        gate, up = torch.chunk(h, 2, dim=-1)
        return F.silu(gate) * up
    return F.gelu(h, approximate="tanh" if act_name == "gelu_tanh" else "none")


router_input = x
if cfg.get("jitter") == "1":  # --moe-input-jitter-eps: the factors mactor drew, as constants
    jitter = torch.tensor(np.fromfile(d / "jitter.bin", dtype=np.float64).reshape(T, H))
    router_input = x * jitter
logits = router_input @ wr.t()
if cfg.get("random_logits") == "1":  # --moe-router-force-load-balancing: RandomSTE, forward the
    # draws mactor made, backward straight through to the gating GEMM
    drawn = torch.tensor(np.fromfile(d / "random_logits.bin", dtype=np.float64).reshape(T, E))
    logits = logits + (drawn - logits).detach()
aux_total = torch.zeros((), dtype=torch.float64)
losses = {"load_balancing_loss": 0.0, "seq_load_balancing_loss": 0.0, "z_loss": 0.0}
token_factor = T if per_token else 1
if training and z_coeff is not None:
    z = torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * z_coeff
    aux_total = aux_total + z * token_factor
    losses["z_loss"] = (z / z_coeff).item()


def compute_topk(scores):
    if not group_topk:
        return torch.topk(scores, k=K, dim=1)
    # group-limited: a group's score is the sum of its top (K // group_topk) scores
    group_scores = scores.view(T, num_groups, -1).topk(K // group_topk, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=group_topk, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(T, num_groups, E // num_groups).reshape(T, -1)
    return torch.topk(scores.masked_fill(~score_mask.bool(), float("-inf")), k=K, dim=-1)


bias = None
if cfg.get("expert_bias") == "1":
    bias = torch.tensor(np.fromfile(d / "bias.bin", dtype=np.float32).astype(np.float64))
def load_sinkhorn():
    import ast
    import importlib.util
    spec = importlib.util.find_spec("megatron")
    path = Path(list(spec.submodule_search_locations)[0]) / "core/transformer/moe/moe_utils.py"
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "sinkhorn")
    scope = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), scope)
    return scope["sinkhorn"]


if balancing == "sinkhorn":
    # sinkhorn_load_balancing: the choices from the balanced fp32 logits in training, from the
    # scores in evaluation; probs = sigmoid (k = 1) or softmax over all experts at the choices.
    act = torch.sigmoid(logits) if K == 1 else torch.softmax(logits, dim=-1)
    if training:
        with torch.no_grad():
            _, top = torch.topk(load_sinkhorn()(logits.detach().to(torch.float32)), k=K, dim=1)
    else:
        _, top = torch.topk(act, k=K, dim=1)
    probs = torch.gather(act, 1, top)
elif score_function == "sigmoid":
    sig = torch.sigmoid(logits)
    if bias is not None:  # the bias picks the experts; the probabilities are the plain scores
        _, top = compute_topk(sig.detach() + bias)
        top_scores = torch.gather(sig, 1, top)
    else:
        top_scores, top = compute_topk(sig)
    probs = top_scores / (top_scores.sum(dim=-1, keepdim=True) + 1e-20) if K > 1 else top_scores
elif pre_softmax:
    scores = torch.softmax(logits, dim=-1)
    probs, top = compute_topk(scores)
else:
    top_logits, top = compute_topk(logits)
    probs = torch.softmax(top_logits, dim=-1)
if sf and balancing != "sinkhorn":
    probs = probs * sf
routing_probs = torch.zeros_like(logits).scatter(1, top, probs)
routing_map = torch.zeros_like(logits).int().scatter(1, top, 1).bool()
if cfg.get("capacity"):
    # apply_router_token_dropping: capacity = ceil(tokens * topk / experts * factor)
    capacity = math.ceil((T * K / E) * float(cfg["capacity"]))
    if cfg["drop_policy"] == "probs":
        _, idx = torch.topk(routing_probs.detach(), k=capacity, dim=0, sorted=False)
        capacity_mask = torch.zeros_like(routing_probs).scatter(0, idx, 1).bool()
    else:  # position: each expert's first `capacity` routed tokens
        capacity_mask = (torch.cumsum(routing_map.int(), dim=0) <= capacity) & routing_map
    routing_map = routing_map & capacity_mask
    routing_probs = routing_probs * routing_map
# Each load-balancing type's coefficient: one type, or the list form ("list=type:coeff,...").
coeffs = {balancing: aux_coeff}
if cfg.get("list"):
    coeffs = {t: float(c) for t, c in (item.split(":") for item in cfg["list"].split(","))}
if training and any(coeffs.get(t, 0) > 0 for t in ("aux_loss", "seq_aux_loss")):
    if score_function == "sigmoid":
        scores_aux = torch.sigmoid(logits)
        scores_aux = scores_aux / (scores_aux.sum(dim=-1, keepdim=True) + 1e-20)
    else:
        scores_aux = torch.softmax(logits, dim=-1)
    _, top_aux = torch.topk(scores_aux, k=K, dim=1)
    map_aux = torch.zeros_like(logits).int().scatter(1, top_aux, 1).bool()
    if coeffs.get("aux_loss", 0) > 0:
        c = coeffs["aux_loss"]
        tpe = map_aux.sum(dim=0)
        aux = torch.sum(scores_aux.sum(dim=0) * tpe) * (E * c / (K * T * T))
        losses["load_balancing_loss"] = (aux / c).item()
        aux_total = aux_total + aux * token_factor
    if coeffs.get("seq_aux_loss", 0) > 0:  # [seq, batch * experts]
        c = coeffs["seq_aux_loss"]
        tpe = map_aux.reshape(S, -1).sum(dim=0)
        aux = torch.sum(scores_aux.reshape(S, -1).sum(dim=0) * tpe) * (E * c / (K * S * S)) / B
        losses["seq_load_balancing_loss"] = (aux / c).item()
        aux_total = aux_total + aux * token_factor

out = torch.zeros(T, H, dtype=torch.float64)
for e in range(E):
    idx = torch.nonzero(routing_map[:, e]).flatten()
    if idx.numel() == 0:
        continue
    p = routing_probs[idx, e].unsqueeze(-1)
    h = activation((x[idx] * p) @ w1[e].t()) if probs_on_input else activation(x[idx] @ w1[e].t()) * p
    out = out.index_add(0, idx, h @ w2[e].t())

if SH:
    out = out + activation(x @ s1.t()) @ s2.t()
objective = torch.sum(out * dy) + scale * aux_total
objective.backward()


def save(name, t):
    t.detach().to(torch.float64).numpy().tofile(d / name)


save("ref_out.bin", out)
if bias is not None:
    tokens = routing_map.sum(dim=0).to(torch.float64)
    save("ref_tokens_per_expert.bin", tokens)
    save("ref_updated_bias.bin", bias + torch.sign(tokens.mean() - tokens) * float(cfg["bias_rate"]))
save("ref_routing_probs.bin", routing_probs)
save("ref_losses.bin", torch.tensor([losses["load_balancing_loss"], losses["seq_load_balancing_loss"], losses["z_loss"]]))
save("ref_dx.bin", x.grad)
save("ref_drouter.bin", wr.grad)
if SH:
    save("ref_dshared_fc1.bin", s1.grad)
    save("ref_dshared_fc2.bin", s2.grad)
for e in range(E):
    save(f"ref_dfc1_{e}.bin", w1[e].grad if w1[e].grad is not None else torch.zeros_like(w1[e]))
    save(f"ref_dfc2_{e}.bin", w2[e].grad if w2[e].grad is not None else torch.zeros_like(w2[e]))
