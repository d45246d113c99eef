#!/usr/bin/env python3
"""Calibrate the compute rate and jitter of simulate/systems/cpu_this_machine.json from mactor's own training.

Runs pretrain_gpt (one rank, one OpenMP thread: what each rank of a `mactor -np 2` job gets on this
2-core machine) on a small GPT with mock data as one job per core at once (the machine full, as
every rank of a job that uses it all: the cores share the caches and the memory, so a core alone
runs faster than with its neighbour busy), --repeats times. From the iterations after the first:

- memory_efficiency: bench_elementwise's rate for the element-wise kernels around the matmuls (layer
  norms, bias-dropout-adds; compute-bound here: the dropout mask's hash) over memory_bandwidth_GBps,
  so those kernels are priced apart: a tensor-parallel rank without sequence parallelism runs them
  on the whole hidden state, unlike the matmuls.
- compute_efficiency: the share of the peak (--peak-gflops, default 100: one core's 1024^3 sgemm with
  the OpenBLAS kernels pretrain_gpt picks; the README's bench_mamba notes) at which `mactor simulate`
  predicts the fastest iteration (the machine is shared; the least disturbed iteration is the
  machine's own rate, and scripts/simulate_vs_measured.py measures the same way), the element-wise
  kernels priced as above.
- compute_jitter: how much one job's iteration times vary (the median over the jobs of 1.4826 x the
  median absolute deviation over the median: a standard deviation that ignores the odd disturbed
  iteration), which prices the waits for the slowest rank at every synchronization
  (simulate/rank_skew.hpp).
- sync_jitter_us: how long a synchronizing collective waits beyond its own cost whatever the compute
  before it (interrupts, the scheduler, the wake-up). One 2-rank tensor-parallel job (no sequence
  parallelism) profiles rank 0; each kind of tensor-parallel collective (operation and size) costs
  its 10th-percentile duration on the link, and the mean beyond that is the wait for the partner,
  E[max of 2 standard normals] x sync_jitter (0.564 x); the median over --repeats such jobs (the
  mean is the expected wait, but a disturbed run's tail moves it: 300-530 us in four runs here).
  The iteration time is not fitted.
- attention_efficiency: the share of the peak one rank's attention kernel (scores, softmax, dropout,
  context; forward and backward) reaches at the model's shape, from bench_context_parallel's one-rank
  row at sequence 256 (8 heads of 32, dropout 0.1; two copies at once, the cores busy); the fastest
  of --repeats runs. The attention core is then priced apart: with the dropout mask's hash and the
  softmax's exponentials it runs at a tenth of the GEMMs' rate here, and a context-parallel ring
  or a tensor-parallel rank holds another share of it than of the GEMMs.
- ring_attention_efficiency: the same runs of bench_context_parallel (the model's 8 heads of 32, attention dropout 0.1,
  one thread per rank) times a context-parallel rank's ring attention (p2p, cp = 2) at sequences of
  256, 512 and 1024 (chunks of 64, 128 and 256 positions) against one rank's attention kernel on the
  whole sequence, both with the two cores busy: per chunk size, half the one-rank kernel's time over
  the ring rank's, forward and backward, each time the fastest of --repeats runs. Below 1 where the ring's
  small tiles cost more per FLOP than the one-rank kernel (OpenBLAS packs every small GEMM's
  operands), so `mactor simulate` prices a ring's attention core apart from compute_efficiency.

The link fields are kept from the current file (hand-measured from bench_comm and
bench_actor_overhead); this script does not measure them.

    scripts/calibrate_cpu_system.py [--build build] [--iters 8] [--repeats 3] [--peak-gflops 100] [--out FILE]
"""
import argparse
import collections
import datetime
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

# E[max of 2 independent standard normals]: a 2-rank collective's expected wait per unit of sync jitter.
EXPECTED_MAX_OF_TWO = 1 / math.sqrt(math.pi)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The model the calibration and scripts/simulate_vs_measured.py train (it imports MODEL from here).
MODEL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 256 "
         "--max-position-embeddings 256 --micro-batch-size 1 --global-batch-size 8 --vocab-size 4096").split()


