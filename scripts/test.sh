#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test suite (GPU suites skip themselves on
# machines without a GPU); then the file-format suites again under AddressSanitizer.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh"
(cd "$root/build" && QT_QPA_PLATFORM=offscreen ctest --output-on-failure --timeout 900)

# Hostile-input suites under AddressSanitizer: a separate Debug build of just those tests.
cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DUNET_SANITIZE=address \
      -DUNET_BUILD_BENCH=OFF -DUNET_BUILD_GUI=OFF >/dev/null
asan_tests=(test_safetensors test_checkpoint)
cmake --build "$root/build-asan" --parallel --target "${asan_tests[@]}"
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -R "^($(IFS='|'; echo "${asan_tests[*]}"))\$")
echo "all tests passed"
