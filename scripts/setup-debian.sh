#!/usr/bin/env bash
# Installs what UNet Workbench builds against, from Debian 12's packages. Safe to run again: it only calls
# apt-get when something is missing. --lint adds what scripts/lint.sh needs, --fuzz what scripts/fuzz.sh needs.
# The CUDA toolkit (optional) is not installed here: put it at /usr/local/cuda.
set -euo pipefail

# Installed with --no-install-recommends, so a package that CMake needs only through a *Recommends* must be named:
# Debian's oneDNN CMake package calls find_package(OpenCL) (its GPU runtime is OpenCL), and ocl-icd-opencl-dev is
# only recommended by libdnnl-dev.
packages=(
  build-essential cmake ninja-build ccache pkg-config
  qt6-base-dev libqcustomplot-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libpng-dev
  libjpeg62-turbo-dev libtiff-dev libssl-dev libfmt-dev
  # Augmentation's warps, interpolation and blur: OpenCV's imgproc (and core), not the whole of libopencv-dev.
  libopencv-imgproc-dev
  # ONNX export: libonnx-dev's protobuf classes (it does not pull in protobuf's headers, libprotobuf-dev); the
  # export test checks the file with python3-onnx's checker and runs it with OpenCV's DNN module.
  libonnx-dev libprotobuf-dev python3-onnx python3-opencv python3-numpy
  # Multi-process training: Open MPI's headers and library (the engine's MPI module) and mpirun (the tests
  # launch two processes with it).
  libopenmpi-dev openmpi-bin
  xvfb xauth
  file  # cpack's DEB generator runs dpkg-shlibdeps, which needs it
  xz-utils  # tar -J: the GPU bundle and results.tar.xz (test_gpu_check runs gpu-check.sh); priority standard only
)
# scripts/lint.sh (CI) also needs the formatter and clang-tidy 16 (clang 14 cannot parse libstdc++ 12's
# <source_location>).
if [ "${1:-}" = --lint ]; then
  packages+=(clang-format-14 clang-tidy-16 libomp-16-dev python3)
fi
# scripts/fuzz.sh (CI) builds with clang 16, libFuzzer (in compiler-rt) and clang's OpenMP.
if [ "${1:-}" = --fuzz ]; then
  packages+=(clang-16 libclang-rt-16-dev libomp-16-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
