#!/usr/bin/env python3
"""Reference runs of PyPI megatron-core's dataset code for tests/data (indexed datasets, GPTDataset,
BlendedDataset). megatron.core's package __init__ needs a newer torch than Debian's 1.13, so this
loads megatron/core/datasets/* alone, stubbing megatron.core.utils.log_single_rank and
megatron.core.tokenizers.MegatronTokenizerBase (the only names those modules take from outside).

Usage: megatron_reference.py COMMAND JSON_SPEC_FILE   (prints JSON on stdout)
COMMAND is write, read, gpt, or batch (a list of [command, spec] pairs)."""
import importlib.util
import json
import logging
import os
import sys
import types

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_packages import stub_megatron_packages  # noqa: E402


def import_megatron_datasets():
    stub_megatron_packages()
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, *args, rank=0, **kwargs: logger.log(*args, **kwargs)
    sys.modules["megatron.core.utils"] = utils
    tok = types.ModuleType("megatron.core.tokenizers")
    tok.MegatronTokenizerBase = object
    sys.modules["megatron.core.tokenizers"] = tok
    import torch

    if not torch.distributed.is_initialized():
        torch.distributed.get_rank = lambda *a, **k: 0  # BlendedDataset asks even when single-process
    from megatron.core.datasets import indexed_dataset, gpt_dataset, blended_megatron_dataset_builder
    return indexed_dataset, gpt_dataset, blended_megatron_dataset_builder


DTYPES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64,
          6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}


class Tokenizer:
    def __init__(self, spec):
        self.eod = spec["eod"]
        if spec.get("pad") is not None:
            self.pad = spec["pad"]
        self.unique_identifiers = spec["identifiers"]


def cmd_write(spec, idx):
    """spec: {prefix, dtype, docs: [[seq, ...], ...], whole_documents: bool, merge: [prefix...]}"""
    import torch

    b = idx.IndexedDatasetBuilder(spec["prefix"] + ".bin", dtype=DTYPES[spec["dtype"]])
    for doc in spec["docs"]:
        if spec.get("whole_documents"):
            flat = [t for seq in doc for t in seq]
            b.add_document(torch.tensor(flat, dtype=torch.int64), [len(s) for s in doc])
        else:
            for seq in doc:
                b.add_item(torch.tensor(seq, dtype=torch.int64))
            b.end_document()
    for other in spec.get("merge", []):
        b.add_index(other)
    b.finalize(spec["prefix"] + ".idx")
    return {}


def cmd_read(spec, idx):
    ds = idx.IndexedDataset(spec["prefix"])
    return {"dtype": idx.DType.code_from_dtype(ds.index.dtype),
            "sequence_lengths": ds.sequence_lengths.tolist(),
            "document_indices": ds.document_indices.tolist(),
            "sequences": [ds.get(i).astype(numpy.int64).tolist() for i in range(len(ds))],
            "pieces": [ds.get(i, offset=1, length=2).astype(numpy.int64).tolist()
                       for i in range(len(ds)) if ds.sequence_lengths[i] >= 3]}


def cmd_gpt(spec, gpt, builder):
    """Builds train/valid/test like pretrain_gpt does; returns lengths, cache dir listing and items."""
    blend = spec.get("blend")
    cfg = gpt.GPTDatasetConfig(
        random_seed=spec["seed"], sequence_length=spec["seq_length"],
        blend=(blend["prefixes"], blend.get("weights")) if blend else None,
        blend_per_split=[(b["prefixes"], b.get("weights")) if b else None for b in spec["blend_per_split"]]
        if spec.get("blend_per_split") else None,
        split=spec.get("split"), path_to_cache=spec.get("cache"), tokenizer=Tokenizer(spec["tokenizer"]),
        reset_position_ids=spec.get("reset_position_ids", False),
        reset_attention_mask=spec.get("reset_attention_mask", False),
        eod_mask_loss=spec.get("eod_mask_loss", False),
        create_attention_mask=spec.get("create_attention_mask", True),
        add_extra_token_to_sequence=spec.get("add_extra_token", True),
        drop_last_partial_validation_sequence=spec.get("drop_last_valid", True),
        mid_level_dataset_surplus=spec.get("surplus", 0.005))
    cls = gpt.MockGPTDataset if cfg.mock else gpt.GPTDataset
    datasets = builder.BlendedMegatronDatasetBuilder(cls, spec["sizes"], lambda: True, cfg).build()
    out = []
    for ds in datasets:
        if ds is None:
            out.append(None)
            continue
        items = []
        for i in spec.get("items", []):
            if i >= len(ds):
                continue
            it = ds[i]
            items.append({k: (v.to(torch_dtype_for(k)).tolist() if hasattr(v, "to") else int(v))
                          for k, v in it.items()})
        out.append({"length": len(ds), "items": items, "class": type(ds).__name__})
    return {"splits": out}


