#!/usr/bin/env bash
# The attention backward's development loop on a lent Hopper GPU, in one call:
#   build (Release, sm_90a) -> the backward GPU tests -> `parallax attention --backward` (torch peers in the
#   same run) -> optionally an Nsight Compute profile of one backward launch.
#
#   GIT_SHA=<sha> scripts/device-attn-bwd.sh [OUT_DIR]        OUT_DIR defaults to $OUT, then ./out
#
# Environment:
#   TESTS=1          run `parallax_gpu_tests --gtest_filter=$TEST_FILTER` (default '*AttentionBackward*')
#   BENCH=1          run `parallax attention --backward --torch-peers $BENCH_ARGS` -> attention_bwd.json
#                    (default BENCH_ARGS: --kernel wgmma --head-dim 128 --causal both --deterministic both)
#   PROFILE=0        1: ncu --set full on one wgmma backward (scripts/profile_attn_bwd.py $PROFILE_ARGS) ->
#                    ncu_details.txt, ncu_source.csv (per-SASS-instruction stall samples)
#   BUILD_DIR=build-device
# Prints a short summary last; full logs in OUT_DIR/*.log.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.." || exit 2
OUT_DIR=${1:-${OUT:-out}}
mkdir -p "$OUT_DIR"
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
BUILD_DIR=${BUILD_DIR:-build-device}
[ -n "${GIT_SHA:-}" ] && export PARALLAX_GIT_SHA="$GIT_SHA"
summary=()
step() {  # step NAME COMMAND...: runs, logs to OUT_DIR/NAME.log, records the status and seconds
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  "$@" >"$OUT_DIR/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-10s rc=%-3s %4ss' "$name" "$rc" "$(($(date +%s) - t0))")")
  return $rc
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$OUT_DIR/gpu.txt" 2>&1

step build bash -c "cmake -S . -B '$BUILD_DIR' -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARALLAX_CUDA_ARCHS=90a \
  -DCMAKE_CUDA_ARCHITECTURES=90a && cmake --build '$BUILD_DIR' -j$(nproc)" || { printf '%s\n' "${summary[@]}"; tail -30 "$OUT_DIR/build.log"; exit 1; }

if [ "${TESTS:-1}" = 1 ]; then
  step tests "$BUILD_DIR/tests/parallax_gpu_tests" --gtest_filter="${TEST_FILTER:-*AttentionBackward*}"
fi
if [ "${BENCH:-1}" = 1 ]; then
  # shellcheck disable=SC2086
  step bench "$BUILD_DIR/tools/parallax" attention --backward --torch-peers --json-out "$OUT_DIR/attention_bwd.json" \
    ${BENCH_ARGS:---kernel wgmma --head-dim 128 --causal both --deterministic both}
fi
if [ "${PROFILE:-0}" = 1 ]; then
  export PARALLAX_LIB="$PWD/$BUILD_DIR/src"
  # shellcheck disable=SC2086
  step ncu ncu --clock-control none --kernel-name regex:attention_bwd_wgmma --launch-skip 2 --launch-count 1 \
    --set full --import-source yes -f -o "$OUT_DIR/bwd" python3 scripts/profile_attn_bwd.py ${PROFILE_ARGS:-}
  ncu --import "$OUT_DIR/bwd.ncu-rep" --page details >"$OUT_DIR/ncu_details.txt" 2>&1
  ncu --import "$OUT_DIR/bwd.ncu-rep" --page source --csv --print-source sass >"$OUT_DIR/ncu_source.csv" 2>&1
  gzip -f "$OUT_DIR/ncu_source.csv"
  rm -f "$OUT_DIR/bwd.ncu-rep"
fi

echo "==== summary ($(head -2 "$OUT_DIR/gpu.txt" | tail -1))"
printf '%s\n' "${summary[@]}"
[ -f "$OUT_DIR/tests.log" ] && grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]' "$OUT_DIR/tests.log" | head -20
[ -f "$OUT_DIR/bench.log" ] && grep -vE '^\s*$' "$OUT_DIR/bench.log" | grep -E 'wgmma|torch|cudnn|flash|S |---' | tail -40
[ -f "$OUT_DIR/ncu_details.txt" ] && grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc|Registers|Achieved Occ' "$OUT_DIR/ncu_details.txt" | head -12
exit 0
