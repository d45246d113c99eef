"""megatron-core's own fused weighted squared ReLU (megatron/core/fusions/fused_weighted_squared_relu.py,
what TEGroupedMLP runs under --use-fused-weighted-squared-relu) on the rows mactor's test writes:
the reference for mactor's weighted_squared_relu kernels.

weighted_squared_relu_reference.py fp32 IN OUT
    IN: {"rows": r, "width": w, "x": [r * w], "weights": [r], "dy": [r * w]}
    OUT: {"y": [r * w], "dx": [r * w], "dweights": [r]}, all computed in fp32. A 16-bit model's
    kernel, compiled by torch.compile (PyTorch >= 2.2), computes these same fp32 values from its
    widened inputs and rounds each output once; the test rounds them itself.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from megatron_packages import stub_megatron_packages  # noqa: E402

stub_megatron_packages()
import types  # noqa: E402

import torch  # noqa: E402

# megatron.core.utils pulls in parallel_state (torch.distributed code Debian's torch lacks); the
# module needs only its jit decorator and nvtx_decorator, stubbed as plain calls. jit_fuser is
# torch.compile on PyTorch >= 2.2, whose fused kernel computes the same fp32 arithmetic.
_jit = types.ModuleType("megatron.core.jit")
_jit.jit_fuser = lambda f: f
_utils = types.ModuleType("megatron.core.utils")
_utils.nvtx_decorator = lambda *a, **k: (lambda f: f)
sys.modules.update({"megatron.core.jit": _jit, "megatron.core.utils": _utils})
from megatron.core.fusions.fused_weighted_squared_relu import weighted_squared_relu_impl  # noqa: E402


def main():
    mode, path_in, path_out = sys.argv[1:4]
    assert mode == "fp32", mode
    with open(path_in) as f:
        case = json.load(f)
    rows, width = case["rows"], case["width"]
    x = torch.tensor(case["x"], dtype=torch.float32).view(rows, width).requires_grad_()
    weights = torch.tensor(case["weights"], dtype=torch.float32).view(rows, 1).requires_grad_()
    dy = torch.tensor(case["dy"], dtype=torch.float32).view(rows, width)
    y = weighted_squared_relu_impl(x, weights)
    y.backward(dy)
    with open(path_out, "w") as f:
        json.dump({"y": y.detach().flatten().tolist(), "dx": x.grad.flatten().tolist(),
                   "dweights": weights.grad.flatten().tolist()}, f)


if __name__ == "__main__":
    main()
