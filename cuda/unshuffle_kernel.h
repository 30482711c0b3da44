// The device byte-unshuffle kernel (internal to cuda/).
#ifndef RCKPT_CUDA_UNSHUFFLE_KERNEL_H_
#define RCKPT_CUDA_UNSHUFFLE_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rckpt {

// Enqueues on `stream` the inverse of codec.h's ShuffleBytes: `src` holds
// `bytes` bytes shuffled with element size `elem` (>= 2); the unshuffled
// bytes go to `dst` (no overlap). Both are device pointers of the current
// device. Returns the launch error, if any.
cudaError_t LaunchUnshuffle(void* dst, const void* src, uint64_t bytes,
                            uint32_t elem, cudaStream_t stream);

}  // namespace rckpt

#endif  // RCKPT_CUDA_UNSHUFFLE_KERNEL_H_
