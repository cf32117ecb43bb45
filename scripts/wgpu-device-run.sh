#!/usr/bin/env bash
# On the lent GPU machine (no Rust there): trueno-wgpu's test suites and the core crate's
# suites on Backend::Gpu through the NVIDIA Vulkan driver, the measured crossover
# (`tests`); then wgpu-bench, trueno-gpu's gpu-bench (the CUDA path) and PyTorch in one
# command (`bench`); no argument runs both. Pack first on a build machine:
#   scripts/device-pack.sh -p trueno-wgpu
#   scripts/device-pack.sh -p trueno --features gpu --test accuracy --test equivalence_binary \
#       --test equivalence_elementwise --test equivalence_reductions --test gemm \
#       --test gpu_routing --test errors
#   cargo build --release -p trueno-bench --bin wgpu-bench --bin gpu-bench
#   cargo build --release -p trueno-cli
#   cp target/release/{wgpu-bench,gpu-bench,trueno} .device/ && strip .device/*
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
# Runs a test binary, keeps its log, shows the summary lines; a failure sets status.
run_suite() {
    local log="$OUT/$(basename "$1").log"
    timeout 300 "$1" > "$log" 2>&1
    local rc=$?
    grep -E "test result|panicked|tests on|skipped" "$log"
    [ $rc -eq 0 ] || { echo "FAILED: $1 (exit $rc)"; status=1; }
}
what=${1:-all}
if [ "$what" = all ] || [ "$what" = tests ]; then
    echo "== trueno-wgpu suites"
    for t in .device/trueno_wgpu-* .device/elementwise-* .device/reductions-* .device/linalg-* \
             .device/batch-* .device/adapter-*; do
        run_suite "$t"
    done
    echo "== the core crate's suites on Backend::Gpu (and its size routing)"
    for t in .device/accuracy-* .device/equivalence_* .device/gemm-* .device/gpu_routing-* \
             .device/errors-*; do
        [ -e "$t" ] && run_suite "$t"
    done
    echo "== trueno bench --ops crossover (the default engine's thresholds on this machine)"
    timeout 120 .device/trueno bench --ops crossover | tee "$OUT/crossover.txt" || status=1
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
    echo "== wgpu-bench"
    timeout 240 .device/wgpu-bench --out "$OUT/wgpu.jsonl" | grep -v crossover || status=1
    echo "== gpu-bench (CUDA path)"
    timeout 200 .device/gpu-bench --out "$OUT/cuda.jsonl" | grep -E '"gemm"|"elementwise"' || status=1
    echo "== PyTorch peer and tables"
    python3 scripts/wgpu_bench_peer.py "$OUT/wgpu.jsonl" "$OUT/cuda.jsonl" --md "$OUT/table.md" || status=1
fi
exit $status
