#!/usr/bin/env bash
# The whole check on a GPU machine, from the repository root, with no network:
#   build (Release) -> ctest (CPU + GPU) -> compute-sanitizer memcheck and racecheck over the GPU tests ->
#   pytest (if python/tests exists) -> `parallax tune gemm-fp32` -> `parallax info` -> `parallax gemm --ladder`
#
#   scripts/device-check.sh [OUT_DIR]            OUT_DIR defaults to $OUT, then ./out
#
# What comes back (at most 8 files, all at the top of OUT_DIR, because that is what a lent machine returns):
#   summary.txt   the step table and the key numbers (also printed last on stdout)
#   logs.tar.gz   every step's full log (logs/<step>.log), nvidia-smi, the ctest JUnit file
#   info.json, ladder.json, tune.json, tc.json   the results documents (schema parallax.results/1; tune: the
#                 tuner's; tc: the tensor-core GEMM study `parallax gemm --ladder --dtype bf16`)
#   attention.json, attention_peers.json   `parallax attention` and torch SDPA (flash, cuDNN) in the same run
#   comm.json, tp.json   (steps comm / tp, 2+ GPUs) `parallax comm` and `parallax tp` over all visible GPUs
# summary.txt and logs.tar.gz are rewritten after every step, so a run cut off from outside still leaves
# what it had done.
#
# Every step runs even if an earlier one failed; each has a timeout; the script exits non-zero if any step
# did not pass (steps listed in TOLERATE excepted: they are recorded, not counted).
#
# Environment:
#   STEPS="build test memcheck racecheck python tune info ladder tc"   which steps, in this order; aliases:
#         all, sanitize (memcheck racecheck), bench (tune info ladder tc), quick (build test info)
#   TC_DTYPE=bf16  TC_ARGS="" (more `parallax gemm --ladder --dtype` options, e.g. "--levels mma,wgmma")
#   ATTN_ARGS="" (more `parallax attention` options, e.g. --quick)   TP_ARGS="" (more `parallax tp` options)
#   multi-GPU steps (not in "all"): mgpu (the *2Gpu* GPU tests, one ctest per test with a time limit),
#   comm, tp
#   MEMCHECK_FILTER='*' / RACECHECK_FILTER=<the shared-memory paths>: gtest filters of the sanitizer steps
#   report (not in "all"): `parallax report ${REPORT_ARGS:---quick}` -> report.tar.gz (results.json, report.md, PNGs)
#   attention_bwd (not in "all": the file limit): `parallax attention --backward --torch-peers` ->
#   attention_bwd.json (peers inside); ATTN_BWD_ARGS="" more options (e.g. --quick --head-dim 128)
#   PARALLAX_CUDA_ARCHS=90a   architectures to build (90a only by default here: half the compile time)
#   BUILD_DIR=build-device    JOBS=<nproc>    CTEST_JOBS=8
#   LADDER_SIZES=1000,1024,2048,4096,8192   LADDER_ARGS="" (more `parallax gemm` options)
#   TOLERATE="tune"           steps whose failure is recorded but does not fail the script
#   GIT_SHA=<sha>             the revision for the summary when the tree has no .git (a copied checkout)
#   BUDGET_S=<seconds>        total wall-clock budget: each step's timeout is cut to what is left (keep it
#                             under the caller's own limit, e.g. BUDGET_S=570 under a 600 s limit)
#   T_BUILD T_TEST T_MEMCHECK T_RACECHECK T_PYTHON T_TUNE T_INFO T_LADDER T_TC   per-step timeouts in seconds
set -uo pipefail  # no -e: a failing step is recorded, and the next one still runs

# A rule on the lent machines: NVLink multicast stays off (it can take a shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
SELF="$ROOT/scripts/device-check.sh"

command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
command -v compute-sanitizer >/dev/null 2>&1 || export PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer

