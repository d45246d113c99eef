#!/usr/bin/env python3
"""Independent reference for tests/checkpoint/hf_export.test.cpp and hf_mixtral.test.cpp: loads each exported folder with
PyPI transformers (GPT2LMHeadModel / LlamaForCausalLM / MixtralForCausalLM .from_pretrained) and checks its tensors with
PyPI safetensors (safetensors.torch.load_file), then computes the masked cross-entropy sum on the
case's batch.

Usage: hf_reference.py CASES.json OUT.json
CASES: [{"hf_dir": ..., "architecture": "GPT2LMHeadModel"|"LlamaForCausalLM"|"MixtralForCausalLM", "tokens": [[...]],
         "labels": [[...]], "loss_mask": [[...]]}, ...]
OUT:   [{"loss_sum": float, "num_tokens": float, "tensors": int}, ...]"""
import json
import os
import sys

import torch


def main():
    cases_path, out_path = sys.argv[1], sys.argv[2]
    try:
        import transformers
        from safetensors.torch import load_file
    except ImportError as e:
        sys.exit(f"hf_reference.py needs transformers and safetensors ({e}); run scripts/setup.sh")
    with open(cases_path) as f:
        cases = json.load(f)
    results = []
    for case in cases:
        cls = getattr(transformers, case["architecture"])
        model, info = cls.from_pretrained(case["hf_dir"], output_loading_info=True,
                                          torch_dtype=torch.float32)
        bad = {k: v for k, v in info.items() if v and k != "error_msgs" or (k == "error_msgs" and v)}
        if bad:
            sys.exit(f"{case['hf_dir']}: from_pretrained reported {bad}")
        model.eval()
        tensors = load_file(os.path.join(case["hf_dir"], "model.safetensors"))
        state = model.state_dict()
        for name, t in tensors.items():
            if t.dtype != torch.float32 or not torch.equal(state[name], t):
                sys.exit(f"{case['hf_dir']}: {name} differs between load_file and the model")
        tokens = torch.tensor(case["tokens"], dtype=torch.long)
        labels = torch.tensor(case["labels"], dtype=torch.long)
        mask = torch.tensor(case["loss_mask"], dtype=torch.float32)
        with torch.no_grad():
            logits = model(input_ids=tokens, use_cache=False).logits.float()
            losses = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
            loss_sum = (losses.double() * mask.reshape(-1).double()).sum().item()
        results.append({"loss_sum": loss_sum, "num_tokens": mask.sum().item(),
                        "tensors": len(tensors)})
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
