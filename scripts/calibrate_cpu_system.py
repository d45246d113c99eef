#!/usr/bin/env python3
"""Calibrate the compute rate of simulate/systems/cpu_this_machine.json from mactor's own training.

Runs pretrain_gpt (one rank, one OpenMP thread: what each rank of a `mactor -np 2` job gets on this
2-core machine) on a small GPT with mock data, --repeats times, takes the fastest iteration after
the first over all runs (the machine is shared; the least disturbed iteration is the machine's own
rate, and scripts/simulate_vs_measured.py measures the same way), and asks `mactor simulate` for
the model FLOPs of that iteration (Megatron's formula). The achieved rate over the peak
(--peak-gflops, default 100: OpenBLAS's one-thread 1024^3 sgemm here with the SkylakeX kernels
pretrain_gpt picks, see the README's bench_mamba notes) becomes compute_efficiency. The link fields
are kept from the current file (hand-measured from bench_comm and bench_actor_overhead); this
script does not measure them.

    scripts/calibrate_cpu_system.py [--build build] [--iters 6] [--repeats 3] [--peak-gflops 100] [--out FILE]
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 256 "
         "--max-position-embeddings 256 --micro-batch-size 1 --global-batch-size 8 --vocab-size 4096").split()


def iteration_seconds(build, iters):
    flags = MODEL + ["--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer", "--log-interval", "1",
                     "--train-iters", str(iters), "--eval-iters", "0", "--eval-interval", str(10 * iters)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([f"{build}/bin/mactor", "-np", "1", f"{build}/bin/pretrain_gpt", *flags],
                         capture_output=True, text=True, env=env, timeout=1200)
    times = [float(t) for t in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", run.stdout + run.stderr)]
    if run.returncode != 0 or len(times) < 2:
        sys.exit(f"calibration run failed (status {run.returncode}):\n{run.stderr[-2000:]}")
    return [t / 1e3 for t in times[1:]]


def model_flops(build, system_file):
    run = subprocess.run([f"{build}/bin/mactor", "simulate", "--system", system_file, *MODEL],
                         capture_output=True, text=True, timeout=60)
    match = re.search(r"model FLOPs per iteration[^:]*: ([0-9.e+]+)", run.stdout)
    if run.returncode != 0 or not match:
        sys.exit(f"mactor simulate failed:\n{run.stderr}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peak-gflops", type=float, default=100.0)
    p.add_argument("--out", default=os.path.join(ROOT, "simulate/systems/cpu_this_machine.json"))
    a = p.parse_args()
    with open(a.out) as f:
        system = json.load(f)
    times = [t for _ in range(a.repeats) for t in iteration_seconds(a.build, a.iters)]
    seconds = min(times)
    flops = model_flops(a.build, a.out)
    rate = flops / seconds
    peak = max(a.peak_gflops * 1e9, rate)
    system["peak_tflops_bf16"] = system["peak_tflops_fp32"] = round(peak / 1e12, 6)
    system["compute_efficiency"] = round(rate / peak, 3)
    system["source"] = (f"calibrated {datetime.date.today()} by scripts/calibrate_cpu_system.py: pretrain_gpt, one rank, "
                        f"one thread, {' '.join(MODEL)}: {seconds * 1e3:.0f} ms for the fastest iteration of {a.repeats} runs (median "
                        f"{statistics.median(times) * 1e3:.0f} ms) for {flops:.3e} model "
                        f"FLOPs = {rate / 1e9:.1f} GFLOP/s over a {peak / 1e9:.0f} GFLOP/s peak. Links hand-measured "
                        "(bench_comm's 2-rank rates, bench_actor_overhead's per-message costs), not calibrated.")
    with open(a.out, "w") as f:
        json.dump(system, f, indent=2)
        f.write("\n")
    print(f"{seconds * 1e3:.0f} ms/iteration, {rate / 1e9:.1f} GFLOP/s, compute_efficiency {rate / peak:.3f} -> {a.out}")


if __name__ == "__main__":
    main()
