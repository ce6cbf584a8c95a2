#!/usr/bin/env bash
# Installs the build dependencies from Debian/Ubuntu packages when they are missing (CI, a fresh machine).
# The GPU machines already carry them; nothing is downloaded at build time.
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "install-deps: nvcc not found (install the CUDA toolkit)"; exit 1; }
# Python test dependencies (pytest) for the binding's tests.
python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q pytest
# matplotlib draws the plots of `parallax report` (scripts/report.py); without it the report still writes
# report.md and the report_from_sample test is skipped.
python3 -c 'import matplotlib' >/dev/null 2>&1 || python3 -m pip install -q matplotlib