export BUILD_DIR=${BUILD_DIR:-build-device}
export PARALLAX_CUDA_ARCHS=${PARALLAX_CUDA_ARCHS:-90a}
export JOBS=${JOBS:-$(nproc)}
export CTEST_JOBS=${CTEST_JOBS:-8}
export LADDER_SIZES=${LADDER_SIZES:-1000,1024,2048,4096,8192}
export LADDER_ARGS=${LADDER_ARGS:-}
PARALLAX="$ROOT/$BUILD_DIR/tools/parallax"
GPU_TESTS="$ROOT/$BUILD_DIR/tests/parallax_gpu_tests"

# A copied tree has no .git: GIT_SHA, when given, also goes into the build (every JSON result carries it).
[ -n "${GIT_SHA:-}" ] && export PARALLAX_GIT_SHA="$GIT_SHA"

# ------------------------------------------------------------------------------------------------ one step
# The script calls itself as `device-check.sh __step NAME OUT_DIR LOG_DIR` under `timeout`, so each step
# is an ordinary process that timeout can stop, with its whole process group.
if [ "${1:-}" = "__step" ]; then
  step=$2 out=$3 logs=$4
  case $step in
    build)
      cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DPARALLAX_CUDA_ARCHS="$PARALLAX_CUDA_ARCHS" -DCMAKE_CUDA_ARCHITECTURES="$PARALLAX_CUDA_ARCHS" &&
        cmake --build "$BUILD_DIR" -j"$JOBS"
      ;;
    test)
      ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$CTEST_JOBS" --timeout 600 \
        --output-junit "$logs/ctest-junit.xml"
      ;;
    memcheck | racecheck)
      # Smaller shapes (the GPU tests honour PARALLAX_TEST_QUICK): the sanitizers run kernels 10-100x slower.
      # racecheck is far slower than memcheck on shared-memory kernels: it covers every ladder level's
      # shared-memory path (small and big tiles, edges) rather than every test (RACECHECK_FILTER overrides).
      filter=${MEMCHECK_FILTER:-'*'}
      [ "$step" = racecheck ] && filter=${RACECHECK_FILTER:-'Level4/AttentionMmaTest.TileEdges/bf16_d128:GemmTcWgmma.ClusterPairsOddTileRowsAndWalks:Ladder/SgemmLadderTest.BigTilePathWithEdges/*:Ladder/SgemmLadderTest.AlphaBeta/*:Level3/AttentionMmaTest.TileEdges/bf16_d128:GemmTc.AutoRunsTheTensorCoreLevel:Backward/AttentionBackwardFloat64.CausalShapes/mma_bf16_d128:Backward/AttentionBackwardFloat64.OddLengthsAndTileEdges/mma_f16_d64'}
      # --report-api-errors no: NCCL's communicator set-up probes its kernels with cudaFuncGetAttributes and
      # handles the "no kernel image" answers itself; memcheck would count each as an error. parallax checks
      # every CUDA call's status itself (the tests fail on any), so only memory/race findings count here.
      PARALLAX_TEST_QUICK=1 compute-sanitizer --tool "$step" --report-api-errors no --error-exitcode 1 "$GPU_TESTS" --gtest_brief=1 \
        --gtest_filter="$filter"
      ;;
    python)
      PARALLAX_LIB="$ROOT/$BUILD_DIR/src/libparallax.so" PYTHONUNBUFFERED=1 python3 -m pytest -q python/tests
      ;;
    tune)
      # JSON on stdout into the file, messages into the log.
      "$PARALLAX" tune gemm-fp32 --sizes "${TUNE_SIZES:-1000,2048,4096,8192}" --json >"$out/tune.json"
      ;;
    info)
      "$PARALLAX" info --json-out "$out/info.json"
      ;;
    ladder)
      # shellcheck disable=SC2086  # LADDER_ARGS is a list of words on purpose
      "$PARALLAX" gemm --ladder --sizes "$LADDER_SIZES" --json-out "$out/ladder.json" $LADDER_ARGS
      ;;
    attention)
      # torch's SDPA backends first (the peers), then parallax with the peers' numbers beside its own.
      PYTHONUNBUFFERED=1 python3 scripts/attention_peers.py --out "$out/attention_peers.json" ${ATTN_PEER_ARGS:-} &&
        "$PARALLAX" attention --peers "$out/attention_peers.json" --json-out "$out/attention.json" ${ATTN_ARGS:-}
      ;;
    attention_bwd)
      # The backward with torch's flash / cuDNN backward in the same run (the CLI runs the peers script itself;
      # the peers' records travel in the same document).
      "$PARALLAX" attention --backward --torch-peers --json-out "$out/attention_bwd.json" ${ATTN_BWD_ARGS:-}
      ;;
    report)
      # `parallax report` (REPORT_ARGS, default --quick) into one tarball (a lent machine returns <= 8 files).
      # shellcheck disable=SC2086
      "$PARALLAX" report ${REPORT_ARGS:---quick} --out "$logs/../report" &&
        tar czf "$out/report.tar.gz" -C "$logs/.." report
      ;;
    mgpu)
      ctest --test-dir "$BUILD_DIR" -R '2Gpu' --output-on-failure --timeout 120
      ;;
    comm)
      g=$(nvidia-smi -L | wc -l)
      "$PARALLAX" comm --gpus "$g" --op all --min-bytes 1048576 --max-bytes 1073741824 --json-out "$out/comm.json"
      ;;
    tp)
      g=$(nvidia-smi -L | wc -l)
      # shellcheck disable=SC2086
      "$PARALLAX" tp --gpus "$g" --t 8192 --k 8192 --n 28672 --json-out "$out/tp.json" ${TP_ARGS:-}
      ;;
    tc)
      # shellcheck disable=SC2086  # TC_ARGS is a list of words on purpose
      "$PARALLAX" gemm --ladder --dtype "${TC_DTYPE:-bf16}" --json-out "$out/tc.json" ${TC_ARGS:-}
      ;;
    *)
      echo "device-check: unknown step '$step'" >&2
      exit 2
      ;;
  esac
  exit $?
