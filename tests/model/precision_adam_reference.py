"""Reference for tests/model/optimizer_precision.test.cpp: torch.optim.AdamW (single-tensor path)
whose two moments are stored, after every step, the way Transformer Engine's FusedAdam stores
them for Megatron's --use-precision-aware-optimizer (te_state_storage.py).
Usage: precision_adam_reference.py run IN.json OUT.json. IN: {"values", "grads" [step][param],
"groups" [{"params", "lr" [step], "weight_decay" [step]}], "beta1", "beta2", "eps",
"exp_avg_dtype", "exp_avg_sq_dtype"}. OUT: {"history" [step][param], "state" [{"exp_avg",
"exp_avg_sq"}]} with the states as fp32 (unscaled)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from te_state_storage import round_trip  # noqa: E402


def run(spec):
    params = [torch.nn.Parameter(torch.tensor(v, dtype=torch.float32)) for v in spec["values"]]
    groups = [{"params": [params[i] for i in g["params"]], "lr": 0.0, "weight_decay": 0.0}
              for g in spec["groups"]]
    opt = torch.optim.AdamW(groups, lr=0.0, betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"],
                            foreach=False)
    history = []
    for step, grads in enumerate(spec["grads"]):
        for group, g in zip(opt.param_groups, spec["groups"]):
            group["lr"] = g["lr"][step]
            group["weight_decay"] = g["weight_decay"][step]
        for p, grad in zip(params, grads):
            p.grad = torch.tensor(grad, dtype=torch.float32)
        opt.step()
        with torch.no_grad():
            for p in params:
                s = opt.state[p]
                s["exp_avg"].copy_(round_trip(s["exp_avg"], spec["exp_avg_dtype"]))
                s["exp_avg_sq"].copy_(round_trip(s["exp_avg_sq"], spec["exp_avg_sq_dtype"]))
        history.append([p.detach().tolist() for p in params])
    state = [{"exp_avg": opt.state[p]["exp_avg"].tolist(),
              "exp_avg_sq": opt.state[p]["exp_avg_sq"].tolist()} for p in params]
    return {"history": history, "state": state}


def main():
    path_in, path_out = sys.argv[2:4]
    with open(path_in) as f:
        spec = json.load(f)
    with open(path_out, "w") as f:
        json.dump(run(spec), f)


if __name__ == "__main__":
    main()
