"""Reference for the LR scheduler tests: megatron-core 0.15.0's own OptimizerParamScheduler,
fed the values that Megatron's get_optimizer_param_scheduler (training.py) computes from the
arguments (validation.md rules 50 and 129, restated here).
Usage: lr_scheduler_reference.py batch IN.json OUT.json with IN = {"cases": [...]}."""
import json
import sys

from optim_megatron_import import import_megatron_core_module

OptimizerParamScheduler = import_megatron_core_module("optimizer_param_scheduler").OptimizerParamScheduler


class GroupHolder:
    """Stands in for the optimizer: the scheduler only touches param_groups."""

    def __init__(self, groups):
        self.param_groups = [dict(g) for g in groups]


def scheduler_from_args(a, groups):
    gbs = a["global_batch_size"]
    if a.get("train_iters"):
        decay_iters = a.get("lr_decay_iters")
        decay = (a["train_iters"] if decay_iters is None else decay_iters) * gbs
        wd_steps = a["train_iters"] * gbs
        wsd = None if a.get("lr_wsd_decay_iters") is None else a["lr_wsd_decay_iters"] * gbs
        warmup = (a["lr_warmup_fraction"] * decay if a.get("lr_warmup_fraction") is not None
                  else a.get("lr_warmup_iters", 0) * gbs)
    elif a.get("train_samples"):
        decay_samples = a.get("lr_decay_samples")
        decay = a["train_samples"] if decay_samples is None else decay_samples
        wd_steps = a["train_samples"]
        wsd = a.get("lr_wsd_decay_samples")
        warmup = (a["lr_warmup_fraction"] * decay if a.get("lr_warmup_fraction") is not None
                  else a.get("lr_warmup_samples", 0))
    else:
        raise Exception("either train-iters or train-samples should be provided.")
    wd = a.get("weight_decay", 0.01)
    start_wd = a.get("start_weight_decay")
    end_wd = a.get("end_weight_decay")
    return OptimizerParamScheduler(
        GroupHolder(groups),
        init_lr=a.get("lr_warmup_init", 0.0),
        max_lr=a["lr"],
        min_lr=a.get("min_lr", 0.0),
        lr_warmup_steps=warmup,
        lr_decay_steps=decay,
        lr_decay_style=a.get("lr_decay_style", "linear"),
        start_wd=wd if start_wd is None else start_wd,
        end_wd=wd if end_wd is None else end_wd,
        wd_incr_steps=wd_steps,
        wd_incr_style=a.get("weight_decay_incr_style", "constant"),
        use_checkpoint_opt_param_scheduler=a.get("use_checkpoint_opt_param_scheduler", False),
        override_opt_param_scheduler=a.get("override_opt_param_scheduler", False),
        wsd_decay_steps=wsd,
        lr_wsd_decay_style=a.get("lr_wsd_decay_style", "exponential"),
    )


def snapshot(sched, out):
    out["num_steps"].append(sched.num_steps)
    out["lr"].append([g["lr"] for g in sched.optimizer.param_groups])
    out["wd"].append([g["weight_decay"] for g in sched.optimizer.param_groups])


def run_case(case):
    out = {"num_steps": [], "lr": [], "wd": []}
    try:
        sched = scheduler_from_args(case["args"], case["groups"])
    except Exception as e:  # the checks: AssertionError, or the errors step(0) runs into
        return {"error": type(e).__name__ + ": " + str(e)}
    increments = case["increments"]
    resume = case.get("resume")
    stop = resume["after"] if resume else len(increments)
    snapshot(sched, out)
    for inc in increments[:stop]:
        sched.step(inc)
        snapshot(sched, out)
    if resume:
        saved = sched.state_dict()
        sched = scheduler_from_args(resume["args"], case["groups"])
        try:
            sched.load_state_dict(saved)
        except Exception as e:
            return {"error": type(e).__name__ + ": " + str(e)}
        snapshot(sched, out)
        for inc in increments[stop:]:
            sched.step(inc)
            snapshot(sched, out)
    return out


def main():
    path_in, path_out = sys.argv[2:4]
    with open(path_in) as f:
        cases = json.load(f)["cases"]
    with open(path_out, "w") as f:
        json.dump({"results": [run_case(c) for c in cases]}, f)


if __name__ == "__main__":
    main()
