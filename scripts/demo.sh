#!/usr/bin/env bash
# The launch command: installs what is missing, builds, and starts the workbench on the built-in demo
# (synthetic cells). Without a display (or in a build without Qt) it says so and runs the same demo headless with
# unet-train. Extra arguments go to unet-train in the headless case (e.g. --set train.epochs=3); the workbench
# itself is configured in its window.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh" >/dev/null
workbench="$root/build/gui/unet-workbench"
if [ -x "$workbench" ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  if [ "$#" -gt 0 ]; then
    echo "demo: arguments are for the headless demo; set them in the workbench's Configuration panel instead"
  fi
  exec "$workbench" --demo
fi
if [ ! -x "$workbench" ]; then
  echo "demo: this build has no desktop workbench (Qt 6 or QCustomPlot missing); running the demo headless"
else
  echo "demo: no display (DISPLAY and WAYLAND_DISPLAY are unset); running the demo headless with unet-train"
fi
cd "$root"
# Each headless demo gets a folder of its own (runs/demo-<time>), so that running it again never meets the
# last run's folder; naming a folder or resuming leaves the choice to the user.
case " $* " in
  *checkpoint.dir=* | *" --resume "*) ;;
  *) set -- --set "checkpoint.dir=runs/demo-$(date +%Y%m%d-%H%M%S)" "$@" ;;
esac
exec "$root/build/cli/unet-train" train "$@"
