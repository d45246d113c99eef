"""Reads what mactor pickled, with Python's own pickle (the independent reader).

memory_snapshot_check.py values FILE
    FILE must unpickle to the fixed structure below (the pickle writer's test).
memory_snapshot_check.py snapshot FILE [ACTIVE_BYTES] [KIND...]
    FILE must be a torch.cuda.memory._snapshot()-style dict: the device trace replays to exactly
    the active blocks of the segments; torch's own _memory_viz.stats() accepts the segments;
    ACTIVE_BYTES (if not -1) is the active_allocated total; each KIND names a block's frame.
Prints OK and exits 0, or prints the problem and exits 1.
"""
import pickle
import sys

KINDS = {"parameters", "gradients", "optimizer state", "activations", "communication", "other"}


def check_values(snapshot):
    expected = {
        "small": [0, 1, 255, 256, -1, -(2**31), 2**31 - 1],
        "large": [2**31, -(2**31) - 1, 2**40, -(2**40), 2**63 - 1, -(2**63)],
        "unsigned": [2**63, 2**64 - 1],
        "text": ["", "plain", "\u00e9\u4e2d\U0001F600"],
        "nested": {"empty_list": [], "empty_dict": {}, "tuple": (0, 0), "bools": [True, False, None]},
    }
    assert snapshot == expected, f"unpickled {snapshot!r}, expected {expected!r}"


def check_snapshot(snapshot, active_bytes, kinds):
    assert set(snapshot) >= {"segments", "device_traces"}, f"keys {sorted(snapshot)}"
    (trace,) = snapshot["device_traces"]
    live = {}
    for e in trace:
        assert e["action"] in ("alloc", "free_requested", "free_completed"), e
        assert all(f["name"] in KINDS for f in e["frames"]), e
        if e["action"] == "alloc":
            assert e["addr"] not in live, f"address {e['addr']} allocated twice"
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            assert live.pop(e["addr"]) == e["size"], f"free of {e['addr']} with another size"
    times = [e["time_us"] for e in trace]
    assert times == sorted(times), "trace out of time order"
    active = {}
    seen_kinds = set()
    for seg in snapshot["segments"]:
        assert seg["total_size"] == sum(b["size"] for b in seg["blocks"]), seg
        for b in seg["blocks"]:
            seen_kinds.update(f["name"] for f in b["frames"])
            if b["state"] == "active_allocated":
                active[b["address"]] = b["size"]
    # The trace may start after some blocks were made (it keeps the newest entries): every block
    # it shows alive must be active, and with a full trace the two agree exactly.
    missing = {a: s for a, s in live.items() if active.get(a) != s}
    assert not missing, f"the trace leaves {len(missing)} blocks alive that the segments lack"
    if len(trace) < 100000:
        assert live == active, f"trace replay {len(live)} blocks, segments {len(active)}"
    try:
        from torch.cuda import _memory_viz
        stats = _memory_viz.stats(snapshot["segments"])
        got = stats.get("active_allocated", _memory_viz.Bytes(0)).value
    except ImportError:
        got = sum(active.values())
    assert got == sum(active.values()), f"torch's stats {got} vs {sum(active.values())}"
    if active_bytes >= 0:
        assert got == active_bytes, f"active_allocated {got} bytes, expected {active_bytes}"
    for k in kinds:
        assert k in seen_kinds, f"no block held by {k!r}; saw {sorted(seen_kinds)}"


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    try:
        if mode == "values":
            check_values(snapshot)
        else:
            active = int(sys.argv[3]) if len(sys.argv) > 3 else -1
            check_snapshot(snapshot, active, sys.argv[4:])
    except AssertionError as e:
        print(f"{path}: {e}")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
