#!/usr/bin/env bash
# CTest `report_from_sample`: `parallax report --from` on the committed sample results.json.
# Checks: exit 0; report.md has every section's table; every expected plot exists and is a non-empty PNG.
# Usage: report_from_sample.sh PARALLAX_EXE SAMPLE_JSON OUT_DIR
set -euo pipefail
exe=$1 sample=$2 out=$3
if ! python3 -c 'import matplotlib' >/dev/null 2>&1; then
  echo "SKIPPED: python3 with matplotlib is needed for the plots (pip install matplotlib)"
  exit 77
fi
rm -rf "$out"
"$exe" report --from "$sample" --out "$out"
fail=0
for heading in "Device roofs (measured)" "Roofline" "FP32 GEMM ladder vs cuBLAS" "Tensor-core GEMM vs cuBLAS" \
               "Attention forward" "Attention backward" "Collectives (NCCL)" "Tensor parallelism"; do
  grep -q "^## $heading" "$out/report.md" || { echo "report.md lacks the section '$heading'"; fail=1; }
done
grep -q "Not measured in this run" "$out/report.md" && { echo "report.md says a sample suite was not measured"; fail=1; }
for png in roofline ladder attention attention_backward comm tp_strong tp_weak tp_breakdown; do
  f="$out/$png.png"
  if [ ! -s "$f" ]; then echo "missing or empty plot $f"; fail=1; continue; fi
  # The PNG signature: 0x89 'PNG'.
  [ "$(head -c 4 "$f" | tail -c 3)" = "PNG" ] || { echo "$f is not a PNG"; fail=1; }
done
[ $fail -eq 0 ] && echo "report_from_sample: report.md and 8 plots OK in $out"
exit $fail
