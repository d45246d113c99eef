#!/usr/bin/env python3
"""Reference encodings for the TikTokenizer tests in tests/data/tiktoken_tokenizer.test.cpp.

Writes Megatron's tiktoken vocabulary JSON (list of {"rank", "token_bytes", "token_str"}) made
from the GPT-2 ranks openai-whisper ships (the 256 single bytes moved to ranks 0..255 in byte
order, as Megatron requires), adds seeded random texts to the given ones, and for each
configuration in SPEC encodes every text with
  - tiktoken: an Encoding built here from the pattern and the shifted ranks,
  - Megatron's default path: megatron.core.tokenizers' build_tokenizer (installed megatron-core),
  - Megatron's legacy path (--legacy-tokenizer, megatron-training's CustomTikTokenizer, which is
    not on PyPI): its layout restated in LegacyLayout below (special tokens are ordinary text,
    eod is "</s>", no pad), its unique_identifiers from megatron-core's own MegatronLegacyTokenizer,
and the pre-tokenizer pieces with the `regex` package.

Usage: tiktoken_reference.py SPEC.json OUT_DIR. Prints JSON: {"vocab": path, "texts": [...],
"configs": [{"ids": {...}, "pieces": [...], "eod", "pad", "vocab_size", "unique_identifiers"}]}."""
import base64
import contextlib
import importlib.util
import json
import os
import random
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_packages import stub_megatron_packages  # noqa: E402


def whisper_ranks():
    spec = importlib.util.find_spec("whisper")  # locate only: importing whisper pulls torch/numba
    if spec is None:
        sys.exit("openai-whisper is not installed: pip install --no-deps openai-whisper")
    from tiktoken.load import load_tiktoken_bpe

    return load_tiktoken_bpe(os.path.join(list(spec.submodule_search_locations)[0], "assets", "gpt2.tiktoken"))


def write_megatron_vocab(path):
    ranks = whisper_ranks()
    ordered = [bytes([b]) for b in range(256)]
    ordered += [t for t, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(t) > 1]
    assert len(ordered) == len(ranks)
    entries = [{"rank": i, "token_bytes": base64.b64encode(t).decode("ascii"),
                "token_str": t.decode("utf-8", errors="replace")} for i, t in enumerate(ordered)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(entries, f)
    return ordered


def random_texts(n, seed):
    pool = (list("abcXYZ019 '\"/!?.,-_") + [" ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028",
            "\u0301", "\u0308", "\u01c5", "\u02b0", "\u00e9", "\u00c9", "\u03a9", "\u03c9", "\u65e5\u672c",
            "\u0627\u0644", "\U0001F600", "\U0001F44D\U0001F3FD", "\u0663", "\u00bd", "\u2167", "Hello", "WORLD",
            "camelCase", "they're", "I'LL", "<s>", "</s>", "<pad>", "<SPECIAL_9>", "//", "\n/", "$", "\u20ac"])
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 24))) for _ in range(n)]


class LegacyLayout:
    """What megatron-training's CustomTikTokenizer (core_v0.15.0) is, for the assertions below:
    ids from the file's ranks shifted by num_special_tokens, special tokens never matched in text,
    eod = id of "</s>", vocab_size = --vocab-size. Its unique_identifiers come from megatron-core's
    MegatronLegacyTokenizer base, given the options CustomTikTokenizer passes it, in that order."""

    def __init__(self, enc, vocab, pattern, a, specials):
        from megatron.core.datasets.megatron_tokenizer import MegatronLegacyTokenizer

        class CustomTikTokenizer(MegatronLegacyTokenizer):  # the class name is part of the identifiers
            def __init__(self, *paths, **options):
                super().__init__(*paths, **options)

            # MegatronLegacyTokenizer's abstract members; the identifiers are all this is used for.
            vocab = inv_vocab = vocab_size = None

            def tokenize(self, text):
                raise NotImplementedError

        self.unique_identifiers = CustomTikTokenizer(
            vocab, pattern=pattern, vocab_size=a.vocab_size, num_special_tokens=a.tiktoken_num_special_tokens,
            special_tokens=a.tiktoken_special_tokens).unique_identifiers
        self.enc, self.vocab_size, self.eod = enc, a.vocab_size, specials.index("</s>")

    def tokenize(self, text):
        return self.enc.encode_ordinary(text)


def megatron_args(c, vocab):
    return types.SimpleNamespace(
        tokenizer_type="TikTokenizer", tokenizer_model=vocab, tiktoken_pattern=c.get("pattern"),
        vocab_size=c.get("vocab_size"), tiktoken_num_special_tokens=c["num_special_tokens"],
        tiktoken_special_tokens=c.get("special_tokens"), tokenizer_metadata=None, rank=0)


def run_config(c, vocab, ordered, texts):
    import regex
    import tiktoken
    from megatron.core.tokenizers.text.libraries.tiktoken_tokenizer import PATTERN_TIKTOKEN_V1, PATTERN_TIKTOKEN_V2

    a = megatron_args(c, vocab)
    n_special = a.tiktoken_num_special_tokens
    if c["legacy"]:
        pattern = PATTERN_TIKTOKEN_V1 if a.tiktoken_pattern == "v1" else PATTERN_TIKTOKEN_V2
        pad, meg = None, None
        size = a.vocab_size
    else:
        from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

        with contextlib.redirect_stdout(sys.stderr):
            meg = build_tokenizer(a)
        pattern = PATTERN_TIKTOKEN_V1 if (a.tiktoken_pattern or "v2") == "v1" else PATTERN_TIKTOKEN_V2
        pad = meg.pad
        size = meg.vocab_size
    # An Encoding of our own from the file's ranks, laid out as the docstring of tiktoken_tokenizer.cpp says.
    specials = list(a.tiktoken_special_tokens or (["<unk>", "<s>", "</s>"] if c["legacy"] else
                    ["<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"]))
    specials += [f"<SPECIAL_{i}>" for i in range(len(specials), n_special)]
    enc = tiktoken.Encoding("check", pat_str=pattern,
                            mergeable_ranks={t: i + n_special for i, t in enumerate(ordered[:size - n_special])},
                            special_tokens={t: i for i, t in enumerate(specials)})
    if c["legacy"]:
        meg = LegacyLayout(enc, vocab, pattern, a, specials)
    own = [enc.encode_ordinary(t) if c["legacy"] else enc.encode(t, allowed_special="all") for t in texts]
    theirs = [meg.tokenize(t) for t in texts]
    assert own == theirs, "tiktoken and Megatron disagree: the test's statement of the layout is wrong"
    ids = json.dumps(meg.unique_identifiers, separators=(",", ":"))  # in Megatron's key order
    return {"ids": theirs, "pieces": [regex.findall(pattern, t) for t in texts], "eod": meg.eod, "pad": pad,
            "vocab_size": size, "unique_identifiers": ids}


def main():
    spec_path, out_dir = sys.argv[1], sys.argv[2]
    stub_megatron_packages()
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    vocab = os.path.join(out_dir, "tiktoken_vocab.json")
    ordered = write_megatron_vocab(vocab)
    texts = spec["texts"] + random_texts(spec["random_texts"], seed=1234)
    configs = [run_config(c, vocab, ordered, texts) for c in spec["configs"]]
    json.dump({"vocab": vocab, "texts": texts, "configs": configs}, sys.stdout)


if __name__ == "__main__":
    main()
