#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite.
# Stages: default build + tests; a sanitizer build + tests (skip with
# RCKPT_SKIP_SANITIZERS=1); bounded fuzzer runs when clang's libFuzzer is
# available (skip with RCKPT_SKIP_FUZZ=1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
t0=$(date +%s)
bash scripts/install-deps.sh python3-torch python3-venv python3-pip
stage() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s elapsed)"; }

stage "python for the interoperability checks"
py="$(bash scripts/python-env.sh "$root/build/pyenv")"
"$py" -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
"$py" -c "import safetensors; print('safetensors', safetensors.__version__)" || true

stage "build (default)"
BUILD_DIR="$root/build" bash scripts/build.sh -DRCKPT_PYTHON="$py"
stage "tests (default)"
ctest --test-dir "$root/build" -j"$(nproc)" --output-on-failure --timeout 600

stage "done in $(( $(date +%s) - t0 )) s"
