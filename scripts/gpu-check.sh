#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from a bundle made by scripts/make-gpu-bundle.sh. It
# builds nothing and runs nothing on the CPU alone: the CPU's figures it compares against were measured when the
# bundle was made (share/cpu-reference.json). Every stage has a time limit, the whole check keeps within
# GPU_CHECK_BUDGET seconds (default 420, so that a rerun fits a 15-minute GPU session), and it goes on past a
# failed stage; stages the budget no longer reaches are listed as skipped.
#
#   scripts/gpu-check.sh OUTDIR [BUNDLE]      (BUNDLE: build-gpu/gpu-bundle.tar.xz)
#
# OUTDIR must be empty or absent. Whatever happens (a failed stage, the budget spent, a bundle that does not
# unpack, an interrupt), it ends up holding exactly four files:
#   summary.txt      the summary table: each stage, its status, duration and key figures
#   log.txt          everything the stages printed, the summary table last
#   stages.tsv       one line per stage: name, status, seconds, limit, result file
#   results.tar.xz   results/: what the stages wrote (devices.json, the junit files, the demo's metrics.jsonl,
#                    estimate, memory and bench JSON lines, PyTorch's), the CPU record, info.txt
# The stages run in a work folder outside OUTDIR (checkpoints stay there), which is removed at the end.
#
# NVIDIA's libraries come from the machine: the system's, or a Python environment's nvidia/*/lib folders
# (cuDNN, cuBLAS, NVRTC, NCCL wheels), which UNET_CUDA_LIBRARY_PATH then names for the engine.
set -uo pipefail
out="${1:?usage: gpu-check.sh OUTDIR [BUNDLE]}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="${2:-$root/build-gpu/gpu-bundle.tar.xz}"
budget="${GPU_CHECK_BUDGET:-420}"
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "gpu-check: GPU_CHECK_BUDGET must be a whole number of seconds, not '$budget'" >&2
  exit 2
fi
mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 2; }
out="$(cd "$out" && pwd)"
if [[ -n "$(ls -A "$out")" ]]; then
  echo "gpu-check: $out is not empty; give an empty or new folder (nothing in it is overwritten)" >&2
  exit 2
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")" || { echo "gpu-check: cannot make a work folder" >&2; exit 2; }
R="$work/results"
mkdir -p "$R"
: > "$R/stages.tsv"

# Everything printed goes to the terminal and to the work folder's log; finish closes the tee and waits for it,
# so log.txt is whole before it is copied. The tee ignores INT and TERM: killed with the script's process group,
# it would take the rest of the log with it and leave the script writing into a closed pipe.
exec 3>&1 4>&2
exec > >(trap '' INT TERM; exec tee -a "$work/log.txt") 2>&1
tee_pid=$!

