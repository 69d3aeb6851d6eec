#!/usr/bin/env bash
# Formatting and static analysis, as CI runs them.
#
#   scripts/lint.sh          check: clang-format 14 on every C++ file, clang-tidy 16 on every engine/cli/gui
#                            source (findings of the .clang-tidy checks fail it)
#   scripts/lint.sh --fix    apply clang-format to every C++ file instead of checking it (then run it again)
#
# clang-tidy needs build/compile_commands.json (scripts/build.sh makes it). Its results are cached per source
# file in ~/.cache/unet-workbench/clang-tidy, keyed by a hash of the preprocessed file (comments kept), its flags and the
# .clang-tidy config, so after the first run only files whose code (or any header they include) changed are
# analysed again. clang-tidy 16, not Debian's default 14: clang 14 cannot parse libstdc++ 12's
# <source_location>, which the engine's errors use.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
"$root/scripts/setup-debian.sh" --lint

mode=check
case "${1:-}" in
  --fix) mode=fix ;;
  "") ;;
  *) echo "lint: unknown argument '$1' (use --fix or nothing)" >&2; exit 2 ;;
esac

# The floors the includes must keep (docs/ARCHITECTURE.md): the replicated step (engine/unet/step) sits below
# both the planner and the trainer, and the planner below the trainer; an include that runs back up makes the
# folders depend on each other again.
upward="$(grep -rnE '#include "unet/(plan|train)/' engine/unet/step; grep -rn '#include "unet/train/' engine/unet/plan)" || true
if [ -n "$upward" ]; then
  echo "lint: includes that run up the floors (step/ includes nothing from plan/ or train/; plan/ nothing from train/):" >&2
  sed 's/^/  /' <<<"$upward" >&2
  exit 1
fi
echo "lint: layering: step/ and plan/ include nothing above them"

# No two folders of the engine include each other, directly or around a circle: every include is an edge
# from the including file's folder to the included file's, and tsort refuses a graph with a loop.
folder_edges="$(grep -rnoE '#include "unet/[a-z_/]+/[A-Za-z0-9_.]+"' engine/unet |
  sed -E 's|^engine/(unet/.*)/[^/]+:[0-9]+:#include "(unet/.*)/[^/]+"$|\1 \2|' | sort -u)"
if ! loops="$(tsort <<<"$folder_edges" 2>&1 >/dev/null)" || [ -n "$loops" ]; then
  echo "lint: the engine's folders include each other in a circle:" >&2
  sed 's/^/  /' <<<"$loops" >&2
  exit 1
fi
echo "lint: layering: no include circle between the engine's folders"

mapfile -t cxx_files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "$mode" = fix ]; then
  clang-format-14 -i "${cxx_files[@]}"
  echo "lint: formatted ${#cxx_files[@]} files"
  exit 0
fi

start=$SECONDS
unformatted=()
for f in "${cxx_files[@]}"; do
  clang-format-14 --dry-run -Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "lint: ${#unformatted[@]} files differ from .clang-format (scripts/lint.sh --fix applies it):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  clang-format-14 --dry-run "${unformatted[0]}" 2>&1 | head -20 >&2
  exit 1
fi
echo "lint: clang-format: ${#cxx_files[@]} files formatted ($((SECONDS - start)) s)"

start=$SECONDS
db="$root/build/compile_commands.json"
[ -f "$db" ] || { echo "lint: $db is missing; run scripts/build.sh first" >&2; exit 1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/unet-workbench/clang-tidy"
mkdir -p "$cache"
# Every project source of engine/, cli/ and gui/ in the compile database (not generated moc/rcc files, not
# tests: the checks are for the shipped code), analysed two at a time; the exit status says whether any
# finding was printed.
python3 - "$root" "$db" "$cache" <<'PY' || { echo "lint: clang-tidy found the above (checks in .clang-tidy)" >&2; exit 1; }
import concurrent.futures, hashlib, json, os, shlex, subprocess, sys

root, db, cache = sys.argv[1:4]
config = open(os.path.join(root, ".clang-tidy"), "rb").read()
version = subprocess.run(["clang-tidy-16", "--version"], capture_output=True).stdout

def preprocess_command(entry):
    """The compile command turned into 'preprocess to stdout': no output file, no dependency files."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a not in ("-c", "-MD", "-MMD"):
            out.append(a)
    return out + ["-E", "-P", "-C"]  # -C: comments stay, so a NOLINT added or removed counts as a change

def tidy(entry):
    source = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(source, root)
    pre = subprocess.run(preprocess_command(entry), cwd=entry["directory"], capture_output=True)
    key = hashlib.sha256(pre.stdout + config + version + repr(preprocess_command(entry)).encode()).hexdigest()
    marker = os.path.join(cache, key[:40] + ".clean")
    if pre.returncode == 0 and os.path.exists(marker):
        return rel, []
    result = subprocess.run(["clang-tidy-16", "-p", os.path.dirname(db), "--quiet", source],
                            capture_output=True, text=True)
    findings = [line.replace(root + "/", "") for line in result.stdout.splitlines()
                if line.startswith("/") and (": warning: " in line or ": error: " in line)]
    if not findings and result.returncode == 0 and pre.returncode == 0:
        open(marker, "w").close()
    if result.returncode != 0 and not findings:
        findings = [f"{rel}: clang-tidy failed: {result.stderr.strip()[-400:]}"]
    return rel, findings

entries = [e for e in json.load(open(db))
           if (lambda rel: rel.split(os.sep)[0] in ("engine", "cli", "gui") and "_autogen" not in rel
               and rel.endswith(".cpp"))(os.path.relpath(os.path.normpath(os.path.join(e["directory"], e["file"])), root))]
seen, failed = set(), False
with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    for rel, findings in pool.map(tidy, entries):
        for line in findings:
            if line not in seen:  # a header's finding is reported once, not once per file that includes it
                seen.add(line)
                print(line)
                failed = True
print(f"lint: clang-tidy: {len(entries)} sources analysed or unchanged since a clean analysis", file=sys.stderr)
sys.exit(1 if failed else 0)
PY
echo "lint: clang-tidy: clean ($((SECONDS - start)) s)"
