"""Megatron-LM core_v0.15.0's functional-test flag sets (a table in tests/config/data/) through pretrain_gpt
(pretrain_mamba for the hybrid family, as Megatron's hybrid tests run pretrain_mamba.py).

Each flag set Megatron itself accepts runs as written apart from its data: the /data/... paths are
dropped (--save goes to a scratch folder), --mock-data and a NullTokenizer stand in for the corpus,
and the model is shrunk (heads cut to 8 where the layout allows, hidden 8 x heads, seq 64,
micro-batch 1, 2 iterations, 2 layers per pipeline stage or per virtual stage where the set's own
layer structure allows: see fewer_layers) on tp x pp x cp
processes (one data-parallel replica, or as many as --num-distributed-optimizer-instances asks, or two
for FSDP's sets), or as many more as the experts' etp x ep x pp (x the instances) needs (at most 8: a
larger ep is halved).
A set with a flag mactor has not built yet must be refused
with exit 2 naming it; every other set must train its 2 iterations. At least MIN_TRAINED sets must
train (MIN_TRAINED, or the fourth argument), so a flag that stops working fails this test.

A set that injects errors into Megatron's result validation (--error-injection-rate) may end as
Megatron's own run of it ends once an error is drawn, and that counts as trained: a transient error
exits 17 after "Possible transient error!!", a persistent one (or a correct result) exits 16 after
"Saving a checkpoint and exiting now" (Megatron's functional tests check those lines, not the
exit code). Which validation draws the error depends on the random stream, so either ending counts.

functional_flag_sets.py BIN_DIR TSV SCRATCH_DIR
"""
import collections
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

# The sets that must train, per table (2026-12-04). GPT: 118 of 123 (+2: the wandb sets, +2: the FSDP
# sets); Megatron refuses the other 5. MoE (moe and mixtral families): see the table's test in
# tests/training/CMakeLists.txt.
MIN_TRAINED = {"megatron_gpt_functional_tests.tsv": 118, "megatron_hybrid_functional_tests.tsv": 4}


