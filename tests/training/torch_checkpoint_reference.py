"""PyPI torch as the reference for mactor's --ckpt-format torch checkpoints.

  compare <torch_dir> <torch_iteration> <dist_dir> <dist_iteration> [--model-only]
      torch.load every iter_N/mp_rank_*/model_optim_rng.pt of torch_dir and check each model
      tensor (and, unless --model-only, each Adam moment) against the global tensor mactor's
      torch_dist checkpoint of the same training holds (its metadata.json and raw float32 shard
      files, read here directly): each local tensor must be this rank's tensor-parallel slice
      (rows, columns, SwiGLU [gate; up] halves, or the whole tensor); also iteration, consumed
      samples, the LR scheduler state and the dtype.
  distrib <torch_dir> <torch_iteration> <dist_dir> <dist_iteration>
      --use-distributed-optimizer: torch.load each rank's distrib_optim.pt and check it is what
      Megatron's DistributedOptimizer.save_parameter_state writes: per gradient buffer (one per
      model chunk) the fp32 'param', 'exp_avg' and 'exp_avg_sq' world tensors in the layout of
      Megatron's _ParamAndGradBuffer (simulated here from the model's parameters: reverse order,
      64-aligned starts, a bucket of its own for the tied embedding across stages, buckets padded
      to lcm(dp, 128) and the padding dropped), each parameter's run equal to this rank's slice of
      the torch_dist run's tensors; the model file's optimizer holds param groups with 'step' only.
  same <dir_a> <dir_b> <iteration>
      two torch-format checkpoints hold identical tensors (model and optimizer) and positions.
  megatron <template_dir> <out_dir> <iteration> <seed>
      write a checkpoint the way Megatron's save_checkpoint builds its state dict (args Namespace,
      checkpoint_version, iteration, model (TE _extra_state entries too), optimizer,
      opt_param_scheduler, rng_state with Python/numpy/torch generator states,
      num_floating_point_operations_so_far) with new random weights, in the template's layout.
"""
import argparse
import collections
import glob
import json
import math
import os
import random
import re
import sys

import numpy as np
import torch


def torch_files(root, iteration):
    files = sorted(glob.glob(os.path.join(root, "iter_%07d" % iteration, "mp_rank_*", "model_optim_rng.pt")))
    assert files, "no torch-format files under %s" % root
    out = {}
    for f in files:
        m = re.match(r"mp_rank_(\d\d)(?:_(\d\d\d))?$", os.path.basename(os.path.dirname(f)))
        assert m, f
        out[(int(m.group(1)), int(m.group(2) or 0))] = torch.load(f, map_location="cpu", weights_only=False)
    return out


def dist_tensors(root, iteration):
    d = os.path.join(root, "iter_%07d" % iteration)
    meta = json.load(open(os.path.join(d, "metadata.json")))
    common = json.load(open(os.path.join(d, "common.json")))
    out = {}
    for name, t in meta["tensors"].items():
        full = np.zeros(t["global_shape"], dtype=np.float32)
        for p in t["pieces"]:
            with open(os.path.join(d, p["file"]), "rb") as f:
                f.seek(p["byte_offset"])
                data = np.frombuffer(f.read(p["length"]), dtype="<f4")
            where = tuple(slice(o, o + s) for o, s in zip(p["offset"], p["shape"]))
            if p["flat_range"] is None:
                full[where] = data.reshape(p["shape"])
            else:  # a distributed-optimizer range of the slice's flattened elements
                block = full[where].copy().reshape(-1)
                block[p["flat_range"][0]:p["flat_range"][1]] = data
                full[where] = block.reshape(p["shape"])
        out[name] = torch.from_numpy(full)
    return out, common


def is_slice(local, full, t, tp):
    """local is rank t of tp's tensor-parallel part of full (any of Megatron's splits)."""
    if local.shape == full.shape:
        return torch.equal(local, full)
    if local.dim() >= 1 and local.shape[0] * tp == full.shape[0]:
        n = local.shape[0]
        if torch.equal(local, full[t * n:(t + 1) * n]):
            return True
        h, q = full.shape[0] // 2, n // 2  # SwiGLU fc1: [gate_t; up_t]
        if torch.equal(local, torch.cat([full[t * q:(t + 1) * q], full[h + t * q:h + (t + 1) * q]])):
            return True
    if local.dim() == 2 and local.shape[1] * tp == full.shape[1]:
        n = local.shape[1]
        return torch.equal(local, full[:, t * n:(t + 1) * n])
    return False


def model_dicts(sd):
    return [v for k, v in sorted(sd.items(), key=lambda kv: str(kv[0])) if re.fullmatch(r"model\d*", str(k))]


