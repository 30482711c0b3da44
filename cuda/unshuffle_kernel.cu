#include "unshuffle_kernel.h"

#include <algorithm>

namespace rckpt {
namespace {

constexpr int kThreads = 256;
// Elements per tile: a block reads kTile bytes of each of the `elem` byte
// planes (coalesced) into shared memory and writes kTile whole elements back
// out (coalesced), so neither side of the transpose is strided in global
// memory.
constexpr uint32_t kTile = 1024;
constexpr uint32_t kMaxTiledElem = 16;

__global__ void __launch_bounds__(kThreads)
    UnshuffleTiled(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src,
                   uint64_t n_elem, uint32_t elem) {
  __shared__ uint8_t tile[kTile * kMaxTiledElem];
  for (uint64_t base = uint64_t{blockIdx.x} * kTile; base < n_elem;
       base += uint64_t{gridDim.x} * kTile) {
    const uint64_t left = n_elem - base;
    const uint32_t count = left < kTile ? static_cast<uint32_t>(left) : kTile;
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

// Any element size: one output byte per iteration, grid-stride.
__global__ void __launch_bounds__(kThreads)
    UnshuffleGeneric(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src,
                     uint64_t n_elem, uint32_t elem) {
  const uint64_t total = n_elem * elem;
  for (uint64_t k = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < total;
       k += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t i = k / elem;
    const uint64_t j = k - i * elem;
    dst[k] = src[j * n_elem + i];
  }
}

}  // namespace

cudaError_t LaunchUnshuffle(void* dst, const void* src, uint64_t bytes,
                            uint32_t elem, cudaStream_t stream) {
  if (elem < 2) return cudaErrorInvalidValue;
  const uint64_t n_elem = bytes / elem;
  const uint64_t body = n_elem * elem;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (n_elem > 0) {
    // Enough blocks to fill the GPU; the grid-stride loops cover the rest.
    const uint64_t tiles = (n_elem + kTile - 1) / kTile;
    const unsigned blocks =
        static_cast<unsigned>(std::min<uint64_t>(tiles, 65535));
    if (elem <= kMaxTiledElem) {
      UnshuffleTiled<<<blocks, kThreads, 0, stream>>>(d, s, n_elem, elem);
    } else {
      UnshuffleGeneric<<<blocks, kThreads, 0, stream>>>(d, s, n_elem, elem);
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (bytes > body) {
    // The trailing partial element is stored unshuffled at the end.
    return cudaMemcpyAsync(d + body, s + body, bytes - body,
                           cudaMemcpyDeviceToDevice, stream);
  }
  return cudaSuccess;
}

}  // namespace rckpt
