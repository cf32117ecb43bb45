# Source me (`. scripts/setup-cross.sh`): what the NEON and WASM SIMD128 test runs need, and
# the cargo environment for them. Installs only what is missing (Debian packages):
# rustc-web 1.96 with its std source (std is rebuilt for each target with -Zbuild-std, since
# rustup cannot add targets here), wasm-ld, wasi-libc, the aarch64 cross gcc and qemu-user.
# The cross builds use /usr/bin/cargo and /usr/bin/rustc (1.96): trueno builds on stable
# 1.95 and 1.96 alike; RUSTC_BOOTSTRAP only unlocks -Zbuild-std, no nightly features.
export DEBIAN_FRONTEND=noninteractive
_trueno_pk=(rustc-web cargo-web rust-web-src lld-22 wasi-libc gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
if ! dpkg -s "${_trueno_pk[@]}" >/dev/null 2>&1; then
    _sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    $_sudo apt-get update -qq
    $_sudo apt-get install -y -qq --no-install-recommends "${_trueno_pk[@]}"
fi
_trueno_scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CROSS_CARGO=/usr/bin/cargo
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$_trueno_scripts/qemu-aarch64-run.sh"
export CARGO_TARGET_WASM32_WASIP1_LINKER=wasm-ld-22
export CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="-C target-feature=+simd128 -C link-self-contained=no -L native=/usr/lib/wasm32-wasi -C link-arg=/usr/lib/wasm32-wasi/crt1-command.o"
export CARGO_TARGET_WASM32_WASIP1_RUNNER="node --no-warnings $_trueno_scripts/wasi-run.mjs"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld-22
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+simd128"
unset _trueno_pk _trueno_scripts _sudo
