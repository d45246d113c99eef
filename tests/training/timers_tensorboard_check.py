#!/usr/bin/env python3
"""Runs pretrain_gpt on two pipeline stages under `mactor -np 2` with --timing-log-level 1 and
--log-timers-to-tensorboard, and reads the events back with TensorBoard's own loader: Megatron's
timers.write gives one '<name>-time' scalar per printed timer at each log iteration, the max over
ranks in seconds per iteration, so 1000 times it must round to the max the timers block prints.
Usage: timers_tensorboard_check.py MACTOR PRETRAIN_GPT WORK_DIR"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

mactor, program, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
shutil.rmtree(work, ignore_errors=True)
tb = work / "tb"
flags = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
         "--max-position-embeddings", "32", "--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", "4",
         "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192",
         "--log-interval", "2", "--eval-iters", "0", "--pipeline-model-parallel-size", "2", "--timing-log-level", "1",
         "--log-timers-to-tensorboard", "--tensorboard-dir", str(tb)]
run = subprocess.run([mactor, "-np", "2", program, *flags], capture_output=True, text=True)
assert run.returncode == 0, run.stderr

# {iteration: {timer: printed max in ms}} from each training line's timers block.
printed = {}
for m in re.finditer(r"iteration +(\d+)/ +\d+ \|[^\n]*\n(?:\[Rank \d+\] [^\n]*\n)*\(min, max\) time across ranks \(ms\):\n((?:    .*\n)+)", run.stdout):
    printed[int(m.group(1))] = {name: float(hi) for name, hi in
                                re.findall(r"    ([a-z-]+) \.*: \([0-9.]+, ([0-9.]+)\)", m.group(2))}
failures = []
if sorted(printed) != [2, 4]:
    failures.append(f"timers blocks after iterations {sorted(printed)}, want [2, 4]:\n{run.stdout}")

ea = EventAccumulator(str(tb))
ea.Reload()
tags = set(ea.Tags()["scalars"])
want = {name + "-time" for block in printed.values() for name in block} | {"iteration-time"}
if not {"forward-backward-time", "optimizer-time"} <= want:
    failures.append(f"the blocks lack forward-backward or optimizer: {printed}")
if not want <= tags:
    failures.append(f"missing tags {sorted(want - tags)}")
for tag in sorted(want & tags):
    events = ea.Scalars(tag)
    if [e.step for e in events] != [2, 4]:
        failures.append(f"{tag}: steps {[e.step for e in events]}, want [2, 4]")
        continue
    if tag == "iteration-time":
        continue
    for e in events:
        ms = printed[e.step][tag[:-len("-time")]]
        # The log rounds to 0.01 ms; TensorBoard keeps fp32 seconds.
        if abs(e.value * 1000.0 - ms) > 0.005 + 1e-6 * ms:
            failures.append(f"{tag} at {e.step}: tensorboard {e.value * 1000.0} ms, log {ms} ms")
for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed, checked {len(want & tags)} tags: {sorted(want & tags)}")
sys.exit(1 if failures else 0)
