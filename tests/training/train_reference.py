"""PyTorch reference of Megatron's training loop for tests/training/pytorch_training.test.cpp:
the model of tests/model/gpt_reference.py, torch.optim.AdamW in Megatron's two parameter groups
(no weight decay on biases and 1-D weights), megatron-core 0.15.0's own OptimizerParamScheduler,
global-norm clipping and Megatron's loss scaling (each micro-batch's loss / its tokens / number of
micro-batches). The model and schedule settings are read from the Megatron flags themselves.
With --bf16, Megatron's Float16Module and mixed-precision optimizer: a bf16 copy of the model
computes (norms and loss in fp32), each micro-batch's bf16 gradients accumulate into fp32 main
gradients, and clipping and AdamW run on the fp32 main parameters, rounded into the bf16 copy
after each step. With --fp16 the same in fp16, with megatron-core's DynamicGradScaler: the loss
is scaled for the backward, the main gradients unscaled and checked, an overflowing step skipped
(no update, no schedule step, its loss left out of the log). With
--use-precision-aware-optimizer, Transformer Engine FusedAdam's storage of the two moments in
--exp-avg-dtype / --exp-avg-sq-dtype: rounded (and rescaled) after every step
(tests/model/te_state_storage.py), and with --main-params-dtype fp16 its fp16 master weights:
initialized from the 16-bit model's weights, stored (scaled) after each step once the model has
taken the fp32 update.

Usage: train_reference.py DIR. DIR holds flags.txt (one Megatron argument per line),
params.txt + param_<i>.bin (initial weights), batches.bin (every micro-batch of every iteration:
tokens, labels int32, loss_mask float32, position_ids int32). Writes DIR/reference.txt with one
line per iteration: "lm_loss grad_norm learning_rate"."""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
from gpt_reference import loss_sum, parameter_shapes  # noqa: E402
from optim_megatron_import import import_megatron_core_module  # noqa: E402
from te_state_storage import round_trip  # noqa: E402

OptimizerParamScheduler = import_megatron_core_module(
    "optimizer_param_scheduler").OptimizerParamScheduler


def megatron_flags(argv):
    """The flags this reference honours, with Megatron's defaults (arguments.py, core_v0.15.0)."""
    p = argparse.ArgumentParser(allow_abbrev=False)
    for name in ["--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
                 "--seq-length", "--max-position-embeddings", "--micro-batch-size",
                 "--global-batch-size", "--train-iters", "--vocab-size"]:
        p.add_argument(name, type=int)
    p.add_argument("--num-query-groups", type=int, default=1)
    p.add_argument("--kv-channels", type=int)
    p.add_argument("--lr-warmup-iters", type=int, default=0)
    p.add_argument("--lr-decay-iters", type=int)
    p.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    for name, default in [("--lr", None), ("--min-lr", 0.0), ("--lr-warmup-init", 0.0),
                          ("--weight-decay", 0.01), ("--clip-grad", 1.0), ("--adam-beta1", 0.9),
                          ("--adam-beta2", 0.999), ("--adam-eps", 1e-8), ("--norm-epsilon", 1e-5),
                          ("--rotary-base", 10000.0), ("--rotary-percent", 1.0)]:
        p.add_argument(name, type=float, default=default)
    p.add_argument("--lr-decay-style", default="linear")
    p.add_argument("--initial-loss-scale", type=float, default=2.0 ** 32)
    p.add_argument("--min-loss-scale", type=float, default=1.0)
    p.add_argument("--loss-scale-window", type=float, default=1000)
    p.add_argument("--hysteresis", type=int, default=2)
    p.add_argument("--normalization", default="LayerNorm")
    p.add_argument("--position-embedding-type", default="learned_absolute")
    p.add_argument("--exp-avg-dtype", default="fp32")
    p.add_argument("--exp-avg-sq-dtype", default="fp32")
    p.add_argument("--main-params-dtype", default="fp32")
    for name in ["--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights",
                 "--disable-bias-linear", "--apply-layernorm-1p", "--no-bias-gelu-fusion",
                 "--openai-gelu", "--bf16", "--fp16", "--use-precision-aware-optimizer",
                 "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16", "--calculate-per-token-loss",
                 "--optimizer-cpu-offload"]:
        p.add_argument(name, action="store_true")
    args, _ = p.parse_known_args(argv)
    return args


