#!/usr/bin/env bash
# Regenerates the nvcc and Triton PTX fixtures the analyzer is tested on
# (crates/trueno-gpu/tests/fixtures/ptx/{nvcc,triton}). Needs nvcc, and python3 with torch and
# triton on a machine with an NVIDIA GPU (Triton compiles at launch); the lent device has them:
#   scripts/gen-ptx-fixtures.sh OUT_DIR     then copy OUT_DIR/{nvcc,triton}/*.ptx back.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
fx="$here/crates/trueno-gpu/tests/fixtures/ptx"
out="${1:?usage: $0 OUT_DIR}"
mkdir -p "$out/nvcc" "$out/triton"
nvcc --version | tail -2
nvcc -ptx -O3 -arch=sm_90 -o "$out/nvcc/kernels_sm_90.ptx" "$fx/nvcc/src/kernels.cu"
# With line info (.file/.loc directives) and with full debug info (.section blocks, -G).
nvcc -ptx -O3 -lineinfo -arch=sm_90 -o "$out/nvcc/kernels_lineinfo_sm_90.ptx" "$fx/nvcc/src/kernels.cu"
nvcc -ptx -G -arch=sm_90 -o "$out/nvcc/kernels_debug_sm_90.ptx" "$fx/nvcc/src/kernels.cu"
python3 "$fx/triton/gen.py" "$out/triton"
