#!/usr/bin/env bash
# Builds everything (every .cu for sm_90a and sm_80 unless PARALLAX_CUDA_ARCHS says otherwise) and runs all
# tests: the C++ suites through CTest and the Python binding's suite through pytest. GPU tests skip, saying
# so, on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARALLAX_CUDA_ARCHS="${PARALLAX_CUDA_ARCHS:-90a;80}"
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)"
if [ -d python/tests ]; then
  PARALLAX_LIB="$PWD/$BUILD/src/libparallax.so" python3 -m pytest -q python/tests
fi
# scripts/report.py on the committed sample results (no GPU, no library needed).
python3 -m pytest -q tests/python