fi

# ------------------------------------------------------------------------------------------------ setup
case ${1:-} in
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  -*) echo "device-check: unknown option '$1' (usage: scripts/device-check.sh [OUT_DIR])" >&2; exit 2 ;;
esac
OUT_DIR=${1:-${OUT:-./out}}
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$(mktemp -d)
LOG_DIR="$WORK/logs"
mkdir -p "$LOG_DIR"
trap 'rm -rf "$WORK"' EXIT

STEPS=${STEPS:-all}
TOLERATE=${TOLERATE:-tune}
expanded=()
for s in $STEPS; do
  case $s in
    all) expanded+=(build test memcheck racecheck python tune info ladder tc attention) ;;
    sanitize) expanded+=(memcheck racecheck) ;;
    bench) expanded+=(tune info ladder tc attention) ;;
    quick) expanded+=(build test info) ;;
    build | test | memcheck | racecheck | python | tune | info | ladder | tc | attention | attention_bwd | report | mgpu | comm | tp) expanded+=("$s") ;;
    *) echo "device-check: unknown step '$s' (steps: build test memcheck racecheck python tune info ladder tc attention attention_bwd report mgpu comm tp;" \
         "aliases: all sanitize bench quick)" >&2; exit 2 ;;
  esac
done

default_timeout() {
  case $1 in
    build) echo "${T_BUILD:-1200}" ;;
    test) echo "${T_TEST:-900}" ;;
    memcheck) echo "${T_MEMCHECK:-900}" ;;
    racecheck) echo "${T_RACECHECK:-900}" ;;
    python) echo "${T_PYTHON:-600}" ;;
    tune) echo "${T_TUNE:-600}" ;;
    info) echo "${T_INFO:-300}" ;;
    ladder) echo "${T_LADDER:-900}" ;;
    tc) echo "${T_TC:-900}" ;;
    attention) echo "${T_ATTENTION:-900}" ;;
    attention_bwd) echo "${T_ATTENTION_BWD:-900}" ;;
    report) echo "${T_REPORT:-1000}" ;;
    mgpu) echo "${T_MGPU:-600}" ;;
    comm) echo "${T_COMM:-300}" ;;
    tp) echo "${T_TP:-600}" ;;
  esac
}

