#!/usr/bin/env python3
"""Fault-injection soak of mactor's whole-job restart (`mactor --max-restarts`, issue 22).

A tiny GPT on mock data trains on 4 ranks under `mactor -np 4 --max-restarts K pretrain_gpt` with
`--save`/`--load` on one directory. At random moments the script SIGKILLs a random rank, or
SIGSTOPs one (the hang rule must end it: `--distributed-timeout-seconds-after-init`), and watches the
launcher start the job again and the job resume from its newest checkpoint: disk checkpoints
(`--save-interval N`) in one mode, local non-persistent ones in a tmpfs directory
(`--non-persistent-ckpt-type local --non-persistent-save-interval N`) in the other. Per fault:
recovered (an iteration is logged after the restart), hung (nothing within --deadline seconds: the
job is then killed) or lost (the launcher gave up). Recovery time = from the signal to the arrival of
the first iteration line logged after it; iterations lost = the newest iteration logged before the
restart minus the one the job resumed from. Every `lm loss` text the jobs log must equal the
uninterrupted reference run's at that iteration, byte for byte. Uninterrupted runs with and without
checkpoints give the step-time overhead of taking them (the same T iterations, back to back).

    scripts/soak_faults.py --faults 100            # the README's table (about 20-30 minutes)
    scripts/soak_faults.py --faults 3 --train-iters 60 --check   # the ctest: exits 1 unless all good

Every job's stdout/stderr, stamped with arrival times, is kept under --workdir.
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_job import WatchedJob  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_flags(a):
    return (f"--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
            f"--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size {2 * a.ranks} "
            f"--train-iters {a.train_iters} --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 10 "
            f"--init-method-std 0.1 --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 "
            f"--eval-iters 0 --seed 5 --distributed-timeout-minutes 1 "
            f"--distributed-timeout-seconds-after-init {a.hang_timeout}").split()


def checkpoint_flags(mode, a, run_dir):
    """`mode`: none, disk (persistent checkpoints every --interval), local (local non-persistent
    checkpoints every --interval in a tmpfs directory; the persistent one only at the end) or injob
    (local ones replicated to a peer, --replication, and in-job restart, --inprocess-restart: the
    failed rank is replaced and the others restart in place)."""
    if mode == "none":
        return []
    ckpt = os.path.join(run_dir, "ckpt")
    flags = ["--save", ckpt, "--load", ckpt]
    if mode == "disk":
        return flags + ["--save-interval", str(a.interval)]
    local = tempfile.mkdtemp(prefix=f"soak_local_{os.path.basename(run_dir)}_", dir=a.shm_dir)
    flags += ["--save-interval", str(a.train_iters), "--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", local,
              "--non-persistent-save-interval", str(a.interval)]
    if mode in ("injob", "spare"):
        flags += ["--replication", "--replication-jump", "1", "--inprocess-restart", "--inprocess-soft-timeout",
                  str(a.hang_timeout)]
    return flags


def local_dir_of(job):
    """The job's --non-persistent-local-ckpt-dir, or None."""
    cmd = job.proc.args
    return cmd[cmd.index("--non-persistent-local-ckpt-dir") + 1] if "--non-persistent-local-ckpt-dir" in cmd else None


