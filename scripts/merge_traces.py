#!/usr/bin/env python3
"""Merges the per-rank traces of `pretrain_gpt --profile` into one file that ui.perfetto.dev or
chrome://tracing shows as one timeline: each rank is its own process (pid = rank) and timestamps
are microseconds since the epoch, so the traceEvents arrays are simply concatenated.
Usage: merge_traces.py OUT.json TRACE.json [TRACE.json ...]"""
import json
import sys


def merge(paths):
    events = []
    for path in paths:
        with open(path) as f:
            events.extend(json.load(f)["traceEvents"])
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"producer": "mactor --profile, merged"}}


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1], "w") as out:
        json.dump(merge(sys.argv[2:]), out)