START=$(date +%s)
names=() statuses=() seconds=()

# The machine, for the record (never fails the run).
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  git -C "$ROOT" rev-parse HEAD 2>/dev/null
  git -C "$ROOT" status --short 2>/dev/null | head -50
  nvidia-smi 2>&1
  nvidia-smi -q 2>&1 | head -200
  nvcc --version 2>&1
  cmake --version 2>&1 | head -1
  compute-sanitizer --version 2>&1 | head -2
} >"$LOG_DIR/machine.log" 2>&1
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
# GIT_SHA: for a copy of the tree without .git (as on a lent machine), pass the revision in.
if [ -n "${GIT_SHA:-}" ]; then
  SHA=$GIT_SHA
else
  SHA=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] && SHA="$SHA (working tree has changes)"
fi

# Key numbers from the JSON documents; "n/a" where a document or python3 is missing.
key_numbers() {
  command -v python3 >/dev/null 2>&1 || { echo "  (python3 not found: key numbers not extracted)"; return; }
  python3 - "$OUT_DIR" <<'PY' 2>&1
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception:
        return None
info = load("info.json")
c = (info or {}).get("ceilings")
if c:
    print(f"  roofs: copy {c['copy_gbps']:.0f} GB/s, cublasSgemm {c['cublas_sgemm_gflops']/1e3:.1f} TFLOP/s, "
          f"BF16 {c['cublas_bf16_gflops']/1e3:.0f} TFLOP/s (at {c['gemm_size']}^3)")
else:
    print("  roofs: n/a (no info.json with ceilings)")
def tc_summary():
    tc = load("tc.json")
    if not tc:
        print("  tc: n/a (no tc.json)")
        return
    recs = tc.get("records", [])
    shapes = []
    for r in recs:
        sh = r.get("shape", {})
        key = (sh.get("m"), sh.get("n"), sh.get("k"), sh.get("op_a", "N") + sh.get("op_b", "N"))
        if key not in shapes:
            shapes.append(key)
    for key in shapes:
        rows = [r for r in recs if (r["shape"].get("m"), r["shape"].get("n"), r["shape"].get("k"),
                                    r["shape"].get("op_a", "N") + r["shape"].get("op_b", "N")) == key]
        ok = [r for r in rows if r.get("status") == "ok" and "peer" in r]
        peer = next((r for r in rows if r.get("extra", {}).get("role") == "peer"), None)
        label = f"{key[0]}x{key[1]}x{key[2]} {key[3]}"
        per = "  ".join(f"{r['name']} {100 * r['peer']['throughput_ratio']:.0f}%" for r in ok)
        ptf = f"{peer['gflops'] / 1e3:.0f}" if peer and peer.get("status") != "failed" else "n/a"
        print(f"  tc {label:<22} cuBLAS {ptf} TFLOP/s | {per}")
    bad = [r for r in recs if r.get("status") != "ok"]
    if bad:
        print(f"  tc rows not ok: {len(bad)} of {len(recs)}; first: {bad[0]['name']} "
              f"{bad[0].get('shape')}: {bad[0].get('failure', '')[:160]}")

tc_summary()
ladder = load("ladder.json")
if not ladder:
    print("  ladder: n/a (no ladder.json)")
    sys.exit(0)
records = ladder.get("records", [])
for size in (4096, 8192):
    rows = [r for r in records if r.get("shape", {}).get("m") == size and r.get("shape", {}).get("n") == size
            and r.get("shape", {}).get("k") == size]
    peer = next((r for r in rows if r.get("extra", {}).get("role") == "peer" and r.get("status") != "failed"), None)
    ok = [r for r in rows if r.get("status") == "ok" and "peer" in r]
    if not rows:
        print(f"  ladder {size}: not run")
    elif not ok:
        print(f"  ladder {size}: no level passed" + (f" (cuBLAS {peer['gflops']:.0f} GFLOP/s)" if peer else ""))
    else:
        best = max(ok, key=lambda r: r["gflops"])
        print(f"  ladder {size}: best {best['name']} {100 * best['peer']['throughput_ratio']:.1f}% of cuBLAS "
              f"({best['gflops']:.0f} vs {peer['gflops'] if peer else float('nan'):.0f} GFLOP/s)")
bad = [r for r in records if r.get("status") != "ok"]
if bad:
    names = sorted({r["name"] for r in bad})
    print(f"  ladder rows not ok: {len(bad)} of {len(records)} ({', '.join(names)});"
          f" first: {bad[0]['name']}: {bad[0].get('failure', '')[:120]}")
else:
    print(f"  ladder rows: all {len(records)} ok")
PY
}

