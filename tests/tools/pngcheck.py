"""pngcheck - decode a PNG with the standard library and summarise it.

Used by the plot tests to prove a plot is a real, non-trivial image: the
signature, IHDR dimensions, every chunk's CRC, the decompressed scanlines
(all five filter types undone) and the set of distinct colours. Supports
8-bit greyscale, RGB, palette, grey+alpha and RGBA, non-interlaced (what
gnuplot's pngcairo and png terminals write); anything else is an error.
"""
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(raw, width, height, bpp):
    stride = width * bpp
    rows, prev, pos = [], bytearray(stride), 0
    for _ in range(height):
        ftype = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if len(line) != stride:
            raise ValueError("truncated image data")
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                line[i] = (line[i] + _paeth(a, b, c)) & 255
            elif ftype != 0:
                raise ValueError(f"bad filter type {ftype}")
        rows.append(bytes(line))
        prev = line
    return rows


def inspect(path):
    """{"width", "height", "size", "colours": set of RGB(A) tuples}."""
    data = open(path, "rb").read()
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG (bad signature)")
    pos, chunks = 8, []
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(ctype + body) & 0xffffffff != crc:
            raise ValueError(f"bad CRC in {ctype!r}")
        chunks.append((ctype, body))
        pos += 12 + length
        if ctype == b"IEND":
            break
    if chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("IHDR not first or IEND not last")
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB",
                                                        chunks[0][1])
    if depth != 8 or interlace != 0 or ctype not in CHANNELS:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type "
                         f"{ctype}, interlace {interlace})")
    raw = zlib.decompress(b"".join(b for t, b in chunks if t == b"IDAT"))
    bpp = CHANNELS[ctype]
    rows = _unfilter(raw, w, h, bpp)
    palette = next((b for t, b in chunks if t == b"PLTE"), b"")
    colours = set()
    for row in rows:
        for x in range(0, len(row), bpp):
            px = row[x:x + bpp]
            if ctype == 3:
                px = palette[3 * px[0]:3 * px[0] + 3]
            elif ctype in (0, 4):
                px = bytes([px[0]] * 3) + px[1:]
            colours.add(tuple(px[:3]))
    return {"width": w, "height": h, "size": len(data), "colours": colours}
