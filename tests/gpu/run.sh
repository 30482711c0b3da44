#!/usr/bin/env bash
# Builds rckpt with CUDA, runs the gpu-labelled tests and a short load
# throughput measurement, and prints a table. Run from anywhere:
#
#   tests/gpu/run.sh [build-dir] [checkpoint MiB]
#
# RCKPT_PYTHON (an interpreter with nanobind and a CUDA build of torch) adds
# the Python package's gpu tests.
# Without a GPU the tests skip (and say so) and only host rows are measured.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-gpu}"
mib="${2:-1024}"
jobs="$(nproc 2>/dev/null || echo 2)"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DRCKPT_ENABLE_CUDA=ON -DRCKPT_BUILD_EXAMPLES=ON -DRCKPT_BUILD_BENCH=ON \
  ${RCKPT_PYTHON:+-DRCKPT_PYTHON="$RCKPT_PYTHON"}
# Everything the gpu label runs (the restart cases need the demo and the CLI),
# the throughput probe and the suite.
cmake --build "$build" -j "$jobs" --target gpu_tests restart_gpu_tests rckpt-train-demo \
  rckpt_cli rckpt_gpu_throughput rckpt-bench
if [ -n "${RCKPT_PYTHON:-}" ]; then
  cmake --build "$build" -j "$jobs" --target rckpt_python_package
fi

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: not found"

echo
echo "== ctest -L gpu"
ctest --test-dir "$build" -L gpu --output-on-failure -j 1
echo
echo "== load throughput (${mib} MiB, default staging ring)"
"$build/tests/gpu/rckpt_gpu_throughput" --mib "$mib" --dir "${TMPDIR:-/tmp}"
echo
echo "== rckpt-bench (device rows use the CUDA runtime; ratios against the measured limits)"
"$build/bench/rckpt-bench" --size "${mib}M" --no-peers
