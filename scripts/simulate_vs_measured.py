#!/usr/bin/env python3
"""Predicted (mactor simulate, the calibrated CPU system file) against measured (mactor -np N
pretrain_gpt) iteration time for small layouts on this machine, as a markdown table.

Every rank runs one OpenMP thread (the calibration's setting); layouts use at most 2 ranks, one per
core of this 2-core machine. The machine is shared: each layout runs --repeats times, the layouts in
turn, and measured = the fastest iteration after the first over all its runs (the least disturbed
one; the median is printed beside it).

    scripts/simulate_vs_measured.py [--build build] [--iters 6] [--repeats 3]
"""
import argparse
import os
import re
import statistics
import subprocess

from calibrate_cpu_system import MODEL  # the model the system file was calibrated on

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM = os.path.join(ROOT, "simulate/systems/cpu_this_machine.json")
LAYOUTS = [
    ("1 rank", 1, ""),
    ("PP2", 2, "--pipeline-model-parallel-size 2"),
    ("PP2 VPP2", 2, "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"),
    ("DP2", 2, ""),
    ("DP2 distributed optimizer", 2, "--use-distributed-optimizer"),
    ("TP2", 2, "--tensor-model-parallel-size 2"),
    ("TP2 SP", 2, "--tensor-model-parallel-size 2 --sequence-parallel"),
    ("CP2", 2, "--context-parallel-size 2"),
    ("PP2 ZB-H1", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule zb-h1"),
    ("PP2 ZB-V", 2, "--pipeline-model-parallel-size 2 --pipeline-schedule zbv --num-layers-per-virtual-pipeline-stage 1"),
    ("PP2 VPP2 full recompute", 2, "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 "
     "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"),
    ("DP2 distributed optimizer, overlapped", 2, "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"),
    ("TP2 SP selective recompute", 2, "--tensor-model-parallel-size 2 --sequence-parallel --recompute-granularity selective"),
]


def iteration_times_ms(build, ranks, flags, iters):
    train = ["--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer", "--log-interval", "1",
             "--train-iters", str(iters), "--eval-iters", "0", "--eval-interval", str(10 * iters)]
    run = subprocess.run([f"{build}/bin/mactor", "-np", str(ranks), f"{build}/bin/pretrain_gpt", *MODEL, *flags, *train],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=1200)
    times = [float(t) for t in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", run.stdout + run.stderr)]
    if run.returncode != 0 or len(times) < 2:
        return None, run.stderr[-400:]
    return times[1:], ""


def predicted_ms(build, ranks, flags):
    run = subprocess.run([f"{build}/bin/mactor", "simulate", "--system", SYSTEM, *MODEL, *flags, "--world-size", str(ranks)],
                         capture_output=True, text=True, timeout=60)
    match = re.search(r"iteration time \(ms\): ([0-9.]+)", run.stdout)
    return (float(match.group(1)), "") if match else (None, run.stderr[-400:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    times = {name: [] for name, _, _ in LAYOUTS}
    why = {}
    for _ in range(a.repeats):
        for name, ranks, extra in LAYOUTS:
            t, why_m = iteration_times_ms(a.build, ranks, extra.split(), a.iters)
            if t:
                times[name] += t
            else:
                why[name] = why_m
    print("| layout | ranks | predicted ms | measured ms (fastest) | median | predicted / measured |")
    print("|---|---|---|---|---|---|")
    for name, ranks, extra in LAYOUTS:
        pred, why_p = predicted_ms(a.build, ranks, extra.split())
        meas = min(times[name]) if times[name] else None
        median = f"{statistics.median(times[name]):.1f}" if times[name] else "-"
        ratio = f"{pred / meas:.2f}" if pred and meas else (why_p or why.get(name, "")).strip().splitlines()[-1:]
        print(f"| {name} | {ranks} | {pred if pred else '-'} | {meas if meas else '-'} | {median} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
