#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from a bundle made by scripts/make-gpu-bundle.sh. It
# builds nothing. Every stage has a time limit and the check goes on past a failed stage; the last lines are a
# summary table (scripts/gpu_check_summary.py), and OUTDIR keeps every output:
#   log.txt  stages.tsv  devices.json  <suite>.xml (junit)  demo-{cuda,cpu}/metrics.jsonl  memory.jsonl
#   bench.jsonl  summary.txt
#
#   scripts/gpu-check.sh OUTDIR [BUNDLE]      (BUNDLE: build-gpu/gpu-bundle.tar.xz)
#
# NVIDIA's libraries come from the machine: the system's, or a Python environment's nvidia/*/lib folders
# (cuDNN, cuBLAS, NVRTC, NCCL wheels), which UNET_CUDA_LIBRARY_PATH then names for the engine.
set -uo pipefail
out="${1:?usage: gpu-check.sh OUTDIR [BUNDLE]}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="${2:-$root/build-gpu/gpu-bundle.tar.xz}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xJf "$bundle" -C "$work" || { echo "gpu-check: cannot unpack $bundle" >&2; exit 1; }
B="$work/bundle"

python="$(command -v python3 || true)"
for candidate in /opt/torch/.venv/bin/python3 "${VIRTUAL_ENV:-}/bin/python3"; do
  [[ -x "$candidate" ]] && python="$candidate" && break
done
nvidia_libs=""
if [[ -n "$python" ]]; then
  site="$("$python" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)"
  [[ -n "$site" ]] && nvidia_libs="$(ls -d "$site"/nvidia/*/lib 2>/dev/null | paste -sd: -)"
