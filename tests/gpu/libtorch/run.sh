#!/usr/bin/env bash
# rckpt::libtorch on a GPU (the CUDA half of scripts/test-libtorch.sh), on the GPU
# test machine as it is: no network, no CUDA toolkit needed.
#
#   bash tests/gpu/libtorch/run.sh [--require-gpu] [--rckpt-build DIR] [--deps DIR] [--out DIR]
#
# Builds, against this machine's libtorch (that of PYTHON's torch, default
# python3):
#   1. rckpt's library, installed into OUT/prefix: `cmake --install` of
#      --rckpt-build DIR when given (a build of rckpt with the CLI), else a
#      Release build of the
#      library and the CLI here, from the dependencies in --deps DIR
#      (default gpu-carry/deps, as scripts/gpu-prepare.sh carries them);
#   2. the adapter (torch/), the examples (examples/libtorch) and
#      libtorch_gpu_test.cc in one project (tests/gpu/libtorch/CMakeLists.txt);
# then runs libtorch_gpu_test, and the `train` example on cuda stopped and
# resumed against one that never stopped (`rckpt diff`: identical).
# Without a GPU it says SKIPPED and exits 0; --require-gpu makes that exit 1.
# OUT (the builds and the runs' checkpoints) defaults to build-gpu-libtorch/,
# or on the device machine (where $OUT is set: only what is left there comes
# back, 8 files at most) /tmp/rckpt-gpu-libtorch; tests/gpu/proof.sh
# --libtorch passes its scratch folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
require=()
rckpt_build=""
deps="$root/gpu-carry/deps"
out="${OUT:+/tmp/rckpt-gpu-libtorch}"
out="${out:-$root/build-gpu-libtorch}"
while [ $# -gt 0 ]; do
  case "$1" in
    --require-gpu) require=(--require-gpu) ;;
    --rckpt-build) rckpt_build="$2"; shift ;;
    --deps) deps="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: $0 [--require-gpu] [--rckpt-build DIR] [--deps DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
t0=$(date +%s)
py="${PYTHON:-python3}"
torch_cmake="$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
echo "libtorch gpu: torch $("$py" -c 'import torch; print(torch.__version__)') ($torch_cmake)"
prefix_path="$out/prefix"
[ -d "$deps" ] && prefix_path="$prefix_path;$deps"
mkdir -p "$out"

if [ -z "$rckpt_build" ]; then
  rckpt_build="$out/rckpt"
  cmake -S "$root" -B "$rckpt_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix_path" -DRCKPT_BUILD_TESTS=OFF -DRCKPT_BUILD_EXAMPLES=OFF \
    -DRCKPT_BUILD_BENCH=OFF -DRCKPT_BUILD_PYTHON=OFF -DRCKPT_ENABLE_MPI=OFF >/dev/null
  cmake --build "$rckpt_build" --target rckpt rckpt_cli
fi
rm -rf "$out/prefix"
cmake --install "$rckpt_build" --prefix "$out/prefix" >/dev/null
echo "libtorch gpu: rckpt installed ($(( $(date +%s) - t0 )) s)"

cmake -S "$root/tests/gpu/libtorch" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix_path;$torch_cmake" >/dev/null
cmake --build "$out/build"
echo "libtorch gpu: built ($(( $(date +%s) - t0 )) s)"

"$out/build/libtorch_gpu_test" "${require[@]}"
if ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "libtorch gpu: the example on cuda: SKIPPED: no GPU here"
  exit 0
fi
train="$out/build/examples/train"
runs="$out/runs"
rm -rf "$runs"
"$train" --device cuda --run "$runs/straight" --steps 6 --every 3 >/dev/null
"$train" --device cuda --run "$runs/stopped" --steps 6 --stop-after 4 >/dev/null
"$train" --device cuda --run "$runs/resumed" --steps 6 \
  --resume "$runs/stopped/last.rckpt" >/dev/null
"$out/prefix/bin/rckpt" diff "$runs/straight/last.rckpt" "$runs/resumed/last.rckpt"
echo "libtorch gpu: passed in $(( $(date +%s) - t0 )) s"
