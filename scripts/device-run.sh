#!/usr/bin/env bash
# Runs on the lent GPU machine (no Rust there): the packed GPU tests, compute-sanitizer
# memcheck and racecheck over them, and the benchmark with PyTorch as the peer.
# Pack first on a build machine: scripts/device-pack.sh -p trueno-gpu && cp target/release/gpu-bench .device/
# Usage: scripts/device-run.sh [tests] [sanitize] [bench] [quick]   (default: all three)
# BENCH_ONLY=flash_attention,... limits the benchmark to those gpu-bench sections;
# TESTS_ONLY=gpu_qgemv,... the tests and sanitizer runs to those test binaries.
set -uo pipefail
OUT=${OUT:-/tmp/trueno-device-out}; mkdir -p "$OUT"
steps="${*:-tests sanitize bench}"
export TRUENO_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
# The GPU test binaries (the packed ones are named NAME-HASH).
TESTS=""
only=${TESTS_ONLY:-gpu_kernels,gpu_graph,gpu_qgemv,gpu_qgemv_q8k,gpu_qgemv_q8k_routing,gpu_quantize_q8k,gpu_dequant,gpu_qgemm,gpu_rope,gpu_mma,gpu_tf32,gpu_attention,gpu_flash_attention,gpu_paged}
for t in ${only//,/ }; do
  TESTS="$TESTS $(ls .device/"$t"-* | grep -v "\.d$")"
done
L=$(ls .device/trueno_gpu-* | head -1)
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $steps == *tests* ]]; then
  echo "== GPU tests"
  for T in $TESTS; do
    timeout 300 "$T" --test-threads=1 2>&1 | tee -a "$OUT/tests.log" | grep -E "^test |test result|panicked|SKIPPED" || status=1
  done
  timeout 60 "$L" 2>&1 | tail -3
fi
if [[ $steps == *sanitize* ]]; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool (small sizes)"
    # API errors are off: the tests plant a bad module and an oversized allocation on purpose.
    for T in $TESTS; do
      TRUENO_GPU_SMALL=1 timeout 400 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 "$T" --test-threads=1 \
        > "$OUT/$tool-$(basename "$T").log" 2>&1; rc=$?
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$OUT/$tool-$(basename "$T").log" | tail -4; echo "$(basename "$T") exit $rc"
      [[ $rc == 0 ]] || status=1
    done
  done
fi
if [[ $steps == *bench* ]]; then
  echo "== bench"
  q=""; [[ $steps == *quick* ]] && q="--quick"
  # JIT cache off so module load times are real compiles.
  CUDA_CACHE_DISABLE=1 timeout 400 .device/gpu-bench $q ${BENCH_ONLY:+--only $BENCH_ONLY} --out "$OUT/trueno.jsonl" > "$OUT/bench.log" 2>&1 || { status=1; tail -5 "$OUT/bench.log"; }
  timeout 300 python3 scripts/gpu_bench_peer.py "$OUT/trueno.jsonl" --md "$OUT/table.md" || status=1
fi
exit $status
