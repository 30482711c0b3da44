#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time, starting from its seed corpus in tests/data/corpus/<target>/.
#
#   scripts/run_fuzzers.sh [SECONDS_PER_TARGET] [BUILD_DIR]
#
# Defaults: 60 seconds, build-fuzz/. New inputs the fuzzer finds go to
# BUILD_DIR/fuzz-corpus/<target>/ (never into the source tree); a crashing
# input is saved as BUILD_DIR/fuzz-artifacts/<target>-crash-*. Once the bug
# is fixed, copy that input into tests/data/corpus/<target>/ so the
# regression test (ctest -L fuzz) replays it from then on.
#
# Needs clang with libFuzzer (Debian: clang, plus libclang-rt-<N>-dev on
# clang >= 15; clang 14's libFuzzer ships with the clang package).
# RCKPT_FUZZ_SEED=N and RCKPT_FUZZ_RUNS=N (CI sets both) make a run
# reproducible: the same seed, corpus and binary explore the same inputs, so
# a run that passes on one machine passes on another (the time bound still
# applies). Without them every run explores afresh, as a developer wants.
# Exit status: 0 when every target ran its time without a finding.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-${root}/build-fuzz}"
jobs="${RCKPT_FUZZ_BUILD_JOBS:-2}"

if ! [[ "${seconds}" =~ ^[0-9]+$ ]] || [[ "${seconds}" -eq 0 ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [BUILD_DIR]" >&2
  exit 2
fi
for tool in clang clang++ cmake; do
  command -v "${tool}" >/dev/null || { echo "$0: ${tool} not found" >&2; exit 2; }
done

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
CC=clang CXX=clang++ cmake -S "${root}" -B "${build}" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRCKPT_BUILD_FUZZERS=ON -DRCKPT_WERROR=ON \
  -DRCKPT_SANITIZE=ON -DRCKPT_ENABLE_CUDA=OFF -DRCKPT_BUILD_TESTS=ON \
  -DRCKPT_BUILD_TOOLS=OFF -DRCKPT_BUILD_EXAMPLES=OFF -DRCKPT_BUILD_BENCH=OFF \
  >/dev/null
cmake --build "${build}" --target rckpt_fuzzers -j "${jobs}"

mapfile -t fuzzers < <(find "${build}/tests/fuzz" -maxdepth 1 -type f \
  -name '*_fuzzer' -perm -u+x | sort)
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  echo "$0: no fuzzers were built" >&2
  exit 1
fi

mkdir -p "${build}/fuzz-artifacts"
failed=()
for fuzzer in "${fuzzers[@]}"; do
  name="$(basename "${fuzzer}" _fuzzer)"
  seeds="${root}/tests/data/corpus/${name}"
  work="${build}/fuzz-corpus/${name}"
  mkdir -p "${work}"
  echo "== ${name}: ${seconds}s"
  # Corpus directories: the first receives new inputs, the seeds are read.
  dirs=("${work}")
  [[ -d "${seeds}" ]] && dirs+=("${seeds}")
  repro=()
  [[ -n "${RCKPT_FUZZ_SEED:-}" ]] && repro+=("-seed=${RCKPT_FUZZ_SEED}")
  [[ -n "${RCKPT_FUZZ_RUNS:-}" ]] && repro+=("-runs=${RCKPT_FUZZ_RUNS}")
  # Reproducible runs start from the committed seeds alone.
  [[ -n "${RCKPT_FUZZ_SEED:-}" ]] && rm -rf "${work:?}"/*
  if ! "${fuzzer}" "${repro[@]}" -max_total_time="${seconds}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="${build}/fuzz-artifacts/${name}-" "${dirs[@]}"; then
    failed+=("${name}")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzzers with findings: ${failed[*]} (inputs in ${build}/fuzz-artifacts/)" >&2
  exit 1
fi
echo "all ${#fuzzers[@]} fuzzers ran ${seconds}s each without findings"