def start(a, mode, run_dir, max_restarts):
    os.makedirs(run_dir, exist_ok=True)
    cmd = [os.path.join(a.build, "bin/mactor"), "-np", str(a.ranks), "--oversubscribe", "--kill-grace",
           str(a.kill_grace), "--max-restarts", str(max_restarts)]
    if mode == "spare":  # a spare process takes each failed rank's place (and a new one waits)
        cmd += ["--spares", "1"]
    cmd.append(os.path.join(a.build, "bin/pretrain_gpt"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return WatchedJob(cmd + model_flags(a) + checkpoint_flags(mode, a, run_dir), run_dir, env)


def cleanup(run_dir, a):
    """The job's disk checkpoints and its local ones in the tmpfs directory."""
    shutil.rmtree(os.path.join(run_dir, "ckpt"), ignore_errors=True)
    for d in os.listdir(a.shm_dir):
        if d.startswith(f"soak_local_{os.path.basename(run_dir)}_"):
            shutil.rmtree(os.path.join(a.shm_dir, d), ignore_errors=True)


def uninterrupted(a, mode, name):
    """One run without faults: {iteration: loss text} and seconds per iteration (first to last line)."""
    for attempt in range(3):  # a run that stalls or fails on a busy machine is tried again
        run_dir = os.path.join(a.workdir, f"{name}{'_retry' * attempt}")
        job = start(a, mode, run_dir, 0)
        if job.wait_until(lambda its, rs: False, a.deadline + a.train_iters * 0.2, poll_s=0.2) or job.running():
            print(f"soak: the uninterrupted {mode} run made no progress; ended, see {run_dir}", flush=True)
            job.stop()
            continue
        job.finish_reading()
        if job.proc.returncode == 0:
            break
        print(f"soak: the uninterrupted {mode} run failed (status {job.proc.returncode}); see {run_dir}", flush=True)
    cleanup(run_dir, a)
    its, _ = job.snapshot()
    if job.proc.returncode != 0 or len(its) != a.train_iters:
        sys.exit(f"soak: the uninterrupted {mode} run failed (status {job.proc.returncode}, {len(its)} iterations "
                 f"logged); see {run_dir}")
    return {i: loss for _, i, loss in its}, (its[-1][0] - its[0][0]) / (len(its) - 1)


def last_in_attempt(its, attempt_start, before):
    """The newest iteration logged after `attempt_start` and before `before`, or None."""
    done = [i for t, i, _ in its if attempt_start < t < before]
    return max(done) if done else None


def inject(job, a, rng, kind, attempt_start, mode):
    """One fault into a random rank of `job`; returns its record (outcome, times, iterations lost). In
    injob mode a killed rank's node memory goes with it: its local checkpoints are deleted."""
    ranks = job.ranks()
    if len(ranks) < a.ranks:
        return None
    rank = rng.randrange(a.ranks)
    t0 = time.monotonic()
    os.kill(ranks[rank], signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
    if mode in ("injob", "spare") and kind == "kill":
        shutil.rmtree(os.path.join(local_dir_of(job), f"rank_{rank}"), ignore_errors=True)
    rec = {"kind": kind, "rank": rank}

    def recovered(its, rs):
        return any(tr > t0 and any(t > tr for t, _, _ in its) for tr, _ in rs)

    if not job.wait_until(recovered, a.deadline):
        rec["outcome"] = "lost" if not job.running() else "hung"
        return rec
    its, rs = job.snapshot()
    t_restart = min(tr for tr, _ in rs if tr > t0)
    t_first, first, _ = min((t, i, loss) for t, i, loss in its if t > t_restart)
    last = last_in_attempt(its, attempt_start, t_restart)
    rec.update(outcome="recovered", detect_s=t_restart - t0, recovery_s=t_first - t0, resumed_at=first - 1,
               lost_iterations=(last - (first - 1)) if last is not None else 0, restarted_at=t_restart)
    return rec


def soak_job(a, mode, rng, index, wanted):
    """One job with up to `wanted` faults; returns (fault records, job record)."""
    run_dir = os.path.join(a.workdir, f"{mode}_job{index}")
    job = start(a, mode, run_dir, 0 if mode in ("injob", "spare") else a.max_restarts)
    faults = []
    attempt_start = job.started
    if rng.random() < a.startup_share:  # a kill while the ranks start (rendezvous, building, loading)
        time.sleep(rng.uniform(0.1, 1.0))
        rec = inject(job, a, rng, "kill", attempt_start, mode)
        if rec:
            rec["moment"] = "startup"
            faults.append(rec)
            attempt_start = rec.get("restarted_at", attempt_start)
    while len(faults) < wanted and job.running() and (not faults or faults[-1]["outcome"] == "recovered"):
        # A random moment once the attempt trains, while the job is not near its end.
        if not job.wait_until(lambda its, rs: any(t > attempt_start for t, _, _ in its), a.deadline):
            break
        time.sleep(rng.uniform(a.min_gap, a.max_gap))
        its, _ = job.snapshot()
        if not job.running() or its[-1][1] > a.train_iters - a.end_margin:
            break
        rec = inject(job, a, rng, "kill" if rng.random() >= a.stop_share else "stop", attempt_start, mode)
        if rec is None:
            continue
        rec["moment"] = "training"
        faults.append(rec)
        attempt_start = rec.get("restarted_at", attempt_start)
    if faults and faults[-1]["outcome"] == "hung":
        job.stop()
    else:
        try:
            job.proc.wait(timeout=a.deadline + a.train_iters)
        except Exception:
            job.stop()
    job.finish_reading()
    its, rs = job.snapshot()
    matched = sum(1 for f in faults if f["outcome"] == "recovered")
    record = {"mode": mode, "job": index, "exit_status": job.proc.returncode, "faults": len(faults),
              "restarts": len(rs), "spurious_restarts": max(0, len(rs) - matched),
              "orphans": job.orphans(), "lines": its, "finished": any(i == a.train_iters for _, i, _ in its),
              "first_restart": min((tr for tr, _ in rs), default=None)}
    cleanup(run_dir, a)
    return faults, record


def percentile(values, q):
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))]