fi
# Python (PyTorch, the summary) keeps the machine's own libraries: the bundle's are for our binaries only.
python_env=(env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
export LD_LIBRARY_PATH="$B/lib${nvidia_libs:+:$nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UNET_CUDA_MODULE="$B/lib/libunet_cuda.so"
[[ -n "$nvidia_libs" ]] && export UNET_CUDA_LIBRARY_PATH="$nvidia_libs"
export QT_QPA_PLATFORM=offscreen

exec > >(tee "$out/log.txt") 2>&1
echo "gpu-check of commit $(cat "$B/share/commit") on $(hostname), $(date -u +%FT%TZ)"
echo "NVIDIA libraries from: ${nvidia_libs:-the system}"
: > "$out/stages.tsv"

# The whole check fits one command of the device tool (10 minutes): each stage's limit shrinks to what is left
# of GPU_CHECK_BUDGET seconds (keeping 20 for the summary), and stages past it are recorded as skipped.
budget="${GPU_CHECK_BUDGET:-540}"

# stage NAME SECONDS COMMAND...: runs it with a limit and records "NAME<TAB>status<TAB>seconds".
stage() {
  local name="$1" limit="$2"
  shift 2
  local left=$((budget - 20 - SECONDS))
  if ((left < 10)); then
    printf '%s\t%s\t0\n' "$name" "skipped(budget)" >> "$out/stages.tsv"
    echo "=== $name: skipped, the check's ${budget} s budget is spent"
    return
  fi
  ((limit > left)) && limit=$left
  echo "=== $name (limit ${limit}s)"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  local status=ok
  ((rc == 124 || rc == 137)) && status=timeout
  ((rc != 0 && rc != 124 && rc != 137)) && status="failed($rc)"
  printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" >> "$out/stages.tsv"
  echo "--- $name: $status in $((SECONDS - start)) s"
}

stage nvidia-smi 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
stage devices 30 bash -c "'$B/bin/unet-train' devices --json > '$out/devices.json'; cat '$out/devices.json'"
# The workbench's Devices tab reads the same: NVML's utilisation, temperature and power of cuda:0 must be there.
stage "nvml readings" 10 python3 -c "
import json, sys
gpu = json.load(open('$out/devices.json'))['gpus'][0]
missing = [k for k in ('utilisation_percent', 'temperature_celsius', 'power_watts', 'used_by_others_bytes') if gpu.get(k) is None]
print(gpu); sys.exit(1 if missing else 0)"

# The backend suites' cuda:0 rows: every op, every layer, the U-Net's gradient against finite differences and
# against the CPU in each precision.
for suite in test_ops test_layers test_unet; do
  stage "$suite" 240 env UNET_TEST_DEVICES=cuda:0 "$B/bin/$suite" -o "$out/$suite.xml,junitxml" -o -,txt
done

# test_data_parallel's GPU rows: two replicas on cuda:0 (the device communicator) train as two CPU replicas, NCCL
# with one rank, and which communicator real GPU backends get. Its other rows are CPU replicas, which CI runs.
stage test_data_parallel 180 "$B/bin/test_data_parallel" -o "$out/test_data_parallel.xml,junitxml" -o -,txt \
  registryJoinsGpuReplicas twoReplicasOnOneGpuTrainAsCpuReplicas ncclWithOneRankTrainsAsOneReplica

# The demo for 200 steps on the GPU and on this machine's CPU: the validation IoU must match. The GPU run
# measures the runtime overhead into $out/cache; estimate then predicts what NVML showed during the run.
export UNET_CACHE_DIR="$out/cache"
for device in cuda:0 cpu:0; do
  name="demo-${device%%:*}"
  stage "$name" 240 "$B/bin/unet-train" train --config "$B/share/demo.json" --set "devices=[\"$device\"]" \
    --set train.steps=200 --set checkpoint.dir="$out/$name"
done
stage "estimate demo-cuda" 60 bash -c "'$B/bin/unet-train' estimate --json --config '$B/share/demo.json' \
  --set 'devices=[\"cuda:0\"]' > '$out/estimate-cuda.json'"

# Memory: the planner's prediction against the measured run, in fp32 and bf16, checkpointing off and on.
: > "$out/memory.jsonl"
for precision in fp32 mixed-bf16; do
  for checkpointing in false true; do
    stage "memory $precision ckpt=$checkpointing" 120 bash -c "'$B/bin/unet-memory-check' \
      --set 'devices=[\"cuda:0\"]' --set precision=$precision --set memory.checkpointing=$checkpointing \
      >> '$out/memory.jsonl'"
  done
done

# Speed: the engine and PyTorch on the same GPU in the same run.
: > "$out/bench.jsonl"
for precision in fp32 mixed-bf16 mixed-fp16; do
  stage "bench $precision" 120 bash -c "'$B/bin/unet-bench' --set 'devices=[\"cuda:0\"]' \
    --set precision=$precision --steps 50 >> '$out/bench.jsonl'"
done
big=(--set model.width=64 --set 'data.image_size=[256,256]' --set train.batch_size=16)
stage "bench width64 bf16" 180 bash -c "'$B/bin/unet-bench' --set 'devices=[\"cuda:0\"]' ${big[*]@Q} \
  --set precision=mixed-bf16 --steps 30 >> '$out/bench.jsonl'"
# Two replicas on cuda:0 summing through the device communicator: how much of the sum the gradient buckets hide
# behind backward (the line's "comm" object).
stage "bench overlap 2 replicas" 180 bash -c "'$B/bin/unet-bench' --set 'devices=[\"cuda:0\"]' ${big[*]@Q} \
  --set precision=mixed-bf16 --set comm.bucket_mib=4 --replicas-per-device 2 --steps 20 >> '$out/bench.jsonl'"
if [[ -n "$python" ]] && "${python_env[@]}" "$python" -c 'import torch' 2>/dev/null; then
  stage "pytorch width16 fp32" 120 "${python_env[@]}" bash -c "'$python' '$B/share/pytorch_reference.py' speed \
    --device cuda --channels-last --steps 50 >> '$out/bench.jsonl'"
  stage "pytorch width64 bf16" 180 "${python_env[@]}" bash -c "'$python' '$B/share/pytorch_reference.py' speed \
    --device cuda --amp bf16 --channels-last --width 64 --size 256 --batch 16 --steps 30 >> '$out/bench.jsonl'"
else
  echo "=== pytorch: not found, skipped"
fi

"${python_env[@]}" "${python:-python3}" "$B/share/gpu_check_summary.py" "$out" | tee "$out/summary.txt"
