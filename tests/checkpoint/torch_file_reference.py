"""PyPI torch as the reference for mactor's torch.save files (checkpoint/torch_file.*).

  torch_file_reference.py check <file>   torch.load a file mactor wrote; assert its contents
  torch_file_reference.py write <file>   torch.save the file mactor's reader is tested on

Both sides compute the expected values from the same formulas (not from each other's output).
"""
import argparse
import collections
import math
import sys

import numpy as np
import torch


def expected_f32():
    return torch.tensor([[i * 0.25 - 1.0 for i in range(4 * r, 4 * r + 4)] for r in range(3)], dtype=torch.float32)


def expected_bf16_source():
    return torch.tensor([i * 1.37 + 0.1 for i in range(5)], dtype=torch.float32)


def check(path):
    sd = torch.load(path, map_location="cpu", weights_only=False)
    assert isinstance(sd, dict), type(sd)
    assert torch.equal(sd["f32"], expected_f32()), sd["f32"]
    assert sd["f32"].dtype == torch.float32
    bf = sd["bf16"]
    assert bf.dtype == torch.bfloat16 and bf.shape == (5,), (bf.dtype, bf.shape)
    assert torch.equal(bf, expected_bf16_source().to(torch.bfloat16)), bf
    assert sd["i64"].dtype == torch.int64 and sd["i64"].tolist() == [-3, 0, 1 << 40], sd["i64"]
    ns = sd["ns"]
    assert isinstance(ns, argparse.Namespace), type(ns)
    assert ns.a == 1 and ns.b == "x" and ns.c == 2.5 and ns.d is None and ns.e is True, vars(ns)
    assert ns.f == [1, 2] and ns.big == 2 ** 40 and ns.neg == -7 and ns.neg_big == -(2 ** 40), vars(ns)
    od = sd["od"]
    assert isinstance(od, collections.OrderedDict) and list(od.items()) == [("k1", 1), ("k2", "v")], od
    assert sd["by"] == b"\x00\xff\x80a", sd["by"]
    assert sd["tu"] == (1, "two", 3.0), sd["tu"]
    assert sd[7] == "int key"
    assert math.isclose(sd["pi"], math.pi, rel_tol=0, abs_tol=0), sd["pi"]
    assert sd["empty"] == {} and sd["empty_list"] == [] and sd["empty_tuple"] == ()
    print("torch.load read mactor's file:", sorted(str(k) for k in sd))


def write(path):
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5
    sd = collections.OrderedDict()
    sd["w"] = w
    sd["wt"] = w.t()                  # a strided view of w's storage
    sd["row"] = w[1]                  # a view at storage offset 4
    sd["bf"] = (torch.arange(6, dtype=torch.float32) / 3).to(torch.bfloat16)
    sd["half"] = (torch.arange(4, dtype=torch.float32) - 1.5).half()
    sd["f64"] = torch.tensor([0.1, -2.0], dtype=torch.float64)
    sd["args"] = argparse.Namespace(tensor_model_parallel_size=2, lr=0.5, name="x", flag=False, nothing=None,
                                    layers=[1, 2, 3])
    sd["rng_state"] = [{"random_rng_state": ("state", (1, 2, 3), None),
                        "np_rng_state": np.random.RandomState(5).get_state(),
                        "torch_rng_state": torch.get_rng_state()}]
    sd["optimizer"] = {"state": {0: {"step": torch.tensor(3.0)}, 1: {"step": 4}}, "param_groups": [{"params": [0, 1]}]}
    sd["checkpoint_version"] = 3.0
    sd["by"] = b"\x01\xfe"
    torch.save(sd, path)


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
