#!/usr/bin/env bash
# The tensor-core GEMM study of issue 4 on a lent GPU, in one call, from the repository root:
#   device-check build -> the GEMM GPU tests -> compute-sanitizer memcheck + racecheck on the tensor-core GEMM
#   tests -> `parallax gemm --ladder --dtype bf16` over the issue's shapes, once per epilogue
#   (PARALLAX_GEMM_EPILOGUE=direct|tma, the ablation of the TMA-store epilogue), cuBLAS in the same run.
#   scripts/device-gemm.sh [OUT_DIR]       (OUT_DIR defaults to $OUT, then ./out)
# Environment: LEVELS (default wgmma-ws,wgmma-persistent,auto), EPILOGUES (default "direct tma"),
#   SHAPES (default: the issue's list), REPS (10), SKIP_CHECKS=1 (bench only), GIT_SHA (see device-check.sh).
# What comes back: summary.txt + logs.tar.gz (device-check's build), gemm-tests.log, sanitize.log,
#   tc-<epilogue>.json and tc-<epilogue>.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT_DIR=${1:-${OUT:-./out}}
mkdir -p "$OUT_DIR" && OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD_DIR=${BUILD_DIR:-build-device}
P="$PWD/$BUILD_DIR/tools/parallax"
T="$PWD/$BUILD_DIR/tests/parallax_gpu_tests"
command -v compute-sanitizer >/dev/null 2>&1 || export PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
SQUARES=1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192
LLM=8192x28672x8192,8192x8192x28672,4096x14336x4096,8192x1024x8192
TRANS=4096x4096x4096:NT,4096x4096x4096:TN,4096x4096x4096:TT
ODD=4095x4095x4095,1000x3000x777
SHAPES=${SHAPES:-$SQUARES,$LLM,$TRANS,$ODD}
LEVELS=${LEVELS:-wgmma-ws,wgmma-persistent,auto}
T_BUILD=${T_BUILD:-240} STEPS="build" scripts/device-check.sh "$OUT_DIR" >/dev/null 2>&1
echo "build: $(grep -m1 build "$OUT_DIR/summary.txt" 2>/dev/null)"
if [ "${SKIP_CHECKS:-0}" != 1 ]; then
  timeout 240 "$T" --gtest_brief=1 --gtest_filter='Gemm*:*Gemm*' >"$OUT_DIR/gemm-tests.log" 2>&1
  echo "gemm tests rc $? $(grep -E '^\[  (PASSED|FAILED)|tests ran' "$OUT_DIR/gemm-tests.log" | tr '\n' ' ')"
  {
    PARALLAX_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
      "$T" --gtest_brief=1 --gtest_filter='GemmTc*'
    echo "memcheck rc $?"
    PARALLAX_TEST_QUICK=1 timeout 150 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 1 \
      "$T" --gtest_brief=1 --gtest_filter="${RACE_FILTER:-GemmTc.AutoRunsTheTensorCoreLevel:GemmTcWgmma.*}"
    echo "racecheck rc $?"
  } >"$OUT_DIR/sanitize.log" 2>&1
  grep -E "rc [0-9]+|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT_DIR/sanitize.log"
fi
for e in ${EPILOGUES:-direct tma}; do
  PARALLAX_GEMM_EPILOGUE=$e timeout 240 "$P" gemm --ladder --dtype bf16 --out-dtype bf16 --shapes "$SHAPES" \
    --levels "$LEVELS" --reps "${REPS:-10}" --warmup 5 --budget-ms 2000 --tolerance 0.01 \
    --json-out "$OUT_DIR/tc-$e.json" >"$OUT_DIR/tc-$e.txt" 2>&1
  echo "== epilogue $e rc $?"
  grep -vE "^\s*$" "$OUT_DIR/tc-$e.txt" | tail -n 40
done
