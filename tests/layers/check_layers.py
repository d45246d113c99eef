#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer cmake/layers.txt does not allow it, or an
outside library's header (CAF, UCX, ...) its layer may not use.

usage: check_layers.py ROOT   (ROOT holds cmake/layers.txt and the layer folders)
Prints one line per violation (file:line, the include, its layer, the allowed list) and exits 1;
exits 0 when clean.

A project include is one that names a file in the tree: "model/gpt_chunk.hpp" from the root,
"../model/x.hpp" or "x.hpp" from the including file's folder, or <model/gpt_chunk.hpp>. Its layer
is the top-level folder the file lies in. A header the tree does not hold (a generated one) is
taken by its first folder when that names a layer. A top-level folder holding sources must be a
layer, so a new folder cannot slip past the table.
"""
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cc", ".cu", ".cuh", ".inl", ".ipp", ".tpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
TABLE = "cmake/layers.txt"


def read_table(root):
    """Returns {layer: the layers it may use, itself included} and
    [(library, header prefixes, layers that may use it)]."""
    layers, externals = {}, []
    for line in (root / TABLE).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 2:
            layers[cells[0]] = set(cells[1].split()) | {cells[0]}
        elif len(cells) == 4:
            externals.append((cells[0], cells[1].split(), set(cells[3].split())))
        else:
            raise SystemExit(f"{TABLE}: a layer row has 2 columns, a library row 4: {line!r}")
    return layers, externals


def is_build_tree(folder):
    return (folder / "CMakeCache.txt").exists() or (folder / "CMakeFiles").is_dir()


def sources(folder):
    for path in sorted(folder.rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            yield path


def layer_of_include(root, including, bracket, header, layers):
    """The layer a project include lands in, or None for an outside header."""
    candidates = [root / header]
    if bracket == '"':
        candidates.insert(0, including.parent / header)
    for c in candidates:
        if c.is_file():
            try:
                rel = c.resolve().relative_to(root)
            except ValueError:  # outside the tree
                continue
            return rel.parts[0] if len(rel.parts) > 1 else None
    first = header.split("/", 1)[0]
    return first if bracket == '"' and "/" in header and first in layers else None


def violations(root):
    layers, externals = read_table(root)
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        if folder.name.startswith(".") or folder.name in layers or is_build_tree(folder):
            continue
        stray = next(sources(folder), None)
        if stray is not None:
            yield (f"{stray.relative_to(root)}: {folder.name}/ holds sources but is no layer of {TABLE}; "
                   f"put the file in a layer's folder or give {folder.name}/ a row")
    for layer, allowed in sorted(layers.items()):
        folder = root / layer
        if not folder.is_dir():
            continue
        others = ", ".join(sorted(allowed - {layer})) or "nothing of ours"
        for path in sources(folder):
            rel = path.relative_to(root)
            for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(text)
                if not m:
                    continue
                bracket, header = m.groups()
                shown = f'"{header}"' if bracket == '"' else f"<{header}>"
                target = layer_of_include(root, path, bracket, header, layers)
                if target is not None:
                    if target not in layers:
                        yield (f"{rel}:{number}: includes {shown} from {target}/, which is no layer of "
                               f"{TABLE}")
                    elif target not in allowed:
                        yield (f"{rel}:{number}: includes {shown} (layer {target}); "
                               f"layer {layer} may include {others} (and itself)")
                    continue
                for library, prefixes, users in externals:
                    if any(("<" + header).startswith(p) for p in prefixes) and layer not in users:
                        yield (f"{rel}:{number}: includes {shown} ({library}); "
                               f"only {', '.join(sorted(users))} may include {library}")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(violations(root))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) break the layering of {TABLE}: move the code to the layer "
              f"that may use what it needs, or pass it in from above")
        return 1
    print(f"every include respects {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
