#!/usr/bin/env bash
# Makes cuda/unshuffle_kernels.fatbin, the kernel image every rckpt build
# embeds, and its stamp cuda/unshuffle_kernels.fatbin.txt. Run it after
# changing cuda/unshuffle_kernels.cuh or cuda/unshuffle_params.h and commit
# both files: builds never run nvcc, and the test cuda.KernelImageIsCurrent
# fails while the stamp's source hash differs from the sources'.
#
#   scripts/make-kernel-image.sh [--check] [NVCC]
#
# --check makes the image in a temporary directory and compares it, byte for
# byte, with the committed one (exit 1 when they differ, 77 without nvcc):
# the test cuda.KernelImageRebuildsIdentically, where a toolkit exists.
#
# The image holds cubins for the GPU families rckpt ships native code for and
# PTX of the oldest, which newer GPUs JIT-compile. nvcc 13 is the oldest
# toolkit targeting Blackwell (sm_100, sm_120) and the newest that still
# targets Turing (sm_75); its output loads on drivers for CUDA 13.0 (R580) or
# newer (kMinKernelDriverVersion in include/rckpt/runtime.h).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
nvcc="${1:-nvcc}"
if ! command -v "$nvcc" >/dev/null; then
  echo "make-kernel-image: $nvcc not found (the CUDA toolkit is only needed to remake the image)" >&2
  exit 77
fi
cubins=(75 80 86 89 90 100 120)
ptx=75
gencode=()
for a in "${cubins[@]}"; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
gencode+=(-gencode "arch=compute_$ptx,code=compute_$ptx")
out_dir="$root/cuda"
if [ "$check" = 1 ]; then
  out_dir="$(mktemp -d)"
  trap 'rm -rf "$out_dir"' EXIT
fi
out="$out_dir/unshuffle_kernels.fatbin"
"$nvcc" -fatbin -O3 -std=c++17 "${gencode[@]}" -I"$root/cuda" -o "$out.tmp" \
  "$root/cuda/unshuffle_kernels.cu"
mv "$out.tmp" "$out"
version="$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
{
  echo "# Made by scripts/make-kernel-image.sh; checked by the test cuda.KernelImageIsCurrent."
  echo "source-sha256 $(bash "$root/scripts/kernel-source-hash.sh")"
  echo "nvcc $version"
  echo "cubins $(printf 'sm_%s ' "${cubins[@]}" | sed 's/ $//')"
  echo "ptx compute_$ptx"
} > "$out.txt"
if [ "$check" = 1 ]; then
  if cmp -s "$out" "$root/cuda/unshuffle_kernels.fatbin" &&
     cmp -s "$out.txt" "$root/cuda/unshuffle_kernels.fatbin.txt"; then
    echo "make-kernel-image: the committed image is what nvcc $version makes of the sources"
    exit 0
  fi
  echo "make-kernel-image: the committed image differs from what nvcc $version makes of the" \
       "sources: run scripts/make-kernel-image.sh and commit cuda/unshuffle_kernels.fatbin*" >&2
  exit 1
fi
echo "make-kernel-image: $out ($(stat -c %s "$out") bytes), nvcc $version"
