#!/usr/bin/env bash
# Files one device-check run's results where they are committed, named by the GPU and the code they measured:
#
#   scripts/save-results.sh FETCHED_DIR [--sha SHA] [--force] [--dry-run]
#
# copies FETCHED_DIR/*.json (and summary.txt) into bench/results/<gpu-slug>/<date>-<sha>/, e.g.
#   bench/results/nvidia-h100-80gb-hbm3/2026-11-13-1ace21d0c0ff/{info,ladder,tune}.json
# The GPU name, the git SHA and the date are read from the parallax results documents themselves
# (schema parallax.results/1: device.name, git_sha, timestamp_utc), never from this machine, so the folder
# names what was measured. Documents that disagree (two GPUs, two SHAs) are refused.
#   --sha SHA   use SHA when the documents say "unknown" (built from a copy of the tree without .git)
#   --force     replace an existing folder's files
#   --dry-run   say where the files would go, copy nothing
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-2}"; }

src="" sha_override="" force=0 dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --sha) [ $# -ge 2 ] || usage; sha_override=$2; shift 2 ;;
    --force) force=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage 0 ;;
    -*) echo "save-results: unknown option '$1'" >&2; usage ;;
    *) [ -z "$src" ] || usage; src=$1; shift ;;
  esac
done
[ -n "$src" ] || usage
[ -d "$src" ] || { echo "save-results: '$src' is not a folder" >&2; exit 2; }
command -v python3 >/dev/null || { echo "save-results: python3 is needed to read the JSON" >&2; exit 2; }

# One line "slug<TAB>date<TAB>sha" from the documents, or an error message and a non-zero exit.
meta=$(python3 - "$src" "$sha_override" <<'PY'
import glob, json, os, re, sys
src, sha_override = sys.argv[1], sys.argv[2]
seen = {}
for path in sorted(glob.glob(os.path.join(src, "*.json"))):
    try:
        with open(path) as f:
            doc = json.load(f)
    except Exception as e:
        print(f"save-results: note: {os.path.basename(path)} is not readable JSON ({e}); copied as is", file=sys.stderr)
        continue
    if not isinstance(doc, dict) or doc.get("schema") != "parallax.results/1":
        continue  # e.g. a tuner cache in its own format: copied, but it does not name the folder
    try:
        key = (doc["device"]["name"], doc["git_sha"], doc["timestamp_utc"][:10])
    except (KeyError, TypeError) as e:
        sys.exit(f"save-results: {path}: missing field {e}")
    seen.setdefault(key[:2], []).append((os.path.basename(path), key[2]))
if not seen:
    sys.exit(f"save-results: no parallax.results/1 document in {src}")
if len(seen) > 1:
    lines = "\n".join(f"  {gpu} @ {sha}: {', '.join(n for n, _ in files)}" for (gpu, sha), files in seen.items())
    sys.exit("save-results: the documents disagree on GPU or SHA:\n" + lines)
(gpu, sha), files = next(iter(seen.items()))
if sha_override:
    sha = sha_override
if not sha or sha == "unknown":
    sys.exit("save-results: the documents' git_sha is 'unknown' (built without .git?); pass --sha SHA")
if not re.fullmatch(r"[0-9A-Za-z._-]+", sha):
    sys.exit(f"save-results: unusable SHA '{sha}'")
date = min(d for _, d in files)  # the run's first document
if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
    sys.exit(f"save-results: unusable timestamp date '{date}'")
slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "unknown-gpu"
print(f"{slug}\t{date}\t{sha}")
PY
) || exit 1

IFS=$'\t' read -r slug date sha <<<"$meta"
dest="bench/results/$slug/$date-$sha"
files=()
for f in "$src"/*.json "$src"/summary.txt; do
  [ -f "$f" ] && files+=("$f")
done

if [ -d "$dest" ] && [ "$force" -eq 0 ]; then
  echo "save-results: $dest already exists (use --force to replace its files)" >&2
  exit 1
fi
echo "save-results: -> $dest"
for f in "${files[@]}"; do echo "  $(basename "$f")"; done
[ "$dry" -eq 1 ] && { echo "(dry run: nothing copied)"; exit 0; }
mkdir -p "$dest"
cp -- "${files[@]}" "$dest/"
echo "save-results: copied ${#files[@]} file(s); commit them with: git add $dest"
