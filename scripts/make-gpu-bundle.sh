#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine and packs it, with the Debian libraries that machine
# lacks (oneDNN, Qt Core/Test, ICU, {fmt}, ONNX export's libonnx_proto and its libprotobuf, ...: whatever ldd
# finds below), into build-gpu/gpu-bundle.tar.xz: one file to carry to the machine (the device tool carries
# ignored paths of at most 64 MiB in all). NVIDIA's libraries (driver, cuDNN, cuBLASLt, NVRTC, NCCL) are not
# packed: the GPU machine has them, and gpu-check.sh finds them there.
#
# It also runs, here, the CPU side of the check's comparison: the demo for 200 steps on cpu:0, whose validation
# IoU the check compares cuda:0's with (share/cpu-reference.json), so that the GPU machine's time goes to the GPU.
# That run takes a few minutes on 2 cores; its record is kept in build-gpu/cpu-reference.json and reused while
# unet-train and the demo config are unchanged.
#
#   scripts/make-gpu-bundle.sh            # SASS for sm_90 (H100/H200)
#   UNET_CUDA_ARCHITECTURES="80-real" scripts/make-gpu-bundle.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
arch="${UNET_CUDA_ARCHITECTURES:-90-real}"
# The demo run both sides make (gpu-check.sh passes the same, with devices=["cuda:0"]).
demo_steps=200
demo_overrides=(--set train.steps=$demo_steps --set checkpoint.every_epochs=0)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUNET_WITH_CUDA=ON \
      -DUNET_CUDA_ARCHITECTURES="$arch" -DUNET_BUILD_GUI=OFF >/dev/null
binaries=(unet-train unet-bench unet-memory-check test_ops test_layers test_unet test_data_parallel)
cmake --build "$build" --parallel --target "${binaries[@]}" unet_cuda
module_install="$build/engine/unet/backend/cuda/cmake_install.cmake"
[[ -f "$module_install" ]] || { echo "make-gpu-bundle: no CUDA module in this build (nvcc or cuDNN not found?)" >&2; exit 1; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bundle/bin" "$stage/bundle/lib" "$stage/bundle/share/test-data"
for b in "${binaries[@]}"; do
  path="$(find "$build" -name "$b" -type f -perm -u+x | head -n1)"
  [[ -n "$path" ]] || { echo "make-gpu-bundle: $b was not built" >&2; exit 1; }
  cp "$path" "$stage/bundle/bin/"
done
# The module as installed, whose RUNPATH is $ORIGIN: the build tree's names the build machine's CUDA folder and an
# empty element (the current folder). Only the module's own folder is installed, not the whole build.
cmake -DCMAKE_INSTALL_PREFIX="$stage/install" -DCMAKE_INSTALL_CONFIG_NAME=Release -P "$module_install" >/dev/null
module="$(find "$stage/install" -name libunet_cuda.so -type f | head -n1)"
[[ -n "$module" ]] || { echo "make-gpu-bundle: installing the CUDA module gave no libunet_cuda.so" >&2; exit 1; }
cp "$module" "$stage/bundle/lib/"
runpath="$(readelf -d "$stage/bundle/lib/libunet_cuda.so" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')"
if [[ "$runpath" != '$ORIGIN' ]]; then
  echo "make-gpu-bundle: the bundle's libunet_cuda.so has RUNPATH '$runpath', not '\$ORIGIN'" >&2
  exit 1
fi

# Every library ldd resolves for what is packed, except glibc's own, the C++ runtime (the GPU machine's is
# newer) and NVIDIA's (the GPU machine's are the ones that fit its driver).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudnn|libcublas|libnvrtc|libnccl|libnvidia)'
for f in "$stage"/bundle/bin/* "$stage"/bundle/lib/libunet_cuda.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$stage/bundle/lib/$name"
done

cp "$root/resources/configs/demo.json" "$root/bench/pytorch_reference.py" "$root/scripts/gpu_check_summary.py" \
   "$stage/bundle/share/"
# The test suites' data files (tests/test_data_dir.h: gpu-check.sh sets UNET_TEST_DATA_DIR to this folder).
cp -r "$root/tests/data/." "$stage/bundle/share/test-data/"
git -C "$root" describe --always --dirty --abbrev=9 > "$stage/bundle/share/commit" 2>/dev/null \
  || echo unknown > "$stage/bundle/share/commit"

# The CPU record: the demo's last validation on cpu:0, from this build's unet-train. Its key is what decides
# the result (the program, the config, the overrides); a record with another key is measured again.
train="$stage/bundle/bin/unet-train"
key="$( { sha256sum < "$train"; sha256sum < "$root/resources/configs/demo.json"; echo "${demo_overrides[*]}"; } \
        | sha256sum | cut -c1-16)"
record="$build/cpu-reference.json"
if [[ -f "$record" ]] && python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("key") != sys.argv[2])' \
     "$record" "$key" 2>/dev/null; then
  echo "make-gpu-bundle: CPU record of the demo ($demo_steps steps) kept from $record"
else
  echo "make-gpu-bundle: the demo for $demo_steps steps on cpu:0, for the check's comparison (a few minutes)"
  run="$stage/demo-cpu"
  started=$SECONDS
  "$train" train --config "$root/resources/configs/demo.json" --set 'devices=["cpu:0"]' "${demo_overrides[@]}" \
    --set checkpoint.dir="$run" > "$stage/demo-cpu.log" 2>&1 \
    || { tail -n 20 "$stage/demo-cpu.log" >&2; echo "make-gpu-bundle: the CPU demo run failed" >&2; exit 1; }
  python3 - "$run/metrics.jsonl" "$record" "$key" "$demo_steps" "$((SECONDS - started))" "${demo_overrides[*]}" <<'EOF'
import json, sys
metrics, record, key, steps, seconds, overrides = sys.argv[1:]
rows = [json.loads(l) for l in open(metrics) if l.strip()]
epochs = [r for r in rows if r.get("kind") == "epoch"]
if not epochs or epochs[-1].get("val_iou") is None:
    sys.exit("make-gpu-bundle: the CPU demo run logged no validation IoU in " + metrics)
last = epochs[-1]
json.dump({"key": key, "device": "cpu:0", "config": "demo.json", "overrides": overrides, "steps": int(steps),
           "seconds": int(seconds), "step": last.get("step"), "epoch": last.get("epoch"),
           "val_iou": last.get("val_iou"), "val_dice": last.get("val_dice"), "val_acc": last.get("val_acc"),
           "val_loss": last.get("val_loss"), "loss": last.get("loss")}, open(record, "w"), indent=1)
EOF
fi
cp "$record" "$stage/bundle/share/cpu-reference.json"
echo "make-gpu-bundle: CPU record: $(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]));
print("val IoU %.4f at step %s (%s s)" % (r["val_iou"], r["step"], r["seconds"]))' "$record")"

tar -C "$stage" -cJf "$build/gpu-bundle.tar.xz" bundle
size=$(stat -c %s "$build/gpu-bundle.tar.xz")
echo "build-gpu/gpu-bundle.tar.xz: $((size / 1048576)) MiB ($(ls "$stage/bundle/lib" | wc -l) libraries, sm: $arch," \
     "libunet_cuda.so RUNPATH $runpath)"
if (( size > 60 * 1048576 )); then
  echo "make-gpu-bundle: the bundle is over 60 MiB; the device tool carries 64 MiB in all" >&2
  exit 1
fi
