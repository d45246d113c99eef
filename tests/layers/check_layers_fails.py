#!/usr/bin/env python3
"""The layering check fails on deliberate bad includes: a tree with the project's own table, a
kernels/ file including a model/ header and a comm/ file including CAF. It must exit 1 and name
both files and lines, and pass once they are gone.

usage: check_layers_fails.py ROOT CHECKER
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

root, checker = pathlib.Path(sys.argv[1]), sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    tree = pathlib.Path(tmp)
    (tree / "cmake").mkdir()
    shutil.copy(root / "cmake" / "layers.txt", tree / "cmake" / "layers.txt")
    for folder in ("kernels", "comm", "model"):
        (tree / folder).mkdir()
    (tree / "model" / "gpt_chunk.hpp").write_text("#pragma once\n")
    bad_kernel = tree / "kernels" / "gemm.cpp"
    bad_kernel.write_text('#include "kernels/gemm.hpp"\n#include "tensor/tensor.hpp"\n#include "model/gpt_chunk.hpp"\n')
    bad_comm = tree / "comm" / "transport.cpp"
    bad_comm.write_text('#include <ucp/api/ucp.h>\n#include <caf/all.hpp>\n')
    run = subprocess.run([sys.executable, checker, str(tree)], capture_output=True, text=True)
    print(run.stdout, end="")
    expected = [
        'kernels/gemm.cpp:3: includes "model/gpt_chunk.hpp" (layer model); layer kernels may include kernels, tensor',
        "comm/transport.cpp:2: includes <caf/all.hpp> (CAF); only actors, bench, tests may include CAF",
    ]
    failures = [f"missing: {e}" for e in expected if e not in run.stdout]
    if run.returncode != 1:
        failures.append(f"the check exited {run.returncode} on bad includes, not 1")
    if len(run.stdout.strip().splitlines()) != len(expected) + 1:
        failures.append("the check reported other lines than the two bad includes (and its summary)")
    bad_kernel.write_text('#include "kernels/gemm.hpp"\n')
    bad_comm.write_text("#include <ucp/api/ucp.h>\n")
    clean = subprocess.run([sys.executable, checker, str(tree)], capture_output=True, text=True)
    if clean.returncode != 0:
        failures.append(f"the check failed a clean tree: {clean.stdout}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
