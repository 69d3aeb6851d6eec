#!/usr/bin/env bash
# Proves the set-up on a machine that has nothing installed by hand: builds a fresh Debian 12 root
# (debootstrap --variant=minbase bookworm) from this machine's own apt sources and, inside it, runs the README's
# two commands from a copy of the repository; then builds the .deb there and installs it with apt-get into a
# second fresh root, where the installed binaries must run. Needs root (chroot, mount) and about 10 GiB free
# under the work folder.
#
#   scripts/fresh-root-check.sh [--skip-deb] [--deb FILE] [--work DIR]
#   (--deb FILE: skip the first root and install this package into a fresh one)
#
# What it takes from this machine, on purpose: the apt sources (the Debian mirror), /etc/resolv.conf, and
# /usr/local/cuda (read-only), because a fresh machine of our kind ships the CUDA toolkit there. The debootstrap
# package tarball is cached in /var/cache/unet-fresh-root so later runs skip that download; the roots' ccache
# is kept there too, so an unchanged tree compiles quickly (a missing header still fails: ccache preprocesses).
#
# The one rule that matters: a root is only deleted once nothing is mounted below it, so a failed unmount can
# never let `rm` reach through a bind mount into the host's /dev or /usr/local/cuda.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache=/var/cache/unet-fresh-root
work=""
skip_deb=0
deb=""  # --deb FILE: only the second stage, installing a package built elsewhere
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-deb) skip_deb=1 ;;
    --deb) deb="$(readlink -f "$2")"; shift ;;
    --work) work="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-root: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

[ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root (debootstrap, chroot and mount)" >&2; exit 2; }

script_start=$SECONDS
stage_start=$SECONDS
stage() {
  echo "fresh-root: [$(date -u +%H:%M:%S)] $*"
  stage_start=$SECONDS
}
stage_done() { echo "fresh-root:   done in $((SECONDS - stage_start)) s"; }

# --- the mirror: this machine's Debian sources for bookworm, bookworm-updates and bookworm-security -----------
# Prints "URI SUITE COMPONENTS" lines from deb822 .sources files and one-line .list files.
debian_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() { if (types ~ /(^| )deb( |$)/ && uris != "" && suites != "")
                              { n = split(uris, u, " "); m = split(suites, s, " ");
                                for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j], comps }
                            types = uris = suites = comps = "" }
         /^[ \t]*$/ { flush(); next }
         /^[ \t]*#/ { next }
         /^Types:/      { sub(/^Types:[ \t]*/, "");      types = $0 }
         /^URIs:/       { sub(/^URIs:[ \t]*/, "");       uris = $0 }
         /^Suites:/     { sub(/^Suites:[ \t]*/, "");     suites = $0 }
         /^Components:/ { sub(/^Components:[ \t]*/, ""); comps = $0 }
         END { flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # "deb [options] URI SUITE COMPONENTS..."
    sed -E -n 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+)[[:space:]]+([^[:space:]]+)[[:space:]]+(.*)$/\2 \3 \4/p' "$f"
  done
}
mapfile -t sources < <(debian_sources | awk '$2 ~ /^bookworm(-updates|-security)?$/' | sort -u)
mirror=$(printf '%s\n' "${sources[@]}" | awk '$2 == "bookworm" { print $1; exit }')
if [ -z "$mirror" ]; then
  echo "fresh-root: no Debian 12 (bookworm) source in /etc/apt/sources.list or /etc/apt/sources.list.d/" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "fresh-root: installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }

if [ -z "$work" ]; then
  work=$(mktemp -d /var/tmp/unet-fresh-root.XXXXXX)
fi
mkdir -p "$work" "$cache/ccache"

