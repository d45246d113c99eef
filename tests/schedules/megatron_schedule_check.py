#!/usr/bin/env python3
"""Runs Megatron-Core's own pipeline schedules (PyPI megatron-core 0.15.0) for simulated pipeline
ranks, records the order of forward/backward steps and p2p transfers on each rank, and checks that
`mactor schedule --with-p2p` prints exactly the same, for many (pp, vp, m, g) shapes; and that
mactor rejects exactly the shapes Megatron rejects.

Usage: megatron_schedule_check.py PATH/TO/mactor

How Megatron is run without GPUs or torch.distributed (nothing of the schedule logic is replaced):
- Import: megatron/__init__, megatron/core/__init__ and a few package __init__ files pull in
  modules that need a newer torch than Debian's 1.13 (torch.distributed._coalescing_manager,
  torch.cuda.memory.CUDAPluggableAllocator). The packages are registered in sys.modules with
  their real __path__ but without running their __init__, and three modules the schedules import
  only for features that are off here are stubbed: megatron.core.transformer.cuda_graphs
  (create_cudagraphs), megatron.core.transformer.moe.router (MoEAuxLossAutoScaler) and, for the
  import only, megatron.core.pipeline_parallel.combined_1f1b (the EP-overlap schedules).
- --overlap-moe-expert-parallel-comm: the real combined_1f1b module is loaded from the installed
  package (its fp8 import stubbed, its CUDA stream set-up a no-op) and runs as Megatron runs it.
  Only its combined_forward_backward_step, which builds the model's layer plans, is replaced by a
  recorder that calls the p2p callbacks in TransformerModelChunkSchedulePlan.run's order: before
  the pair pre_forward then pre_backward, after it post_forward then post_backward.
- torch.distributed.is_initialized / get_global_rank are patched so the pipeline group is a fake
  object that answers size() and rank(); parallel_state getters return the simulated pp size,
  rank and vp size. `torch.zeros(..., device="cuda")` (the token counter) runs on the CPU.
- forward_step / backward_step are replaced by recorders that tag their outputs with
  (microbatch, chunk); P2PCommunicator._communicate is replaced by a recorder of the sends and
  receives in one call, in torch.distributed.batch_isend_irecv order (send_prev, recv_prev,
  send_next, recv_next). A received tensor is named after the forward or backward that consumes
  it, which is found by identity when Megatron passes it to forward_step/backward_step.
"""
import contextlib
import itertools
import os
import subprocess
import sys
import types

import torch
import torch.distributed as dist

SITE = None