write_summary() {
  local i failed=0 tolerated=0 line
  {
    echo "parallax device-check  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git $SHA   GPU: ${GPU_NAME:-none found}   archs: $PARALLAX_CUDA_ARCHS   steps: ${expanded[*]}"
    echo
    printf '%-10s  %-24s  %8s\n' step status seconds
    printf '%-10s  %-24s  %8s\n' ---------- ------------------------ --------
    for i in "${!names[@]}"; do
      printf '%-10s  %-24s  %8s\n' "${names[$i]}" "${statuses[$i]}" "${seconds[$i]}"
      case ${statuses[$i]} in
        PASS | SKIP*) ;;
        *tolerated*) tolerated=$((tolerated + 1)) ;;
        *) failed=$((failed + 1)) ;;
      esac
    done
    echo
    echo "key numbers:"
    key_numbers
    echo
    line="overall: $([ "$failed" -eq 0 ] && echo PASS || echo "FAIL ($failed step(s) did not pass)")"
    [ "$tolerated" -gt 0 ] && line="$line; $tolerated tolerated failure(s)"
    echo "$line   total $(($(date +%s) - START)) s"
  } >"$OUT_DIR/summary.txt"
  tar -czf "$OUT_DIR/logs.tar.gz" -C "$WORK" logs 2>/dev/null
  return "$failed"
}

# ------------------------------------------------------------------------------------------------ run
for step in "${expanded[@]}"; do
  limit=$(default_timeout "$step")
  if [ -n "${BUDGET_S:-}" ]; then
    left=$((BUDGET_S - ($(date +%s) - START) - 15))  # keep 15 s to write the summary and the tarball
    if [ "$left" -lt 10 ]; then
      names+=("$step") statuses+=("NOT RUN (budget)") seconds+=(0)
      write_summary >/dev/null
      continue
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  if [ "$step" = python ] && [ ! -d python/tests ]; then
    names+=("$step") statuses+=("SKIP (no tests)") seconds+=(0)
    continue
  fi
  log="$LOG_DIR/$step.log"
  echo "== $step (timeout ${limit}s) -> logs/$step.log"
  t0=$(date +%s.%N)
  timeout --kill-after=20 "$limit" "$SELF" __step "$step" "$OUT_DIR" "$LOG_DIR" >"$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=PASS ;;
    124 | 137) status="TIMEOUT (${limit}s)" ;;
    *) status="FAIL (rc $rc)" ;;
  esac
  if [ "$rc" -ne 0 ] && [[ " $TOLERATE " == *" $step "* ]]; then status="$status tolerated"; fi
  # A JSON document left empty by a failed command would only mislead; drop it.
  for f in tune.json info.json ladder.json tc.json attention.json attention_peers.json attention_bwd.json comm.json tp.json; do
    [ -f "$OUT_DIR/$f" ] && [ ! -s "$OUT_DIR/$f" ] && rm -f "$OUT_DIR/$f"
  done
  names+=("$step") statuses+=("$status") seconds+=("$secs")
  echo "   $status in ${secs}s"
  if [ "$rc" -ne 0 ]; then
    echo "   --- last lines of logs/$step.log ---"
    tail -n 25 "$log" | sed 's/^/   | /'
  fi
  write_summary >/dev/null
done

# The summary goes last, so the end of the output is the part that matters.
write_summary
failed=$?
echo
cat "$OUT_DIR/summary.txt"
[ "$failed" -eq 0 ] || exit 1
exit 0
