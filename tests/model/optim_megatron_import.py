"""Imports single modules of the installed megatron-core (0.15.0) without running its package
__init__, which needs torch >= 2 features Debian's torch 1.13 lacks. Only the two modules the
optimizer tests read are stubbed: megatron.core.optimizer (a type annotation) and
megatron.core.utils (a logging helper and a version check)."""
import importlib
import importlib.util
import sys
import types


def import_megatron_core_module(name):
    if not hasattr(sys.modules.get("megatron.core"), "_mactor_stub"):
        spec = importlib.util.find_spec("megatron.core")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("megatron-core is not installed in this Python; run "
                             "scripts/setup.sh (pip install megatron-core into .venv)")
        core = types.ModuleType("megatron.core")
        core.__path__ = list(spec.submodule_search_locations)
        core._mactor_stub = True
        sys.modules["megatron.core"] = core
        optimizer = types.ModuleType("megatron.core.optimizer")
        optimizer.MegatronOptimizer = object
        sys.modules["megatron.core.optimizer"] = optimizer
        utils = types.ModuleType("megatron.core.utils")
        utils.log_single_rank = lambda *args, **kwargs: None
        utils.is_torch_min_version = lambda version, check_equality=True: False
        sys.modules["megatron.core.utils"] = utils
    return importlib.import_module("megatron.core." + name)