def cmd_numpy_random(spec):
    """Legacy RandomState shuffles (two in a row, as GPTDataset does) and default_rng integers."""
    shuffles = []
    for seed, n in spec["shuffles"]:
        rs = numpy.random.RandomState(seed)
        a = numpy.arange(n, dtype=numpy.int32)
        rs.shuffle(a)
        b = numpy.arange(n, dtype=numpy.uint32)
        rs.shuffle(b)
        shuffles.append([a.tolist(), b.tolist()])
    rng = numpy.random.default_rng(seed=spec["rng_seed"])
    lengths = rng.integers(low=1, high=4096, size=spec["rng_size"], dtype=numpy.int32)
    return {"shuffles": shuffles, "lengths": lengths.tolist()}


def cmd_preprocessed(spec, idx):
    """Reads a preprocess_data output with megatron-core, and tokenizes the same jsonl with tiktoken
    (GPT-2 ranks from whisper's assets) the way Megatron's Encoder.encode does."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    spec_w = importlib.util.find_spec("whisper")
    if spec_w is None:
        sys.exit("openai-whisper is not installed: pip install --no-deps openai-whisper")
    ranks = os.path.join(list(spec_w.submodule_search_locations)[0], "assets", "gpt2.tiktoken")
    enc = tiktoken.Encoding("gpt2_whisper", mergeable_ranks=load_tiktoken_bpe(ranks), special_tokens={},
                            pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    want_docs, want_lens = [], []
    with open(spec["jsonl"], encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            text = json.loads(line)[spec["key"]]
            ids, lens = [], []
            for sentence in (text if isinstance(text, list) else [text]):
                t = enc.encode_ordinary(sentence)
                if t:
                    ids.extend(t)
                    lens.append(len(t))
            if ids and spec["append_eod"]:
                ids.append(50256)
                lens[-1] += 1
            want_docs.append(ids)
            want_lens.append(lens)
    ds = idx.IndexedDataset(spec["prefix"])
    docs = ds.document_indices.tolist()
    got_docs = [[t for s in range(docs[k], docs[k + 1]) for t in ds.get(s).tolist()] for k in range(len(docs) - 1)]
    got_lens = [ds.sequence_lengths[docs[k]:docs[k + 1]].tolist() for k in range(len(docs) - 1)]
    return {"dtype": idx.DType.code_from_dtype(ds.index.dtype), "got_docs": got_docs, "got_lens": got_lens,
            "want_docs": want_docs, "want_lens": want_lens}


def torch_dtype_for(key):
    import torch
    return {"attention_mask": torch.int64, "loss_mask": torch.float32}.get(key, torch.int64)


def main():
    logging.basicConfig(level=logging.WARNING)
    cmd, spec_file = sys.argv[1], sys.argv[2]
    with open(spec_file) as f:
        spec = json.load(f)
    idx, gpt, builder = import_megatron_datasets()
    run = {"write": lambda s: cmd_write(s, idx), "read": lambda s: cmd_read(s, idx),
           "gpt": lambda s: cmd_gpt(s, gpt, builder), "numpy_random": cmd_numpy_random,
           "preprocessed": lambda s: cmd_preprocessed(s, idx)}
    if cmd == "batch":  # spec: [[command, spec], ...] -> list of results (one Python start-up)
        result = [run[c](s) for c, s in spec]
    else:
        result = run[cmd](spec)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
