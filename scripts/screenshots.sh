#!/usr/bin/env bash
# Retakes the README's screenshots of the workbench during a training run, on a virtual X display (Xvfb).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh" >/dev/null
mkdir -p "$root/docs/screenshots"
QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$root/build/gui/unet-workbench-screenshots" "$root/docs/screenshots"
echo "screenshots in docs/screenshots"
