#!/usr/bin/env python3
"""Runs pretrain_gpt with --wandb-project (the wandb package from PyPI, offline) and reads the run back
with wandb's own record reader: the run's name, project and config as Megatron's wandb.init gets them,
and per step the values Megatron's wandb_writer.log calls send, checked against the log lines and
against the TensorBoard scalars of the same run (read by TensorBoard's loader): W&B gets each
mirrored tag with the same value, and nothing else. Then the user errors: no experiment name, no
directory, no Python with wandb. Usage: wandb_run_check.py PRETRAIN_GPT WORK_DIR"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal import datastore

program, work = sys.argv[1], Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
env = dict(os.environ, MACTOR_PYTHON=sys.executable, WANDB_MODE="offline", WANDB_SILENT="true",
           SLURM_JOB_NAME="mactor-check")
flags = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
         "--max-position-embeddings", "32", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6",
         "--lr", "1e-3", "--lr-warmup-iters", "2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192",
         "--log-interval", "1", "--eval-interval", "3", "--eval-iters", "1", "--seed", "7",
         "--log-world-size-to-tensorboard", "--log-params-norm", "--log-timers-to-tensorboard", "--timing-log-level", "2"]
wandb_flags = ["--wandb-project", "mactor-tests", "--wandb-exp-name", "tiny", "--wandb-save-dir", str(work / "w")]
run = subprocess.run([program, *flags, *wandb_flags, "--tensorboard-dir", str(work / "tb")],
                     capture_output=True, text=True, env=env)
assert run.returncode == 0, run.stderr
failures = []
printed = {int(i): float(v) for i, v in re.findall(r"iteration +(\d+)/ +6 \|.*?\| lm loss: ([0-9.E+-]+) \|", run.stdout)}
lrs = {int(i): float(v) for i, v in re.findall(r"iteration +(\d+)/ +6 \|.*?\| learning rate: ([0-9.E+-]+) \|", run.stdout)}
consumed = {int(i): int(v) for i, v in re.findall(r"iteration +(\d+)/ +6 \| consumed samples: +(\d+) \|", run.stdout)}
assert len(printed) == 6, run.stdout

files = glob.glob(str(work / "w" / "wandb" / "offline-run-*" / "run-*.wandb"))
assert len(files) == 1, f"one offline run expected, found {files}"
store = datastore.DataStore()
store.open_for_scan(files[0])
history, run_record, config_updates = {}, None, {}
while (data := store.scan_data()) is not None:
    record = wandb_internal_pb2.Record()
    record.ParseFromString(data)
    kind = record.WhichOneof("record_type")
    if kind == "history":
        items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
        history[int(items.pop("_step"))] = {k: v for k, v in items.items() if not k.startswith("_")}
    elif kind == "run":
        run_record = record.run
    elif kind == "config":
        config_updates.update({u.key: json.loads(u.value_json) for u in record.config.update})

if run_record is None:
    failures.append("no run record")
else:
    if (run_record.display_name, run_record.project) != ("tiny", "mactor-tests"):
        failures.append(f"run name/project {run_record.display_name}/{run_record.project}")
    config = {u.key: json.loads(u.value_json) for u in run_record.config.update}
    for key, want in {"hidden_size": 32, "num_layers": 2, "wandb_project": "mactor-tests", "train_iters": 6}.items():
        if config.get(key) != want:
            failures.append(f"config {key} = {config.get(key)!r}, want {want!r}")
if config_updates.get("slurm_job_name") != "mactor-check":
    failures.append(f"config update slurm_job_name = {config_updates.get('slurm_job_name')!r}")

# Megatron mirrors to W&B every TensorBoard tag of training_log / evaluate except the "vs samples"
# ones and the decoupled learning rate, and adds 'samples vs steps'.
tb = EventAccumulator(str(work / "tb"))
tb.Reload()
tb_values = {}
for tag in tb.Tags()["scalars"]:
    if tag.endswith(" vs samples"):
        continue
    for event in tb.Scalars(tag):
        tb_values.setdefault(event.step, {})[tag] = event.value
if sorted(history) != list(range(1, 7)):
    failures.append(f"W&B steps {sorted(history)}, want 1..6")
for step in sorted(history):
    row = history[step]
    want_keys = set(tb_values.get(step, {})) | {"samples vs steps"}
    if set(row) != want_keys:
        failures.append(f"step {step}: W&B keys {sorted(row)}, TensorBoard (+samples vs steps) {sorted(want_keys)}")
    for tag, value in tb_values.get(step, {}).items():
        if tag in row and abs(row[tag] - value) > 1e-6 * max(1.0, abs(value)):
            failures.append(f"step {step}: {tag} W&B {row[tag]} vs TensorBoard {value}")
    if abs(row.get("lm loss", 0) - printed[step]) > 1e-5 * printed[step]:
        failures.append(f"step {step}: lm loss {row.get('lm loss')} vs printed {printed[step]}")
    if abs(row.get("learning-rate", -1) - lrs[step]) > 1e-6 * max(lrs[step], 1e-12):
        failures.append(f"step {step}: learning-rate {row.get('learning-rate')} vs printed {lrs[step]}")
    if row.get("samples vs steps") != consumed[step]:
        failures.append(f"step {step}: samples vs steps {row.get('samples vs steps')} vs printed {consumed[step]}")
    if "iteration-time" not in row or not any(k.endswith("-time") and k != "iteration-time" for k in row):
        failures.append(f"step {step}: the timers (--log-timers-to-tensorboard) are missing: {sorted(row)}")
if "lm loss validation" not in history.get(3, {}):
    failures.append("no 'lm loss validation' at step 3")


def user_error(extra_flags, extra_env, words):
    p = subprocess.run([program, *flags, *extra_flags], capture_output=True, text=True, env=dict(env, **extra_env))
    if p.returncode != 2 or "iteration " in p.stdout or not all(w in p.stderr for w in words):
        failures.append(f"{extra_flags} {extra_env}: exit {p.returncode}, stderr {p.stderr[-600:]!r}, want exit 2 naming {words}")


user_error(["--wandb-project", "p"], {}, ["--wandb-exp-name"])
user_error(["--wandb-project", "p", "--wandb-exp-name", "e"], {}, ["--wandb-save-dir", "--save"])
user_error(wandb_flags, {"MACTOR_PYTHON": "/nonexistent/python3"}, ["MACTOR_PYTHON", "/nonexistent/python3"])
user_error(wandb_flags, {"MACTOR_PYTHON": "/usr/bin/false"}, ["--wandb-project", "MACTOR_PYTHON", "pip install wandb"])

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"W&B run read back: {len(history)} steps, {sum(len(r) for r in history.values())} values, equal to "
      "the log lines and the TensorBoard scalars; 4 user errors exit 2")