def model_config(a):
    """What core_transformer_config_from_args makes of the flags, in gpt_reference's keys."""
    bias = not a.disable_bias_linear
    vocab = a.vocab_size + 1  # Megatron's NullTokenizer appends the EOD token
    multiple = a.make_vocab_size_divisible_by
    return {
        "num_layers": a.num_layers, "hidden_size": a.hidden_size,
        "ffn_hidden_size": a.ffn_hidden_size or 4 * a.hidden_size,
        "num_attention_heads": a.num_attention_heads,
        "num_query_groups": a.num_query_groups if a.group_query_attention else a.num_attention_heads,
        "kv_channels": a.kv_channels or a.hidden_size // a.num_attention_heads,
        "seq_length": a.seq_length, "max_position_embeddings": a.max_position_embeddings,
        "padded_vocab_size": (vocab + multiple - 1) // multiple * multiple,
        "norm_epsilon": a.norm_epsilon, "rotary_base": a.rotary_base,
        "rotary_percent": a.rotary_percent, "apply_layernorm_1p": a.apply_layernorm_1p,
        "swiglu": a.swiglu,
        # Megatron's fused bias-GeLU (default on with biases) computes the tanh approximation.
        "gelu_tanh_approximation": a.openai_gelu or (bias and not a.swiglu and not a.no_bias_gelu_fusion),
        "add_bias_linear": bias,
        "untie_embeddings_and_output_weights": a.untie_embeddings_and_output_weights,
        "normalization": a.normalization, "position_embedding_type": a.position_embedding_type,
    }


