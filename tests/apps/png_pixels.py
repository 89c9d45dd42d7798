#!/usr/bin/env python3
"""Is this PNG a picture or a blank page? Decodes an 8-bit RGB/RGBA PNG with the standard library only
(zlib, the five PNG row filters) and exits 0 when at least 2% of the pixels are not white-ish and at
least 5 distinct strong colours appear (the sweep plot's curves), 1 otherwise, saying which."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG layout"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = decode(sys.argv[1])
    ink, colours = 0, set()
    for line in rows:
        for x in range(width):
            r, g, b = line[x * bpp:x * bpp + 3]
            alpha = line[x * bpp + 3] if bpp == 4 else 255
            if alpha > 128 and min(r, g, b) < 200:
                ink += 1
                if max(r, g, b) - min(r, g, b) > 60:  # saturated: a curve, not grey text or grid
                    colours.add((r // 32, g // 32, b // 32))
    share = ink / float(width * height)
    print(f"{width}x{height}: {share:.1%} ink, {len(colours)} strong colours")
    if share < 0.02 or len(colours) < 5:
        print("the picture looks blank or has lost its curves")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
