"""Megatron-Core's own RankGenerator (megatron/core/parallel_state.py, core_v0.15.0 from the
project's venv), lifted out of the module with ast so none of its GPU imports run.

rank_generator_reference.py WORLD TP CP PP ORDER
    prints, one per line, "<token> <group> <group> ..." for the dense groups tp, cp, dp, pp,
    dp-cp and tp-pp, each group as comma-separated ranks.
"""
import ast
import importlib.util
import os
import sys


def load_rank_generator():
    # Found without importing megatron.core, whose __init__ pulls in GPU-only packages.
    spec = importlib.util.find_spec("megatron")
    path = os.path.join(list(spec.submodule_search_locations)[0], "core", "parallel_state.py")
    source = open(path).read()
    wanted = {"generate_masked_orthogonal_rank_groups", "RankGenerator"}
    nodes = [n for n in ast.parse(source).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in wanted]
    namespace = {"List": list}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), namespace)
    return namespace["RankGenerator"]


def main(world, tp, cp, pp, order):
    dp = world // (tp * cp * pp)
    gen = load_rank_generator()(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    for token in ["tp", "cp", "dp", "pp", "dp-cp", "tp-pp"]:
        groups = gen.get_ranks(token)
        print(token, " ".join(",".join(str(r) for r in g) for g in groups))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:5]), sys.argv[5])
