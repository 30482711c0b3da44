#!/usr/bin/env bash
# Prints the SHA-256 of the kernel sources the embedded image is made from
# (the files in order, concatenated): what cuda/unshuffle_kernels.fatbin.txt
# records and the test cuda.KernelImageIsCurrent recomputes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cat "$root/cuda/unshuffle_params.h" "$root/cuda/unshuffle_kernels.cuh" "$root/cuda/unshuffle_kernels.cu" |
  sha256sum | cut -d' ' -f1
