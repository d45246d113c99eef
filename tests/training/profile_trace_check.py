#!/usr/bin/env python3
"""--profile under `mactor -np 4`: the trace files are read back with json.load and held to the
Trace Event Format's rules (complete events with ts and dur in microseconds, metadata naming every
process and thread, the spans of one thread nested or apart) and to what the job did:
  A  pp 2 x dp 2, --use-pytorch-profiler --profile-step-start 2 --profile-step-end 4
     --profile-ranks 0 2 3 --tensorboard-dir: one rank<N>.<ns>.pt.trace.json per profiled rank and
     none for rank 1; the forward and backward of every micro-batch of iterations 2 and 3 and of no
     other; every span inside its iteration's; each send of a profiled rank and its receive on
     the other profiled rank have the same tag, bytes and iteration, the receive ending after the
     send was posted; the distributed optimizer's reduce-scatter (on the background thread, with
     --overlap-grad-reduce) and all-gather; the optimizer's timed parts;
  B  tp 2 x pp 2 with 2 virtual stages, no --use-pytorch-profiler and no --tensorboard-dir:
     mactor_trace_rank0.json in the current folder for iteration 2 alone (nsys's capture range,
     start + 1 to end), both chunks' micro-batches, the tensor-parallel collectives;
  C  an unwritable --tensorboard-dir: exit status 2 and a message naming the flag.
perfetto's trace_processor fetches its binary at run time, which this machine cannot.
Usage: profile_trace_check.py MACTOR PRETRAIN_GPT WORK_DIR"""
import json
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

mactor, program = (str(Path(p).resolve()) for p in sys.argv[1:3])
work = Path(sys.argv[3]).resolve()
shutil.rmtree(work, ignore_errors=True)
failures = []
TOLERANCE_US = 1.0  # ts are doubles near 1.7e15 us: a quarter of a microsecond apart at best

MODEL = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
         "--max-position-embeddings", "32", "--micro-batch-size", "2", "--lr", "1e-3", "--mock-data",
         "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192", "--log-interval", "1", "--eval-iters", "0",
         "--clip-grad", "1.0"]


def fail(message):
    failures.append(message)


def launch(name, ranks, flags):
    cwd = work / name
    cwd.mkdir(parents=True)
    run = subprocess.run([mactor, "-np", str(ranks), "--oversubscribe", program, *MODEL, *flags],
                         capture_output=True, text=True, cwd=cwd)
    return run, cwd


def check_format(path, rank):
    """The file's events, after the format's rules: {pid: rank, tid -> thread name}."""
    trace = json.loads(path.read_text())
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        fail(f"{path}: no traceEvents list")
        return []
    threads, spans, process = {}, [], None
    for e in events:
        if e.get("pid") != rank:
            fail(f"{path}: pid {e.get('pid')} in the trace of rank {rank}: {e}")
        if e.get("ph") == "M":
            if e["name"] == "process_name":
                process = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads[e["tid"]] = e["args"]["name"]
            elif e["name"] not in ("process_sort_index", "thread_sort_index"):
                fail(f"{path}: unknown metadata {e}")
        elif e.get("ph") == "X":
            ok = (isinstance(e.get("name"), str) and isinstance(e.get("ts"), (int, float)) and
                  isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 and isinstance(e.get("tid"), int) and
                  isinstance(e.get("args"), dict) and isinstance(e["args"].get("iteration"), int))
            if not ok:
                fail(f"{path}: malformed complete event {e}")
                continue
            spans.append(e)
        else:
            fail(f"{path}: event of phase {e.get('ph')}: {e}")
    if not process or not re.fullmatch(rf"rank {rank} \(pp \d+, tp \d+, dp \d+\)", process):
        fail(f"{path}: process name {process!r}")
    unnamed = {e["tid"] for e in spans} - set(threads)
    if unnamed:
        fail(f"{path}: threads {sorted(unnamed)} have no thread_name")
    check_nesting(path, spans)
    return spans


def check_nesting(path, spans):
    """On one thread, a span lies inside the one open before it or starts after it ends."""
    by_thread = defaultdict(list)
    for e in spans:
        by_thread[e["tid"]].append(e)
    for tid, list_ in by_thread.items():
        list_.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ = []
        for e in list_:
            while open_ and e["ts"] >= open_[-1]["ts"] + open_[-1]["dur"] - TOLERANCE_US:
                open_.pop()
            if open_ and e["ts"] + e["dur"] > open_[-1]["ts"] + open_[-1]["dur"] + TOLERANCE_US:
                fail(f"{path}: tid {tid}: {e['name']} overlaps {open_[-1]['name']} without nesting")
            open_.append(e)


