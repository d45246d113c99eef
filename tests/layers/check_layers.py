#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer cmake/layers.txt does not allow it.

usage: check_layers.py ROOT   (ROOT holds cmake/layers.txt and the layer folders)
Prints one line per violation (file:line, the include, the rule) and exits 1; exits 0 when clean.
"""
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def read_table(root):
    layers, externals = {}, []
    for line in (root / "cmake" / "layers.txt").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 3:
            raise SystemExit(f"cmake/layers.txt: a row needs three columns: {line!r}")
        name, _, allowed = cells
        if name.startswith("<"):
            externals.append((name.split(), cells[1], set(allowed.split())))
        else:
            layers[name] = set(allowed.split()) | {name}
    return layers, externals


def violations(root):
    layers, externals = read_table(root)
    for layer, allowed in sorted(layers.items()):
        folder = root / layer
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(text)
                if not m:
                    continue
                bracket, header = m.groups()
                if bracket == '"':
                    target = header.split("/", 1)[0]
                    if "/" in header and target in layers and target not in allowed:
                        yield (f"{rel}:{number}: includes \"{header}\" (layer {target}); "
                               f"layer {layer} may include {', '.join(sorted(allowed))}")
                    continue
                for prefixes, library, users in externals:
                    if any(("<" + header).startswith(p) for p in prefixes) and layer not in users:
                        yield (f"{rel}:{number}: includes <{header}> ({library}); "
                               f"only {', '.join(sorted(users))} may include {library}")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(violations(root))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) break the layering of cmake/layers.txt: move the code to the layer "
              f"that may use what it needs, or pass it in from above")
        return 1
    print("every include respects cmake/layers.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
