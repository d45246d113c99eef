"""Counts a screenshot's pixels of given colours, for the inspector's web page test.

usage: png_colours.py FILE.png '#rrggbb' ...  -> one JSON object on stdout:
{"width": W, "height": H, "distinct": number of distinct colours,
 "colours": {"#rrggbb": {"pixels": n, "bands": [[y0, y1, x_min, x_max], ...]}}}
A band is a run of consecutive pixel rows that hold the colour (a chart row shows as one band);
x_min and x_max are the leftmost and rightmost pixels of the colour within it.
Decodes 8-bit non-interlaced PNGs with zlib only, so it needs no imaging package.
"""
import json
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or interlace != 0 or colour_type not in (2, 6):
        sys.exit(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    path, wanted = sys.argv[1], sys.argv[2:]
    width, height, bpp, rows = read_png(path)
    targets = {w: tuple(int(w[i:i + 2], 16) for i in (1, 3, 5)) for w in wanted}
    counts = {w: 0 for w in wanted}
    rows_with = {w: [] for w in wanted}  # (y, x_min, x_max)
    distinct = set()
    for y, line in enumerate(rows):
        pixels = [bytes(line[i:i + 3]) for i in range(0, len(line), bpp)]
        distinct.update(pixels)
        for w, rgb in targets.items():
            n = pixels.count(bytes(rgb))
            if n:
                counts[w] += n
                xs = [x for x, p in enumerate(pixels) if p == bytes(rgb)]
                rows_with[w].append((y, xs[0], xs[-1]))
    result = {"width": width, "height": height, "distinct": len(distinct), "colours": {}}
    for w in wanted:
        bands = []
        for y, x0, x1 in rows_with[w]:
            if bands and bands[-1][1] == y - 1:
                bands[-1][1] = y
                bands[-1][2] = min(bands[-1][2], x0)
                bands[-1][3] = max(bands[-1][3], x1)
            else:
                bands.append([y, y, x0, x1])
        result["colours"][w] = {"pixels": counts[w], "bands": bands}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
