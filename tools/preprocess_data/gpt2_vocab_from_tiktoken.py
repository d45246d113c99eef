#!/usr/bin/env python3
"""Writes GPT-2's vocab.json and merges.txt from a tiktoken ranks file (the gpt2.tiktoken that the
PyPI openai-whisper package ships in whisper/assets/). The merge that made each token is recovered
by running byte-pair merging on the token's bytes with only lower ranks allowed: exactly two parts
remain, and that pair is the merge of that rank.

Usage: gpt2_vocab_from_tiktoken.py [RANKS_FILE] OUT_DIR   (RANKS_FILE defaults to whisper's)"""
import base64
import importlib.util
import json
import os
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def bpe_parts(ranks, token, max_rank):
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]


def whisper_ranks_file():
    spec = importlib.util.find_spec("whisper")  # locate only: importing whisper needs torch/numba
    if spec is None:
        sys.exit("openai-whisper is not installed; pip install --no-deps openai-whisper, or pass RANKS_FILE")
    return os.path.join(list(spec.submodule_search_locations)[0], "assets", "gpt2.tiktoken")


def main():
    args = sys.argv[1:]
    if len(args) == 1:
        args = [whisper_ranks_file()] + args
    if len(args) != 2:
        sys.exit(__doc__)
    ranks = {}
    with open(args[0], "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    enc = bytes_to_unicode()
    text = lambda b: "".join(enc[x] for x in b)
    vocab = {text(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])}
    vocab["<|endoftext|>"] = len(ranks)
    merges = []
    for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(t) == 1:
            continue
        parts = bpe_parts(ranks, t, r)
        assert len(parts) == 2, (t, parts)
        merges.append(text(parts[0]) + " " + text(parts[1]))
    os.makedirs(args[1], exist_ok=True)
    with open(os.path.join(args[1], "gpt2-vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args[1], "gpt2-merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")


if __name__ == "__main__":
    main()
