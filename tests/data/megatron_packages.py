"""megatron/ and megatron/core/ of the installed megatron-core as bare packages, so single modules
import without megatron.core's __init__, which pulls in torch.distributed code the data tests do
not need (Debian's torch lacks parts of it)."""
import importlib.util
import os
import sys
import types


def stub_megatron_packages():
    spec = importlib.util.find_spec("megatron")
    if spec is None:
        sys.exit("megatron-core is not installed: pip install megatron-core (scripts/requirements-test.txt)")
    root = list(spec.submodule_search_locations)[0]
    for name, path in [("megatron", root), ("megatron.core", os.path.join(root, "core"))]:
        m = types.ModuleType(name)
        m.__path__ = [path]
        sys.modules[name] = m
