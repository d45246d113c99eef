#!/usr/bin/env python3
"""Runs pretrain_gpt with --mtp-num-layers 2 and --tensorboard-dir and reads the events back with
TensorBoard's own loader: Megatron's track_mtp_metrics writes "mtp_1 loss" and "mtp_2 loss" every
iteration, equal to the values the iteration lines print. Usage: mtp_tensorboard_check.py PRETRAIN_GPT WORK_DIR"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

program, work = sys.argv[1], Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
tb = work / "tb"
flags = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--max-position-embeddings", "16", "--position-embedding-type", "rope", "--mtp-num-layers", "2",
         "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-3", "--mock-data",
         "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192", "--log-interval", "1", "--tensorboard-dir", str(tb),
         "--seed", "7"]
run = subprocess.run([program, *flags], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
ea = EventAccumulator(str(tb))
ea.Reload()
failures = []
for depth in (1, 2):
    tag = f"mtp_{depth} loss"
    printed = [float(x) for x in re.findall(r"\| " + tag + r": ([0-9.E+-]+) \|", run.stdout)]
    if len(printed) != 4:
        failures.append(f"{tag}: {len(printed)} values in the log lines")
        continue
    if tag not in ea.Tags()["scalars"]:
        failures.append(f"{tag}: not in the TensorBoard events")
        continue
    events = [(e.step, e.value) for e in ea.Scalars(tag)]
    if [s for s, _ in events] != [1, 2, 3, 4]:
        failures.append(f"{tag} steps {[s for s, _ in events]}")
    for (step, v), p in zip(events, printed):
        if abs(v - p) > 2e-6 * abs(p):
            failures.append(f"{tag} at {step}: tensorboard {v}, log {p}")
if failures:
    sys.exit("\n".join(failures))
print("mtp_1 loss and mtp_2 loss: 4 TensorBoard values each, equal to the log lines")