def check_iterations(label, spans, iterations):
    """Every span belongs to one of `iterations` and lies inside that iteration's span."""
    seen = sorted({e["args"]["iteration"] for e in spans})
    if seen != iterations:
        fail(f"{label}: spans of iterations {seen}, want {iterations}")
    outer = {}
    for e in spans:
        if e["name"].startswith("iteration "):
            if e["name"] in outer:
                fail(f"{label}: two spans {e['name']}")
            outer[e["name"]] = e
    if sorted(outer) != [f"iteration {i}" for i in iterations]:
        fail(f"{label}: iteration spans {sorted(outer)}")
        return
    for e in spans:
        it = outer[f"iteration {e['args']['iteration']}"]
        if e["ts"] < it["ts"] - TOLERANCE_US or e["ts"] + e["dur"] > it["ts"] + it["dur"] + TOLERANCE_US:
            fail(f"{label}: {e['name']} ({e['ts']}+{e['dur']}) outside {it['name']} ({it['ts']}+{it['dur']})")


def check_compute(label, spans, iterations, microbatches, chunks):
    """One forward and one backward of each micro-batch and chunk in each iteration."""
    got = Counter((e["name"].split()[0], e["args"]["iteration"], e["args"]["microbatch"], e["args"]["chunk"])
                  for e in spans if e.get("cat") == "compute")
    want = Counter((kind, i, mb, c) for kind in ("forward", "backward") for i in iterations
                   for mb in range(microbatches) for c in chunks)
    if got != want:
        fail(f"{label}: compute spans differ: missing {sorted((want - got).elements())[:8]}, "
             f"extra {sorted((got - want).elements())[:8]}")
    for e in spans:
        if e.get("cat") == "compute":
            a = e["args"]
            if e["name"] != f"{e['name'].split()[0]} mb {a['microbatch']} chunk {a['chunk']}":
                fail(f"{label}: name {e['name']!r} does not match its args {a}")


def names(spans):
    return Counter(e["name"] for e in spans)