def loss_check(jobs, reference):
    """(losses compared after a recovery, mismatches anywhere, first mismatch) over the jobs' lines."""
    after, bad, first_bad = 0, 0, None
    for j in jobs:
        for t, i, loss in j["lines"]:
            if j["first_restart"] is not None and t > j["first_restart"]:
                after += 1
            if reference.get(i) != loss:
                bad += 1
                first_bad = first_bad or f"{j['mode']} job {j['job']} iteration {i}: {loss} vs {reference.get(i)}"
    return after, bad, first_bad


def summarize(name, faults, jobs, reference, overhead):
    rec = [f for f in faults if f["outcome"] == "recovered"]
    times = [f["recovery_s"] for f in rec]
    lost = [f["lost_iterations"] for f in rec]
    after, bad, first_bad = loss_check(jobs, reference) if jobs is not None else (None, None, None)
    return {"rows": name, "faults": len(faults), "kills": sum(f["kind"] == "kill" for f in faults),
            "stops": sum(f["kind"] == "stop" for f in faults),
            "recovered": len(rec), "hung": sum(f["outcome"] == "hung" for f in faults),
            "lost": sum(f["outcome"] == "lost" for f in faults),
            "spurious_restarts": sum(j["spurious_restarts"] for j in jobs or []),
            "jobs_unfinished": sum(not j["finished"] or j["exit_status"] != 0 for j in jobs or []),
            "orphans": sum(len(j["orphans"]) for j in jobs or []),
            "p50_s": percentile(times, 50), "p90_s": percentile(times, 90), "p99_s": percentile(times, 99),
            "detect_p50_s": percentile([f["detect_s"] for f in rec], 50),
            "lost_iters_mean": statistics.mean(lost) if lost else float("nan"), "lost_iters_max": max(lost, default=0),
            "losses_after_recovery": after, "loss_mismatches": bad, "first_mismatch": first_bad,
            "step_time_ratio": overhead}


def losses_cell(r):
    if r["losses_after_recovery"] is None:
        return "(in the row below)"
    return f"{r['losses_after_recovery']} checked, {r['loss_mismatches']} differ"


def table(rows):
    head = ("| checkpoints | faults (kill/stop) | recovered | hung | lost | recovery p50 / p90 / p99 (s) | "
            "detected p50 (s) | iterations lost per fault (mean / max) | losses after recovery: bitwise equal | "
            "step time vs no checkpoints |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        out.append(f"| {r['rows']} | {r['faults']} ({r['kills']}/{r['stops']}) | {r['recovered']} | {r['hung']} | "
                   f"{r['lost']} | {r['p50_s']:.2f} / {r['p90_s']:.2f} / {r['p99_s']:.2f} | {r['detect_p50_s']:.2f} | "
                   f"{r['lost_iters_mean']:.1f} / {r['lost_iters_max']} | "
                   f"{losses_cell(r)} | "
                   f"{r['step_time_ratio']:.3f} |")
    return "\n".join(out)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (bin/mactor, bin/pretrain_gpt)")
    p.add_argument("--faults", type=int, default=100, help="faults in all, split evenly over the --modes")
    p.add_argument("--modes", default="disk,local", help="modes to soak, comma-separated: disk, local, injob, spare")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--train-iters", type=int, default=1500, help="iterations of each job")
    p.add_argument("--interval", type=int, default=5, help="--save-interval / --non-persistent-save-interval")
    p.add_argument("--faults-per-job", type=int, default=25, help="then a fresh job (and its startup kill)")
    p.add_argument("--max-restarts", type=int, default=1000, help="mactor --max-restarts of each job")
    p.add_argument("--stop-share", type=float, default=0.5, help="share of SIGSTOP faults (the rest SIGKILL)")
    p.add_argument("--startup-share", type=float, default=1.0,
                   help="chance that a job's first fault is a kill while its ranks start")
    p.add_argument("--hang-timeout", type=int, default=3,
                   help="--distributed-timeout-seconds-after-init (1 is allowed, but a loaded 2-core machine then "
                        "declares hangs where a rank merely waited for a core)")
    p.add_argument("--kill-grace", type=float, default=0.5, help="mactor --kill-grace")
    p.add_argument("--min-gap", type=float, default=0.5, help="seconds of training before a fault, at least")
    p.add_argument("--max-gap", type=float, default=3.0, help="... and at most")
    p.add_argument("--end-margin", type=int, default=20, help="no fault within this many iterations of the end")
    p.add_argument("--deadline", type=float, default=90.0, help="seconds for a recovery before 'hung'")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default=None, help="logs (default: a fresh temporary directory)")
    p.add_argument("--shm-dir", default="/dev/shm", help="tmpfs for the local checkpoints")
    p.add_argument("--json", default=None, help="also write every fault and the summary here")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless every fault recovered, no loss differs, no orphan, no spurious restart")
    return p.parse_args()


