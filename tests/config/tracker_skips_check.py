"""--result-rejected-tracker-filename read at start, against Megatron-Core's own
RerunStateMachine.get_skipped_iterations_from_tracker_file (core_v0.15.0 in the project's venv,
lifted out of its class with ast so none of its torch imports run).

Random tracker files (several jobs, ranks, iterations and statuses, with noise lines and a bad
number now and then) go to `pretrain_gpt --dump-config --result-rejected-tracker-filename F`; the
iterations_to_skip it resolves must equal Megatron's list appended to the --iterations-to-skip given.

tracker_skips_check.py PRETRAIN_GPT SCRATCH_DIR
"""
import ast
import importlib.util
import json
import logging
import os
import random
import re
import subprocess
import sys
from typing import Tuple


def megatron_reader():
    spec = importlib.util.find_spec("megatron")
    path = os.path.join(list(spec.submodule_search_locations)[0], "core", "rerun_state_machine.py")
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RerunStateMachine")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "get_skipped_iterations_from_tracker_file")
    fn.decorator_list = []
    namespace = {"re": re, "Tuple": Tuple, "logger": logging.getLogger("reference")}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), namespace)
    return lambda file_name: namespace["get_skipped_iterations_from_tracker_file"](None, file_name)


STATUSES = ["RerunValidationStatus.RERUN_DISABLED", "RerunValidationStatus.INITIAL_RUN",
            "RerunValidationStatus.FIRST_RERUN_NOT_REPRODUCIBLE", "RerunValidationStatus.FIRST_RERUN_REPRODUCIBLE",
            "RerunValidationStatus.SECOND_RERUN_NOT_REPRODUCIBLE", "RerunValidationStatus.SECOND_RERUN_REPRODUCIBLE",
            "second_rerun_reproducible"]


def tracker_text(rng):
    lines = []
    for _ in range(rng.randint(0, 40)):
        kind = rng.random()
        if kind < 0.05:
            lines.append("garbage line without the fields")
            continue
        rank = str(rng.randint(0, 3)) if kind > 0.03 else "x"
        lines.append(f"ts=2026-01-01 00:00:00 node=n{rng.randint(0, 1)} device=0 jobID=j{rng.randint(0, 2)} "
                     f"rank={rank} iteration={rng.randint(1, 8)} status={rng.choice(STATUSES)} "
                     f"result={rng.random():.3f} message=some text here")
    return "\n".join(lines) + ("\n" if lines else "")


def main(pretrain_gpt, scratch):
    os.makedirs(scratch, exist_ok=True)
    reference = megatron_reader()
    logging.disable(logging.CRITICAL)
    rng = random.Random(5)
    base = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
            "--max-position-embeddings", "32", "--micro-batch-size", "1", "--train-iters", "10", "--lr", "1e-3",
            "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192"]
    cases = nonempty = 0
    for case in range(60):
        path = os.path.join(scratch, f"tracker_{case}.txt")
        if case % 15 != 14:  # now and then no file at all (a first run)
            open(path, "w").write(tracker_text(rng))
        elif os.path.exists(path):
            os.remove(path)
        given = [] if case % 2 else [9]
        args = base + (["--iterations-to-skip"] + [str(i) for i in given] if given else [])
        p = subprocess.run([pretrain_gpt, "--dump-config"] + args + ["--result-rejected-tracker-filename", path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"case {case}: pretrain_gpt exit {p.returncode}: {p.stderr}")
        got = json.loads(p.stdout)["iterations_to_skip"]
        want = given + reference(path)
        if got != want:
            sys.exit(f"case {case}: mactor skips {got}, Megatron {want}\n{open(path).read() if os.path.exists(path) else '(no file)'}")
        cases += 1
        nonempty += bool(want != given)
    if nonempty < 10:
        sys.exit(f"only {nonempty} of {cases} tracker files skip anything: the cases test too little")
    print(f"{cases} tracker files ({nonempty} adding iterations to skip): iterations to skip equal Megatron's")


if __name__ == "__main__":
    main(*sys.argv[1:3])
