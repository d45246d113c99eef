"""Megatron-Core's own pipeline layer split (core_v0.15.0 from the project's venv):
get_num_layers_to_build (transformer_block.py), get_transformer_layer_offset (transformer_layer.py),
PipelineParallelLayerLayout (pipeline_parallel_layer_layout.py) and is_vp_first/last_stage
(pipeline_parallel/utils.py), lifted out of their modules with ast so none of the GPU imports run.

Reads cases from stdin, one per line: NUM_LAYERS PP VP FIRST LAST ACC_EMBEDDING ACC_LOSS LAYOUT
('-' for an unset FIRST/LAST/LAYOUT, VP 1 for none). For each case prints "case K", then per
pipeline rank and virtual stage "R V OFFSET COUNT", then (for a layout) its pretty_repr lines each
prefixed "repr ", or "error MESSAGE" when Megatron rejects the case.
"""
import ast
import importlib.util
import os
import sys
import types


def core_path(*parts):
    spec = importlib.util.find_spec("megatron")
    return os.path.join(list(spec.submodule_search_locations)[0], "core", *parts)


def lift(path, wanted, namespace):
    source = open(path).read()
    nodes = [n for n in ast.parse(source).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in wanted]
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), namespace)


class FakeParallelState:
    """What the lifted functions ask parallel_state, answered from the case at hand."""

    def __init__(self):
        self.pp_rank = 0
        self.vp_size = None

    def get_pipeline_model_parallel_rank(self):
        return self.pp_rank

    def get_virtual_pipeline_model_parallel_world_size(self):
        return self.vp_size


def load():
    state = FakeParallelState()
    ns = {"Optional": __import__("typing").Optional, "parallel_state": state,
          "copy": __import__("copy"), "re": __import__("re"), "logging": __import__("logging"),
          "lru_cache": __import__("functools").lru_cache,
          "logger": __import__("logging").getLogger("reference"), "TransformerConfig": object}
    enums = {}
    exec(compile(open(core_path("transformer", "enums.py")).read(), "enums", "exec"), enums)
    ns["LayerType"] = enums["LayerType"]
    lift(core_path("pipeline_parallel", "utils.py"), {"is_vp_first_stage", "is_vp_last_stage"}, ns)
    lift(core_path("transformer", "pipeline_parallel_layer_layout.py"), {"PipelineParallelLayerLayout"}, ns)
    lift(core_path("transformer", "transformer_block.py"), {"get_num_layers_to_build"}, ns)
    lift(core_path("transformer", "transformer_layer.py"), {"get_transformer_layer_offset"}, ns)
    # transformer_layer imports is_vp_first_stage inside the function from this module.
    utils = types.ModuleType("megatron.core.pipeline_parallel.utils")
    utils.is_vp_first_stage = ns["is_vp_first_stage"]
    utils.is_vp_last_stage = ns["is_vp_last_stage"]
    for name in ["megatron", "megatron.core", "megatron.core.pipeline_parallel"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["megatron.core.pipeline_parallel.utils"] = utils
    return ns, state


def run_case(ns, state, fields):
    layers, pp, vp, first, last, acc_e, acc_l, layout = fields
    vp_size = int(vp) if int(vp) > 1 else None
    config = types.SimpleNamespace(
        num_layers=int(layers), pipeline_model_parallel_size=int(pp),
        virtual_pipeline_model_parallel_size=vp_size,
        num_layers_in_first_pipeline_stage=None if first == "-" else int(first),
        num_layers_in_last_pipeline_stage=None if last == "-" else int(last),
        account_for_embedding_in_pipeline_split=acc_e == "1",
        account_for_loss_in_pipeline_split=acc_l == "1",
        pipeline_model_parallel_layout=None)
    lines = []
    if layout != "-":
        parsed = ns["PipelineParallelLayerLayout"](layout, int(pp))
        parsed.validate_layer_layout(int(layers), None)
        config.pipeline_model_parallel_layout = parsed
        vp_size = parsed.virtual_pipeline_model_parallel_size
        vp_size = vp_size if vp_size > 1 else None
        config.virtual_pipeline_model_parallel_size = vp_size
    state.vp_size = vp_size
    for r in range(int(pp)):
        state.pp_rank = r
        for v in range(vp_size or 1):
            stage = v if vp_size else None
            count = ns["get_num_layers_to_build"](config, vp_stage=stage, pp_rank=r)
            offset = ns["get_transformer_layer_offset"](config, vp_stage=stage, pp_rank=r)
            lines.append(f"{r} {v} {offset} {count}")
    if layout != "-":
        lines += ["repr " + line for line in config.pipeline_model_parallel_layout.pretty_repr().split("\n")]
    return lines


def main():
    ns, state = load()
    for k, line in enumerate(sys.stdin):
        fields = line.split()
        if not fields:
            continue
        print(f"case {k}")
        try:
            print("\n".join(run_case(ns, state, fields)))
        except Exception as e:  # Megatron rejects the case: report it for the test to compare
            print("error " + str(e).replace("\n", " "))


if __name__ == "__main__":
    main()
