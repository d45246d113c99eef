#!/usr/bin/env python3
"""Writes a flag-set table (tests/config/data/megatron_*_functional_tests.tsv) from a Megatron-LM
checkout's functional tests: tests/functional_tests/test_cases/<family>/*/model_config.yaml.

    functional_sets_from_megatron.py MEGATRON_CHECKOUT FAMILY [FAMILY ...] > table.tsv

Each row: the test's name (family/name), its MODEL_ARGS as shell-quoted flags (${VARS} become
/data/<var> paths, ${REPEAT} 1; shell escapes and list brackets removed as the test runner's shell
removes them), NCCL_ALGO and CUDA_DEVICE_MAX_CONNECTIONS from ENV_VARS, and an empty fourth
column for the error Megatron's own validate_args gives (filled by hand where it refuses a set).
The inference tests run other programs and are left out."""
import os
import re
import shlex
import sys

import yaml


def flag_words(model_args):
    words = []
    for key, value in model_args.items():
        if value is True or value == "true":
            words.append(key)
        elif value is False or value == "false" or value is None:
            continue
        else:
            text = str(value).replace("\\", "")
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            words += [key] + text.split()
    return words


def main(checkout, families):
    print("# Flag sets of Megatron-LM core_v0.15.0's functional tests (tests/functional_tests/test_cases/"
          + "{" + ",".join(families) + "}/*/model_config.yaml: MODEL_ARGS, and NCCL_ALGO / CUDA_DEVICE_MAX_CONNECTIONS from ENV_VARS).")
    print("# Columns: name, shell-quoted flags, environment, and the error Megatron's own validate_args gives (empty: none).")
    print("# Written by tests/config/functional_sets_from_megatron.py; the inference tests run other programs and are left out.")
    root = os.path.join(checkout, "tests/functional_tests/test_cases")
    for family in families:
        for name in sorted(os.listdir(os.path.join(root, family))):
            path = os.path.join(root, family, name, "model_config.yaml")
            if "inference" in name or not os.path.exists(path):
                continue
            text = re.sub(r"\$\{(\w+)\}", lambda m: "1" if m.group(1) == "REPEAT" else "/data/" + m.group(1).lower(),
                          open(path).read())
            config = yaml.safe_load(text)
            env = config.get("ENV_VARS") or {}
            env_text = " ".join(f"{k}={env[k]}" for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO") if k in env)
            flags = " ".join(shlex.quote(w) for w in flag_words(config.get("MODEL_ARGS") or {}))
            print(f"{family}/{name}\t{flags}\t{env_text}\t")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
