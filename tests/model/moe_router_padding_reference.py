"""megatron-core's own pad_routing_map (megatron/core/transformer/moe/moe_utils.py) on routing maps
mactor's test writes: the reference for --moe-router-padding-for-fp8.

moe_router_padding_reference.py pad IN OUT
    IN: {"cases": [{"map": [[0/1 per expert] per token], "pad": multiple}, ...]}
    OUT: {"padded": [[[0/1 per expert] per token], ...]}
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from megatron_packages import stub_megatron_packages  # noqa: E402

stub_megatron_packages()
import torch  # noqa: E402
from megatron.core.transformer.moe.moe_utils import pad_routing_map  # noqa: E402


def main():
    mode, path_in, path_out = sys.argv[1:4]
    assert mode == "pad", mode
    with open(path_in) as f:
        cases = json.load(f)["cases"]
    padded = []
    for case in cases:
        routing_map = torch.tensor(case["map"], dtype=torch.bool)
        padded.append(pad_routing_map(routing_map, case["pad"]).int().tolist())
    with open(path_out, "w") as f:
        json.dump({"padded": padded}, f)


if __name__ == "__main__":
    main()