def model_value(flag):
    """MODEL's whole-number value of `flag`."""
    return int(MODEL[MODEL.index(flag) + 1])


MODEL_SEQ = model_value("--seq-length")
MODEL_HEADS = model_value("--num-attention-heads")
MODEL_HEAD_DIM = model_value("--hidden-size") // MODEL_HEADS


def concurrent_iteration_seconds(build, iters, jobs):
    """`jobs` one-rank trainings at once; each one's iteration times after the first, in seconds."""
    flags = MODEL + ["--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer", "--log-interval", "1",
                     "--train-iters", str(iters), "--eval-iters", "0", "--eval-interval", str(10 * iters)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = [subprocess.Popen([f"{build}/bin/mactor", "-np", "1", f"{build}/bin/pretrain_gpt", *flags],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(jobs)]
    out = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=1200)
        times = [float(t) for t in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", stdout + stderr)]
        if run.returncode != 0 or len(times) < 3:
            sys.exit(f"calibration run failed (status {run.returncode}):\n{stderr[-2000:]}")
        out.append([t / 1e3 for t in times[1:]])
    return out


def relative_spread(times):
    """1.4826 x the median absolute deviation over the median: a robust coefficient of variation."""
    mid = statistics.median(times)
    return 1.4826 * statistics.median(abs(t - mid) for t in times) / mid


def elementwise_gbps(build, jobs):
    """bench_elementwise's rate, `jobs` copies at once; the median of their best rounds."""
    runs = [subprocess.Popen([f"{build}/bin/bench_elementwise"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(jobs)]
    rates = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=600)
        match = re.search(r"elementwise GB/s: ([0-9.]+)", stdout)
        if run.returncode != 0 or not match:
            sys.exit(f"bench_elementwise failed (status {run.returncode}):\n{stderr[-2000:]}")
        rates.append(float(match.group(1)))
    return statistics.median(rates)


def tensor_parallel_sync_jitter_us(build, iters):
    """A TP2 job's rank-0 trace: the mean wait of its tensor-parallel collectives beyond each kind's
    10th-percentile duration, over E[max of 2 standard normals]; with the collectives' count."""
    with tempfile.TemporaryDirectory() as trace_dir:
        flags = MODEL + ["--tensor-model-parallel-size", "2", "--lr", "1e-4", "--mock-data", "--tokenizer-type",
                         "NullTokenizer", "--log-interval", "1", "--train-iters", str(iters), "--eval-iters", "0",
                         "--eval-interval", str(10 * iters), "--profile", "--profile-step-start", "2",
                         "--profile-step-end", str(iters), "--profile-ranks", "0", "--tensorboard-dir", trace_dir]
        run = subprocess.run([f"{build}/bin/mactor", "-np", "2", f"{build}/bin/pretrain_gpt", *flags],
                             capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=1200)
        traces = glob.glob(os.path.join(trace_dir, "**", "rank0*.json"), recursive=True)
        if run.returncode != 0 or not traces:
            sys.exit(f"the tensor-parallel calibration run failed (status {run.returncode}):\n{run.stderr[-2000:]}")
        with open(traces[0]) as f:
            events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    kinds = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "tensor_parallel":
            kinds[(e["name"], e.get("args", {}).get("bytes"))].append(float(e["dur"]))
    waits, count = 0.0, 0
    for durations in kinds.values():
        if len(durations) < 20:
            continue  # too few to tell the link's cost from the waits
        durations.sort()
        floor = durations[len(durations) // 10]
        waits += sum(d - floor for d in durations)
        count += len(durations)
    if not count:
        sys.exit("the tensor-parallel calibration run traced no collectives")
    return waits / count / EXPECTED_MAX_OF_TWO, count


RING_SEQUENCES = (256, 512, 1024)


def attention_bench(build):
    """bench_context_parallel's rows, in seconds: a ring rank's compute by (seq, "forward"|"backward"),
    and the one-rank kernel's (forward, backward) by seq."""
    run = subprocess.run([f"{build}/bin/bench_context_parallel", str(MODEL_HEADS), str(MODEL_HEAD_DIM), str(max(RING_SEQUENCES)),
                          str(min(RING_SEQUENCES)), "0.1"], capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    ring, one = {}, {}
    for line in run.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].isdigit():
            continue
        seq = int(cells[0])
        if cells[1] in ("forward", "backward"):
            ring[(seq, cells[1])] = float(cells[4]) / 1e3
        elif cells[1] == "one rank":
            one[seq] = [float(x) / 1e3 for x in cells[4].split("+")]
    if run.returncode != 0 or len(one) != len(RING_SEQUENCES):
        sys.exit(f"bench_context_parallel failed (status {run.returncode}):\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return ring, one


def attention_efficiencies(build, repeats, peak):
    """The system file's attention_efficiency (one rank's kernel at the model's shape against `peak`
    FLOP/s) and ring_attention_efficiency (per chunk size, seq / 4 at cp = 2: half the one-rank
    kernel's time over a ring rank's), each time the fastest of `repeats` runs of
    bench_context_parallel (the least disturbed, as the iteration time is)."""
    runs = [attention_bench(build) for _ in range(repeats)]
    ring = {key: min(r[0][key] for r in runs) for key in runs[0][0]}
    one = {seq: [min(r[1][seq][i] for r in runs) for i in (0, 1)] for seq in RING_SEQUENCES}
    forward_flops = 2 * MODEL_SEQ * MODEL_SEQ * MODEL_HEAD_DIM * MODEL_HEADS  # causal: half of 4 s^2 d heads
    attention = {"forward": round(forward_flops / one[MODEL_SEQ][0] / peak, 4),
                 "backward": round(2 * forward_flops / one[MODEL_SEQ][1] / peak, 4)}
    points = [{"chunk_tokens": seq // 4, "forward": round(one[seq][0] / 2 / ring[(seq, "forward")], 3),
               "backward": round(one[seq][1] / 2 / ring[(seq, "backward")], 3)} for seq in RING_SEQUENCES]
    return attention, points


def simulate(build, system):
    """`mactor simulate` of the calibration model on `system`: (iteration seconds, model FLOPs)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(system, f)
    try:
        run = subprocess.run([f"{build}/bin/mactor", "simulate", "--system", f.name, *MODEL],
                             capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    time = re.search(r"iteration time \(ms\): ([0-9.]+)", run.stdout)
    flops = re.search(r"model FLOPs per iteration[^:]*: ([0-9.e+]+)", run.stdout)
    if run.returncode != 0 or not time or not flops:
        sys.exit(f"mactor simulate failed:\n{run.stderr}")
    return float(time.group(1)) / 1e3, float(flops.group(1))


def compute_efficiency_for(build, system, seconds):
    """The compute_efficiency at which `mactor simulate` predicts `seconds` for the calibration model:
    its time is compute / efficiency plus the rest (element-wise kernels, the optimizer step), so two
    predictions, at 1 and 1/2, give both parts. Returns it with the model's FLOPs per iteration."""
    at_one, flops = simulate(build, dict(system, compute_efficiency=1.0))
    at_half, _ = simulate(build, dict(system, compute_efficiency=0.5))
    compute = at_half - at_one
    rest = at_one - compute
    if seconds <= rest:
        sys.exit(f"the measured {seconds * 1e3:.0f} ms is less than the element-wise and optimizer time alone "
                 f"({rest * 1e3:.0f} ms): check memory_bandwidth_GBps")
    return compute / (seconds - rest), flops


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peak-gflops", type=float, default=100.0)
    p.add_argument("--out", default=os.path.join(ROOT, "simulate/systems/cpu_this_machine.json"))
    a = p.parse_args()
    with open(a.out) as f:
        system = json.load(f)
    jobs = int(system["accelerators_per_node"])
    per_job = [job for _ in range(a.repeats) for job in concurrent_iteration_seconds(a.build, a.iters, jobs)]
    times = [t for job in per_job for t in job]
    seconds = min(times)
    jitter = statistics.median(relative_spread(job) for job in per_job)
    gbps = elementwise_gbps(a.build, jobs)
    system["memory_efficiency"] = round(min(1.0, gbps / system["memory_bandwidth_GBps"]), 3)
    system["peak_tflops_bf16"] = system["peak_tflops_fp32"] = round(a.peak_gflops / 1e3, 6)
    attention, ring_points = attention_efficiencies(a.build, a.repeats, a.peak_gflops * 1e9)
    system["attention_efficiency"], system["ring_attention_efficiency"] = attention, ring_points
    efficiency, flops = compute_efficiency_for(a.build, system, seconds)
    if efficiency > 1:  # faster than the assumed peak: the peak is what was reached (the attention's time kept)
        system["peak_tflops_bf16"] = system["peak_tflops_fp32"] = round(a.peak_gflops * efficiency / 1e3, 6)
        system["attention_efficiency"] = {k: round(v / efficiency, 4) for k, v in attention.items()}
        efficiency = 1.0
    peak = system["peak_tflops_fp32"] * 1e12
    system["compute_efficiency"] = round(efficiency, 3)
    system["compute_jitter"] = round(max(jitter, 1e-4), 4)
    sync_runs = [tensor_parallel_sync_jitter_us(a.build, a.iters) for _ in range(a.repeats)]
    sync_jitter, collectives = sorted(sync_runs)[len(sync_runs) // 2]
    system["sync_jitter_us"] = round(max(sync_jitter, 0.1), 1)
    ring = ", ".join(f"{p['chunk_tokens']}: {p['forward']}/{p['backward']}" for p in system["ring_attention_efficiency"])
    rate = flops / seconds
    system["source"] = (f"calibrated {datetime.date.today()} by scripts/calibrate_cpu_system.py: pretrain_gpt, one rank, "
                        f"one thread, {' '.join(MODEL)}, {jobs} such jobs at once (one per core), {a.repeats} times: "
                        f"{seconds * 1e3:.0f} ms for the fastest iteration (median {statistics.median(times) * 1e3:.0f} ms) "
                        f"for {flops:.3e} model FLOPs = {rate / 1e9:.1f} GFLOP/s over a {peak / 1e9:.0f} GFLOP/s peak; "
                        f"a job's iteration times vary by {jitter * 100:.1f}% (robust); a TP2 job's {collectives} "
                        f"traced tensor-parallel collectives (rank 0) wait {sync_jitter * EXPECTED_MAX_OF_TWO:.0f} us beyond their "
                        f"kind's 10th percentile on average (sync_jitter_us); the element-wise kernels "
                        f"around the matmuls ran at {gbps:.2f} GB/s (bench_elementwise, {jobs} at once), priced apart "
                        f"(memory_efficiency); one rank's attention kernel at this shape (bench_context_parallel, 2 at once) reached "
                        f"{system['attention_efficiency']['forward']}/{system['attention_efficiency']['backward']} of the peak "
                        f"forward/backward (attention_efficiency); ring attention's tiles against one rank's kernel, per chunk forward/backward "
                        f"(bench_context_parallel, ring_attention_efficiency): {ring}; the rest of the step's FLOPs at compute_efficiency. Links hand-measured "
                        "(bench_comm's 2-rank rates, bench_actor_overhead's per-message costs), not calibrated.")
    with open(a.out, "w") as f:
        json.dump(system, f, indent=2)
        f.write("\n")
    print(f"{seconds * 1e3:.0f} ms/iteration, {rate / 1e9:.1f} model GFLOP/s, element-wise {gbps:.2f} GB/s: "
          f"compute_efficiency {efficiency:.3f} of {peak / 1e9:.0f} GFLOP/s, memory_efficiency "
          f"{system['memory_efficiency']}, compute_jitter {jitter:.4f}, sync_jitter_us {system['sync_jitter_us']}, "
          f"ring attention (chunk: forward/backward) {ring} -> {a.out}")


if __name__ == "__main__":
    main()
