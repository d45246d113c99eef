#!/usr/bin/env python3
"""The layering check fails on deliberate bad includes. A tree with the project's own table where
a kernels/ file includes a model/ header (once from the root, once as "../model/..."), a comm/ file
includes CAF, a training/ file UCX, and a folder that is no layer holds a source: the check must
exit 1 and name each file and line, and exit 0 once they are gone.

usage: check_layers_fails.py ROOT CHECKER
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

root, checker = pathlib.Path(sys.argv[1]), sys.argv[2]
failures = []
with tempfile.TemporaryDirectory() as tmp:
    tree = pathlib.Path(tmp)
    (tree / "cmake").mkdir()
    shutil.copy(root / "cmake" / "layers.txt", tree / "cmake" / "layers.txt")
    for folder in ("tensor", "kernels", "comm", "model", "training", "scratch"):
        (tree / folder).mkdir()
    (tree / "tensor" / "tensor.hpp").write_text("#pragma once\n")
    (tree / "model" / "gpt_chunk.hpp").write_text("#pragma once\n")
    (tree / "kernels" / "gemm.hpp").write_text('#pragma once\n#include "tensor/tensor.hpp"\n')
    files = {
        "kernels/gemm.cpp": '#include "kernels/gemm.hpp"\n#include "gemm.hpp"\n#include "model/gpt_chunk.hpp"\n',
        "kernels/norm.cpp": '#include <cblas.h>\n#include "../model/gpt_chunk.hpp"\n',
        "comm/transport.cpp": "#include <ucp/api/ucp.h>\n#include <caf/all.hpp>\n",
        "training/port.cpp": '#include "model/gpt_chunk.hpp"\n#include <ucp/api/ucp.h>\n',
        "scratch/try.cpp": "int main() {}\n",
    }
    for name, text in files.items():
        (tree / name).write_text(text)
    run = subprocess.run([sys.executable, checker, str(tree)], capture_output=True, text=True)
    print(run.stdout, end="")
    expected = [
        'kernels/gemm.cpp:3: includes "model/gpt_chunk.hpp" (layer model); layer kernels may include tensor (and itself)',
        'kernels/norm.cpp:2: includes "../model/gpt_chunk.hpp" (layer model); layer kernels may include tensor (and itself)',
        "comm/transport.cpp:2: includes <caf/all.hpp> (CAF); only actors, bench, tests may include CAF",
        "training/port.cpp:2: includes <ucp/api/ucp.h> (UCX); only comm may include UCX",
        "scratch/try.cpp: scratch/ holds sources but is no layer of cmake/layers.txt; put the file in a layer's folder or give scratch/ a row",
    ]
    failures += [f"missing: {e}" for e in expected if e not in run.stdout]
    if run.returncode != 1:
        failures.append(f"the check exited {run.returncode} on bad includes, not 1")
    if len(run.stdout.strip().splitlines()) != len(expected) + 1:
        failures.append("the check reported other lines than the bad includes (and its summary)")
    (tree / "kernels" / "gemm.cpp").write_text('#include "kernels/gemm.hpp"\n#include "gemm.hpp"\n')
    (tree / "kernels" / "norm.cpp").write_text("#include <cblas.h>\n")
    (tree / "comm" / "transport.cpp").write_text("#include <ucp/api/ucp.h>\n")
    (tree / "training" / "port.cpp").write_text('#include "model/gpt_chunk.hpp"\n')
    shutil.rmtree(tree / "scratch")
    clean = subprocess.run([sys.executable, checker, str(tree)], capture_output=True, text=True)
    if clean.returncode != 0:
        failures.append(f"the check failed a clean tree: {clean.stdout}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
