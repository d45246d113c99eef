#!/usr/bin/env python3
"""Rebuilds kjv.jsonl.gz (one JSON object per chapter: {"text": ..., "book_chapter": ...}) from the
King James Version that Debian's bible-kjv / bible-kjv-text packages ship (apt-get install bible-kjv).

Usage: make_kjv_jsonl.py OUT.jsonl.gz"""
import gzip
import json
import re
import subprocess
import sys


def main():
    out = sys.argv[1]
    raw = subprocess.run(["bible", "Genesis 1:1-Revelation 22:21"], check=True, capture_output=True,
                         text=True, env={"COLUMNS": "100000", "PATH": "/usr/bin:/bin"}).stdout
    chapters = []  # (title, [verses])
    for line in raw.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            chapters[-1][1].append(m.group(2).strip())
        elif not line.startswith(" ") and re.match(r"^\S.* \d+$", line):
            chapters.append((line.strip(), []))
        else:
            chapters[-1][1][-1] += " " + line.strip()  # a wrapped verse
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        for title, verses in chapters:
            f.write((json.dumps({"text": " ".join(verses), "book_chapter": title}) + "\n").encode("utf-8"))
    print(f"{len(chapters)} chapters, {sum(len(' '.join(v)) for _, v in chapters)} characters", file=sys.stderr)


if __name__ == "__main__":
    main()
