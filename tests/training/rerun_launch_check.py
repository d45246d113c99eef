"""--rerun-mode end to end: pretrain_gpt on a tiny model under `mactor -np 2` (two pipeline stages).

- an injected transient error is found in iteration 2 (the first iteration is never validated), the
  iteration is rerun, the rerun does not reproduce it: Megatron's "Possible transient error" line,
  a checkpoint of iteration 1, exit 17 (EXIT_CODE_FAILED_ON_RESULT_VALIDATION), the tracker file;
- an injected persistent error: the rerun reproduces it, checkpoint, exit 16
  (EXIT_CODE_RESUME_TO_DISAMBIGUATE), the tracker file's lines as Megatron's parser reads them,
  and the checkpoint resumes at the rejected iteration;
- a real spiky loss (--check-for-spiky-loss; a huge learning rate after 100 micro-batch losses):
  rejected, rerun on the same micro-batches with the same dropout masks, reproduced bit for bit
  (tolerance 0), exit 16;
- a real NaN loss: rejected and reproduced, exit 16; with --rerun-mode disabled Megatron's
  RuntimeError (exit 1); with --no-check-for-nan-in-loss-and-grad the job runs to its end;
- --rerun-mode disabled ignores injected errors; report_stats is refused with exit 2;
- --check-for-large-grads (Megatron's check_grads): on one rank the bucket is the whole gradient
  buffer, so the logged max of its first 100 norms (iterations 2-101; the first is not validated)
  is the largest logged grad norm of those iterations, a norm measured by the gradient clipping;
  with two data-parallel replicas and one bucket per parameter (--overlap-grad-reduce
  --ddp-bucket-size 1) the huge step of the spike above makes iteration 3's grads rejected,
  rerun and reproduced (exit 16); without the flag they are not checked.

usage: rerun_launch_check.py MACTOR PRETRAIN_GPT WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

MACTOR, PRETRAIN, WORK = sys.argv[1:4]

BASE = ("--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 2 --hidden-size 32 "
        "--ffn-hidden-size 64 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 "
        "--micro-batch-size 1 --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1 --eval-iters 0 "
        "--seed 5 --pipeline-model-parallel-size 2").split()

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run(name, extra):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    args = [a.replace("DIR", d) for a in BASE + extra]
    p = subprocess.run([MACTOR, "-np", "2", "--oversubscribe", PRETRAIN] + args, capture_output=True, text=True, timeout=600)
    return p, d


def run_unpiped(name, ranks, extra):
    """BASE without its pipeline split, on `ranks` data-parallel replicas."""
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    base = " ".join(BASE).replace("--pipeline-model-parallel-size 2", "").split()
    args = [a.replace("DIR", d) for a in base + extra]
    p = subprocess.run([MACTOR, "-np", str(ranks), "--oversubscribe", PRETRAIN] + args, capture_output=True, text=True,
                       timeout=600)
    return p, d


def large_grads():
    p, _ = run_unpiped("large_grads_values", 1, ["--check-for-large-grads", "--clip-grad", "100", "--train-iters", "102"])
    out = p.stdout + p.stderr
    norms = {int(i): float(g) for i, g in re.findall(r"iteration +(\d+)/.*?grad norm: ([0-9.]+)", p.stdout)}
    maxima = re.findall(r"Max value for grads: ([0-9.eE+-]+)", out)
    check(p.returncode == 0 and len(norms) == 102, f"large grads: 102 iterations train, exit {p.returncode}")
    want = max(norms[i] for i in range(2, 102)) if len(norms) == 102 else None
    check(len(maxima) == 1 and want is not None and abs(float(maxima[0]) - want) <= 5e-4,
          f"large grads: the max of the first 100 bucket norms {maxima} is the largest grad norm of iterations 2-101 ({want})")
    spike = ["--global-batch-size", "4", "--num-layers", "8", "--lr", "2000", "--lr-warmup-iters", "2",
             "--lr-decay-style", "constant", "--clip-grad", "0", "--overlap-grad-reduce", "--ddp-bucket-size", "1",
             "--result-rejected-tracker-filename", "DIR/tracker.txt"]
    p, d = run_unpiped("large_grads_spike", 2, spike + ["--check-for-large-grads"])
    out = p.stdout + p.stderr
    message = "found unexpected large grads in bucket #0 in backward pass before data-parallel communication collective"
    check(p.returncode == 16 and message in out, f"large grads: iteration 3's grads rejected and reproduced, exit {p.returncode}")
    check(out.count("Max value for grads:") == 2, "large grads: each rank logs its max")
    rows = tracker_lines(os.path.join(d, "tracker.txt"))
    check(sorted(rows) == [(0, 3, "FIRST_RERUN_REPRODUCIBLE"), (0, 3, "INITIAL_RUN"), (1, 3, "FIRST_RERUN_REPRODUCIBLE"),
                           (1, 3, "INITIAL_RUN")], f"large grads: tracker rows {rows}")
    p, _ = run_unpiped("large_grads_unchecked", 2, spike)
    out = p.stdout + p.stderr
    check("large grads" not in out and "Max value for grads" not in out, "large grads: unchecked without the flag")


def logged_iterations(out):
    return [int(m) for m in re.findall(r"iteration +(\d+)/", out)]


def tracker_lines(path):
    # Megatron's own pattern (RerunStateMachine.get_skipped_iterations_from_tracker_file).
    pattern = r"ts=.+ node=.+ device=.+ jobID=(.+) rank=(.+) iteration=(.+) status=(.+) result=.+ message=.+"
    rows = []
    for line in open(path):
        m = re.search(pattern, line)
        check(m is not None, f"tracker line parses with Megatron's pattern: {line.strip()}")
        if m:
            rows.append((int(m[2]), int(m[3]), m[4].split(".")[-1].upper()))
    return rows


def tracker_iteration(d):
    path = os.path.join(d, "ckpt", "latest_checkpointed_iteration.txt")
    return open(path).read().strip() if os.path.exists(path) else None


def injected(kind, code, line, second_status):
    p, d = run(kind, ["--error-injection-rate", "1", "--error-injection-type", kind, "--save", "DIR/ckpt",
                      "--save-interval", "1000", "--result-rejected-tracker-filename", "DIR/tracker.txt"])
    out = p.stdout + p.stderr
    check(p.returncode == code, f"{kind}: exit {p.returncode}, Megatron's {code}")
    check("WARNING:megatron.core.rerun_state_machine:Result validation enabled" in out, f"{kind}: validation enabled line")
    check("Injecting error type" in out, f"{kind}: injection line")
    check(line in out, f"{kind}: {line!r}")
    check("Need to rerun step to check reproducibility of initial result" in out, f"{kind}: rerun line")
    check(logged_iterations(p.stdout) == [1], f"{kind}: iteration 1 logged, iteration 2 not ({logged_iterations(p.stdout)})")
    check(tracker_iteration(d) == "1", f"{kind}: checkpoint of iteration 1 saved ({tracker_iteration(d)})")
    rows = tracker_lines(os.path.join(d, "tracker.txt"))
    check(rows == [(1, 2, "INITIAL_RUN"), (1, 2, second_status)], f"{kind}: tracker rows {rows}")
    return out


def main():
    os.makedirs(WORK, exist_ok=True)
    out = injected("transient_error", 17, "Possible transient error!!", "FIRST_RERUN_NOT_REPRODUCIBLE")
    check("Exiting now. A checkpoint at the last iteration is being saved" in out, "transient: exit line")
    out = injected("persistent_error", 16, "First rerun: unexpected result is reproducible within the tolerance",
                   "FIRST_RERUN_REPRODUCIBLE")
    check("Saving a checkpoint and exiting now. Please resume the job from the checkpoint" in out, "persistent: exit line")
    # The checkpoint resumes at the rejected iteration (mactor keeps no rerun state in it: the
    # resumed job runs iteration 2 as a fresh one).
    d = os.path.join(WORK, "persistent_error")
    args = [a.replace("DIR", d) for a in BASE] + ["--load", os.path.join(d, "ckpt"), "--use-checkpoint-opt-param-scheduler"]
    p = subprocess.run([MACTOR, "-np", "2", "--oversubscribe", PRETRAIN] + args, capture_output=True, text=True, timeout=600)
    check(p.returncode == 0 and logged_iterations(p.stdout) == [2, 3, 4], f"persistent: the checkpoint resumes at iteration 2 ({logged_iterations(p.stdout)})")

    # A real spike: the first iteration is not validated and its learning rate is half the peak's;
    # iteration 2's 100 micro-batch losses set the max; after its huge step, iteration 3's loss is
    # far above 10x. Dropout is on: the rerun must draw the same masks to reproduce it.
    spike = ["--global-batch-size", "100", "--lr", "2000", "--lr-warmup-iters", "2", "--lr-decay-style", "constant",
             "--clip-grad", "0", "--check-for-spiky-loss", "--hidden-dropout", "0.1", "--attention-dropout", "0.1",
             "--result-rejected-tracker-filename", "DIR/tracker.txt"]
    p, d = run("spiky", spike)
    out = p.stdout + p.stderr
    check("Max value for loss:" in out, "spiky: the max of the first 100 losses is logged")
    check(p.returncode == 16, f"spiky: exit {p.returncode}, 16 (the rerun reproduces the spike exactly)")
    check("message='Spiky loss'" in out, "spiky: rejected as a spiky loss")
    rows = tracker_lines(os.path.join(d, "tracker.txt"))
    check(rows == [(1, 3, "INITIAL_RUN"), (1, 3, "FIRST_RERUN_REPRODUCIBLE")], f"spiky: tracker rows {rows}")
    check(logged_iterations(p.stdout) == [1, 2], f"spiky: iterations 1 and 2 logged ({logged_iterations(p.stdout)})")

    nan = ["--lr", "1e38", "--clip-grad", "0", "--train-iters", "6"]
    p, _ = run("nan", nan)
    out = p.stdout + p.stderr
    check(p.returncode == 16 and "found NaN in local forward loss calculation" in out,
          f"nan: rejected and reproduced, exit {p.returncode}")
    p, _ = run("nan_disabled", nan + ["--rerun-mode", "disabled"])
    out = p.stdout + p.stderr
    check(p.returncode == 1 and re.search(r"Rank \d+, node .+, device \d+, iteration \d+: Unexpected result nan", out) is not None,
          f"nan, disabled: Megatron's RuntimeError, exit {p.returncode}")
    p, _ = run("nan_unchecked", nan + ["--no-check-for-nan-in-loss-and-grad"])
    check(p.returncode == 0 and logged_iterations(p.stdout)[-1:] == [6], f"nan, unchecked: trains to the end, exit {p.returncode}")

    p, _ = run("disabled", ["--rerun-mode", "disabled", "--error-injection-rate", "1"])
    check(p.returncode == 0 and logged_iterations(p.stdout) == [1, 2, 3, 4], f"disabled: injection ignored, exit {p.returncode}")
    check("Result validation enabled" not in p.stderr, "disabled: no validation line")
    large_grads()
    p, _ = run("report_stats", ["--rerun-mode", "report_stats"])
    check(p.returncode == 2 and "--rerun-mode report_stats is recognized but not implemented" in p.stderr,
          f"report_stats: refused, exit {p.returncode}")
    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