finished=0
failures=0
skipped=0
unpacked=0
unpack_problem=""
python=""
# Python (PyTorch, the summary) keeps the machine's own libraries: the bundle's are for our binaries only.
python_env=(env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")

# The summary (the bundle's gpu_check_summary.py; a plain table of stages.tsv where that cannot run) into
# summary.txt, then the four files into OUTDIR. Runs once: at the end, or on the way out after an interrupt.
finish() {
  ((finished)) && return
  finished=1
  trap '' INT TERM
  exec 1>&3 2>&4 3>&- 4>&-
  wait "$tee_pid" 2>/dev/null
  local summary="$work/summary.txt"
  if ((!unpacked)); then
    echo "gpu-check: nothing ran: the bundle $bundle could not be unpacked (${unpack_problem:-see log.txt})" > "$summary"
  elif [[ -n "$python" ]] && "${python_env[@]}" "$python" "$B/share/gpu_check_summary.py" "$R" > "$summary" 2>> "$work/log.txt"; then
    :
  else
    {
      echo "=== GPU check summary (gpu_check_summary.py could not run: stages only)"
      printf '%-30s  %-16s  %6s\n' stage status seconds
      while IFS=$'\t' read -r name status seconds _; do
        printf '%-30s  %-16s  %6s\n' "$name" "$status" "$seconds"
      done < "$R/stages.tsv"
    } > "$summary"
  fi
  { echo; cat "$summary"; } | tee -a "$work/log.txt"

  if ! tar -C "$work" -cJf "$out/results.tar.xz" results 2>> "$work/log.txt"; then
    echo "gpu-check: results.tar.xz could not be written (see log.txt); it holds only this note" | tee -a "$summary" "$work/log.txt"
    rm -f "$out/results.tar.xz"
    mkdir -p "$work/note/results" && cp "$summary" "$work/note/results/" && tar -C "$work/note" -cJf "$out/results.tar.xz" results
  fi
  cp "$R/stages.tsv" "$out/stages.tsv"
  cp "$summary" "$out/summary.txt"
  # Each file that comes back from the device tool may hold 16 MiB: a longer log keeps its last 15 MiB.
  if (($(stat -c %s "$work/log.txt") > 15 * 1048576)); then
    { echo "[log.txt: the first part was cut to keep the file under 16 MiB]"; tail -c $((15 * 1048576)) "$work/log.txt"; } > "$out/log.txt"
  else
    cp "$work/log.txt" "$out/log.txt"
  fi
}
trap 'finish; rm -rf "$work"' EXIT
# An interrupt ends the check after the running stage's command (bash runs the trap once it returns); that stage
# is recorded as interrupted.
current=""
interrupted() {
  echo "gpu-check: $1${current:+ during $current}"
  [[ -n "$current" ]] && record "$current" "$1" "$((SECONDS - current_start))" - -
  exit "$2"
}
trap 'interrupted interrupted 130' INT
trap 'interrupted terminated 143' TERM

# The stages' time: each limit shrinks to what is left of the budget, keeping `reserve` seconds for the summary
# and the packing and `kill_after` for a command that ignores timeout's TERM.
reserve=15
kill_after=5

record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$R/stages.tsv"; }

# stage NAME LIMIT RESULT COMMAND...: runs COMMAND under a limit and records its line in stages.tsv. RESULT is the
# file under results/ the stage leaves ('-': none); written as '>FILE', the command's standard output goes there.
stage() {
  local name="$1" limit="$2" result="$3"
  shift 3
  local file="${result#>}"
  local left=$((budget - reserve - kill_after - SECONDS))
  if ((left < 5)); then
    record "$name" "skipped(budget)" 0 "$limit" -
    skipped=$((skipped + 1))
    echo "=== $name: skipped, the check's ${budget} s budget is spent"
    return 0
  fi
  ((limit > left)) && limit=$left
  echo "=== $name (limit ${limit} s)"
  local start=$SECONDS rc
  current="$name" current_start=$SECONDS
  if [[ "$result" == '>'* ]]; then
    mkdir -p "$(dirname "$R/$file")"
    timeout --kill-after="$kill_after" "$limit" "$@" > "$R/$file"
    rc=$?
    head -n 40 "$R/$file"
    [[ -s "$R/$file" ]] || rm -f "$R/$file"
  else
    timeout --kill-after="$kill_after" "$limit" "$@"
    rc=$?
  fi
  local status=ok
  ((rc == 124 || rc == 137)) && status=timeout
  ((rc != 0 && rc != 124 && rc != 137)) && status="failed($rc)"
  ((rc != 0)) && failures=$((failures + 1))
  current=""
  record "$name" "$status" "$((SECONDS - start))" "$limit" "$file"
  echo "--- $name: $status in $((SECONDS - start)) s"
}

echo "gpu-check on $(hostname), $(date -u +%FT%TZ), budget ${budget} s; work folder $work"
# Unpacking is not held to the budget (nothing runs without it), but its time counts against it.
if [[ ! -f "$bundle" ]]; then
  unpack_problem="$bundle does not exist (make it with scripts/make-gpu-bundle.sh)"
  echo "gpu-check: $unpack_problem"
  record "unpack bundle" "failed(missing)" 0 0 -
  exit 3
fi
start=$SECONDS
if timeout 120 tar -xJf "$bundle" -C "$work" && [[ -x "$work/bundle/bin/unet-train" ]]; then
  unpacked=1
  record "unpack bundle" ok "$((SECONDS - start))" 120 -
else
  unpack_problem="tar failed or the archive holds no bundle/bin/unet-train"
  echo "gpu-check: cannot unpack $bundle: $unpack_problem"
  record "unpack bundle" failed "$((SECONDS - start))" 120 -
  exit 3
fi
B="$work/bundle"
cp "$B/share/cpu-reference.json" "$R/" 2>/dev/null || echo "gpu-check: the bundle has no CPU record (share/cpu-reference.json)"

python="$(command -v python3 || true)"
for candidate in /opt/torch/.venv/bin/python3 "${VIRTUAL_ENV:-}/bin/python3"; do
  [[ -x "$candidate" ]] && python="$candidate" && break
done
nvidia_libs=""
if [[ -n "$python" ]]; then
  site="$("$python" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)"
  [[ -n "$site" ]] && nvidia_libs="$(ls -d "$site"/nvidia/*/lib 2>/dev/null | paste -sd: -)"
fi
export LD_LIBRARY_PATH="$B/lib${nvidia_libs:+:$nvidia_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UNET_CUDA_MODULE="$B/lib/libunet_cuda.so"
[[ -n "$nvidia_libs" ]] && export UNET_CUDA_LIBRARY_PATH="$nvidia_libs"
export UNET_TEST_DATA_DIR="$B/share/test-data"
export UNET_CACHE_DIR="$work/cache"
export QT_QPA_PLATFORM=offscreen
{
  echo "commit: $(cat "$B/share/commit" 2>/dev/null || echo unknown)"
  echo "host: $(hostname)"
  echo "date: $(date -u +%FT%TZ)"
  echo "budget_s: $budget"
  echo "python: ${python:-none}"
  echo "nvidia_libraries: ${nvidia_libs:-the system}"
} > "$R/info.txt"
echo "commit $(cat "$B/share/commit" 2>/dev/null || echo unknown); NVIDIA libraries from: ${nvidia_libs:-the system}"

# Stages by value: what the GPU's rows of the test suites say first, then the demo, memory, speed, PyTorch.
stage nvidia-smi 15 '>nvidia-smi.csv' nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
stage devices 30 '>devices.json' "$B/bin/unet-train" devices --json
# The workbench's Devices tab reads the same: NVML's utilisation, temperature and power of cuda:0 must be there.
if [[ -n "$python" ]]; then
  stage "nvml readings" 10 '>nvml.json' "${python_env[@]}" "$python" -c '
import json, sys
gpus = json.load(open(sys.argv[1])).get("gpus") or []
if not gpus:
    sys.exit("devices.json lists no GPU")
keys = ("utilisation_percent", "temperature_celsius", "power_watts", "used_by_others_bytes")
print(json.dumps({k: gpus[0].get(k) for k in keys}))
missing = [k for k in keys if gpus[0].get(k) is None]
sys.exit("NVML gave no " + ", ".join(missing) if missing else 0)' "$R/devices.json"
else
  record "nvml readings" "skipped(no python)" 0 0 -
fi

# The backend suites' cuda:0 rows: every op, every layer, the U-Net's gradient against finite differences and
# against the CPU in each precision.
for suite in test_ops test_layers test_unet; do
  limit=60
  [[ $suite == test_unet ]] && limit=90
  stage "$suite" "$limit" "$suite.xml" env UNET_TEST_DEVICES=cuda:0 "$B/bin/$suite" \
    -o "$R/$suite.xml,junitxml" -o -,txt
done
# test_data_parallel's GPU rows: two replicas on cuda:0 (the device communicator) train as two CPU replicas and
# sum in buckets bitwise as in one sum (review finding B1), NCCL with one rank, and which communicator real GPU
# backends get. Its other rows are CPU replicas, which CI runs (and again on asynchronous CPU streams).
stage test_data_parallel 60 test_data_parallel.xml "$B/bin/test_data_parallel" \
  -o "$R/test_data_parallel.xml,junitxml" -o -,txt \
  registryJoinsGpuReplicas twoReplicasOnOneGpuTrainAsCpuReplicas bucketsSumAsOneSumOnAGpu \
  ncclWithOneRankTrainsAsOneReplica

# The demo for 200 steps on cuda:0; its validation IoU is compared with the CPU's for the same run, recorded in
# the bundle. No periodic checkpoints (last and best stay in the work folder). The run measures the runtime's
# overhead into $UNET_CACHE_DIR; estimate then predicts what NVML showed during the run.
stage demo-cuda 75 demo-cuda/metrics.jsonl "$B/bin/unet-train" train --config "$B/share/demo.json" \
  --set 'devices=["cuda:0"]' --set train.steps=200 --set checkpoint.every_epochs=0 \
  --set checkpoint.dir="$work/runs/demo-cuda"
mkdir -p "$R/demo-cuda"
cp "$work/runs/demo-cuda/metrics.jsonl" "$work/runs/demo-cuda/validation.json" "$R/demo-cuda/" 2>/dev/null
stage "estimate demo-cuda" 20 '>estimate-cuda.json' "$B/bin/unet-train" estimate --json \
  --config "$B/share/demo.json" --set 'devices=["cuda:0"]'
[[ -f "$work/cache/overhead.json" ]] && mkdir -p "$R/cache" && cp "$work/cache/overhead.json" "$R/cache/"

# Memory: the planner's prediction against the measured run, in fp32 and bf16, checkpointing off and on.
for precision in fp32 mixed-bf16; do
  for checkpointing in false true; do
    stage "memory $precision ckpt=$checkpointing" 25 ">memory-$precision-ckpt-$checkpointing.jsonl" \
      "$B/bin/unet-memory-check" --set 'devices=["cuda:0"]' --set precision=$precision \
      --set memory.checkpointing=$checkpointing
  done
done

# Speed: the engine in each precision, a larger model, and two replicas on cuda:0 summing through the device
# communicator (how much of the sum the gradient buckets hide behind backward: the line's "comm" object).
for precision in fp32 mixed-bf16 mixed-fp16; do
  stage "bench $precision" 30 ">bench-$precision.jsonl" "$B/bin/unet-bench" --set 'devices=["cuda:0"]' \
    --set precision=$precision --steps 50
done
big=(--set model.width=64 --set 'data.image_size=[256,256]' --set train.batch_size=16 --set precision=mixed-bf16)
stage "bench width64 bf16" 45 '>bench-width64-bf16.jsonl' "$B/bin/unet-bench" --set 'devices=["cuda:0"]' \
  "${big[@]}" --steps 30
stage "bench overlap 2 replicas" 45 '>bench-overlap-2-replicas.jsonl' "$B/bin/unet-bench" \
  --set 'devices=["cuda:0"]' "${big[@]}" --set comm.bucket_mib=4 --replicas-per-device 2 --steps 20

# PyTorch on the same GPU, last: the same two models.
if [[ -n "$python" ]] && "${python_env[@]}" "$python" -c \
     'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; then
  stage "pytorch width16 fp32" 45 '>pytorch-width16-fp32.jsonl' "${python_env[@]}" "$python" \
    "$B/share/pytorch_reference.py" speed --device cuda --channels-last --steps 50
  stage "pytorch width64 bf16" 45 '>pytorch-width64-bf16.jsonl' "${python_env[@]}" "$python" \
    "$B/share/pytorch_reference.py" speed --device cuda --amp bf16 --channels-last --width 64 --size 256 \
    --batch 16 --steps 30
else
  echo "=== pytorch: no Python with torch found, skipped"
  record "pytorch width16 fp32" "skipped(no torch)" 0 0 -
  record "pytorch width64 bf16" "skipped(no torch)" 0 0 -
fi

finish
# 0 when every stage ran and exited 0 (the summary judges their figures), 1 when one failed or the budget left
# one out.
((failures == 0 && skipped == 0))
