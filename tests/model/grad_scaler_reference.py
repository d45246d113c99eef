"""Reference for the loss-scaler tests: megatron-core 0.15.0's own DynamicGradScaler (its
tensors made on the CPU instead of CUDA), fed a sequence of found_inf flags.
Usage: grad_scaler_reference.py dynamic IN.json OUT.json with IN = {"options": {...},
"found_inf": [...]}; OUT = {"scales": [scale after each update], "state": state_dict()}."""
import json
import sys

import torch

import importlib.util
import os

_tensor = torch.tensor


def cpu_tensor(*args, **kwargs):
    kwargs.pop("device", None)
    return _tensor(*args, **kwargs)


torch.tensor = cpu_tensor


def load_grad_scaler():
    """megatron/core/optimizer/grad_scaler.py on its own: it needs only torch (the package's
    __init__ would pull in the rest of megatron-core)."""
    core = importlib.util.find_spec("megatron.core")
    if core is None or not core.submodule_search_locations:
        raise SystemExit("megatron-core is not installed in this Python; run scripts/setup.sh")
    path = os.path.join(list(core.submodule_search_locations)[0], "optimizer", "grad_scaler.py")
    spec = importlib.util.spec_from_file_location("megatron_grad_scaler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


grad_scaler = load_grad_scaler()


def main(mode, in_path, out_path):
    assert mode == "dynamic"
    with open(in_path) as f:
        request = json.load(f)
    o = request["options"]
    scaler = grad_scaler.DynamicGradScaler(
        initial_scale=o["initial_scale"], min_scale=o["min_scale"], growth_factor=2.0,
        backoff_factor=0.5, growth_interval=o["growth_interval"], hysteresis=o["hysteresis"])
    scales = []
    for found in request["found_inf"]:
        scaler.update(bool(found))
        scales.append(scaler.scale.item())
    state = scaler.state_dict()
    with open(out_path, "w") as f:
        json.dump({"scales": scales, "state": {"scale": state["scale"].item(),
                                               "growth_tracker": state["growth_tracker"],
                                               "hysteresis_tracker": state["hysteresis_tracker"]}}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
