#!/usr/bin/env bash
# Writes the TIFF fixtures of tests/test_image_tiff.cpp (committed; run again only to change them) with writers
# that are not the decoder under test: ImageMagick's convert (LZW, from a PGM/PPM whose bytes Python writes) and
# python3's tifffile (Debian's python3-tifffile, python3-numpy), which writes TIFF itself, without libtiff.
# Every value follows a formula the test knows (x is the column, y the row):
#   gray8_lzw.tif         8-bit gray, LZW, 7x3, strips of 1 row        x + 100 y
#   gray16_lzw.tif        16-bit gray, LZW (ImageMagick), 6x2          1000 x + 300 y + 7
#   gray16_deflate_tiled  16-bit gray, Deflate, 20x18, 16x16 tiles     1000 x + 3 y
#   float32.tif           32-bit float, Deflate, 5x4                   -1.5 + 0.25 x + 0.5 y
#   float64.tif           64-bit float, 3x2                            x - 0.125 y
#   int16.tif             16-bit signed, 4x3                           -300 + 100 x + 37 y
#   uint32.tif            32-bit unsigned, 3x2                         70000 x + 5 y (70005 > 65535)
#   int32.tif             32-bit signed, 3x2                           -100000 + 1000 x + y
#   int8.tif              8-bit signed, 4x2                            -100 + 50 x + 7 y
#   rgb8_planar.tif       8-bit RGB, planar (separate), 4x3            (x, 10 y, 200)
#   rgba8.tif             8-bit RGBA, Deflate, 3x2                     (x, y, 7, 255 - x)
#   five16.tif            16-bit gray + 4 extra samples, 3x2           1000 c + 10 x + y for channel c
#   bilevel.tif           1-bit min-is-black, 10x2                     1 where (x + y) is odd
#   miniswhite8.tif       8-bit min-is-white, 4x2                      stored x + 10 y
#   palette8.tif          8-bit palette, 4x2                           index x + 4 y (+ 240 where x = 3), colour
#                                                                      (i, 255 - i, 3 i mod 256) in 16-bit entries
#   two_pages.tif         8-bit gray, page 0: x + y, page 1: 100 + x (4x3 and 5x2)
#   mask8.tif             8-bit mask, 4x3                              (x + y) % 3
#   mask16.tif            16-bit mask, Deflate, 4x3                    300 x + y (up to 901)
#   mask_pages.tif        8-bit mask, page 0 all 1, page 1: x % 2 (3x2)
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.tif
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
import tifffile

work = sys.argv[1]
y, x = np.mgrid[0:3, 0:7]
with open(f"{work}/gray8.pgm", "wb") as f:
    f.write(b"P5 7 3 255\n" + (x + 100 * y).astype(np.uint8).tobytes())
y, x = np.mgrid[0:2, 0:6]
with open(f"{work}/gray16.pgm", "wb") as f:
    f.write(b"P5 6 2 65535\n" + (1000 * x + 300 * y + 7).astype(">u2").tobytes())

def grid(h, w):
    return np.mgrid[0:h, 0:w]

def save(name, data, **kw):
    tifffile.imwrite(name, data, metadata=None, **kw)

y, x = grid(18, 20)
save("gray16_deflate_tiled.tif", (1000 * x + 3 * y).astype(np.uint16), tile=(16, 16), compression="zlib")
y, x = grid(4, 5)
save("float32.tif", (-1.5 + 0.25 * x + 0.5 * y).astype(np.float32), compression="zlib")
y, x = grid(2, 3)
save("float64.tif", (x - 0.125 * y).astype(np.float64))
y, x = grid(3, 4)
save("int16.tif", (-300 + 100 * x + 37 * y).astype(np.int16))
y, x = grid(2, 3)
save("uint32.tif", (70000 * x + 5 * y).astype(np.uint32))
save("int32.tif", (-100000 + 1000 * x + y).astype(np.int32))
y, x = grid(2, 4)
save("int8.tif", (-100 + 50 * x + 7 * y).astype(np.int8))
y, x = grid(3, 4)
save("rgb8_planar.tif", np.stack([x, 10 * y, np.full_like(x, 200)]).astype(np.uint8),
     photometric="rgb", planarconfig="separate")
y, x = grid(2, 3)
save("rgba8.tif", np.stack([x, y, np.full_like(x, 7), 255 - x], axis=-1).astype(np.uint8),
     photometric="rgb", extrasamples=["unassalpha"], compression="zlib")
save("five16.tif", np.stack([1000 * c + 10 * x + y for c in range(5)], axis=-1).astype(np.uint16),
     photometric="minisblack", planarconfig="contig")
y, x = grid(2, 10)
save("bilevel.tif", ((x + y) % 2).astype(bool), photometric="minisblack")
y, x = grid(2, 4)
save("miniswhite8.tif", (x + 10 * y).astype(np.uint8), photometric="miniswhite")
i = np.arange(256)
colormap = np.stack([i, 255 - i, (3 * i) % 256]).astype(np.uint16) * 257  # 16-bit entries, as TIFF stores
save("palette8.tif", (x + 4 * y + 240 * (x == 3)).astype(np.uint8), photometric="palette", colormap=colormap)
with tifffile.TiffWriter("two_pages.tif") as tif:
    y, x = grid(3, 4)
    tif.write((x + y).astype(np.uint8), metadata=None)
    y, x = grid(2, 5)
    tif.write((100 + x).astype(np.uint8), metadata=None)
y, x = grid(3, 4)
save("mask8.tif", ((x + y) % 3).astype(np.uint8))
save("mask16.tif", (300 * x + y).astype(np.uint16), compression="zlib")
with tifffile.TiffWriter("mask_pages.tif") as tif:
    y, x = grid(2, 3)
    tif.write(np.ones((2, 3), np.uint8), metadata=None)
    tif.write((x % 2).astype(np.uint8), metadata=None)
PY

convert "$work/gray8.pgm" -compress LZW -define tiff:rows-per-strip=1 gray8_lzw.tif
convert "$work/gray16.pgm" -depth 16 -compress LZW gray16_lzw.tif
ls -l ./*.tif
