"""PyTorch side of bench_train_step: the same GPT (tests/model/gpt_reference.py) trained with a
plain SGD step on the CPU; prints one RESULT line that bench_train_step parses."""
import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "model"))
import gpt_reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for name in ["layers", "hidden", "heads", "seq", "vocab", "batch", "iters", "threads"]:
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--style", choices=["gpt2", "llama"], default="gpt2")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    llama = a.style == "llama"
    cfg = {"num_layers": a.layers, "hidden_size": a.hidden, "ffn_hidden_size": 4 * a.hidden,
           "num_attention_heads": a.heads, "num_query_groups": a.heads // 2 if llama else a.heads,
           "kv_channels": a.hidden // a.heads, "seq_length": a.seq,
           "max_position_embeddings": a.seq, "padded_vocab_size": a.vocab,
           "norm_epsilon": 1e-5, "rotary_base": 10000.0, "rotary_percent": 1.0,
           "apply_layernorm_1p": False, "swiglu": llama, "gelu_tanh_approximation": False,
           "add_bias_linear": not llama, "untie_embeddings_and_output_weights": llama,
           "normalization": "RMSNorm" if llama else "LayerNorm",
           "position_embedding_type": "rope" if llama else "learned_absolute"}
    params = {}
    for name, shape in gpt_reference.parameter_shapes(cfg).items():
        t = torch.ones(shape) if len(shape) == 1 and name.endswith("weight") else (
            torch.zeros(shape) if len(shape) == 1 else torch.randn(shape) * 0.02)
        params[name] = t.requires_grad_(True)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq))
    labels = torch.randint(0, a.vocab, (a.batch, a.seq))
    mask = torch.ones(a.batch, a.seq)

    def step():
        loss = gpt_reference.loss_sum(cfg, params, tokens, labels, mask)
        (loss / mask.sum()).backward()
        with torch.no_grad():
            for p in params.values():
                p -= 1e-3 * p.grad
                p.grad = None
        return loss.item()

    for _ in range(2):
        step()
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(a.iters):
        step()
    seconds = (time.perf_counter() - start) / a.iters
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_end.ru_utime + cpu_end.ru_stime - cpu_start.ru_utime - cpu_start.ru_stime) / a.iters
    gemm_ops = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
    with torch.autograd.profiler.profile() as prof:
        step()
    events = prof.key_averages()
    gemm_us = sum(e.self_cpu_time_total for e in events if e.key in gemm_ops)
    total_us = sum(e.self_cpu_time_total for e in events)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"RESULT ms_per_iter={seconds * 1e3:.3f} tokens_per_s={a.batch * a.seq / seconds:.1f} "
          f"gemm_share={gemm_us / max(total_us, 1):.3f} peak_rss_mb={rss_mb:.1f} "
          f"cpu_ms_per_iter={cpu * 1e3:.3f}")


if __name__ == "__main__":
    main()
