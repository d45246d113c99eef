"""Megatron-Core's own RerunStateMachine (core 0.15, from the venv) run on scripted losses: the
independent reference for training/result_validation.

The module's classes are lifted with ast (importing megatron.core may fail here) and run on the CPU:
a single rank, so the world-wide all-reduce of a flag is the identity. Each scenario feeds the
machine, iteration by iteration, the local losses of the initial run and of a rerun, through
pretrain_gpt.py's loss_func checks, and records what the machine decides, logs and appends to the
tracker file. Writes the scenarios (inputs and events) as text; the C++ test replays the inputs
on mactor's machine and compares the events line by line.

usage: rerun_reference.py OUT_FILE TRACKER_DIR
"""
import ast
import logging
import math
import os
import random
import sys
import types
from functools import partial

import torch

SOURCE = os.path.join(os.path.dirname(__file__), "../../.venv/lib/python3.11/site-packages/megatron/core/rerun_state_machine.py")


def load_machine():
    tree = ast.parse(open(SOURCE).read())
    keep = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    module = ast.Module(body=keep, type_ignores=[])
    # torch on the CPU: tensors made "on cuda" stay on the CPU, one rank, device 0.
    fake = types.SimpleNamespace(**{k: getattr(torch, k) for k in ("isnan", "isinf", "int32", "Tensor", "get_rng_state", "set_rng_state")})
    fake.tensor = lambda v, dtype=None, device=None: torch.tensor(v, dtype=dtype)
    fake.distributed = types.SimpleNamespace(all_reduce=lambda t: None, is_initialized=lambda: False)
    fake.cuda = types.SimpleNamespace(current_device=lambda: 0, get_rng_state=lambda: None, set_rng_state=lambda s: None)
    import datetime, inspect, re, numpy as np
    from collections import defaultdict
    from enum import Enum
    from typing import Any, Callable, Iterable, NamedTuple, Optional, Set, Tuple, Union
    ns = dict(torch=fake, datetime=datetime, inspect=inspect, logging=logging, math=math, os=os, random=random, re=re,
              np=np, defaultdict=defaultdict, Enum=Enum, Any=Any, Callable=Callable, Iterable=Iterable,
              NamedTuple=NamedTuple, Optional=Optional, Set=Set, Tuple=Tuple, Union=Union, ShardedObject=object,
              __name__="megatron.core.rerun_state_machine")
    exec(compile(module, SOURCE, "exec"), ns)
    return ns


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.levelname}:{record.name}:{record.getMessage()}")


# (name, mode, injection rate, injection type, spiky check, iterations: [(initial losses, rerun losses)])
def scenarios():
    flat = [2.5, 2.25]
    yield "clean", "validate_results", 0, "transient_error", 0, [(flat, flat)] * 4
    yield "nan_on_first_iteration_is_not_checked", "validate_results", 0, "transient_error", 0, [([float("nan"), 2.0], [1.0, 1.0]), (flat, flat)]
    yield "nan_reproduced", "validate_results", 0, "transient_error", 0, [(flat, flat), (flat, flat), ([2.0, float("nan")], [2.0, float("nan")])]
    yield "nan_not_reproduced", "validate_results", 0, "transient_error", 0, [(flat, flat), ([float("nan"), 2.0], [2.125, 2.0])]
    yield "inf_reproduced", "validate_results", 0, "transient_error", 0, [(flat, flat), ([2.0, float("inf")], [2.0, float("inf")])]
    yield "inf_changed", "validate_results", 0, "transient_error", 0, [(flat, flat), ([2.0, float("inf")], [2.0, 3.5])]
    losses = [(2.0 + 0.01 * i, 2.0 + 0.01 * i) for i in range(60)]
    spike = [(x[:1] * 2, x[:1] * 2) for x in losses]
    yield "spiky_loss_reproduced", "validate_results", 0, "transient_error", 1, spike + [([2.5, 30.0], [2.5, 30.0])]
    yield "spiky_loss_not_reproduced", "validate_results", 0, "transient_error", 1, spike + [([2.5, 30.0], [2.5, 29.0])]
    yield "spike_before_100_samples_sets_the_max", "validate_results", 0, "transient_error", 1, [(flat, flat)] * 10 + [([25.0, 2.0], [25.0, 2.0])] + [(flat, flat)] * 50
    yield "spiky_without_the_flag", "validate_results", 0, "transient_error", 0, spike + [([2.5, 30.0], [2.5, 30.0])]
    yield "injected_transient", "validate_results", 1, "transient_error", 0, [(flat, flat)] * 3
    yield "injected_persistent", "validate_results", 1, "persistent_error", 0, [(flat, flat)] * 3
    yield "injected_correct_result", "validate_results", 1, "correct_result", 1, [(flat, flat)] * 3
    yield "disabled_nan_raises", "disabled", 0, "transient_error", 0, [(flat, flat), ([float("nan"), 2.0], flat)]
    yield "disabled_ignores_injection", "disabled", 1, "transient_error", 1, [(flat, flat)] * 3


