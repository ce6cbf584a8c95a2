#!/usr/bin/env bash
# The main job: build Release and run the study. Until `parallax report` exists, that is the FP32 ladder
# against cuBLAS (`parallax gemm --ladder`). Extra arguments go to `parallax gemm`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARALLAX_CUDA_ARCHS="${PARALLAX_CUDA_ARCHS:-90a;80}"
cmake --build "$BUILD" -j"$(nproc)" --target parallax_exe
exec "$BUILD/tools/parallax" gemm --ladder "$@"
