#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine and packs it, with the Debian libraries that machine
# lacks (oneDNN, Qt Core/Test, ICU, {fmt}, ONNX export's libonnx_proto and its libprotobuf, ...: whatever ldd
# finds below), into build-gpu/gpu-bundle.tar.xz: one file to carry to the machine (the device tool carries
# ignored paths of at most 64 MiB in all). NVIDIA's libraries (driver, cuDNN, cuBLASLt, NVRTC, NCCL) are not
# packed: the GPU machine has them, and gpu-check.sh finds them there.
#
#   scripts/make-gpu-bundle.sh            # SASS for sm_90 (H100/H200)
#   UNET_CUDA_ARCHITECTURES="80-real" scripts/make-gpu-bundle.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
arch="${UNET_CUDA_ARCHITECTURES:-90-real}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUNET_WITH_CUDA=ON \
      -DUNET_CUDA_ARCHITECTURES="$arch" -DUNET_BUILD_GUI=OFF >/dev/null
binaries=(unet-train unet-bench unet-memory-check test_ops test_layers test_unet test_data_parallel)
cmake --build "$build" --parallel --target "${binaries[@]}" unet_cuda

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bundle/bin" "$stage/bundle/lib" "$stage/bundle/share"
for b in "${binaries[@]}"; do
  path="$(find "$build" -name "$b" -type f -perm -u+x | head -n1)"
  [[ -n "$path" ]] || { echo "make-gpu-bundle: $b was not built" >&2; exit 1; }
  cp "$path" "$stage/bundle/bin/"
done
cp "$build/engine/unet/backend/cuda/libunet_cuda.so" "$stage/bundle/lib/"

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
git -C "$root" rev-parse --short HEAD > "$stage/bundle/share/commit" 2>/dev/null || echo unknown > "$stage/bundle/share/commit"
tar -C "$stage" -cJf "$build/gpu-bundle.tar.xz" bundle
size=$(stat -c %s "$build/gpu-bundle.tar.xz")
echo "build-gpu/gpu-bundle.tar.xz: $((size / 1048576)) MiB ($(ls "$stage/bundle/lib" | wc -l) libraries, sm: $arch)"
if (( size > 60 * 1048576 )); then
  echo "make-gpu-bundle: the bundle is over 60 MiB; the device tool carries 64 MiB in all" >&2
  exit 1
fi
