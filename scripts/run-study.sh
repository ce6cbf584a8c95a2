#!/usr/bin/env bash
# The main job: build Release and run the whole study, `parallax report` (device roofs, FP32 ladder,
# tensor-core GEMM, attention forward/backward vs torch SDPA, collectives, TP strong/weak scaling on every
# visible GPU), writing results.json, report.md and the plots to parallax-report/ (or --out DIR).
# Extra arguments go to `parallax report`, e.g. `scripts/run-study.sh --quick` (< 2 min on one H100) or
# `scripts/run-study.sh --dry-run` (print the plan and its time budgets, run nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARALLAX_CUDA_ARCHS="${PARALLAX_CUDA_ARCHS:-90a;80}"
cmake --build "$BUILD" -j"$(nproc)" --target parallax_exe
exec "$BUILD/tools/parallax" report "$@"