# --- mounts, and undoing them on every exit path -------------------------------------------------------------
mounted=()  # in mount order; unmounted in reverse
roots=()
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}
kill_processes_in() {  # anything still running with its root inside $1 (a test's leftover server, say)
  local pid link
  for link in /proc/[0-9]*/root; do
    pid=${link#/proc/}; pid=${pid%/root}
    [ "$(readlink "$link" 2>/dev/null)" = "$1" ] && kill -9 "$pid" 2>/dev/null || true
  done
}
unmount_all() {
  local i
  for root in "${roots[@]}"; do kill_processes_in "$root"; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount --lazy "${mounted[i]}" 2>/dev/null ||
      echo "fresh-root: could not unmount ${mounted[i]}" >&2
  done
  mounted=()
}
remove_root() {
  local root="$1"
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    echo "fresh-root: something is still mounted under $root; leaving it in place" >&2
    return 1
  fi
  rm -rf --one-file-system "$root"
}
cleanup() {
  local status=$?
  unmount_all
  for root in "${roots[@]}"; do remove_root "$root" || true; done
  if [ $status -eq 0 ]; then
    rm -rf "$work"
    echo "fresh-root: all stages passed in $((SECONDS - script_start)) s"
  else
    echo "fresh-root: FAILED (exit $status) after $((SECONDS - script_start)) s; logs in $work" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- a fresh root: debootstrap from the cached package tarball, our sources, the mounts ------------------------
tarball="$cache/bookworm-minbase.tgz"
if [ ! -s "$tarball" ]; then
  stage "downloading the minbase packages from $mirror into $tarball"
  rm -rf "$work/tarball-root"
  debootstrap --variant=minbase --make-tarball="$tarball.part" bookworm "$work/tarball-root" "$mirror" \
    >"$work/make-tarball.log" 2>&1 || { tail -20 "$work/make-tarball.log" >&2; exit 1; }
  mv "$tarball.part" "$tarball"
  rm -rf "$work/tarball-root"
  stage_done
fi

make_root() {  # make_root DIR: a new minbase root, ready to chroot into
  local root="$1"
  roots+=("$root")
  debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log" >&2; return 1; }
  printf 'deb %s\n' "${sources[@]}" >"$root/etc/apt/sources.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  bind /proc "$root/proc"
  bind /sys "$root/sys"
  bind /dev "$root/dev"
  bind /dev/pts "$root/dev/pts"
  bind /dev/shm "$root/dev/shm"
  if [ -d /usr/local/cuda ]; then bind "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda" ro; fi
}
in_root() {  # in_root DIR COMMAND: a login-like clean environment: no DISPLAY, nothing of this shell's
  chroot "$1" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$2"
}

# --- root 1: the README's two commands from a copy of the repository -------------------------------------------
if [ -z "$deb" ]; then
stage "root 1: debootstrap (minbase bookworm) in $work/root1"
make_root "$work/root1"
mkdir -p "$work/root1/root/.cache"
bind "$cache/ccache" "$work/root1/root/.cache/ccache"
stage_done

# The working tree as committed, plus uncommitted changes to tracked files (so a developer can try an edit
# before committing it); untracked files are not copied.
tree=$(git -C "$repo" stash create 2>/dev/null || true)
[ -n "$tree" ] || tree=HEAD
stage "root 1: copying the repository ($(git -C "$repo" rev-parse --short HEAD)$([ "$tree" = HEAD ] || echo ' + uncommitted changes')) to /src"
mkdir -p "$work/root1/src"
git -C "$repo" archive "$tree" | tar -x -C "$work/root1/src"
stage_done

stage "root 1: ./scripts/demo.sh --set train.epochs=1 (installs the packages, builds, trains the demo headless)"
in_root "$work/root1" 'cd /src && ./scripts/demo.sh --set train.epochs=1' >"$work/demo.log" 2>&1 ||
  { tail -40 "$work/demo.log" >&2; echo "fresh-root: demo.sh failed in the fresh root (log: $work/demo.log)" >&2; exit 1; }
tr '\r' '\n' <"$work/demo.log" | grep -E '^demo:|val_iou' | sed 's/^/  /'
stage_done

stage "root 1: ./scripts/test.sh"
in_root "$work/root1" 'cd /src && ./scripts/test.sh' >"$work/test.log" 2>&1 ||
  { tail -60 "$work/test.log" >&2; echo "fresh-root: test.sh failed in the fresh root (log: $work/test.log)" >&2; exit 1; }
grep -E 'tests passed|tests failed|all tests passed' "$work/test.log" | sed 's/^/  /'
stage_done

if [ $skip_deb -eq 1 ]; then exit 0; fi

stage "root 1: cpack -G DEB"
in_root "$work/root1" 'cd /src/build && cpack -G DEB' >"$work/cpack.log" 2>&1 ||
  { tail -20 "$work/cpack.log" >&2; exit 1; }
deb=$(find "$work/root1/src/build" -maxdepth 1 -name 'unet-workbench_*.deb' | head -1)
[ -n "$deb" ] || { echo "fresh-root: cpack made no unet-workbench_*.deb" >&2; exit 1; }
cp "$deb" "$work/"
deb="$work/$(basename "$deb")"
echo "  $(basename "$deb") ($(du -h "$deb" | cut -f1))"
stage_done

unmount_all
remove_root "$work/root1"
fi

# --- root 2: the package alone, installed by apt-get, so its Depends are proven complete -----------------------
stage "root 2: debootstrap, then apt-get install ./$(basename "$deb") (no recommends: Depends must suffice)"
make_root "$work/root2"
cp "$deb" "$work/root2/tmp/"
in_root "$work/root2" "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
  apt-get install -y -qq --no-install-recommends /tmp/$(basename "$deb")" >"$work/install.log" 2>&1 ||
  { tail -30 "$work/install.log" >&2; echo "fresh-root: the package did not install" >&2; exit 1; }
stage_done

stage "root 2: the installed programs"
in_root "$work/root2" 'set -e
  echo "+ unet-train devices"; unet-train devices
  mkdir -p /tmp/run && cd /tmp/run
  echo "+ unet-train train --set train.steps=3"; unet-train train --set train.steps=3
  test -s runs/demo/last.safetensors
  echo "+ unet-workbench --version"; QT_QPA_PLATFORM=offscreen unet-workbench --version
  for f in /usr/share/applications/unet-workbench.desktop \
           /usr/share/icons/hicolor/scalable/apps/unet-workbench.svg \
           /usr/share/icons/hicolor/256x256/apps/unet-workbench.png \
           /usr/share/unet-workbench/configs/demo.json \
           /usr/share/doc/unet-workbench/CONFIG.md; do
    test -s "$f" || { echo "missing: $f"; exit 1; }
    echo "installed: $f"
  done' >"$work/installed.log" 2>&1 ||
  { cat "$work/installed.log" >&2; echo "fresh-root: the installed package does not work" >&2; exit 1; }
sed 's/^/  /' "$work/installed.log" | grep -v '^  step ' | tail -30
# The desktop entry's syntax, with the tool desktop environments use (installed only now, after the proof).
in_root "$work/root2" 'apt-get install -y -qq --no-install-recommends desktop-file-utils >/dev/null &&
  desktop-file-validate /usr/share/applications/unet-workbench.desktop' ||
  { echo "fresh-root: desktop-file-validate refused the .desktop entry" >&2; exit 1; }
stage_done
