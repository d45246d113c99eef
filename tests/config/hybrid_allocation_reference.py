"""Megatron-Core's own allocate_layers (megatron/core/ssm/mamba_hybrid_layer_allocation.py from
the installed megatron-core) as the reference for tests/config/hybrid_layer_allocation.test.cpp.
megatron.core's package import needs a newer torch than this environment has, so the one module is
loaded from its file with megatron.core.utils stubbed (it only takes log_single_rank from it).

Usage: hybrid_allocation_reference.py CASES OUT; CASES holds 'layers attention_ratio mlp_ratio
[pattern]' lines; OUT gets the allocation string, or 'error', per case."""
import importlib.util
import logging
import sys
import types
from pathlib import Path

import megatron

utils = types.ModuleType("megatron.core.utils")
utils.log_single_rank = lambda *args, **kwargs: None
sys.modules.setdefault("megatron.core", types.ModuleType("megatron.core"))
sys.modules["megatron.core.utils"] = utils
path = Path(megatron.__path__[0]) / "core/ssm/mamba_hybrid_layer_allocation.py"
spec = importlib.util.spec_from_file_location("hybrid_allocation", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
logging.disable(logging.CRITICAL)

out = []
for line in Path(sys.argv[1]).read_text().splitlines():
    fields = line.split()
    layers, attention, mlp = int(fields[0]), float(fields[1]), float(fields[2])
    pattern = fields[3] if len(fields) > 3 else None
    try:
        out.append("".join(module.allocate_layers(layers, attention, mlp, pattern)))
    except (ValueError, AssertionError):
        out.append("error")
Path(sys.argv[2]).write_text("\n".join(out) + "\n")