def read_params(folder, shapes):
    with open(os.path.join(folder, "params.txt")) as f:
        names = [line.strip() for line in f if line.strip()]
    if sorted(names) != sorted(shapes):
        sys.exit(f"parameter names differ from Megatron's: got {sorted(names)}, expected {sorted(shapes)}")
    params = {}
    for i, name in enumerate(names):
        with open(os.path.join(folder, f"param_{i}.bin"), "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
        if data.numel() != torch.Size(shapes[name]).numel():
            sys.exit(f"{name}: {data.numel()} values, Megatron's shape is {shapes[name]}")
        params[name] = data.reshape(shapes[name]).clone().requires_grad_(True)
    return names, params


def read_batches(folder, count, b, s):
    with open(os.path.join(folder, "batches.bin"), "rb") as f:
        raw = bytearray(f.read())
    per = b * s * 4
    if len(raw) != count * 4 * per:
        sys.exit(f"batches.bin has {len(raw)} bytes, expected {count * 4 * per}")
    out = []
    for k in range(count):
        base = k * 4 * per

        def part(i, dtype):
            return torch.frombuffer(raw[base + i * per: base + (i + 1) * per], dtype=dtype).reshape(b, s)
        tokens, labels = part(0, torch.int32).long(), part(1, torch.int32).long()
        mask, positions = part(2, torch.float32).clone(), part(3, torch.int32).long()
        if not torch.equal(positions, torch.arange(s).expand(b, s)):
            sys.exit("position ids are not 0..seq-1; this reference handles only plain positions")
        out.append((tokens, labels, mask))
    return out


def dynamic_grad_scaler(a):
    """megatron-core's DynamicGradScaler (grad_scaler.py loaded on its own, tensors on the CPU)."""
    import importlib.util
    # megatron.core is optim_megatron_import's stub package here: its path is the real one.
    path = os.path.join(list(sys.modules["megatron.core"].__path__)[0], "optimizer", "grad_scaler.py")
    spec = importlib.util.spec_from_file_location("megatron_grad_scaler", path)
    module = importlib.util.module_from_spec(spec)
    tensor = torch.tensor
    torch.tensor = lambda *args, **kwargs: tensor(*args, **{k: v for k, v in kwargs.items() if k != "device"})
    try:
        spec.loader.exec_module(module)
        return module.DynamicGradScaler(
            initial_scale=a.initial_loss_scale, min_scale=a.min_loss_scale, growth_factor=2.0,
            backoff_factor=0.5, growth_interval=int(a.loss_scale_window), hysteresis=a.hysteresis)
    finally:
        torch.tensor = tensor


def main(folder):
    with open(os.path.join(folder, "flags.txt")) as f:
        a = megatron_flags([line.rstrip("\n") for line in f if line.strip()])
    cfg = model_config(a)
    names, params = read_params(folder, parameter_shapes(cfg))
    num_micro = a.global_batch_size // a.micro_batch_size  # one data-parallel rank
    batches = read_batches(folder, a.train_iters * num_micro, a.micro_batch_size, a.seq_length)

    # Megatron's get_param_groups: no weight decay for biases and 1-D parameters (norm weights).
    no_wd = [params[n] for n in names if n.endswith(".bias") or params[n].dim() == 1]
    wd = [params[n] for n in names if not (n.endswith(".bias") or params[n].dim() == 1)]
    optimizer = torch.optim.AdamW(
        [{"params": wd, "wd_mult": 1.0}, {"params": no_wd, "wd_mult": 0.0}], lr=a.lr,
        betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_eps, weight_decay=a.weight_decay)
    gbs = a.global_batch_size
    decay_iters = a.lr_decay_iters if a.lr_decay_iters is not None else a.train_iters
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=a.lr_warmup_init, max_lr=a.lr, min_lr=a.min_lr,
        lr_warmup_steps=a.lr_warmup_iters * gbs, lr_decay_steps=decay_iters * gbs,
        lr_decay_style=a.lr_decay_style, start_wd=a.weight_decay, end_wd=a.weight_decay,
        wd_incr_steps=a.train_iters * gbs, wd_incr_style="constant")

    lines = []
    every = list(params.values())
    half = torch.bfloat16 if a.bf16 else torch.float16 if a.fp16 else None
    # The parameters the model computes with: the main (fp32) ones, or their 16-bit copies.
    model = {n: p.detach().to(half).requires_grad_(True) for n, p in params.items()} if half else params
    scaler = dynamic_grad_scaler(a) if a.fp16 else None
    # TE FusedAdam's fp16 master weights of a 16-bit model: from the model's weights.
    # Megatron's --optimizer-cpu-offload builds HybridDeviceOptimizer instead: torch AdamW updating
    # fp32 parameters with fp32 moments (param_update_in_fp32), whatever the dtype flags say.
    te_storage = a.use_precision_aware_optimizer and not a.optimizer_cpu_offload
    fp16_master = te_storage and a.main_params_dtype == "fp16" and half is not None
    if fp16_master:
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(round_trip(model[n].detach().float(), "fp16"))
    # Megatron's grad buffer: fp32 with --accumulate-allreduce-grads-in-fp32 (on under --bf16
    # unless --grad-reduce-in-bf16), else the model's dtype (fp16's default).
    fp32_buffer = a.accumulate_allreduce_grads_in_fp32 or (a.bf16 and not a.grad_reduce_in_bf16)
    buffer_dtype = torch.float32 if fp32_buffer or not half else half
    for it in range(a.train_iters):
        for p in every:
            p.grad = torch.zeros_like(p) if half else None
        buffers = {n: torch.zeros_like(p, dtype=buffer_dtype) for n, p in params.items()}
        total, tokens = 0.0, 0.0
        for j in range(num_micro):
            t, l, m = batches[it * num_micro + j]
            count = m.sum()
            loss = loss_sum(cfg, model, t, l, m)
            scale = scaler.scale.item() if scaler else 1.0
            # Megatron: each micro-batch's mean over its tokens and the micro-batches, or with
            # --calculate-per-token-loss the sum, divided by the batch's tokens below.
            (loss * scale if a.calculate_per_token_loss else loss / count / num_micro * scale).backward()
            if half:  # Megatron's DDP hook: main_grad += param.grad, in the grad buffer's dtype
                for n, p in model.items():
                    if buffer_dtype == torch.float32:
                        params[n].grad += p.grad.float()
                    else:
                        buffers[n] += p.grad.to(buffer_dtype)
                    p.grad = None
            total += loss.item()
            tokens += count.item()
        if half and buffer_dtype != torch.float32:  # the optimizer's fp32 copy of main_grad
            for n, p in params.items():
                p.grad = buffers[n].float()
        if a.calculate_per_token_loss:  # finalize_model_grads' 1/num_tokens
            for p in every:
                p.grad.div_(tokens)
        if scaler:
            found_inf = any(not torch.isfinite(p.grad).all() for p in every)
            inv = scaler.inv_scale.item()
            for p in every:
                p.grad.mul_(inv)
            scaler.update(found_inf)
            if found_inf:
                lines.append(f"skipped {scaler.scale.item()!r} {optimizer.param_groups[0]['lr']!r}")
                continue
        norm = torch.nn.utils.clip_grad_norm_(every, a.clip_grad).item() if a.clip_grad > 0 else 0.0
        optimizer.step()
        if te_storage:  # TE FusedAdam keeps the moments in their dtypes
            with torch.no_grad():
                for p in every:
                    st = optimizer.state[p]
                    st["exp_avg"].copy_(round_trip(st["exp_avg"], a.exp_avg_dtype))
                    st["exp_avg_sq"].copy_(round_trip(st["exp_avg_sq"], a.exp_avg_sq_dtype))
        if half:
            with torch.no_grad():
                for n, p in model.items():
                    p.copy_(params[n].to(half))
        if fp16_master:  # after the model took the fp32 update
            with torch.no_grad():
                for p in every:
                    p.copy_(round_trip(p, "fp16"))
        scheduler.step(gbs)
        lines.append(f"{total / tokens!r} {norm!r} {optimizer.param_groups[0]['lr']!r} "
                     f"{scaler.scale.item() if scaler else 1.0!r}")
    with open(os.path.join(folder, "reference.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
