"""Reads a directory written by mactor's tensorboard_writer with PyPI tensorboard's own readers and checks it.

usage: tensorboard_check.py <log dir> <expected.json>
expected.json: {"scalars": {tag: [[step, value, wall_time], ...]}}. Exits 0 when every check passes.
"""
import json
import os
import re
import socket
import struct
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow


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


def main():
    log_dir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)["scalars"]
    check(crc32c(b"123456789") == 0xE3069283, "the Python crc32c reference fails its own check vector")

    files = os.listdir(log_dir)
    check(len(files) == 1, f"expected one event file in {log_dir}, found {files}")
    name = files[0]
    pattern = r"events\.out\.tfevents\.(\d+)\." + re.escape(socket.gethostname()) + r"\.(\d+)\.(\d+)"
    check(re.fullmatch(pattern, name) is not None, f"event file name {name!r} does not match {pattern}")
    path = os.path.join(log_dir, name)

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
    total = sum(len(v) for v in expected.values())
    check(len(records) == 1 + total, f"{len(records)} records, expected 1 + {total}")

    # 2. tensorboard's own record reader (raises DataLossError on a CRC mismatch) reads the same records.
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    tb_records = []
    while True:
        try:
            reader.GetNext()
        except pywrap_tensorflow.errors.OutOfRangeError:
            break
        tb_records.append(reader.record())
    check(tb_records == records, "tensorboard's record reader disagrees with the independent walk")

    # 3. Records parse as tensorboard's Event protobuf; the first is the file_version event; scalars are simple_value.
    events = [event_pb2.Event.FromString(r) for r in records]
    loaded = list(event_file_loader.EventFileLoader(path).Load())
    check(len(loaded) == len(records), f"EventFileLoader yielded {len(loaded)} events of {len(records)}")
    check(events[0].file_version == "brain.Event:2", f"first event is {events[0]}")
    for e in events[1:]:
        check(e.WhichOneof("what") == "summary", f"not a summary event: {e}")
        check(all(v.WhichOneof("value") == "simple_value" for v in e.summary.value), f"not simple_value: {e}")

    # 4. EventAccumulator, as TensorBoard's UI loads it: tags, steps, float32 values, wall times.
    acc = event_accumulator.EventAccumulator(log_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    check(sorted(acc.Tags()["scalars"]) == sorted(expected), f"scalar tags {acc.Tags()['scalars']} != {sorted(expected)}")
    for tag, points in expected.items():
        got = acc.Scalars(tag)
        check(len(got) == len(points), f"{tag}: {len(got)} points, expected {len(points)}")
        for g, (step, value, wall_time) in zip(got, points):
            check(g.step == step, f"{tag}: step {g.step}, expected {step}")
            want = float(np.float32(value))
            check(g.value == want, f"{tag} at step {step}: value {g.value!r}, expected float32 {want!r}")
            check(g.wall_time == wall_time, f"{tag} at step {step}: wall_time {g.wall_time!r}, expected {wall_time!r}")
    print(f"OK: {len(records)} records, tags {sorted(expected)}")


if __name__ == "__main__":
    main()
