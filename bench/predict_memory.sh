#!/bin/sh
# Peak memory of `unet-train predict` for a model of many classes on a large image (issue 23: a 255-class model
# on a 2048x2048 PNG took 8.4 GB, the whole float map held twice; streamed, 1.8 GB, most of it the 254 8-bit
# probability images it writes). Prints the peak resident set (/usr/bin/time -v) for probability images and
# for masks. A width-8 model keeps the forward passes short; the memory at issue grows with classes x pixels.
#   bench/predict_memory.sh build/cli/unet-train [CLASSES] [SIDE]
set -eu
unet_train=$1
classes=${2:-255}
side=${3:-2048}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/in"
# A smooth RGB image (a few KB of PNG), written with the standard library alone.
python3 - "$work/in/image.png" "$side" <<'PY'
import struct, sys, zlib
path, side = sys.argv[1], int(sys.argv[2])
rows = b"".join(b"\0" + bytes(((y // 8) % 256, 128, 60)) * side for y in range(side))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
with open(path, "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))
PY
"$unet_train" init --set model.classes="$classes" --set model.width=8 --out "$work/model.safetensors" >/dev/null
for kind in probability mask; do
  /usr/bin/time -v "$unet_train" predict --checkpoint "$work/model.safetensors" --input "$work/in" \
    --output "$work/out-$kind" --output-kind "$kind" 2>"$work/time.txt" >/dev/null
  peak=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
  echo "{\"classes\": $classes, \"side\": $side, \"output_kind\": \"$kind\", \"peak_rss_mib\": $((peak / 1024))}"
done