def shrunk(name, flags, scratch):
    toks = shlex.split(flags)
    out, i = [], 0
    while i < len(toks):
        # A path of Megatron's CI machines, or a variable its scripts fill in ('$DATA_BLEND').
        if i + 1 < len(toks) and (toks[i + 1].startswith("/data/") or toks[i + 1].startswith("$")):
            if toks[i] == "--save":
                out += ["--save", os.path.join(scratch, name)]
            elif toks[i] == "--tensorboard-dir":
                out += ["--tensorboard-dir", os.path.join(scratch, name + "_tb")]
            elif toks[i] == "--wandb-exp-name":  # a run name, not a path
                out += ["--wandb-exp-name", name]
            elif toks[i] == "--wandb-save-dir":
                out += ["--wandb-save-dir", os.path.join(scratch, name + "_wandb")]
            i += 2
            continue
        out.append(toks[i])
        i += 1

    def value(flag, default):
        return int(toks[toks.index(flag) + 1]) if flag in toks else default

    tp, pp = value("--tensor-model-parallel-size", 1), value("--pipeline-model-parallel-size", 1)
    cp = value("--context-parallel-size", 1)
    # Partial distributed-optimizer sharding needs that many data-parallel replicas.
    optimizer_instances = instances = value("--num-distributed-optimizer-instances", 1)
    # FSDP shards over the data-parallel replicas: two of them, so that it shards.
    if "--use-megatron-fsdp" in toks or "--use-torch-fsdp2" in toks:
        instances = max(instances, 2)
    # The experts' layout (etp x ep x pp) must divide the world as the dense one does, and the
    # expert-data-parallel replicas split into the optimizer instances; past 8 ranks the
    # expert-parallel size is halved (the layout's kind kept, its size shrunk).
    ep, etp = value("--expert-model-parallel-size", 1), value("--expert-tensor-parallel-size", tp)
    while True:
        world = math.lcm(tp * pp * cp * instances, etp * ep * pp * optimizer_instances)
        if world <= 8 or ep == 1:
            break
        ep //= 2
    if "--expert-model-parallel-size" in toks:
        out += ["--expert-model-parallel-size", str(ep)]
    dp = world // (tp * pp * cp)
    heads = value("--num-attention-heads", 8)
    # 8 heads where the layout allows (Mixtral's 32 would make the model 256 wide, DeepSeek-V3's
    # 128 1024 wide, and an 8-rank set of them run 6x longer): the fewest heads, at least 8, that
    # divide the set's own, hold its query groups (with --group-query-attention) and split over
    # tp x cp as its heads do.
    groups = value("--num-query-groups", 1) if "--group-query-attention" in toks else 1
    unit = math.lcm(tp * cp, groups)
    fewer = next((h for h in range(unit, heads, unit) if h >= 8 and heads % h == 0), heads)
    if fewer < heads:
        heads = fewer
        out += ["--num-attention-heads", str(heads)]
    # Two microbatches per stage, or two groups where the set fixes the interleaved group size
    # (Megatron needs microbatches % group to be 0 or at least pp).
    microbatches = 2 * value("--microbatch-group-size-per-virtual-pipeline-stage", pp)
    out += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "8191",
            "--hidden-size", str(8 * heads), "--ffn-hidden-size", str(32 * heads),
            "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "1",
            "--global-batch-size", str(microbatches * dp), "--eval-iters", "1",
            "--eval-interval", "2", "--exit-interval", "0", "--save-interval", "2", "--log-interval", "1"]
    # A sample-based run stays sample-based (Megatron refuses --lr-warmup-samples with --train-iters).
    out += ["--train-samples", str(2 * microbatches * dp)] if "--train-samples" in toks else ["--train-iters", "2"]
    if "--rampup-batch-size" in toks:
        # A ramp that fits the shrunk batch: 1 sample at batch 1, then full batches; 2 iterations.
        out += ["--rampup-batch-size", "1", "1", "1", "--train-samples", str(1 + microbatches * dp)]
    layers = fewer_layers(toks, pp)
    if layers is not None:
        out += ["--num-layers", str(layers)]
    if "--kv-channels" in toks:
        out += ["--kv-channels", "8"]
    if "--is-hybrid-model" in toks:
        # Mamba heads of 8 and a state of 16 (Megatron's 64 and 128 would leave the shrunk
        # model's 2 * hidden / 64 heads fewer than its 8 groups).
        out += ["--mamba-head-dim", "8", "--mamba-state-dim", "16"]
    # Multi-latent attention's own widths (DeepSeek's 1536/512/128/64/128 would hold gigabytes
    # on 8 ranks of a 2-core machine) and the experts' widths as the hidden size (the fp8 sets
    # round every expert weight for each GEMM).
    for flag, width in (("--q-lora-rank", 16), ("--kv-lora-rank", 8), ("--qk-head-dim", 8),
                        ("--qk-pos-emb-head-dim", 4), ("--v-head-dim", 8), ("--moe-ffn-hidden-size", 8 * heads),
                        ("--moe-shared-expert-intermediate-size", 8 * heads)):
        if flag in toks:
            out += [flag, str(width)]
    return world, out