def compare(torch_dir, iteration, dist_dir, dist_iteration, model_only):
    files = torch_files(torch_dir, iteration)
    full, common = dist_tensors(dist_dir, dist_iteration)
    tp = 1 + max(t for t, _ in files)
    checked = set()
    for (t, p), sd in files.items():
        args = sd["args"]
        assert isinstance(args, argparse.Namespace), type(args)
        assert args.tensor_model_parallel_size == tp, (args.tensor_model_parallel_size, tp)
        assert sd["checkpoint_version"] == 3.0
        if not model_only:
            assert sd["iteration"] == iteration == common["iteration"], (sd["iteration"], iteration)
            assert args.consumed_train_samples == common["args"]["consumed_train_samples"]
            assert sd["opt_param_scheduler"] == common["opt_param_scheduler"], (sd["opt_param_scheduler"], common["opt_param_scheduler"])
        want_dtype = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32
        for model in model_dicts(sd):
            assert isinstance(model, collections.OrderedDict)
            for name, local in model.items():
                if name.endswith("_extra_state"):
                    continue
                assert local.dtype == want_dtype, (name, local.dtype)
                if name == "output_layer.weight" and name not in full:  # the tied embedding's copy
                    assert p > 0 and not args.untie_embeddings_and_output_weights, (t, p)
                    name = "embedding.word_embeddings.weight"
                assert name in full, "%s not in the torch_dist checkpoint" % name
                ref = full[name].to(want_dtype).float()
                assert is_slice(local.float(), ref, t, tp), "%s of mp_rank %d/%d differs" % (name, t, p)
                checked.add(name)
        if model_only:
            continue
        opt = sd["optimizer"]["optimizer"]
        group = opt["param_groups"][0]
        for idx, name in zip(group["params"], group["param_names"]):
            for kind in ("exp_avg", "exp_avg_sq"):
                local = opt["state"][idx][kind]
                assert local.dtype == torch.float32
                assert is_slice(local, full["optimizer.state.%s.%s" % (kind, name)], t, tp), (kind, name, t, p)
                checked.add(kind + name)
            assert opt["state"][idx]["step"] == common["optimizer"]["step"]
    model_names = {n for n in full if not n.startswith("optimizer.")}
    assert model_names <= checked, "not in the torch files: %s" % sorted(model_names - checked)
    print("compared %d tensors of %d files" % (len(checked), len(files)))


def megatron_buffer(model, shared, dp):
    """name -> offset in the world tensors, and their length: Megatron's _ParamAndGradBuffer
    index bookkeeping with the distributed optimizer, then its buckets' padding dropped."""
    divisor = math.lcm(dp, 128)
    index, bucket_start, in_bucket, buckets, where = 0, 0, [], [], {}

    def close(end):
        nonlocal bucket_start, in_bucket
        buckets.append((bucket_start, end, in_bucket))
        bucket_start = -(-end // divisor) * divisor
        in_bucket = []
        return bucket_start

    for name in reversed(list(model)):
        index = -(-index // 64) * 64
        if shared(name) and in_bucket:
            index = close(index)
        where[name] = index
        in_bucket.append(name)
        index += model[name].numel()
        if shared(name):
            index = close(index)
    if in_bucket:
        close(index)
    offsets, world = {}, 0
    for start, end, names in buckets:
        for name in names:
            offsets[name] = world + where[name] - start
        world += end - start
    return offsets, world


def distrib(torch_dir, iteration, dist_dir, dist_iteration):
    files = torch_files(torch_dir, iteration)
    full, common = dist_tensors(dist_dir, dist_iteration)
    tp = 1 + max(t for t, _ in files)
    checked = 0
    for (t, p), sd in files.items():
        args = sd["args"]
        assert args.use_distributed_optimizer
        name = "mp_rank_%02d" % t if args.pipeline_model_parallel_size == 1 else "mp_rank_%02d_%03d" % (t, p)
        optim = torch.load(os.path.join(torch_dir, "iter_%07d" % iteration, name, "distrib_optim.pt"),
                           map_location="cpu", weights_only=False)
        assert optim["buckets_coalesced"] is True
        opt = sd["optimizer"]["optimizer"]
        assert "state" not in opt and opt["param_groups"], opt.keys()
        for g in opt["param_groups"]:
            assert g["step"] == common["optimizer"]["step"], (g["step"], common["optimizer"]["step"])
        param_dtype = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32
        tied = args.pipeline_model_parallel_size > 1 and not args.untie_embeddings_and_output_weights
        shared = lambda n: tied and n in ("embedding.word_embeddings.weight", "output_layer.weight")
        models = model_dicts(sd)
        assert sorted(k for k in optim if k != "buckets_coalesced") == list(range(len(models)))
        for g, model in enumerate(models):
            model = collections.OrderedDict((k, v) for k, v in model.items() if not k.endswith("_extra_state"))
            (key, buf), = optim[g].items()
            assert key == (param_dtype, torch.float32), key
            offsets, numel = megatron_buffer(model, shared, args.data_parallel_size)
            assert buf["numel_unpadded"] == numel, (buf["numel_unpadded"], numel)
            covered = torch.zeros(numel, dtype=torch.bool)
            for n, local in model.items():
                ref = "embedding.word_embeddings.weight" if n == "output_layer.weight" and n not in full else n
                o = offsets[n]
                covered[o:o + local.numel()] = True
                for kind, want in (("param", full[ref]), ("exp_avg", full["optimizer.state.exp_avg." + ref]),
                                   ("exp_avg_sq", full["optimizer.state.exp_avg_sq." + ref])):
                    got = buf[kind][o:o + local.numel()].reshape(local.shape)
                    assert buf[kind].dtype == torch.float32 and buf[kind].numel() == numel
                    assert is_slice(got, want, t, tp), "%s of %s, mp_rank %d/%d, buffer %d" % (kind, n, t, p, g)
                    checked += 1
            for kind in ("param", "exp_avg", "exp_avg_sq"):  # the 64-alignment gaps are zeros
                assert torch.count_nonzero(buf[kind][~covered]) == 0, kind
    print("checked %d world-tensor runs of %d files" % (checked, len(files)))


def same(a, b, iteration):
    fa, fb = torch_files(a, iteration), torch_files(b, iteration)
    assert fa.keys() == fb.keys()
    n = 0

    def walk(x, y, where):
        nonlocal n
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), where
            n += 1
        elif isinstance(x, dict):
            assert x.keys() == y.keys(), where
            for k in x:
                walk(x[k], y[k], "%s.%s" % (where, k))
        elif isinstance(x, (list, tuple)):
            assert len(x) == len(y), where
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, "%s[%d]" % (where, i))
        else:
            assert x == y, (where, x, y)

    for key in fa:
        for part in ("iteration", "optimizer", "opt_param_scheduler", "num_floating_point_operations_so_far") + tuple(
                k for k in fa[key] if str(k).startswith("model")):
            walk(fa[key][part], fb[key][part], part)
        assert fa[key]["args"].consumed_train_samples == fb[key]["args"].consumed_train_samples
    for f in sorted(glob.glob(os.path.join(a, "iter_%07d" % iteration, "mp_rank_*", "distrib_optim.pt"))):
        other = os.path.join(b, os.path.relpath(f, a))
        walk(torch.load(f, weights_only=False), torch.load(other, weights_only=False), os.path.relpath(f, a))
    print("identical: %d tensors" % n)


