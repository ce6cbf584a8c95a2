#!/usr/bin/env bash
# The multi-GPU study on a lent machine with 2+ GPUs, from the repository root, in one call:
#   device-check steps build + mgpu (the *2Gpu* tests, tp_mpi_2Gpu_copy_engine under mpirun included) + comm, then `parallax tp` for every layer (column, row,
#   mlp), strong and weak scaling, overlap on/off, both column-forward transports, the torch + NCCL baseline
#   (scripts/tp_torch_baseline.py), and `parallax report --quick` over all GPUs.
#   scripts/device-mgpu.sh [OUT_DIR]     (OUT_DIR defaults to $OUT, then ./out)
# What comes back: summary.txt, logs.tar.gz, comm.json (device-check), tp.tar.gz (every tp_*.json and the
# baseline log), report.tar.gz. TP_SHAPE overrides "--t 8192 --k 8192 --n 28672" (issue 7's bar shape).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/.." || exit 2
OUT_DIR=${1:-${OUT:-./out}}
mkdir -p "$OUT_DIR" && OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD_DIR=${BUILD_DIR:-build-device}
P="$PWD/$BUILD_DIR/tools/parallax"
G=$(nvidia-smi -L | wc -l)
SHAPE=${TP_SHAPE:-"--t 8192 --k 8192 --n 28672"}
T_BUILD=${T_BUILD:-200} T_MGPU=${T_MGPU:-300} T_COMM=${T_COMM:-90} STEPS=${CHECK_STEPS:-"build mgpu comm"} \
  BUDGET_S=${CHECK_BUDGET_S:-420} scripts/device-check.sh "$OUT_DIR"
TP=$(mktemp -d)/tp && mkdir -p "$TP"
# RUNS="name name ..." limits the tp runs below to those names (default: all); SKIP_TORCH=1 / SKIP_REPORT=1
# skip the torch baseline / the report (to fit a 600 s call: run the study in two calls with different RUNS).
run() {  # name, timeout, args...
  local name=$1 limit=$2; shift 2
  if [ -n "${RUNS:-}" ] && [[ " $RUNS " != *" $name "* ]]; then return 0; fi
  echo "== tp $name: $*"
  # shellcheck disable=SC2086
  timeout "$limit" "$P" tp --gpus "$G" $SHAPE "$@" --json-out "$TP/$name.json" >"$TP/$name.log" 2>&1
  echo "   rc $? $(tail -n 12 "$TP/$name.log" | tr -s ' ')"
}
run column_ce 90 --layer column --overlap both --transport copy-engine
run column_nccl 90 --layer column --overlap both --transport nccl
run column_ce_c8 60 --layer column --overlap on --transport copy-engine --chunks 8
run row 90 --layer row --overlap both
run row_ctas16 60 --layer row --overlap both --nccl-max-ctas 16
run mlp 120 --layer mlp --overlap both
run column_weak 60 --layer column --scaling weak --overlap both
run column_cublas 60 --layer column --overlap on --gemm cublas --transport copy-engine
# Chunk GEMMs on one stream (the old pipeline) vs the default two, and tapered chunks (docs/notes/tp.md).
run column_ce_s1 60 --layer column --overlap on --transport copy-engine --compute-streams 1
run column_ce_tapered 60 --layer column --overlap on --transport copy-engine --chunk-schedule tapered
run column_cublas_tapered 60 --layer column --overlap on --gemm cublas --transport copy-engine --chunk-schedule tapered
run mlp_s1 90 --layer mlp --overlap on --compute-streams 1
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  echo "== torch baseline"
  timeout 120 python3 scripts/tp_torch_baseline.py --gpus "$G" >"$TP/torch_baseline.log" 2>&1
  echo "   rc $? $(tail -n 8 "$TP/torch_baseline.log")"
fi
tar czf "$OUT_DIR/tp.tar.gz" -C "$(dirname "$TP")" tp
if [ "${SKIP_REPORT:-0}" != 1 ]; then
  echo "== report --quick over $G GPUs"
  timeout "${T_REPORT:-200}" "$P" report --quick --out "$TP/../report" >"$TP/../report.log" 2>&1
  echo "   rc $?"; cp "$TP/../report.log" "$TP/../report/" 2>/dev/null
  tar czf "$OUT_DIR/report.tar.gz" -C "$TP/.." report
fi