def _install_stubs():
    import importlib.util
    spec = importlib.util.find_spec("megatron")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("FAIL: megatron-core is not installed; run scripts/setup.sh "
                         "(pip install megatron-core==0.15.0 into .venv)")
    root = list(spec.submodule_search_locations)[0]

    def package(name, path):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(root, path)]
        sys.modules[name] = mod

    def stub(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod

    package("megatron", "")
    package("megatron.core", "core")
    package("megatron.core.pipeline_parallel", "core/pipeline_parallel")
    package("megatron.core.transformer", "core/transformer")
    package("megatron.core.transformer.moe", "core/transformer/moe")
    stub("megatron.core.transformer.cuda_graphs", create_cudagraphs=lambda: None)
    stub("megatron.core.transformer.moe.router", MoEAuxLossAutoScaler=object)
    stub("megatron.core.pipeline_parallel.combined_1f1b",
         combined_1f1b_schedule_for_interleaved_pipelining=None,
         combined_1f1b_schedule_for_no_pipelining=None)
    return root


SITE = _install_stubs()
from megatron.core import package_info  # noqa: E402
from megatron.core.pipeline_parallel import schedules  # noqa: E402  (first: utils and parallel_state import each other)
from megatron.core.pipeline_parallel import p2p_communication  # noqa: E402
from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator  # noqa: E402


class _cpu_torch:
    """The schedules module's `torch`, with the CUDA token counter moved to the CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros(*args, **kwargs):
        kwargs.pop("device", None)
        return torch.zeros(*args, **kwargs)


class fake_group:
    def __init__(self, size, rank):
        self._size, self._rank = size, rank

    def size(self):
        return self._size

    def rank(self):
        return self._rank


class tagged:
    """Stands for a tensor: the output of forward (mb, chunk) or a received tensor."""

    def __init__(self, what, mb=None, chunk=None):
        self.what, self.mb, self.chunk = what, mb, chunk

    def __getitem__(self, i):  # the 1F1B code indexes output_tensor[0]
        return self


class handle:
    def wait(self):
        pass


class model_config:
    """The ModelParallelConfig fields the schedules read; anything else reads as None."""

    def __init__(self, pp, vp, g, overlap, warmup_flush=False, combined=False):
        self.pipeline_model_parallel_size = pp
        self.virtual_pipeline_model_parallel_size = vp
        self.microbatch_group_size_per_vp_stage = g if g is not None else pp
        self.overlap_p2p_comm = overlap
        self.batch_p2p_comm = not overlap  # Megatron's training code sets it this way
        self.overlap_p2p_comm_warmup_flush = warmup_flush
        self.overlap_moe_expert_parallel_comm = combined
        self.deallocate_pipeline_outputs = False
        self.sequence_parallel = False
        self.variable_seq_lengths = False
        self.use_ring_exchange_p2p = False
        self.batch_p2p_sync = False
        self.calculate_per_token_loss = False
        self.hidden_size = 8
        self.pipeline_dtype = torch.float32

    def __getattr__(self, name):
        return None


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    elif x is not None:
        yield x


class recorder:
    """Collects one simulated rank's ops as tokens like F3.1, RB2.0."""

    def __init__(self):
        self.ops = []  # [kind, mb, chunk] or [kind, tagged-recv] until the recv is consumed

    def consume(self, tensors, kind, mb, chunk):
        for t in _flatten(tensors):
            for op in self.ops:
                if len(op) == 2 and op[1] is t:
                    op[:] = [kind, mb, chunk]

    def forward(self, input_tensor, mb, chunk):
        """Records forward (mb, chunk) consuming `input_tensor`; returns its tagged output."""
        self.consume(input_tensor, "RF", mb, chunk)
        self.ops.append(["F", mb, chunk])
        return tagged("activation", mb, chunk)

    def backward(self, output_tensor, output_tensor_grad):
        """Records the backward of the forward that produced `output_tensor`, consuming
        `output_tensor_grad`; returns its tagged input gradient."""
        source = next(_flatten(output_tensor))
        self.consume(output_tensor_grad, "RB", source.mb, source.chunk)
        self.ops.append(["B", source.mb, source.chunk])
        return tagged("gradient", source.mb, source.chunk)

    def tokens(self):
        out = []
        for op in self.ops:
            out.append("%s?" % op[0] if len(op) == 2 else "%s%d.%d" % tuple(op))
        return out


def _load_combined_1f1b():
    """Megatron's own combined_1f1b module, from the installed package."""
    import importlib.util
    saved = sys.modules.get("megatron.core.fp8_utils")
    fp8 = types.ModuleType("megatron.core.fp8_utils")
    fp8.get_fp8_context = lambda *a, **k: contextlib.nullcontext()  # fp8 is off here
    sys.modules["megatron.core.fp8_utils"] = fp8
    try:
        spec = importlib.util.spec_from_file_location(
            "megatron.core.pipeline_parallel.combined_1f1b_real",
            os.path.join(SITE, "core/pipeline_parallel/combined_1f1b.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            del sys.modules["megatron.core.fp8_utils"]
        else:
            sys.modules["megatron.core.fp8_utils"] = saved
    mod.set_streams = lambda *a, **k: None  # CUDA streams
    return mod


COMBINED = _load_combined_1f1b()


def combined_step_recorder(rec):
    """combined_forward_backward_step for one simulated rank: the pair's forward and backward
    recorded, the p2p callbacks called as TransformerModelChunkSchedulePlan.run calls them."""

    def step(forward_step_func, data_iterator, f_model, num_microbatches, input_tensor,
             forward_data_store, b_model, b_input_tensor, b_output_tensor, b_output_tensor_grad,
             config, f_model_chunk_id=None, pre_forward=None, pre_backward=None, post_forward=None,
             post_backward=None, current_microbatch=None, **kwargs):
        out = grad = None
        b_chunk = next(_flatten(b_output_tensor)).chunk if b_model is not None else None
        if f_model is not None and pre_forward is not None:
            pre_forward(f_model_chunk_id)
        if b_model is not None and pre_backward is not None:
            pre_backward(b_chunk)
        if f_model is not None:
            out = rec.forward(input_tensor, current_microbatch, f_model_chunk_id or 0)
        if b_model is not None:
            grad = rec.backward(b_output_tensor, b_output_tensor_grad)
        # run() ignores what the two return (the output goes on to the loss, the gradient to the embedding).
        if f_model is not None and post_forward is not None:
            post_forward(out, f_model_chunk_id)
        if b_model is not None and post_backward is not None:
            post_backward(grad, b_chunk)
        return out, torch.zeros([], dtype=torch.int), grad

    return step


def run_megatron(pp, vp, m, g=None, overlap=None, forward_only=False, warmup_flush=False, combined=False):
    """Megatron's op order on every pipeline rank, or the exception it raised (from rank 0)."""
    if overlap is None:
        overlap = vp is not None  # validate_args turns overlap off without interleaving
    ranks = []
    for rank in range(pp):
        rec = recorder()
        config = model_config(pp, vp, g, overlap, warmup_flush, combined)
        group = fake_group(pp, rank)

        def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor,
                         forward_data_store, config, cp_group_size=None, *args, **kwargs):
            out = rec.forward(input_tensor, kwargs["current_microbatch"], kwargs.get("vp_stage") or 0)
            return ([out] if isinstance(input_tensor, list) else out), torch.zeros([], dtype=torch.int)

        def backward_step(input_tensor, output_tensor, output_tensor_grad, model_type, config):
            grad = rec.backward(output_tensor, output_tensor_grad)
            return [grad] if isinstance(input_tensor, list) else grad

        def communicate(self, *, tensor_send_next, tensor_send_prev, recv_prev, recv_next,
                        tensor_shape, wait_on_reqs=True):
            got_prev = got_next = None
            reqs = {}
            if tensor_send_prev is not None:
                rec.ops.append(["SB", tensor_send_prev.mb, tensor_send_prev.chunk])
                reqs["send_prev"] = handle()
            if recv_prev:
                got_prev = tagged("received")
                rec.ops.append(["RF", got_prev])
                reqs["recv_prev"] = handle()
            if tensor_send_next is not None:
                rec.ops.append(["SF", tensor_send_next.mb, tensor_send_next.chunk])
                reqs["send_next"] = handle()
            if recv_next:
                got_next = tagged("received")
                rec.ops.append(["RB", got_next])
                reqs["recv_next"] = handle()
            return got_prev, got_next, (None if wait_on_reqs else reqs)

        ps = schedules.parallel_state
        patches = [
            (dist, "is_initialized", lambda: True),
            (dist, "get_global_rank", lambda grp, r: r),
            (ps, "get_pipeline_model_parallel_world_size", lambda *a, **k: pp),
            (ps, "get_pipeline_model_parallel_rank", lambda *a, **k: rank),
            (ps, "get_virtual_pipeline_model_parallel_world_size", lambda *a, **k: vp),
            (ps, "get_pipeline_model_parallel_group", lambda *a, **k: group),
            (ps, "get_tensor_model_parallel_group", lambda *a, **k: fake_group(1, 0)),
            (ps, "get_context_parallel_group", lambda *a, **k: fake_group(1, 0)),
            (ps, "get_embedding_group", lambda *a, **k: None),
            (ps, "get_position_embedding_group", lambda *a, **k: None),
            (ps, "get_data_parallel_group", lambda *a, **k: fake_group(1, 0)),
            (schedules, "forward_step", forward_step),
            (schedules, "backward_step", backward_step),
            (schedules, "torch", _cpu_torch()),
            (schedules, "combined_1f1b_schedule_for_interleaved_pipelining",
             COMBINED.combined_1f1b_schedule_for_interleaved_pipelining),
            (schedules, "combined_1f1b_schedule_for_no_pipelining",
             COMBINED.combined_1f1b_schedule_for_no_pipelining),
            (COMBINED, "combined_forward_backward_step", combined_step_recorder(rec)),
            (p2p_communication.P2PCommunicator, "_communicate", communicate),
        ]
        saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
        for obj, name, value in patches:
            setattr(obj, name, value)
        try:
            chunks = vp or 1
            model = []
            for _ in range(chunks):
                chunk_module = torch.nn.Identity()
                chunk_module.config = config
                chunk_module.model_type = None
                model.append(chunk_module)
            func = schedules.get_forward_backward_func()
            func(forward_step_func=None, data_iterator=[iter(())] * chunks, model=model,
                 num_microbatches=m, seq_length=4, micro_batch_size=1, forward_only=forward_only)
        except (ValueError, RuntimeError) as e:
            return e
        finally:
            for obj, name, value in saved:
                setattr(obj, name, value)
        ranks.append(rec.tokens())
    return ranks


# What --overlap-moe-expert-parallel-comm needs besides itself (Megatron's validation): an MoE
# layer on 2 expert-parallel ranks with the all-to-all dispatcher, in bf16.
COMBINED_FLAGS = ["--overlap-moe-expert-parallel-comm", "--num-experts", "4", "--expert-model-parallel-size",
                  "2", "--data-parallel-size", "2", "--moe-token-dispatcher-type", "alltoall", "--bf16"]


def run_mactor(mactor, pp, vp, m, g=None, overlap=None, forward_only=False, warmup_flush=False, combined=False):
    cmd = [mactor, "schedule", "--pipeline-model-parallel-size", str(pp), "--num-microbatches",
           str(m), "--with-p2p"]
    if vp is not None:
        cmd += ["--virtual-pipeline-model-parallel-size", str(vp)]
    if g is not None:
        cmd += ["--microbatch-group-size-per-virtual-pipeline-stage", str(g)]
    if overlap is False and vp is not None:
        cmd += ["--no-overlap-p2p-communication"]
    if forward_only:
        cmd += ["--forward-only"]
    if warmup_flush:
        cmd += ["--overlap-p2p-communication-warmup-flush"]
    if combined:
        cmd += COMBINED_FLAGS
    p = subprocess.run(cmd, capture_output=True, text=True)
    return cmd, p


def mactor_ranks(stdout, pp):
    lines = [l for l in stdout.splitlines() if l.startswith("rank ")]
    assert len(lines) == pp, stdout
    return [l.split(": ", 1)[1].split() if ": " in l else [] for l in lines]


def shapes():
    """(pp, vp, m, g, overlap, forward_only, warmup_flush) to compare."""
    out = []
    for m in (1, 2, 3, 4, 7, 8):  # no pipelining
        out.append((1, None, m, None, None, False, False))
    out.append((1, None, 3, None, None, True, False))
    for pp in (2, 3, 4, 8):  # 1F1B, including m < pp
        for m in (1, 2, pp - 1, pp, pp + 1, 2 * pp, 13):
            out.append((pp, None, m, None, None, False, False))
        out.append((pp, None, pp + 3, None, None, True, False))
    for pp, vp in ((2, 2), (2, 3), (3, 2), (4, 2), (4, 3), (4, 4), (8, 2)):  # interleaved
        for m in sorted({pp, pp + 1, 2 * pp, 2 * pp + 1, 3 * pp, 3 * pp + 2, 17}):
            for g in [None] + sorted({pp + 1, pp + 2, m}):
                gg = pp if g is None else g
                if not (pp <= gg <= m) or 0 < m % gg < pp:
                    continue  # rejected; the error check below covers these
                for overlap in ((True, False) if pp > 2 else (True,)):
                    out.append((pp, vp, m, g, overlap, False, False))
                # --overlap-p2p-communication-warmup-flush (with overlap only)
                out.append((pp, vp, m, g, True, False, True))
        out.append((pp, vp, 2 * pp, None, True, True, False))
        out.append((pp, vp, 2 * pp, None, True, True, True))
    # --overlap-moe-expert-parallel-comm: Megatron's combined 1F1B, without pipelining or
    # interleaved (forward-only evaluation runs the plain order).
    combined = [(1, None, m, None, None, False, False) for m in (1, 2, 3, 8)]
    for pp, vp in ((2, 2), (2, 3), (3, 2), (4, 2), (4, 3)):
        for m, g in ((pp, None), (2 * pp, None), (3 * pp, None), (4 * pp, 2 * pp), (2 * pp + 2, pp + 1)):
            for overlap in ((True, False) if pp > 2 else (True,)):
                combined.append((pp, vp, m, g, overlap, False, False))
            combined.append((pp, vp, m, g, True, False, True))
        combined.append((pp, vp, 2 * pp, None, True, True, False))
    return [s + (False,) for s in out] + [s + (True,) for s in combined]


def check_orders(mactor):
    failures = 0
    for shape in shapes():
        pp, vp, m, g, overlap, forward_only, warmup_flush, combined = shape
        expected = run_megatron(*shape)
        if isinstance(expected, Exception):
            print("FAIL: Megatron rejected a shape meant to run: %s: %s" % (shape, expected))
            failures += 1
            continue
        cmd, p = run_mactor(mactor, *shape)
        if p.returncode != 0:
            print("FAIL: %s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr))
            failures += 1
            continue
        got = mactor_ranks(p.stdout, pp)
        for rank in range(pp):
            if got[rank] != expected[rank]:
                print("FAIL: %s\n  rank %d megatron: %s\n  rank %d mactor:   %s" %
                      (" ".join(cmd), rank, " ".join(expected[rank]), rank, " ".join(got[rank])))
                failures += 1
    print("compared %d shapes" % len(shapes()))
    return failures


def check_errors(mactor):
    """Every (pp, vp=2, m, g) in a grid: mactor exits 2 exactly where Megatron raises."""
    failures = checked = rejected = 0
    for pp, m, g in itertools.product((2, 3, 4), range(1, 11), range(1, 11)):
        expected = run_megatron(pp, 2, m, g)
        cmd, p = run_mactor(mactor, pp, 2, m, g)
        checked += 1
        if isinstance(expected, Exception):
            rejected += 1
            # config/'s two rules name the group size either way.
            ok = p.returncode == 2 and "mactor schedule: error:" in p.stderr and \
                ("--microbatch-group-size-per-virtual-pipeline-stage=%d" % g in p.stderr or
                 "microbatch group size (%d)" % g in p.stderr)
            if not ok:
                print("FAIL: Megatron raised %r but %s exited %d: %s" %
                      (expected, " ".join(cmd), p.returncode, p.stderr))
                failures += 1
        elif p.returncode != 0:
            print("FAIL: Megatron accepted but %s exited %d: %s" %
                  (" ".join(cmd), p.returncode, p.stderr))
            failures += 1
    print("checked %d group-size shapes, %d rejected by Megatron" % (checked, rejected))
    return failures


def megatron_num_microbatches(gbs, mbs, dp):
    try:
        return ConstantNumMicroBatchesCalculator(gbs, mbs, dp, False, 0).get()
    except AssertionError as e:
        return e


def check_cli(mactor):
    """Batch-size flags give Megatron's number of microbatches; bad flags exit 2, argparse style."""
    failures = 0

    def run(*flags):
        return subprocess.run([mactor, "schedule"] + [str(f) for f in flags],
                              capture_output=True, text=True)

    def orders(p):  # the schedule without the layers table before it (its --num-layers may differ)
        return [l for l in p.stdout.splitlines() if not l.startswith(("layers per stage", "PP rank", " "))]

    def first_rank_line(p):
        return next(l for l in p.stdout.splitlines() if l.startswith("rank 0: "))

    for gbs, mbs, dp in itertools.product((1, 6, 8, 12, 30, 32), (1, 2, 3), (1, 2, 4)):
        expected = megatron_num_microbatches(gbs, mbs, dp)
        p = run("--pipeline-model-parallel-size", 2, "--global-batch-size", gbs,
                "--micro-batch-size", mbs, "--data-parallel-size", dp)
        if isinstance(expected, Exception):
            ok = p.returncode == 2 and "not divisible" in p.stderr and \
                "mactor schedule: error:" in p.stderr
        else:
            ref = run("--pipeline-model-parallel-size", 2, "--num-microbatches", expected)
            ok = p.returncode == 0 and first_rank_line(p) == first_rank_line(ref)
        if not ok:
            print("FAIL: gbs=%d mbs=%d dp=%d: Megatron %r, mactor exit %d %s" %
                  (gbs, mbs, dp, expected, p.returncode, p.stderr))
            failures += 1

    # dp = W / (tp * pp * cp): W=32, tp=2, pp=4, cp=2 gives dp=2, so gbs=16, mbs=1 gives m=8.
    p = run("--pipeline-model-parallel-size", 4, "--world-size", 32, "--tensor-model-parallel-size",
            2, "--context-parallel-size", 2, "--micro-batch-size", 1, "--global-batch-size", 16)
    ref = run("--pipeline-model-parallel-size", 4, "--num-microbatches", 8)
    if p.returncode != 0 or orders(p) != orders(ref):
        print("FAIL: --world-size derivation: %s %s" % (p.stdout, p.stderr))
        failures += 1
    # --num-microbatches counts per data-parallel replica there too (dp=2 must not become 4).
    p = run("--pipeline-model-parallel-size", 4, "--world-size", 32, "--tensor-model-parallel-size",
            2, "--context-parallel-size", 2, "--num-microbatches", 8)
    if p.returncode != 0 or orders(p) != orders(ref):
        print("FAIL: --num-microbatches with context parallelism: %s %s" % (p.stdout, p.stderr))
        failures += 1
    # A training script's own flags (config/'s parser and validation) give the short form's schedule.
    script = ["--num-layers", 8, "--hidden-size", 64, "--num-attention-heads", 4, "--seq-length", 64,
              "--max-position-embeddings", 64, "--micro-batch-size", 1, "--global-batch-size", 8,
              "--train-iters", 100, "--lr", "3e-4", "--mock-data", "--tokenizer-type", "NullTokenizer",
              "--vocab-size", 4096, "--pipeline-model-parallel-size", 4,
              "--num-layers-per-virtual-pipeline-stage", 1, "--world-size", 4]
    p = run(*script)
    ref = run("--pipeline-model-parallel-size", 4, "--num-microbatches", 8,
              "--virtual-pipeline-model-parallel-size", 2)
    if p.returncode != 0 or orders(p) != orders(ref):
        print("FAIL: a Megatron script's flags: exit %d %s %s" % (p.returncode, p.stdout, p.stderr))
        failures += 1
    # A script's flags that mactor's training does not implement yet but the schedule does not depend
    # on pass (here fp16 and a batch-size ramp-up: the schedule at the full global batch size).
    # dp = 16 / (tp 2 x pp 4) = 2, so gbs 32 with mbs 1 gives m = 16.
    gpt3 = ["--num-layers", 24, "--hidden-size", 256, "--num-attention-heads", 8, "--seq-length", 128,
            "--max-position-embeddings", 128, "--micro-batch-size", 1, "--global-batch-size", 32,
            "--rampup-batch-size", 8, 8, 1000, "--train-samples", 100000, "--lr", "6e-5",
            "--lr-decay-style", "cosine", "--lr-decay-samples", 90000, "--lr-warmup-samples", 100,
            "--fp16", "--attention-backend", "auto", "--use-flash-attn", "--data-path", "/nonexistent",
            "--split", "949,50,1", "--tensor-model-parallel-size", 2, "--pipeline-model-parallel-size", 4,
            "--world-size", 16]
    p = run(*gpt3)
    ref = run("--pipeline-model-parallel-size", 4, "--num-microbatches", 16)
    if p.returncode != 0 or orders(p) != orders(ref) or "--rampup-batch-size" not in p.stderr or \
            "not implemented" in p.stderr:
        print("FAIL: a script with flags mactor does not train with yet: exit %d %s %s" %
              (p.returncode, p.stdout, p.stderr))
        failures += 1
    # Megatron's --num-virtual-stages-per-pipeline-rank is the same vp.
    a = run("--pipeline-model-parallel-size", 2, "--num-microbatches", 4,
            "--num-virtual-stages-per-pipeline-rank", 2)
    b = run("--pipeline-model-parallel-size", 2, "--num-microbatches", 4,
            "--virtual-pipeline-model-parallel-size", 2)
    if a.returncode != 0 or orders(a) != orders(b) or "F0.1" not in a.stdout:
        print("FAIL: --num-virtual-stages-per-pipeline-rank differs from vp")
        failures += 1

    # Megatron's validate_args: vp = num_layers / pp / num_layers_per_virtual_pipeline_stage.
    a = run("--pipeline-model-parallel-size", 4, "--num-microbatches", 8, "--num-layers", 24,
            "--num-layers-per-virtual-pipeline-stage", 2)
    b = run("--pipeline-model-parallel-size", 4, "--num-microbatches", 8,
            "--virtual-pipeline-model-parallel-size", 3)
    if a.returncode != 0 or orders(a) != orders(b) or "F0.2" not in a.stdout:
        print("FAIL: --num-layers-per-virtual-pipeline-stage does not give vp=3: %s" % a.stderr)
        failures += 1

    bad = [
        # The script above with a Megatron rule broken, and with a flag Megatron does not have.
        (["--num-layers", 10] + script[2:], "number of layers (10) must be divisible by --pipeline-model-parallel-size=4"),
        (script + ["--not-a-megatron-flag"], "unrecognized arguments: --not-a-megatron-flag"),
        # A flag that changes Megatron's op order in a way mactor's schedules do not model.
        (["--pipeline-model-parallel-size", 4, "--num-microbatches", 8, "--num-virtual-stages-per-pipeline-rank",
          2, "--delay-wgrad-compute"],
         "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"),
        # Megatron's combined 1F1B exists only without pipelining or interleaved.
        (["--pipeline-model-parallel-size", 2, "--num-microbatches", 4] + COMBINED_FLAGS,
         "--overlap-moe-expert-parallel-comm with --pipeline-model-parallel-size > 1 needs virtual pipeline stages"),
        (["--pipeline-model-parallel-size", 3, "--num-microbatches", 6, "--num-layers", 16,
          "--num-layers-per-virtual-pipeline-stage", 2], "number of layers (16)"),
        (["--pipeline-model-parallel-size", 2, "--num-microbatches", 6, "--num-layers", 16,
          "--num-layers-per-virtual-pipeline-stage", 3], "must be divisible by --num-layers-per-virtual-pipeline-stage=3"),
        (["--world-size", 12, "--tensor-model-parallel-size", 2, "--pipeline-model-parallel-size",
          4, "--micro-batch-size", 1], "world size 12 is not divisible"),
        (["--pipeline-model-parallel-size", 1, "--virtual-pipeline-model-parallel-size", 2,
          "--num-microbatches", 4], "greater than 1"),
        (["--pipeline-model-parallel-size", 2, "--virtual-pipeline-model-parallel-size", 2,
          "--num-microbatches", 4, "--no-overlap-p2p-communication"], "greater than 2"),
        (["--pipeline-model-parallel-size", 2, "--num-microbatches", 4, "--bogus"], "bogus"),
        (["--pipeline-model-parallel-size", "two", "--num-microbatches", 4], "two"),
        (["--pipeline-model-parallel-size", 2], "--num-microbatches"),
        (["--pipeline-model-parallel-size", 2, "--num-microbatches", 4, "--schedule", "zb"],
         "invalid choice"),
        (["--pipeline-model-parallel-size", 2, "--num-microbatches", 4, "--schedule", "gpipe",
          "--virtual-pipeline-model-parallel-size", 2], "one model chunk per rank"),
    ]
    for flags, needle in bad:
        p = run(*flags)
        if p.returncode != 2 or "mactor schedule: error:" not in p.stderr or needle not in p.stderr:
            print("FAIL: %s: exit %d, stderr %r (wanted exit 2 naming %r)" %
                  (flags, p.returncode, p.stderr, needle))
            failures += 1
    # The layers each stage holds, printed before the ranks' orders in Megatron's pretty_repr form.
    p = run("--pipeline-model-parallel-size", 2, "--pipeline-model-parallel-layout", "Et|tt||tttttL",
            "--num-microbatches", 4)
    table = [l.rstrip() for l in p.stdout.splitlines()[:4]]
    want = ["layers per stage (--num-layers 8):",
            "                 VPP rank 0               VPP rank 1",
            "PP rank 0        embedding,decoder        (empty stage)",
            "PP rank 1        decoder*2                decoder*5,loss"]
    if p.returncode != 0 or table != want:
        print("FAIL: the layout table: exit %d, got %r, wanted %r" % (p.returncode, table, want))
        failures += 1
    print("checked the command line: batch sizes against Megatron's microbatch calculator, "
          "%d bad invocations" % len(bad))
    return failures


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    mactor = sys.argv[1]
    print("megatron-core %s from %s" % (package_info.__version__, SITE))
    if package_info.__version__ != "0.15.0":
        print("FAIL: mactor follows Megatron-Core core_v0.15.0 but megatron-core %s is installed; "
              "run .venv/bin/pip install megatron-core==0.15.0" % package_info.__version__)
        return 1
    failures = check_orders(mactor) + check_errors(mactor) + check_cli(mactor)
    if failures:
        print("%d failures" % failures)
        return 1
    print("all schedules match Megatron-Core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
