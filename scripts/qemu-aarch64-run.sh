#!/bin/sh
# cargo runner for aarch64-unknown-linux-gnu tests (see scripts/setup-cross.sh): runs the
# binary under qemu-aarch64 with the cross glibc pinned (mixing it with a multiarch
# libc6:arm64 hangs every thread spawn). TRUENO_TEST_RUNNER tells tests that start a child
# copy of themselves to start it through this script too (there is no binfmt_misc here).
TRUENO_TEST_RUNNER=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
export TRUENO_TEST_RUNNER
exec qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib "$@"
