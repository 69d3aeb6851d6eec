#!/usr/bin/env bash
# The launch command: installs what is missing, builds, and starts the workbench on the built-in demo
# (synthetic cells). Without a display, or before the desktop workbench is built, it says so and runs the same
# demo headless with unet-train. Extra arguments go to unet-train (e.g. --set train.epochs=3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh" >/dev/null
workbench="$root/build/gui/unet-workbench"
if [ -x "$workbench" ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  exec "$workbench" "$@"
fi
if [ ! -x "$workbench" ]; then
  echo "demo: the desktop workbench is not part of this build; running the demo headless with unet-train"
else
  echo "demo: no display (DISPLAY and WAYLAND_DISPLAY are unset); running the demo headless with unet-train"
fi
cd "$root"
exec "$root/build/cli/unet-train" train "$@"
