#!/usr/bin/env bash
# The NEON and WASM SIMD128 runs of the test suites (issue 6), as .ci/run does them:
#  - aarch64-unknown-linux-gnu under qemu-aarch64: trueno and trueno-quant, every test
#    (backend::tests::the_target_selects_its_simd_backend asserts NEON runs every class,
#    GEMM included; the CLI is not rebuilt for aarch64 just to print it: 4 of CI's minutes);
#  - wasm32-wasip1 under node's WASI: the same suites' unit and integration tests, threads
#    off (no `parallel` feature), and `trueno info` (which must report SIMD128);
#  - wasm32-unknown-unknown: trueno-wasm's exports called from `node --test`, built with
#    SIMD128 and without it (the scalar backend must then be the one that runs).
# Installs what it needs through scripts/setup-cross.sh (Debian packages; std is built
# once per target with -Zbuild-std into target/cross).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's header carries the time since the start, so a slow CI run shows where.
phase() { echo "== $* (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }
. scripts/setup-cross.sh
cargo=("$CROSS_CARGO")
dir=(--target-dir target/cross)
# The suites' builds use the test profile (optimised: they sweep millions of points),
# so std is built once per target; no debuginfo: these runs are for pass/fail, and it
# halves link time.
export CARGO_PROFILE_TEST_DEBUG=0 CARGO_PROFILE_DEV_DEBUG=0

# `trueno info --json` on stdin must name ARCH, pick BACKEND for everything and GEMM, and
# report FEATURE on.
check_info() {
    python3 -c '
import json, sys
arch, backend, feature = sys.argv[1:]
i = json.load(sys.stdin)
assert i["arch"] == arch, i["arch"]
assert i["best_backend"] == backend, i["best_backend"]
assert i["gemm"]["backend"] == backend, i["gemm"]
assert dict(i["features"])[feature], i["features"]
print("trueno info on", arch, "| best backend", i["best_backend"], "| gemm", i["gemm"]["micro_kernel"])' "$@"
}

phase "aarch64 (NEON) under qemu-aarch64"
# qemu-user shows the binary the host's /sys, so GEMM would block for an x86 cache
# geometry (a 105 MiB L3 on one CI machine: gemm_b_past_l2, whose tests are sized past L3,
# then took 4.5-5.5 minutes). The NEON run takes a Raspberry Pi 5's instead (Cortex-A76:
# 64 KiB L1d, 512 KiB L2, 2 MiB L3): the same paths at a small board's sizes (the GEMM path tests
# 42 s under qemu here, against 109 s with a Graviton 3's 32 MiB L3).
TRUENO_CACHE_SIZES=64K,512K,2M timeout 2400 "${cargo[@]}" test -p trueno -p trueno-quant --target aarch64-unknown-linux-gnu \
    -Zbuild-std "${dir[@]}"

phase "wasm32-wasip1 (SIMD128) under node's WASI"
timeout 1800 "${cargo[@]}" test -p trueno -p trueno-quant --no-default-features \
    --features trueno/wasi-pthread-stubs --target wasm32-wasip1 \
    -Zbuild-std=std,panic_abort "${dir[@]}" --lib --tests

phase "trueno info on wasm32-wasip1: SIMD128 must be the backend chosen"
# The dev profile: the CLI's clap and serde give its build other features than the
# suites' (every crate from thiserror up is built again), and unoptimised that takes 1m53s
# here against 4m29s in the test profile; `info` runs in 0.2 s either way.
timeout 900 "${cargo[@]}" build -p trueno-cli --no-default-features \
    --features trueno/wasi-pthread-stubs --target wasm32-wasip1 \
    -Zbuild-std=std,panic_abort "${dir[@]}"
timeout 300 node --no-warnings scripts/wasi-run.mjs target/cross/wasm32-wasip1/debug/trueno.wasm \
    info --json | check_info wasm32 wasm-simd128 simd128

phase "wasm32-unknown-unknown (SIMD128): exports from node --test"
# The exports' tests are small: the dev profile builds std (and all) unoptimised, faster.
timeout 900 "${cargo[@]}" build -p trueno-wasm --target wasm32-unknown-unknown \
    -Zbuild-std=std,panic_abort "${dir[@]}"
TRUENO_WASM=target/cross/wasm32-unknown-unknown/debug/trueno_wasm.wasm \
    node --test crates/trueno-wasm/tests/

phase "wasm32-unknown-unknown without +simd128: the scalar build still works"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="" timeout 900 "${cargo[@]}" build -p trueno-wasm \
    --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort --target-dir target/cross-scalar
TRUENO_WASM=target/cross-scalar/wasm32-unknown-unknown/debug/trueno_wasm.wasm \
    TRUENO_WASM_BACKEND=scalar node --test crates/trueno-wasm/tests/
