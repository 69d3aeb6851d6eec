#!/usr/bin/env bash
# Fuzzing (CI runs it): builds the libFuzzer targets in fuzz/ with clang 16 under AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz/, then runs each for FUZZ_SECONDS (default 60) from its seed corpus
# (fuzz/corpus/<target>, copied: the committed seeds are not changed). A crash, a leak, undefined behaviour, an
# exception other than unet::Error, an input slower than 10 s or one needing over 2 GiB fails the run and leaves
# the input in build-fuzz/findings/<target>/; replay it with build-fuzz/fuzz/<target> <file>.
#
#   scripts/fuzz.sh                  all targets, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_image
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${FUZZ_SECONDS:-60}"
targets=("$@")
((${#targets[@]})) || targets=(fuzz_safetensors fuzz_checkpoint fuzz_image fuzz_config fuzz_metrics fuzz_rendezvous)

"$root/scripts/setup-debian.sh" --fuzz
build="$root/build-fuzz"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
      -DUNET_BUILD_FUZZERS=ON -DUNET_SANITIZE=address,undefined -DUNET_WITH_CUDA=OFF \
      -DUNET_BUILD_GUI=OFF -DUNET_BUILD_BENCH=OFF -DUNET_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --parallel --target "${targets[@]}"

failed=()
for target in "${targets[@]}"; do
  work="$build/corpus/$target" findings="$build/findings/$target"
  mkdir -p "$work" "$findings"
  echo "=== $target: $seconds s"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$build/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$findings/" "$work" "$root/fuzz/corpus/$target" 2>"$build/$target.log"; then
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done" "$build/$target.log" || true
  else
    failed+=("$target")
    tail -60 "$build/$target.log"
    echo "$target: FAILED; the input is in $findings/"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${targets[*]} ran clean, $seconds s each"