# Flags that tie the layer count to a structure of the set's own (a layout string, a pattern, uneven
# first or last stages, a per-layer list, embedding or loss counted as layers, bf16 end layers): a set
# with one keeps its layer count.
LAYER_STRUCTURE = ("--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers",
                   "--decoder-last-pipeline-num-layers", "--hybrid-override-pattern",
                   "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                   "--first-last-layers-bf16", "--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16")


def fewer_layers(toks, pp):
    """The layer count a set trains with: its own, or where its layers are uniform (no LAYER_STRUCTURE
    flag, no per-layer --moe-layer-freq list) the fewest that keep its shape: 2 per pipeline stage
    (the layer count of the 345M sets' 12 adds startup-free compute, not code paths), 1 per virtual
    stage with --num-virtual-stages-per-pipeline-rank, the set's own per virtual stage and 2 virtual
    stages with --num-layers-per-virtual-pipeline-stage, and a MoE layer among them
    (--moe-layer-freq k: layer 0 is one)."""
    own = int(toks[toks.index("--num-layers") + 1]) if "--num-layers" in toks else None
    if own is None or any(flag in toks for flag in LAYER_STRUCTURE):
        return own
    if "--moe-layer-freq" in toks and not toks[toks.index("--moe-layer-freq") + 1].isdigit():
        return own
    if "--num-virtual-stages-per-pipeline-rank" in toks:
        fewer = pp * int(toks[toks.index("--num-virtual-stages-per-pipeline-rank") + 1])
    elif "--num-layers-per-virtual-pipeline-stage" in toks:
        fewer = pp * int(toks[toks.index("--num-layers-per-virtual-pipeline-stage") + 1]) * 2
    else:
        fewer = 2 * pp
    return min(own, fewer)


def ended_by_injected_error(args, p):
    """Megatron's ending of a run whose injected error was drawn (rerun_state_machine.py)."""
    if "--error-injection-rate" not in args:
        return False
    kind = args[args.index("--error-injection-type") + 1] if "--error-injection-type" in args else "transient_error"
    if kind == "transient_error":
        return p.returncode == 17 and "Possible transient error!!" in p.stderr
    return p.returncode == 16 and "Saving a checkpoint and exiting now" in p.stderr


def main(bin_dir, tsv, scratch, min_trained=None):
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    rows = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip() and not l.startswith("#")]
    trained, waiting, failed = [], collections.Counter(), []
    for row in rows:
        name, flags = row[0], row[1]
        env_text = row[2] if len(row) > 2 else ""
        if len(row) > 3 and row[3]:
            continue  # Megatron's own validation refuses it
        ranks, args = shrunk(name, flags, scratch)
        if ranks > 8:  # past 8 ranks the runner does not go (the layout's dense part needs them)
            waiting.update([f"more than 8 ranks ({ranks})"])
            print(f"skipped         {ranks} rank(s)  {name}: its dense layout needs more than 8 ranks")
            continue
        program = os.path.join(bin_dir, "pretrain_mamba" if name.startswith("hybrid/") else "pretrain_gpt")
        command = [program] + args if ranks == 1 else [os.path.join(bin_dir, "mactor"), "-np", str(ranks),
                                                      "--oversubscribe", program] + args
        env = dict(os.environ)
        env.update(kv.split("=", 1) for kv in shlex.split(env_text) if "=" in kv)
        env.setdefault("NCCL_ALGO", "Ring")
        # --wandb-project sets: the wandb package of this Python, no network and no files.
        env.setdefault("MACTOR_PYTHON", sys.executable)
        env.setdefault("WANDB_MODE", "disabled")
        start = time.time()
        try:
            p = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            failed.append((name, "timed out after 300 s"))
            print(f"FAILED   300 s  {ranks} rank(s)  {name}: timed out")
            continue
        # The flag each refusal names last before saying so.
        not_built = [flags[-1] for flags in (re.findall(r"--[a-z0-9-]+(?: [a-z_0-9]+)?", head) for head in
                     re.findall(r"error: (.*?) is recognized but not implemented", p.stderr)) if flags]
        if not_built:
            if p.returncode != 2:
                failed.append((name, f"refused {not_built} with exit status {p.returncode}, not 2"))
            waiting.update(set(not_built))
        elif p.returncode == 0 and "iteration        2/       2" in p.stdout:
            trained.append(name)
            print(f"trained  {time.time() - start:5.1f} s  {ranks} rank(s)  {name}")
        elif ended_by_injected_error(args, p):
            trained.append(name)
            print(f"ended    {time.time() - start:5.1f} s  {ranks} rank(s)  {name} (exit {p.returncode}: injected error, as Megatron)")
        else:
            last = (p.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            failed.append((name, f"exit status {p.returncode}: {last}"))
            # Said at once, with the run's last lines: a CI log cut short still names the failure.
            print(f"FAILED   {time.time() - start:5.1f} s  {ranks} rank(s)  {name}: exit status {p.returncode}")
            for line in (p.stdout.strip().splitlines()[-5:] + p.stderr.strip().splitlines()[-15:]):
                print(f"    | {line}")
        # Each set's checkpoints and event files are its own: drop them once it has run, so the
        # scratch folder never holds more than one set's (all of them together pass 5 GB).
        shutil.rmtree(os.path.join(scratch, name), ignore_errors=True)
        shutil.rmtree(os.path.join(scratch, name + "_tb"), ignore_errors=True)
        shutil.rmtree(os.path.join(scratch, name + "_wandb"), ignore_errors=True)
    print(f"\n{len(trained)} of {len(rows)} flag sets train; waiting for: " +
          ", ".join(f"{flag} ({n})" for flag, n in waiting.most_common()))
    for name, why in failed:
        print(f"FAILED {name}: {why}")
    at_least = MIN_TRAINED.get(os.path.basename(tsv), 0) if min_trained is None else int(min_trained)
    if failed or len(trained) < at_least:
        print(f"{len(failed)} failed; {len(trained)} trained, at least {at_least} must")
        sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
