"""PyTorch reference for the optimizer tests: runs torch.optim.AdamW / Adam / SGD and
torch.nn.utils.clip_grad_norm_ on the same numbers as the C++ code.
Usage: optimizer_reference.py batch IN.json OUT.json, where IN holds {"jobs": [...]}, each job
{"mode": "optimizer" | "clip", ...}; OUT gets {"results": [...]} in the same order."""
import json
import sys

import torch


def tensors(values):
    return [torch.tensor(v, dtype=torch.float32) for v in values]


def run_optimizer(spec):
    params = [torch.nn.Parameter(t) for t in tensors(spec["values"])]
    groups = [{"params": [params[i] for i in g["params"]], "lr": 0.0, "weight_decay": 0.0}
              for g in spec["groups"]]
    kind = spec["kind"]
    if kind in ("adamw", "adam"):
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        opt = cls(groups, lr=0.0, betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"],
                  foreach=False)
    else:
        opt = torch.optim.SGD(groups, lr=0.0, momentum=spec["momentum"], foreach=False)
    history = []
    for step, grads in enumerate(spec["grads"]):
        for group, g in zip(opt.param_groups, spec["groups"]):
            group["lr"] = g["lr"][step]
            group["weight_decay"] = g["weight_decay"][step]
        for p, grad in zip(params, tensors(grads)):
            p.grad = grad
        opt.step()
        history.append([p.detach().tolist() for p in params])
    state = []
    for p in params:
        s = opt.state[p]
        entry = {}
        for key in ("exp_avg", "exp_avg_sq", "momentum_buffer"):
            if key in s and s[key] is not None:
                entry[key] = s[key].tolist()
        if "step" in s:
            entry["step"] = float(s["step"])
        state.append(entry)
    return {"history": history, "state": state}


def run_clip(spec):
    params = [torch.nn.Parameter(t) for t in tensors(spec["values"])]
    for p, grad in zip(params, tensors(spec["grads"])):
        p.grad = grad
    zeros = sum(int(p.grad.numel() - torch.count_nonzero(p.grad)) for p in params)
    params_norm = torch.norm(torch.stack([torch.norm(p.detach().double()) for p in params]))
    total = torch.nn.utils.clip_grad_norm_(params, spec["max_norm"])
    return {"total_norm": float(total), "grads": [p.grad.tolist() for p in params],
            "num_zeros": zeros, "params_norm": float(params_norm)}


def main():
    path_in, path_out = sys.argv[2:4]
    with open(path_in) as f:
        jobs = json.load(f)["jobs"]
    results = [run_optimizer(j) if j["mode"] == "optimizer" else run_clip(j) for j in jobs]
    with open(path_out, "w") as f:
        json.dump({"results": results}, f)


if __name__ == "__main__":
    main()
