// The byte un-shuffle kernels: the inverse of codec.h's ShuffleBytes in
// device memory. `src` holds n_elem elements of `elem` bytes stored as
// `elem` byte planes (plane j holds byte j of every element); `dst` gets
// the elements back. The trailing partial element of a chunk is copied by
// the launcher, not here.
//
// This file is compiled twice from the same text: by nvcc into the kernel
// image every build embeds (scripts/make-kernel-image.sh), and for the host
// with shims for the CUDA built-ins (tests/cuda_standin/kernel_host.h), so
// CI checks these exact kernels against the CPU un-shuffle and the stand-in
// driver runs them.
#ifndef RCKPT_CUDA_UNSHUFFLE_KERNELS_CUH_
#define RCKPT_CUDA_UNSHUFFLE_KERNELS_CUH_

#include <cstdint>

#include "unshuffle_params.h"

// Elements up to kMaxTiledElem bytes: one tile of kUnshuffleTile elements
// per block and loop step, transposed through shared memory.
extern "C" __global__ void __launch_bounds__(rckpt::cuda::kUnshuffleThreads)
    rckpt_unshuffle_tiled(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src,
                          uint64_t n_elem, uint32_t elem) {
  using rckpt::cuda::kMaxTiledElem;
  using rckpt::cuda::kUnshuffleTile;
  __shared__ uint8_t tile[kUnshuffleTile * kMaxTiledElem];
  for (uint64_t base = uint64_t{blockIdx.x} * kUnshuffleTile; base < n_elem;
       base += uint64_t{gridDim.x} * kUnshuffleTile) {
    const uint64_t left = n_elem - base;
    const uint32_t count = left < kUnshuffleTile ? static_cast<uint32_t>(left) : kUnshuffleTile;
    const uint32_t total = count * elem;
    for (uint32_t idx = threadIdx.x; idx < total; idx += blockDim.x) {
      const uint32_t plane = idx / count;
      const uint32_t t = idx - plane * count;
      tile[t * elem + plane] = src[uint64_t{plane} * n_elem + base + t];
    }
    __syncthreads();
    uint8_t* out = dst + base * elem;
    for (uint32_t idx = threadIdx.x; idx < total; idx += blockDim.x) {
      out[idx] = tile[idx];
    }
    __syncthreads();
  }
}

// Any element size: one output byte per thread and loop step, grid-stride.
extern "C" __global__ void __launch_bounds__(rckpt::cuda::kUnshuffleThreads)
    rckpt_unshuffle_generic(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src,
                            uint64_t n_elem, uint32_t elem) {
  const uint64_t total = n_elem * elem;
  for (uint64_t k = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < total;
       k += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t i = k / elem;
    const uint64_t j = k - i * elem;
    dst[k] = src[j * n_elem + i];
  }
}

#endif  // RCKPT_CUDA_UNSHUFFLE_KERNELS_CUH_