def main():
    a = parse_args()
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="soak_faults_")
    os.makedirs(a.workdir, exist_ok=True)
    modes = [m for m in a.modes.split(",") if m]
    rng = random.Random(a.seed)
    print(f"soak: logs in {a.workdir}", flush=True)
    reference, base = uninterrupted(a, "none", "reference")
    per_mode = {}
    for mode in modes:
        losses, step = uninterrupted(a, mode, f"{mode}_uninterrupted")
        per_mode[mode] = {"uninterrupted_equal": losses == reference, "overhead": step / base}
        print(f"soak: {mode}: uninterrupted step {step * 1e3:.1f} ms vs {base * 1e3:.1f} ms without checkpoints; "
              f"losses {'equal' if losses == reference else 'DIFFER'}", flush=True)
    rows, everything = [], []
    for k, mode in enumerate(modes):
        want = a.faults // len(modes) + (1 if k < a.faults % len(modes) else 0)
        faults, jobs = [], []
        while len(faults) < want:
            f, j = soak_job(a, mode, rng, len(jobs), min(a.faults_per_job, want - len(faults)))
            faults += f
            jobs.append(j)
            print(f"soak: {mode} job {j['job']}: {j['faults']} faults, {j['restarts']} restarts, exit {j['exit_status']}, "
                  f"outcomes {[x['outcome'] for x in f].count('recovered')} recovered", flush=True)
            if not f:
                break  # the job took no fault (it ended first): do not loop
        label = {"disk": f"disk (--save-interval {a.interval})",
                 "local": f"local tmpfs (--non-persistent-save-interval {a.interval})",
                 "injob": f"in-job restart, local tmpfs + --replication (every {a.interval})",
                 "spare": f"in-job restart with one spare (--spares 1), local tmpfs + --replication (every {a.interval})"}[mode]
        for kind in ("kill", "stop"):
            mine = [x for x in faults if x["kind"] == kind]
            rows.append(summarize(f"{label}: {'SIGKILL' if kind == 'kill' else 'SIGSTOP'}", mine, None, reference,
                                  per_mode[mode]["overhead"]))
        rows.append(summarize(f"{label}: all", faults, jobs, reference, per_mode[mode]["overhead"]))
        rows[-1]["uninterrupted_equal"] = per_mode[mode]["uninterrupted_equal"]
        everything.append({"mode": mode, "faults": faults, "jobs": [{k2: v for k2, v in j.items() if k2 != "lines"}
                                                                     for j in jobs]})
    print(table(rows))
    totals = [r for r in rows if r["rows"].endswith(": all")]
    for r in totals:
        print(f"soak: {r['rows']}: spurious restarts {r['spurious_restarts']}, orphans {r['orphans']}, jobs not "
              f"finished {r['jobs_unfinished']}, first loss mismatch: {r['first_mismatch']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "summary": rows, "detail": everything}, f, indent=1, default=str)
    ok = all(r["faults"] > 0 and r["recovered"] == r["faults"] and r["loss_mismatches"] == 0 and r["orphans"] == 0
             and r["spurious_restarts"] == 0 and r["jobs_unfinished"] == 0 and r["losses_after_recovery"] > 0
             and r["uninterrupted_equal"] for r in totals)
    print(f"soak: {'PASS' if ok else 'FAIL'}")
    return 0 if ok or not a.check else 1


if __name__ == "__main__":
    sys.exit(main())
