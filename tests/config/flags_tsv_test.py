#!/usr/bin/env python3
"""Checks mactor's parser against Python's own argparse, built from shared/megatron/flags.tsv.

Every flag of Megatron-LM core_v0.15.0 is registered on a real argparse.ArgumentParser with its
type, action, nargs, choices and default from the table (allow_abbrev=False, as Megatron). The same
command lines go to mactor's parser (config_dump_parsed) and to argparse; values and error messages
must agree. Usage: flags_tsv_test.py CONFIG_DUMP_PARSED FLAGS_TSV
"""
import argparse
import ast
import csv
import json
import random
import re
import subprocess
import sys

dump_parsed, tsv_path = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(tsv_path), delimiter="\t"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# Independent definitions of Megatron's custom argument types, from their documented behaviour.
def tuple_type(x):
    return tuple(int(i) for i in x.strip("()").split(","))


def pattern(x):
    if "[" not in x:
        return int(x)
    if re.search(r"[^,\d\[\]\(\)\+\*]", x):
        raise ValueError(x)
    v = eval(x)  # only digits, brackets and + * reach here
    if not isinstance(v, (int, list)):
        raise ValueError(x)
    return v


def moe_freq_type(x):
    return pattern(x)


def no_rope_freq_type(x):
    return pattern(x)


def literal(text):
    if text.startswith("AttnBackend."):
        return text.split(".", 1)[1]
    return ast.literal_eval(text)


def build_reference():
    p = argparse.ArgumentParser(prog="config_dump_parsed", allow_abbrev=False)
    kitchen = p.add_mutually_exclusive_group()
    types = {"int": int, "float": float, "str": str, "bool": bool, "tuple_type": tuple_type,
             "moe_freq_type": moe_freq_type, "no_rope_freq_type": no_rope_freq_type,
             "AttnBackend(enum by name)": str}
    for r in rows:
        opts = r["flag"].split("|")
        kw = {"dest": r["dest"], "default": literal(r["default"])}
        t = r["type"]
        if t == "bool-store_true":
            kw["action"] = "store_true"
        elif t == "bool-store_false":
            kw["action"] = "store_false"
        elif t == "bool-BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
            opts = [opts[0]]
        else:
            kw["type"] = types[t]
            if r["nargs"]:
                kw["nargs"] = r["nargs"]
            if r["choices"]:
                conv = int if t == "int" else str
                kw["choices"] = [conv(literal(c) if c.startswith("AttnBackend") else c) for c in r["choices"].split(",")]
        target = kitchen if "mutually_exclusive_group_0" in r["notes"] else p
        target.add_argument(*opts, **kw)
    return p


reference = build_reference()


