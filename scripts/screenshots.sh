#!/usr/bin/env bash
# Retakes the README's screenshots of the workbench during a training run, on a virtual X display (Xvfb).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/build.sh" >/dev/null
mkdir -p "$root/docs/screenshots"
QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$root/build/gui/unet-workbench-screenshots" "$root/docs/screenshots"
# And on a laptop's 1280x720 screen, in the size the window chooses there.
QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1280x720x24" \
  "$root/build/gui/unet-workbench-screenshots" "$root/docs/screenshots" -1280x720
echo "screenshots in docs/screenshots"
