"""Reference for the training-log tests. "formats": Python's own str.format for the specs
Megatron's log line uses, applied to each given double. "timers": megatron-core 0.15.0's
Timers.get_all_timers_string on a given (rank x timer) table of seconds, with the gather across
ranks replaced by that table.
Usage: training_log_reference.py (formats|timers) IN.json OUT.json"""
import json
import sys


def run_formats(spec):
    out = []
    for bits in spec["values"]:
        v = float.fromhex(bits)
        out.append(["{:.6E}".format(v), "{:.1f}".format(v), "{:.3f}".format(v),
                    "{:.2f}".format(v), "{}".format(v)])
    return {"formats": out}


def run_timers(spec):
    import os
    import torch
    # The megatron-core importer sits beside the optimizer references in tests/model.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
    from optim_megatron_import import import_megatron_core_module

    timers_module = import_megatron_core_module("timers")
    results = []
    for job in spec["jobs"]:
        table = torch.tensor(job["seconds"], dtype=torch.float)  # [world, timers]
        timers = timers_module.Timers(0, job["option"])
        timers._get_elapsed_time_all_ranks = lambda names, reset, barrier: table
        torch.distributed.get_world_size = lambda group=None: table.shape[0]
        results.append(timers.get_all_timers_string(
            names=job["names"], normalizer=job["normalizer"], reset=False))
    return {"results": results}


def main():
    mode, path_in, path_out = sys.argv[1:4]
    with open(path_in) as f:
        spec = json.load(f)
    result = run_formats(spec) if mode == "formats" else run_timers(spec)
    with open(path_out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
