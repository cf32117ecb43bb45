#!/usr/bin/env bash
# Usage: scripts/setup-quant-oracle.sh VENV_DIR FIXTURE_DIR
# Installs the `gguf` package (numpy ports of GGML's formats; pinned) into VENV_DIR and
# writes trueno-quant's oracle fixtures to FIXTURE_DIR (see scripts/quant_fixtures.py).
# Safe to re-run: installs only what is missing.
set -euo pipefail
V=${1:-.venv-quant}
OUT=${2:-target/quant-fixtures}
[ -x "$V/bin/python" ] || python3 -m venv "$V" >&2
"$V/bin/python" -c 'import gguf, numpy' 2>/dev/null || "$V/bin/pip" install -q gguf==0.19.0 numpy==2.4.6 >&2
"$V/bin/python" "$(dirname "$0")/quant_fixtures.py" "$OUT" >&2
# An absolute path: tests run with their crate's directory as the working directory.
(cd "$OUT" && pwd)