def run_a():
    tb = work / "a" / "tb"
    run, cwd = launch("a", 4, ["--global-batch-size", "16", "--train-iters", "5", "--pipeline-model-parallel-size", "2",
                               "--use-distributed-optimizer", "--overlap-grad-reduce", "--profile",
                               "--use-pytorch-profiler", "--profile-step-start", "2", "--profile-step-end", "4",
                               "--profile-ranks", "0", "2", "3", "--tensorboard-dir", str(tb)])
    if run.returncode != 0:
        fail(f"A: exit status {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return {}
    files = {}
    for f in sorted(tb.glob("*.pt.trace.json")):
        m = re.fullmatch(r"rank(\d+)\.(\d+)\.pt\.trace\.json", f.name)
        if not m:
            fail(f"A: unexpected trace file name {f.name}")
            continue
        files[int(m.group(1))] = f
    if sorted(files) != [0, 2, 3]:
        fail(f"A: trace files of ranks {sorted(files)}, want [0, 2, 3]: {sorted(p.name for p in tb.iterdir())}")
    if list(cwd.glob("mactor_trace_rank*.json")):
        fail("A: a trace in the current folder although --tensorboard-dir was given")
    for rank, f in files.items():
        if not re.search(rf"^profile: rank {rank} wrote \d+ events of iterations 2-3 to {re.escape(str(f))} ",
                         run.stdout, re.M):
            fail(f"A: no line saying where rank {rank}'s trace went:\n{run.stdout[-2000:]}")
    spans = {rank: check_format(f, rank) for rank, f in files.items()}
    for rank, s in spans.items():
        label = f"A rank {rank}"
        check_iterations(label, s, [2, 3])
        check_compute(label, s, [2, 3], microbatches=4, chunks=[0])
        n = names(s)
        for name in ("forward-backward", "finalize model grads", "optimizer", "optimizer-inner-step",
                     "optimizer-clip-main-grad", "data-parallel params all-gather", "data-parallel grads reduce-scatter",
                     "loss all-reduce"):
            if n[name] != 2:
                fail(f"{label}: {n[name]} spans {name!r}, want 2 (one per iteration)")
        background = [e for e in s if e["name"] == "data-parallel grads reduce-scatter"]
        if any(e["tid"] != 2 or e["args"]["bytes"] <= 0 or e["args"]["group_size"] != 2 for e in background):
            fail(f"{label}: the overlapped reduce-scatter is not on the background thread with bytes: {background}")
        sends = [e for e in s if e.get("cat") == "pipeline"]
        if len(sends) != 2 * 2 * 4:  # 2 iterations x (send + recv) x 4 micro-batches
            fail(f"{label}: {len(sends)} pipeline spans, want 16")
    check_pairs(spans)
    check_merge(files, spans)
    return spans


def check_pairs(spans):
    """Each send between two profiled ranks meets its receive: same tag, iteration and bytes."""
    pairs = 0
    for rank, s in spans.items():
        for send in (e for e in s if e["name"].startswith("send ")):
            peer = send["args"]["peer"]
            if peer not in spans:
                continue
            match = [r for r in spans[peer] if r["name"].startswith("recv ") and r["args"]["tag"] == send["args"]["tag"]
                     and r["args"]["iteration"] == send["args"]["iteration"]]
            if len(match) != 1:
                fail(f"A: send {send['name']} of rank {rank} it {send['args']['iteration']}: {len(match)} receives on {peer}")
                continue
            recv = match[0]
            if recv["args"]["bytes"] != send["args"]["bytes"] or recv["args"]["peer"] != rank or send["args"]["bytes"] <= 0:
                fail(f"A: rank {rank} {send['name']} {send['args']} vs rank {peer} {recv['name']} {recv['args']}")
            if recv["name"].split()[1] != send["name"].split()[1]:
                fail(f"A: {send['name']} received as {recv['name']}")
            if recv["ts"] + recv["dur"] < send["ts"] - 100.0:
                fail(f"A: rank {peer} received {recv['name']} before rank {rank} posted it")
            pairs += 1
    if pairs != 16:  # ranks 0 and 2: 2 iterations x 4 micro-batches x (activation + gradient)
        fail(f"A: {pairs} send/receive pairs between profiled ranks, want 16")
    return pairs


def check_merge(files, spans):
    """scripts/merge_traces.py: one file holding every rank's spans under its own pid."""
    merged = work / "a" / "merged.json"
    script = Path(__file__).resolve().parents[2] / "scripts" / "merge_traces.py"
    run = subprocess.run([sys.executable, str(script), str(merged), *map(str, files.values())], capture_output=True,
                         text=True)
    if run.returncode != 0:
        fail(f"merge: {run.stderr}")
        return
    events = json.loads(merged.read_text())["traceEvents"]
    got = Counter(e["pid"] for e in events if e["ph"] == "X")
    if got != {rank: len(s) for rank, s in spans.items()}:
        fail(f"merge: complete events per pid {dict(got)}")


def run_b():
    run, cwd = launch("b", 4, ["--global-batch-size", "8", "--train-iters", "3", "--tensor-model-parallel-size", "2",
                               "--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                               "--profile", "--profile-step-start", "1", "--profile-step-end", "2"])
    if run.returncode != 0:
        fail(f"B: exit status {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return []
    found = sorted(p.name for p in cwd.iterdir())
    if found != ["mactor_trace_rank0.json"]:
        fail(f"B: the current folder holds {found}, want only mactor_trace_rank0.json")
        return []
    s = check_format(cwd / "mactor_trace_rank0.json", 0)
    check_iterations("B", s, [2])
    check_compute("B", s, [2], microbatches=4, chunks=[0, 1])
    tp = [e for e in s if e.get("cat") == "tensor_parallel"]
    if not tp or any(e["args"]["bytes"] <= 0 or e["args"]["group_size"] != 2 for e in tp):
        fail(f"B: tensor-parallel spans {len(tp)}: {tp[:3]}")
    return s


def run_c():
    run, _ = launch("c", 2, ["--global-batch-size", "8", "--train-iters", "3", "--pipeline-model-parallel-size", "2",
                             "--profile", "--tensorboard-dir", "/proc/mactor-cannot-write"])
    if run.returncode != 2 or "--tensorboard-dir /proc/mactor-cannot-write" not in run.stderr:
        fail(f"C: exit status {run.returncode}, stderr:\n{run.stderr[-2000:]}")


a = run_a()
b = run_b()
run_c()
for f in failures:
    print("FAIL:", f)
summary = {f"A rank {r}": len(s) for r, s in a.items()}
summary["B rank 0"] = len(b)
print(f"{len(failures)} failed; complete events per trace: {summary}")
sys.exit(1 if failures else 0)
