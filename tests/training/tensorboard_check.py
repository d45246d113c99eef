"""Reads a directory written by mactor's tensorboard_writer with PyPI tensorboard's own readers and checks it.

usage: tensorboard_check.py <log dir> <calls.json>
calls.json: {"calls": [["scalar", tag, value, step, wall_time] | ["text", tag, text, step, wall_time], ...]},
the writer calls in order. Checks: file name; every masked CRC (independent Python CRC32C and tensorboard's
record reader); each record byte for byte against torch.utils.tensorboard.SummaryWriter making the same calls;
and EventAccumulator's tags, steps, float32 values and wall times. Exits 0 when every check passes.
"""
import json
import os
import re
import socket
import struct
import sys
import tempfile

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from torch.utils.tensorboard import SummaryWriter


def crc32c(data: bytes) -> int:
    """Bitwise CRC32C (reflected 0x82F63B78), written independently of the writer's table."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def check(condition, message):
    if not condition:
        print("FAIL:", message)
        sys.exit(1)


def read_records(path):
    """tensorboard's own record reader, which raises DataLossError on a CRC mismatch."""
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    records = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records
        records.append(reader.record())


def the_event_file(log_dir):
    files = os.listdir(log_dir)
    check(len(files) == 1, f"expected one event file in {log_dir}, found {files}")
    return os.path.join(log_dir, files[0])


def main():
    log_dir, calls_path = sys.argv[1], sys.argv[2]
    with open(calls_path) as f:
        calls = json.load(f)["calls"]
    check(crc32c(b"123456789") == 0xE3069283, "the Python crc32c reference fails its own check vector")

    path = the_event_file(log_dir)
    name = os.path.basename(path)
    pattern = r"events\.out\.tfevents\.(\d+)\." + re.escape(socket.gethostname()) + r"\.(\d+)\.(\d+)"
    check(re.fullmatch(pattern, name) is not None, f"event file name {name!r} does not match {pattern}")

    # 1. Independent walk over the TFRecord framing, checking both masked CRCs of every record.
    raw = open(path, "rb").read()
    records, pos = [], 0
    while pos < len(raw):
        check(pos + 12 <= len(raw), f"truncated record header at byte {pos}")
        (length,) = struct.unpack_from("<Q", raw, pos)
        (length_crc,) = struct.unpack_from("<I", raw, pos + 8)
        check(masked(crc32c(raw[pos:pos + 8])) == length_crc, f"length CRC mismatch at byte {pos}")
        data = raw[pos + 12:pos + 12 + length]
        check(len(data) == length, f"truncated record data at byte {pos}")
        (data_crc,) = struct.unpack_from("<I", raw, pos + 12 + length)
        check(masked(crc32c(data)) == data_crc, f"data CRC mismatch at byte {pos}")
        records.append(data)
        pos += 12 + length + 4
    check(len(records) == 1 + len(calls), f"{len(records)} records, expected 1 + {len(calls)}")

    # 2. tensorboard's record reader reads the same records; EventFileLoader yields them all.
    check(read_records(path) == records, "tensorboard's record reader disagrees with the independent walk")
    loaded = list(event_file_loader.EventFileLoader(path).Load())
    check(len(loaded) == len(records), f"EventFileLoader yielded {len(loaded)} events of {len(records)}")
    first = event_pb2.Event.FromString(records[0])
    check(first.file_version == "brain.Event:2", f"first event is {first}")

    # 3. Byte for byte against torch.utils.tensorboard (what Megatron uses) making the same calls.
    with tempfile.TemporaryDirectory() as torch_dir:
        writer = SummaryWriter(torch_dir)
        for kind, tag, value, step, wall_time in calls:
            if kind == "scalar":
                writer.add_scalar(tag, value, step, walltime=wall_time)
            else:
                writer.add_text(tag, value, step, walltime=wall_time)
        writer.close()
        torch_records = read_records(the_event_file(torch_dir))
    check(len(torch_records) == len(records), f"torch wrote {len(torch_records)} records, mactor {len(records)}")
    for i, (ours, theirs) in enumerate(zip(records[1:], torch_records[1:]), start=1):
        check(ours == theirs, f"record {i} differs from torch's:\n{event_pb2.Event.FromString(ours)}\n"
                              f"torch:\n{event_pb2.Event.FromString(theirs)}")

    # 4. EventAccumulator, as TensorBoard's UI loads it: tags, steps, float32 values, wall times.
    acc = event_accumulator.EventAccumulator(log_dir, size_guidance={event_accumulator.SCALARS: 0,
                                                                     event_accumulator.TENSORS: 0})
    acc.Reload()
    scalars, texts = {}, {}
    for kind, tag, value, step, wall_time in calls:
        if kind == "scalar":
            scalars.setdefault(tag, []).append((step, value, wall_time))
        else:
            texts.setdefault(tag + "/text_summary", []).append((step, value, wall_time))
    check(sorted(acc.Tags()["scalars"]) == sorted(scalars), f"scalar tags {acc.Tags()['scalars']} != {sorted(scalars)}")
    check(sorted(acc.Tags()["tensors"]) == sorted(texts), f"text tags {acc.Tags()['tensors']} != {sorted(texts)}")
    for tag, points in scalars.items():
        got = acc.Scalars(tag)
        check(len(got) == len(points), f"{tag}: {len(got)} points, expected {len(points)}")
        for g, (step, value, wall_time) in zip(got, points):
            check(g.step == step, f"{tag}: step {g.step}, expected {step}")
            want = float(np.float32(value))
            check(g.value == want, f"{tag} at step {step}: value {g.value!r}, expected float32 {want!r}")
            check(g.wall_time == wall_time, f"{tag} at step {step}: wall_time {g.wall_time!r}, expected {wall_time!r}")
    for tag, points in texts.items():
        got = acc.Tensors(tag)
        check(len(got) == len(points), f"{tag}: {len(got)} points, expected {len(points)}")
        for g, (step, text, wall_time) in zip(got, points):
            check(g.step == step and g.wall_time == wall_time, f"{tag}: step/wall_time {g.step}, {g.wall_time}")
            check(list(g.tensor_proto.string_val) == [text.encode()], f"{tag}: {g.tensor_proto.string_val}")
    print(f"OK: {len(records)} records, scalar tags {sorted(scalars)}, text tags {sorted(texts)}")


if __name__ == "__main__":
    main()