def fmt(x):
    return repr(float(x))


def run(ns, name, mode, rate, kind, spiky, iterations, tracker):
    if os.path.exists(tracker):
        os.remove(tracker)
    machine = ns["RerunStateMachine"](
        mode=ns["RerunMode"](mode),
        error_injector=ns["RerunErrorInjector"](error_injection_rate=rate, error_injection_type=ns["RerunDiagnostic"](kind)),
        result_rejected_tracker_filename=tracker)
    machine.current_iteration = 0  # train() overwrites it with the start iteration
    events = []
    for runs in iterations:
        count = 0
        try:
            while machine.should_run_forward_backward(None):
                events.append(f"run iteration={machine.current_iteration} pass={count} state={machine.state.value}")
                for loss in runs[min(count, 1)]:
                    t = torch.tensor(loss, dtype=torch.float32)
                    machine.validate_result(result=t, rejection_func=torch.isnan, message="found NaN in local forward loss calculation", tolerance=0.0, fatal=True)
                    machine.validate_result(result=t, rejection_func=torch.isinf, message="found Inf in local forward loss calculation", tolerance=0.0, fatal=True)
                    if spiky:
                        machine.validate_result(result=t, rejection_func=partial(machine.is_unexpectedly_large, threshold=10, context="loss"),
                                                message="Spiky loss", tolerance=0.0, fatal=False)
                count += 1
        except RuntimeError as e:
            events.append("raise " + str(e))
            break
        ckpt, leave, code = machine.should_checkpoint_and_exit()
        events.append(f"end iteration={machine.current_iteration} state={machine.state.value} checkpoint={int(ckpt)} exit={int(leave)} code={code}")
        if leave:
            break
    return events


def main():
    out_path, tracker_dir = sys.argv[1], sys.argv[2]
    os.makedirs(tracker_dir, exist_ok=True)
    random.seed(1)
    ns = load_machine()
    capture = Capture()
    log = logging.getLogger("megatron.core.rerun_state_machine")
    log.addHandler(capture)
    log.setLevel(logging.INFO)
    log.propagate = False
    with open(out_path, "w") as out:
        for name, mode, rate, kind, spiky, iterations in scenarios():
            capture.lines = []
            tracker = os.path.join(tracker_dir, name + ".python.txt")
            events = run(ns, name, mode, rate, kind, spiky, iterations, tracker)
            print(f"S {name} {mode} {rate} {kind} {spiky}", file=out)
            for initial, rerun in iterations:
                print("I " + " ".join(map(fmt, initial)) + " | " + " ".join(map(fmt, rerun)), file=out)
            for e in events:
                print("E " + e, file=out)
            for line in capture.lines:
                print("L " + line, file=out)
            if os.path.exists(tracker):
                for line in open(tracker):
                    print("T " + line.split(" ", 2)[2].rstrip("\n"), file=out)  # without the timestamp
            print("X", file=out)


if __name__ == "__main__":
    main()
