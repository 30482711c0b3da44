#!/usr/bin/env bash
# Makes cuda/unshuffle_kernels.fatbin, the kernel image every rckpt build
# embeds, and its stamp cuda/unshuffle_kernels.fatbin.txt. Run it after
# changing cuda/unshuffle_kernels.cuh or cuda/unshuffle_params.h and commit
# both files: builds never compile CUDA (a machine without a toolkit, or
# without PyPI, builds from the committed image), and the test
# cuda.KernelImageIsCurrent fails while the stamp's source hash differs from
# the sources'.
#
#   scripts/make-kernel-image.sh [--check]
#
# --check makes the image in a temporary directory and compares it, byte for
# byte, with the committed one (exit 1 when they differ, 77 when the
# toolkit's packages cannot be had): the test
# cuda.KernelImageRebuildsIdentically.
#
# The compiler is CUDA 12.9's, from PyPI, pinned: NVRTC (nvidia-cuda-nvrtc-cu12,
# the CUDA C++ front end and PTX compiler that nvcc runs; the PyPI package
# nvidia-cuda-nvcc-cu12 holds only ptxas, libNVVM and headers, no nvcc) makes
# the cubins and the PTX, and nvFatbin (nvidia-nvfatbin-cu12) packs them
# (scripts/kernel-image.py). They are installed into a virtual environment
# kept at ${XDG_CACHE_HOME:-~/.cache}/rckpt/kernel-toolkit-cu12.9 (about
# 220 MiB), shared by every clone on the machine.
#
# Why CUDA 12: cubins made by a CUDA 12.x toolkit load on every driver of
# CUDA 12.0 (R525) or newer, the drivers GPU fleets run (R535 to R570), where
# CUDA 13's need R580 (kMinKernelDriverVersion in include/rckpt/runtime.h,
# which cuda.KernelImageIsCurrent holds to this stamp). 12.9 is the newest
# CUDA 12 and targets every family from Turing (sm_75) to Blackwell (sm_100,
# sm_120). The image holds a cubin for each family and the PTX of the oldest,
# which GPUs newer than every cubin JIT-compile (on a driver of 12.9 or newer).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
cubins=(75 80 86 89 90 100 120)
ptx=75
packages=(nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-nvfatbin-cu12==12.9.82)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/rckpt/kernel-toolkit-cu12.9"
python="${PYTHON:-python3}"

if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv" >&2
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -e "$site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ] || [ ! -e "$site/nvidia/nvfatbin/lib/libnvfatbin.so.12" ]; then
  if ! pip_out="$("$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --retries 1 \
                  --timeout 30 "${packages[@]}" 2>&1)"; then
    echo "make-kernel-image: the CUDA 12.9 compiler packages cannot be had from PyPI" \
         "($(echo "$pip_out" | tail -1)); the committed image stays as it is" >&2
    exit 77
  fi
fi

out_dir="$root/cuda"
if [ "$check" = 1 ]; then
  out_dir="$(mktemp -d)"
  trap 'rm -rf "$out_dir"' EXIT
fi
out="$out_dir/unshuffle_kernels.fatbin"
version="$("$venv/bin/python" "$root/scripts/kernel-image.py" "$site" "$root/cuda" "$out.tmp" \
           --cubins "$(IFS=,; echo "${cubins[*]}")" --ptx "$ptx")"
mv "$out.tmp" "$out"
{
  echo "# Made by scripts/make-kernel-image.sh; checked by the test cuda.KernelImageIsCurrent."
  echo "source-sha256 $(bash "$root/scripts/kernel-source-hash.sh")"
  echo "cuda $version"
  echo "made-by $(printf '%s ' "${packages[@]}" | sed 's/ $//')"
  echo "cubins $(printf 'sm_%s ' "${cubins[@]}" | sed 's/ $//')"
  echo "ptx compute_$ptx"
} > "$out.txt"
if [ "$check" = 1 ]; then
  if cmp -s "$out" "$root/cuda/unshuffle_kernels.fatbin" &&
     cmp -s "$out.txt" "$root/cuda/unshuffle_kernels.fatbin.txt"; then
    echo "make-kernel-image: the committed image is what CUDA $version makes of the sources"
    exit 0
  fi
  echo "make-kernel-image: the committed image differs from what CUDA $version makes of the" \
       "sources: run scripts/make-kernel-image.sh and commit cuda/unshuffle_kernels.fatbin*" >&2
  exit 1
fi
echo "make-kernel-image: $out ($(stat -c %s "$out") bytes), CUDA $version"
