#!/usr/bin/env python3
"""Reference encodings for tests/data/tokenizer.test.cpp from independent libraries:
tiktoken with the GPT-2 ranks that openai-whisper ships (whisper/assets/gpt2.tiktoken), HF
`tokenizers` on a tokenizer.json built from data/corpus/gpt2-{vocab.json,merges.txt}, and a tiny
SentencePiece model trained here with the `sentencepiece` package.

Usage: tokenizer_reference.py SPEC.json OUT_DIR   (SPEC: {"texts": [...], "vocab": ..., "merges": ...})
Prints JSON: {"tiktoken": [[ids]...], "hf": [[ids]...], "spm": [[ids]...], "spm_model": path,
"spm_ids": {bos, eos, pad}, "hf_json": path}."""
import importlib.util
import json
import os
import sys

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def whisper_ranks_file():
    spec = importlib.util.find_spec("whisper")  # locate only: importing whisper pulls torch/numba
    if spec is None:
        sys.exit("openai-whisper is not installed: pip install --no-deps openai-whisper")
    return os.path.join(list(spec.submodule_search_locations)[0], "assets", "gpt2.tiktoken")


def main():
    spec_path, out_dir = sys.argv[1], sys.argv[2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    texts = spec["texts"]
    result = {}

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding("gpt2_whisper", pat_str=GPT2_PATTERN,
                            mergeable_ranks=load_tiktoken_bpe(whisper_ranks_file()),
                            special_tokens={"<|endoftext|>": 50256})
    result["tiktoken"] = [enc.encode_ordinary(t) for t in texts]

    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    tok = Tokenizer(models.BPE.from_file(spec["vocab"], spec["merges"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    hf_json = os.path.join(out_dir, "tokenizer.json")
    tok.save(hf_json)
    result["hf_json"] = hf_json
    result["hf"] = [tok.encode(t).ids for t in texts]

    import sentencepiece as spm

    corpus = os.path.join(out_dir, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(spec["spm_corpus"])
    prefix = os.path.join(out_dir, "spm")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=300, model_type="bpe",
                                   pad_id=0, unk_id=1, bos_id=2, eos_id=3, character_coverage=1.0,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    result["spm_model"] = prefix + ".model"
    result["spm"] = [sp.encode_as_ids(t) for t in texts]
    result["spm_decoded"] = [sp.decode_ids(sp.encode_as_ids(t)) for t in texts]
    result["spm_ids"] = {"bos": sp.bos_id(), "eos": sp.eos_id(), "pad": sp.pad_id(), "size": sp.get_piece_size()}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
