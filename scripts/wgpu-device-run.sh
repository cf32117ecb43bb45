#!/usr/bin/env bash
# On the lent GPU machine (no Rust there): trueno-wgpu's test suites through the NVIDIA
# Vulkan driver, then wgpu-bench, trueno-gpu's gpu-bench (the CUDA path) and PyTorch in
# one command. Pack first on a build machine:
#   scripts/device-pack.sh -p trueno-wgpu
#   cargo build --release -p trueno-bench --bin wgpu-bench --bin gpu-bench
#   cp target/release/{wgpu-bench,gpu-bench} .device/ && strip .device/*
# and fetch the Vulkan loader once into .gl/ (see the device tool's README); carry both.
set -uo pipefail
OUT=${OUT:-/tmp/trueno-wgpu-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export TRUENO_REQUIRE_GPU=1 TRUENO_REQUIRE_WGPU=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
echo "== trueno-wgpu suites"
for t in .device/trueno_wgpu-* .device/elementwise-* .device/reductions-* .device/linalg-* \
         .device/batch-* .device/adapter-*; do
    timeout 300 "$t" 2>&1 | tee -a "$OUT/tests.log" | grep -E "test result|panicked|tests on" || status=1
done
echo "== wgpu-bench"
timeout 240 .device/wgpu-bench --out "$OUT/wgpu.jsonl" | grep -v crossover || status=1
echo "== gpu-bench (CUDA path)"
timeout 200 .device/gpu-bench --out "$OUT/cuda.jsonl" | grep -E '"gemm"|"elementwise"' || status=1
echo "== PyTorch peer and tables"
python3 scripts/wgpu_bench_peer.py "$OUT/wgpu.jsonl" "$OUT/cuda.jsonl" --md "$OUT/table.md" || status=1
exit $status