def normalize(v):
    if isinstance(v, tuple):
        return [normalize(x) for x in v]
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def ours(argv):
    r = subprocess.run([dump_parsed, *argv], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def theirs(argv):
    try:
        ns = reference.parse_args(argv)
        return 0, {k: normalize(v) for k, v in vars(ns).items()}, ""
    except SystemExit as e:
        return e.code, None, ""


class ErrorCapture(argparse.ArgumentParser):
    pass


def reference_error(argv):
    """The 'error: ...' line Python's argparse prints for argv, or None."""
    import contextlib, io
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        try:
            reference.parse_args(argv)
            return None
        except SystemExit:
            pass
    return [l for l in buf.getvalue().splitlines() if ": error: " in l][0].split(": error: ", 1)[1]


def compare(argv, label):
    rc, got, err = ours(argv)
    want_err = reference_error(argv)
    if want_err is not None:
        check(rc == 2, f"{label}: argparse rejects it ({want_err}) but mactor exited {rc}")
        got_err = [l for l in err.splitlines() if ": error: " in l]
        check(got_err and got_err[0].split(": error: ", 1)[1] == want_err,
              f"{label}: error text differs\n  argparse: {want_err}\n  mactor:   {got_err}")
        return
    _, want, _ = theirs(argv)
    check(rc == 0, f"{label}: argparse accepts it but mactor exited {rc}: {err.strip()}")
    if rc != 0:
        return
    for dest, value in want.items():
        check(dest in got, f"{label}: mactor has no dest {dest}")
        if dest in got and got[dest] != value:
            failures.append(f"{label}: {dest} = {got[dest]!r}, argparse gives {value!r}")


def sample_value(r, alternate=False):
    t, choices = r["type"], r["choices"].split(",") if r["choices"] else []
    choices = [c.split(".", 1)[1] if c.startswith("AttnBackend.") else c for c in choices]
    many = r["nargs"] in ("+", "*")
    if t == "int":
        vals = choices[-2:] if choices else (["-3", "1_000"] if alternate else ["7", "12"])
    elif t == "float":
        vals = ["-.5", "1e-3"] if alternate else ["0.25", "3"]
    elif t == "bool":
        vals = ["False"] if not alternate else [""]
    elif t == "tuple_type":
        vals = ["(3,4)"] if not alternate else ["5"]
    elif t in ("moe_freq_type", "no_rope_freq_type"):
        vals = ["([1]*2+[0])*2"] if not alternate else ["4"]
    else:
        vals = (choices[-2:] if len(choices) > 1 else choices) or (["a/b c", "x"] if alternate else ["some/path", "y"])
    return vals if many else vals[:1]


# 1. Defaults: no flags at all.
compare([], "defaults")

# 2. Every flag at once, first and then alternate option strings and values.
for alternate in (False, True):
    argv, seen_kitchen = [], False
    for r in rows:
        opts = r["flag"].split("|")
        if "mutually_exclusive_group_0" in r["notes"]:
            if seen_kitchen:
                continue
            seen_kitchen = True
        opt = opts[-1] if alternate else opts[0]
        if r["type"].startswith("bool-"):
            argv.append(opt)
        else:
            argv += [opt, *sample_value(r, alternate)]
    compare(argv, "all flags" + (" (alternate spellings)" if alternate else ""))

# 3. Each flag alone with a bad value, a missing value, an explicit value on a switch, and --x=v.
for r in rows:
    opt = r["flag"].split("|")[0]
    t = r["type"]
    if t.startswith("bool-"):
        compare([opt + "=1"], f"{opt}=1")
        continue
    compare([opt], f"{opt} without value")
    compare([opt + "=" + sample_value(r)[0]], f"{opt}=value")
    if t in ("int", "float", "tuple_type", "moe_freq_type", "no_rope_freq_type") or r["choices"]:
        compare([opt, "zz"], f"{opt} zz")

# 4. Mixed unknown flags and positional words are all reported, in order.
compare(["--foo", "1", "--num-layers", "2", "--bar=3", "baz"], "unknown flags")
compare(["--num-lay", "2"], "abbreviation")
compare(["--kitchen-config-file", "a", "--kitchen-recipe-number", "1"], "mutually exclusive")
compare(["--lr", "-1e-4"], "negative exponent value")
compare(["--lr", "-0.5", "--min-lr", "-1"], "negative values")
compare(["--", "--num-layers", "2"], "separator")

# 5. Random command lines: mactor agrees with argparse on acceptance, values and errors.
rng = random.Random(1234)
words = ["--num-layers", "--lr", "--data-path", "--fp16", "--no-bf16", "--moe-layer-freq", "--split",
         "--position-embedding-type", "rope", "x", "-1", "-1e5", "3", "0.5", "[1]*2", "--", "--unknown",
         "--window-size", "(1,2)", "--recompute-modules", "--onnx-safe", "--timing-log-level", "2", "=", "--lr=1"]
for i in range(150):
    argv = [rng.choice(words) for _ in range(rng.randint(0, 8))]
    compare(argv, f"random #{i}: {argv}")

for f in failures[:50]:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
