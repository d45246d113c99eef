#!/usr/bin/env python3
"""The dataset tokenizer Megatron's pretrain_gpt builds on its default path (megatron.core.tokenizers'
build_tokenizer, installed megatron-core 0.15), for tests/data/dataset_tokenizer.test.cpp.

Makes the tokenizer files (a SentencePiece model trained here, a HuggingFace directory from
data/corpus's GPT-2 vocabulary, Megatron's tiktoken JSON from whisper's GPT-2 ranks), writes each
case's --tokenizer-metadata file, and prints per case the arguments used and either the
tokenizer's eod, pad (None where it has none or raises, as GPTDataset then uses -1),
json.dumps(unique_identifiers) and the ids of SPEC's text (what tools/preprocess_data.py writes
on this path), or the error Megatron raised.

GPT2BPETokenizer's library (MegatronHFTokenizer) downloads "gpt2" from the HuggingFace hub, which
the tests cannot reach: its library class is replaced by one that reads eod from the given
vocab.json (<|endoftext|>) and has no pad, as GPT-2's tokenizer has none. Everything else, the
library choice, the model class and the identifiers, is Megatron's own code.

Usage: dataset_tokenizer_reference.py SPEC.json OUT_DIR
SPEC: {"corpus": dir, "spm_corpus": text, "text": text,
       "cases": [{"type": T, "variant": "template" (optional), "metadata": {...} | "missing" | null}]}"""
import argparse
import contextlib
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_packages import stub_megatron_packages  # noqa: E402
from tiktoken_reference import write_megatron_vocab  # noqa: E402


def make_files(spec, out):
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    corpus = os.path.join(out, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(spec["spm_corpus"])
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(out, "spm"), vocab_size=300,
                                   model_type="bpe", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                   character_coverage=1.0, minloglevel=2)
    vocab, merges = os.path.join(spec["corpus"], "gpt2-vocab.json"), os.path.join(spec["corpus"], "gpt2-merges.txt")
    hf = os.path.join(out, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = Tokenizer(models.BPE.from_file(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(hf, "tokenizer.json"))
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:  # "!" is id 0: a pad that occurs in text
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "pad_token": "!"}, f)
    # The same with a template post-processor that puts <|endoftext|> before each text, as Llama
    # 3's puts its BOS: the legacy class's tokenizer(text).input_ids adds it, the library does not.
    from tokenizers import processors

    hf_bos = os.path.join(out, "hf_bos")
    os.makedirs(hf_bos, exist_ok=True)
    tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 50256)])
    tok.save(os.path.join(hf_bos, "tokenizer.json"))
    with open(os.path.join(hf_bos, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}, f)
    tiktoken_vocab = os.path.join(out, "tiktoken.json")
    write_megatron_vocab(tiktoken_vocab)
    return {
        "GPT2BPETokenizer": {"vocab_file": vocab, "merge_file": merges},
        "HuggingFaceTokenizer": {"tokenizer_model": hf},
        "HuggingFaceTokenizer+template": {"tokenizer_model": hf_bos},
        "GPTSentencePieceTokenizer": {"tokenizer_model": os.path.join(out, "spm.model")},
        "Llama2Tokenizer": {"tokenizer_model": os.path.join(out, "spm.model")},
        "TikTokenizer": {"tokenizer_model": tiktoken_vocab, "tiktoken_pattern": "v2", "vocab_size": 51256},
        "NullTokenizer": {"vocab_size": 100},
    }


def offline_gpt2(vocab_of):
    import megatron.core.tokenizers.text.libraries as libraries

    class GPT2WithoutHub:  # stands in for MegatronHFTokenizer("GPT2BPETokenizer", vocab_file=, merges_file=)
        def __init__(self, path, vocab_file=None, merges_file=None, **_):
            with open(vocab_file, encoding="utf-8") as f:
                self.eod = json.load(f)["<|endoftext|>"]
            self.pad_id = None

    libraries.MegatronHFTokenizer = GPT2WithoutHub


def main():
    spec_path, out = sys.argv[1], sys.argv[2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    stub_megatron_packages()
    with contextlib.redirect_stdout(sys.stderr):
        files = make_files(spec, out)
    offline_gpt2(files)
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    results = []
    for i, case in enumerate(spec["cases"]):
        variant = case["type"] + ("+" + case["variant"] if "variant" in case else "")
        args = {"tokenizer_type": case["type"], "vocab_file": None, "merge_file": None, "tokenizer_model": None,
                "vocab_size": None, "tiktoken_pattern": None, "tiktoken_num_special_tokens": 1000,
                "tiktoken_special_tokens": None, "tokenizer_metadata": None}
        args.update(files[variant])
        if case["metadata"] == "missing":
            args["tokenizer_metadata"] = os.path.join(out, "no_such_metadata.json")
        elif case["metadata"] is not None:
            args["tokenizer_metadata"] = os.path.join(out, f"metadata_{i}.json")
            with open(args["tokenizer_metadata"], "w") as f:
                json.dump(case["metadata"], f)
        r = {"args": args}
        try:
            with contextlib.redirect_stdout(sys.stderr):
                t = build_tokenizer(argparse.Namespace(**args))
            try:
                pad = t.pad
            except AttributeError:  # NullTokenizer: GPTDataset catches it and uses -1
                pad = None
            # No ids for GPT-2 (its library is the stand-in) or NullTokenizer (its text is ids).
            ids = None if args["tokenizer_type"] in ("GPT2BPETokenizer", "NullTokenizer") else t.tokenize(spec["text"])
            r.update(ok=True, eod=t.eod, pad=pad, ids=ids,
                     identifiers=json.dumps(t.unique_identifiers, default=lambda o: o.unique_identifiers))
        except Exception as e:  # noqa: BLE001 -- any failure of Megatron's is what mactor must refuse
            r.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
        results.append(r)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