def megatron(template, out, iteration, seed):
    it = int(open(os.path.join(template, "latest_checkpointed_iteration.txt")).read())
    files = torch_files(template, it)
    gen = torch.Generator().manual_seed(seed)
    shared = {}
    for (t, p), tsd in files.items():
        pp = tsd["args"].pipeline_model_parallel_size
        # megatron/training/checkpointing.py save_checkpoint -> generate_state_dict
        state_dict = {}
        state_dict["args"] = argparse.Namespace(**vars(tsd["args"]))
        state_dict["checkpoint_version"] = 3.0
        state_dict["iteration"] = iteration
        for key in [k for k in tsd if re.fullmatch(r"model\d*", str(k))]:
            model = collections.OrderedDict()
            for name, v in tsd[key].items():
                # A tensor every tensor-parallel rank holds whole (norms, position embeddings,
                # row-parallel biases) is the same on each, as in Megatron; the template tells.
                copies = [f[key][name] for (t2, p2), f in files.items() if p2 == p]
                replicated = all(c.shape == v.shape and torch.equal(c, v) for c in copies)
                if replicated and (key, name, p) in shared:
                    model[name] = shared[(key, name, p)]
                else:
                    model[name] = (torch.randn(v.shape, generator=gen) * 0.05).to(v.dtype)
                    if replicated:
                        shared[(key, name, p)] = model[name]
                if name.endswith(".weight") and "linear" in name:
                    model[name.rsplit(".", 1)[0] + "._extra_state"] = None  # TransformerEngine's
            state_dict[key] = model
        state_dict["optimizer"] = {"optimizer": {"state": {}, "param_groups": []}}
        state_dict["opt_param_scheduler"] = tsd["opt_param_scheduler"]
        state_dict["rng_state"] = [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                                    "torch_rng_state": torch.get_rng_state(), "rng_tracker_states": {}}]
        state_dict["num_floating_point_operations_so_far"] = 0
        name = "mp_rank_%02d" % t if pp == 1 else "mp_rank_%02d_%03d" % (t, p)
        os.makedirs(os.path.join(out, "iter_%07d" % iteration, name), exist_ok=True)
        torch.save(state_dict, os.path.join(out, "iter_%07d" % iteration, name, "model_optim_rng.pt"))
    with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(iteration))
    print("wrote %d files" % len(files))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "compare":
        compare(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), "--model-only" in sys.argv)
    elif cmd == "distrib":
        distrib(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    elif cmd == "same":
        same(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "megatron":
        megatron(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
