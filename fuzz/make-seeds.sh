#!/usr/bin/env bash
# Writes the seed corpora in fuzz/corpus/ (committed; run again only to change them): small valid inputs of
# each kind, so that the fuzzers start past the first checks. Needs a built unet-train (UNET_TRAIN, default
# build/cli/unet-train), ImageMagick's convert (Debian's imagemagick) and python3.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
train="${UNET_TRAIN:-$root/build/cli/unet-train}"
corpus="$root/fuzz/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"/{fuzz_safetensors,fuzz_checkpoint,fuzz_image,fuzz_config,fuzz_metrics,fuzz_rendezvous}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Checkpoints of the smallest model: a full one (with Adam's moments) and a weights-only export.
tiny=(--set model.width=1 --set model.depth=1 --set model.in_channels=1 --set 'data.image_size=[8,8]')
"$train" init "${tiny[@]}" --out "$work/full.safetensors" >/dev/null
"$train" export --checkpoint "$work/full.safetensors" --out "$work/weights.safetensors" >/dev/null
cp "$work/full.safetensors" "$work/weights.safetensors" "$corpus/fuzz_checkpoint/"
cp "$work/weights.safetensors" "$corpus/fuzz_safetensors/checkpoint.safetensors"

# Plain safetensors files: every dtype the reader knows, a scalar, an empty tensor, metadata.
python3 - "$corpus/fuzz_safetensors" <<'PY'
import json, struct, sys, pathlib
out = pathlib.Path(sys.argv[1])
def write(name, tensors, metadata=None):
    header, data = {}, b""
    for key, (dtype, shape, payload) in tensors.items():
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (out / name).write_bytes(struct.pack("<Q", len(text)) + text + data)
write("f32.safetensors", {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))})
write("mixed.safetensors", {"a": ("F16", [3], b"\x00\x3c" * 3), "b": ("BF16", [1], b"\x80\x3f"),
                            "c": ("I64", [], struct.pack("<q", 7)), "d": ("U8", [0], b""),
                            "e": ("F64", [1, 1], struct.pack("<d", 0.5))},
      {"format": "pt", "note": "seed"})
write("empty.safetensors", {})
PY

# Images: each PNG colour type and depth the decoder handles, interlaced, and baseline/progressive JPEG.
img="$corpus/fuzz_image"
convert -size 8x8 gradient:black-white -depth 8 "PNG8:$work/palette.png"
cp "$work/palette.png" "$img/palette.png"
convert -size 8x8 gradient:black-white -depth 8 -colorspace Gray "PNG:$img/gray8.png"
convert -size 8x8 gradient:black-white -depth 16 -colorspace Gray "PNG:$img/gray16.png"
convert -size 8x8 gradient:red-blue -depth 8 "PNG24:$img/rgb.png"
convert -size 8x8 gradient:red-blue -alpha set -channel A -evaluate set 50% "PNG32:$img/rgba.png"
convert -size 8x8 pattern:checkerboard -monochrome "PNG:$img/bilevel.png"
convert -size 16x16 gradient:red-blue -interlace PNG "PNG24:$img/interlaced.png"
convert -size 8x8 gradient:red-blue -quality 80 "$img/rgb.jpg"
convert -size 8x8 gradient:black-white -colorspace Gray "$img/gray.jpg"
convert -size 16x16 gradient:red-blue -interlace JPEG "$img/progressive.jpg"
# TIFF: 8-bit gray LZW in strips, 16-bit Deflate in tiles, float, planar RGB, two pages, bilevel, palette.
convert -size 8x8 gradient:black-white -depth 8 -colorspace Gray -compress LZW \
  -define tiff:rows-per-strip=2 "TIFF:$img/gray8-lzw.tif"
convert -size 20x20 gradient:black-white -depth 16 -colorspace Gray -compress Zip \
  -define tiff:tile-geometry=16x16 "TIFF:$img/gray16-deflate-tiled.tif"
convert -size 8x8 gradient:black-white -colorspace Gray -define quantum:format=floating-point -depth 32 -compress Zip \
  "TIFF:$img/float.tif"
convert -size 8x8 gradient:red-blue -depth 8 -interlace Plane "TIFF:$img/planar-rgb.tif"
convert -size 8x8 gradient:black-white -colorspace Gray -depth 8 \
  \( -size 4x4 gradient:white-black -colorspace Gray -depth 8 \) "TIFF:$img/two-pages.tif"
convert -size 16x8 pattern:checkerboard -monochrome -depth 1 -compress Group4 "TIFF:$img/bilevel-g4.tif"
convert -size 8x8 gradient:red-blue -depth 8 -type Palette "TIFF:$img/palette.tif"

# Configs: the shipped ones, and an assignment + template + document in the fuzzer's own layout.
cp "$root"/resources/configs/*.json "$corpus/fuzz_config/"
printf '%s\n' 'train.batch_size=4' 'unet-{epoch:02d}-{val_loss:.4f}.safetensors' \
  '{"model": {"width": 8}, "memory": {"cap_mib": 64}}' > "$corpus/fuzz_config/layout.txt"
printf '%s\n' 'devices=["cpu:0","cpu:1"]' '{step}-{val_acc:.1%}' '{}' > "$corpus/fuzz_config/devices.txt"
# Nesting at and past the 64 levels a config may have (docs/CONFIG.md), inside a key and at the top.
python3 - "$corpus/fuzz_config" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
(out / "nested-64.json").write_text('{"a":' * 63 + '{}' + '}' * 63 + "\n")
(out / "nested-deep.json").write_text('{"model": {"width": ' + '[' * 200 + ']' * 200 + '}}\n')
PY

# metrics.jsonl: a short run's own log (start, steps, epochs, memory samples, checkpoints), and hand-made
# lines: a resume, a partial last line, a key of another type, a deeply nested record.
"$train" train "${tiny[@]}" --set data.synthetic_samples=4 --set train.steps=2 --set train.epochs=1 \
  --set checkpoint.dir="$work/run" >/dev/null 2>&1
cp "$work/run/metrics.jsonl" "$corpus/fuzz_metrics/run.jsonl"
printf '%s\n' '{"kind":"start","step":0,"epoch":0}' '{"kind":"step","step":1,"loss":0.5,"lr":0.1}' \
  '{"kind":"resume","step":0,"epoch":0}' '{"kind":"epoch","epoch":1,"step":1,"val_iou_per_class":[0.5,null]}' \
  '{"kind":"step","step":"2"}' '[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]' '{"kind":"step","st' \
  > "$corpus/fuzz_metrics/edited.jsonl"

# Rendezvous messages (engine/unet/distributed/rendezvous_protocol.h), each after the fuzzer's selector byte (low 3 bits:
# the decoder; the rest: the world size - 2): valid ones of every kind, names at DNS's 253-character limit.
python3 "$root/fuzz/rendezvous-seeds.py" "$corpus/fuzz_rendezvous"

echo "seeds written to $corpus:"
for d in "$corpus"/*; do echo "  $(basename "$d"): $(ls "$d" | wc -l) files, $(du -sh "$d" | cut -f1)"; done
