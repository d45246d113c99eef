#!/usr/bin/env python3
"""Runs pretrain_gpt with --tensorboard-dir and reads the events back with TensorBoard's own loader:
the tags Megatron's training_log/evaluate write for these flags, one value per iteration, equal to
the losses the log lines print. Usage: tensorboard_run_check.py PRETRAIN_GPT WORK_DIR"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

program, work = sys.argv[1], Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
tb = work / "tb"
flags = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
         "--max-position-embeddings", "32", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6",
         "--lr", "1e-3", "--lr-warmup-iters", "2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192",
         "--log-interval", "1", "--eval-interval", "3", "--eval-iters", "1", "--tensorboard-dir", str(tb),
         "--log-validation-ppl-to-tensorboard", "--log-world-size-to-tensorboard", "--log-params-norm", "--log-memory-to-tensorboard", "--seed", "7"]
run = subprocess.run([program, *flags], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
printed = [float(x) for x in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", run.stdout)]
lrs = [float(x) for x in re.findall(r"\| learning rate: ([0-9.E+-]+) \|", run.stdout)]
validation = [float(x) for x in re.findall(r"\| lm loss value: ([0-9.E+-]+) \|", run.stdout)]
assert len(printed) == 6 and len(validation) == 4, run.stdout

ea = EventAccumulator(str(tb))
ea.Reload()
tags = set(ea.Tags()["scalars"])
expected = {"learning-rate", "batch-size", "lm loss", "loss-scale", "world-size", "grad-norm", "params-norm"}
expected |= {t + " vs samples" for t in expected}
expected |= {"lm loss validation", "lm loss validation vs samples", "lm loss validation ppl", "lm loss validation ppl vs samples"}
expected |= {"mem-reserved-bytes", "mem-allocated-bytes", "mem-max-allocated-bytes"}
failures = []
if tags != expected:
    failures.append(f"tags differ: missing {sorted(expected - tags)}, extra {sorted(tags - expected)}")


def series(tag):
    return [(e.step, e.value) for e in ea.Scalars(tag)]


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


loss = series("lm loss")
if [s for s, _ in loss] != [1, 2, 3, 4, 5, 6]:
    failures.append(f"lm loss steps {[s for s, _ in loss]}")
for (step, v), p in zip(loss, printed):
    if not close(v, p, 2e-6):
        failures.append(f"lm loss at {step}: tensorboard {v}, log {p}")
for (step, v), p in zip(series("learning-rate"), lrs):
    if not close(v, p, 2e-6):
        failures.append(f"learning-rate at {step}: tensorboard {v}, log {p}")
if [s for s, _ in series("lm loss vs samples")] != [4, 8, 12, 16, 20, 24]:
    failures.append(f"'vs samples' steps {[s for s, _ in series('lm loss vs samples')]}")
val = series("lm loss validation")
if [s for s, _ in val] != [3, 6, 6, 6] or any(not close(v, p, 2e-6) for (_, v), p in zip(val, validation)):
    failures.append(f"validation {val} vs printed {validation}")
import math
for (s, ppl), (_, v) in zip(series("lm loss validation ppl"), val):
    if not close(ppl, math.exp(min(20, v)), 1e-5):
        failures.append(f"ppl at {s}: {ppl} vs exp({v})")
texts = set(ea.Tags().get("tensors", []))
for arg in ("num_layers/text_summary", "lr/text_summary", "data_parallel_size/text_summary"):
    if arg not in texts:
        failures.append(f"write_args_to_tensorboard: no {arg}")
# The memory scalars: every iteration, the same readings as the report_memory line after iteration 1.
memory = re.search(r"\[Rank 0\] \(after 1 iterations\) memory \(MB\) \| allocated: ([0-9.e+-]+) \| "
                   r"max allocated: ([0-9.e+-]+) \| reserved: ([0-9.e+-]+) \|", run.stdout)
if not memory:
    failures.append("no memory report line after iteration 1")
else:
    for i, tag in enumerate(("mem-allocated-bytes", "mem-max-allocated-bytes", "mem-reserved-bytes")):
        got = series(tag)
        if [s for s, _ in got] != [1, 2, 3, 4, 5, 6]:
            failures.append(f"{tag} steps {[s for s, _ in got]}")
        elif not close(got[0][1], float(memory.group(i + 1)) * 1024 * 1024, 1e-6):
            failures.append(f"{tag} at 1: tensorboard {got[0][1]}, log {memory.group(i + 1)} MB")
    for (s, a), (_, m) in zip(series("mem-allocated-bytes"), series("mem-max-allocated-bytes")):
        if not 0 < a <= m:
            failures.append(f"memory at {s}: allocated {a}, max allocated {m}")
if any(v != 1.0 for _, v in series("world-size")):
    failures.append("world-size should be 1")
for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed, checked {len(tags)} tags")
sys.exit(1 if failures else 0)
